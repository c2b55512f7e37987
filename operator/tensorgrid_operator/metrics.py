"""The operator's Prometheus metrics (``tensorgrid_operator_*``), on a registry of their own.

A registry of its own, so tests can run the operator several times in one process
and the runtime's metrics never mix in. Named by Prometheus' conventions
(docs/metrics.md has the table): counters end in ``_total`` and export no ``_created``
series; a job's namespace is the label ``job_namespace``, because a ServiceMonitor's
target label ``namespace`` (the operator's own) would rename a ``namespace`` label to
``exported_namespace``.
"""

from __future__ import annotations

import collections
import platform
from importlib import metadata
from typing import Iterable, Optional

import prometheus_client

# Counters export only their _total series: a _created series per label set doubles the
# series and no query of ours reads it (prometheus_client reads this switch at scrape time).
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

REGISTRY = prometheus_client.CollectorRegistry(auto_describe=True)
# process_* (CPU seconds, resident memory, open file descriptors, start time) and python_info.
prometheus_client.ProcessCollector(registry=REGISTRY)
prometheus_client.PlatformCollector(registry=REGISTRY)

try:
    OPERATOR_VERSION = metadata.version("tensorgrid")
except metadata.PackageNotFoundError:  # run from a checkout that was never installed
    OPERATOR_VERSION = "0+unknown"
BUILD_INFO = prometheus_client.Gauge(
    "tensorgrid_build_info", "Always 1: the labels say which tensorgrid release and Python this process runs.",
    ["component", "version", "python_version"], registry=REGISTRY)
BUILD_INFO.labels(component="operator", version=OPERATOR_VERSION, python_version=platform.python_version()).set(1)
ACTIVE = prometheus_client.Gauge(
    "tensorgrid_operator_active",
    "1 while this operator replica reconciles jobs; 0 while it stands by for another replica (peering).",
    registry=REGISTRY)
LEASE_HOLDER = prometheus_client.Gauge(
    "tensorgrid_operator_lease_holder_info",
    "1 for the replica that holds the leader-election Lease, as this replica last read it (--leader-election).",
    ["lease", "holder"], registry=REGISTRY)

JOBS_CREATED = prometheus_client.Counter(
    "tensorgrid_operator_jobs_created_total", "TrainingJobs whose pods were first created.",
    ["job_namespace"], registry=REGISTRY)
JOBS_SUCCEEDED = prometheus_client.Counter(
    "tensorgrid_operator_jobs_succeeded_total", "TrainingJobs that succeeded.", ["job_namespace"],
    registry=REGISTRY)
JOBS_FAILED = prometheus_client.Counter(
    "tensorgrid_operator_jobs_failed_total", "TrainingJobs that failed, by the reason of their Failed condition.",
    ["job_namespace", "reason"], registry=REGISTRY)
REPLICA_RESTARTS = prometheus_client.Counter(
    "tensorgrid_operator_replica_restarts_total",
    "Replicas the operator recreated, by replica type and reason: the pod's own reason (OOMKilled, Error, ...) "
    "for restarts counted against backoffLimit, Disrupted and ParameterServerLost for those that are not.",
    ["job_namespace", "replica_type", "reason"], registry=REGISTRY)
JOBS = prometheus_client.Gauge(
    "tensorgrid_operator_jobs", "TrainingJobs this operator reconciles, by state.", ["phase"], registry=REGISTRY)
RECONCILE_DURATION = prometheus_client.Histogram(
    "tensorgrid_operator_reconcile_duration_seconds",
    "One reconcile of one job: reading it, its pods and Services, deciding, and applying the plan.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=REGISTRY)
TIME_TO_ALL_PODS_RUNNING = prometheus_client.Histogram(
    "tensorgrid_operator_time_to_all_pods_running_seconds",
    "From a job's creation to every one of its pods first running.",
    buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600), registry=REGISTRY)
CONSISTENT_READS = prometheus_client.Counter(
    "tensorgrid_operator_consistent_reads_total",
    "Reconciles that listed a job's pods and Services because the watches did not show the operator's last "
    "writes yet (the others read kopf's indexes).", registry=REGISTRY)
EVENT_LOOP_LAG = prometheus_client.Histogram(
    "tensorgrid_operator_event_loop_lag_seconds",
    "How late the operator's event loop woke a task that slept a fixed interval: the time it was busy "
    "with something else (watches, /healthz and every job's loop wait that long).",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10), registry=REGISTRY)
EVENT_LOOP_LAG_MAX = prometheus_client.Gauge(
    "tensorgrid_operator_event_loop_lag_max_seconds", "The largest event-loop lag seen since the operator started.",
    registry=REGISTRY)
API_ERRORS = prometheus_client.Counter(
    "tensorgrid_operator_api_errors_total",
    "Kubernetes API calls that failed unexpectedly (not 404 on delete, not 409 AlreadyExists on create).",
    ["operation"], registry=REGISTRY)



def count_transitions(namespace: str, transitions: Iterable[tuple[str, str, str]]) -> None:
    """Counts a pass's (name, reason, replica type) transitions (``reconcile.plans.Transition``)."""
    for name, reason, replica_type in transitions:
        if name == "created":
            JOBS_CREATED.labels(job_namespace=namespace).inc()
        elif name == "succeeded":
            JOBS_SUCCEEDED.labels(job_namespace=namespace).inc()
        elif name == "failed":
            JOBS_FAILED.labels(job_namespace=namespace, reason=reason).inc()
        elif name == "restarted":
            REPLICA_RESTARTS.labels(job_namespace=namespace, replica_type=replica_type, reason=reason).inc()
        else:
            raise ValueError(f"unknown job transition {name!r}: valid are created, succeeded, failed, restarted")


class PhaseTracker:
    """Keeps the jobs-by-phase gauge equal to the states of the jobs this operator holds."""

    def __init__(self) -> None:
        self._phases: dict[tuple[str, str], str] = {}

    def set(self, key: tuple[str, str], phase: Optional[str]) -> None:
        if phase is None:
            self._phases.pop(key, None)
        else:
            self._phases[key] = phase
        counts = collections.Counter(self._phases.values())
        for label in set(counts) | {s.labels.get("phase", "") for m in JOBS.collect() for s in m.samples}:
            if label:
                JOBS.labels(phase=label).set(counts.get(label, 0))


class MetricsServer:
    """A running /metrics endpoint of this registry, on its own thread."""

    def __init__(self, port: int) -> None:
        self._server, self._thread = prometheus_client.start_http_server(port, registry=REGISTRY)
        self.port = int(self._server.server_port)
        """The bound port (the one asked for, or the one chosen for port 0)."""

    def close(self) -> None:
        """Stops serving and frees the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def serve(port: int) -> MetricsServer:
    """Start the /metrics endpoint on ``port`` (0: any free port)."""
    return MetricsServer(port)
