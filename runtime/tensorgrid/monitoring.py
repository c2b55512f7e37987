"""Prometheus metrics of a task (``tensorgrid_*``), served on its metrics port.

Named ``monitoring`` (TensorFlow's name for its own process counters) because ``tf.metrics``
is TF1's streaming evaluation metrics (``ops/metrics_impl.py``).

The names are a contract with the Helm chart's dashboards and alerts (docs/metrics.md has the
table). Counters are updated where the work happens (executor steps, RPCs), or read when
Prometheus scrapes, as are the gauges that are cheap to read (variable updates, global step,
device memory, each embedding table's entries and bytes). Counters export their ``_total``
series only, no ``_created``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import threading
import time
from typing import Any, Iterator, Optional

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from tensorgrid import version

# A _created series per counter and label set doubles the series and nothing reads it
# (prometheus_client reads this switch at scrape time).
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

REGISTRY = CollectorRegistry(auto_describe=True)
# process_* (CPU seconds, resident memory, open file descriptors, start time) and python_info.
prometheus_client.ProcessCollector(registry=REGISTRY)
prometheus_client.PlatformCollector(registry=REGISTRY)
BUILD_INFO = Gauge("tensorgrid_build_info",
                   "Always 1: the labels say which tensorgrid release and Python this process runs.",
                   ["component", "version", "python_version"], registry=REGISTRY)
BUILD_INFO.labels(component="runtime", version=version.TENSORGRID_VERSION,
                  python_version=platform.python_version()).set(1)

STEPS = Counter("tensorgrid_steps", "Graph partitions run by this task's worker (one per step).",
                ["task"], registry=REGISTRY)
STEP_DURATION = Histogram("tensorgrid_step_duration_seconds", "Duration of a partition run on this task.",
                          ["task"], registry=REGISTRY,
                          buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
RPC_DURATION = Histogram("tensorgrid_rpc_duration_seconds", "Duration of RPCs served by this task.",
                         ["method"], registry=REGISTRY,
                         buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30))
RPC_BYTES = Counter("tensorgrid_rpc_bytes", "Tensor payload bytes moved by RPCs of this task.",
                    ["method", "direction"], registry=REGISTRY)
TENSORS_SENT = Counter("tensorgrid_tensors_sent", "Tensors this task sent to peers or clients.",
                       registry=REGISTRY)
DATA_CHANNEL_CALLS = Counter(
    "tensorgrid_data_channel_calls",
    "Step calls (RunStep, RunGraph, PushTensors) this task served on its data channel.",
    ["method"], registry=REGISTRY)
DATA_CHANNEL_FALLBACKS = Counter(
    "tensorgrid_data_channel_fallbacks",
    "Calls this task sent over gRPC because the peer's data channel could not be reached.",
    ["peer"], registry=REGISTRY)
TLS_CERTIFICATE_EXPIRY = Gauge(
    "tensorgrid_tls_certificate_expiry_timestamp_seconds",
    "When the first of this task's TLS certificates (its own or the CA it trusts) expires, as a Unix time: "
    "peers refuse its new connections after it.", registry=REGISTRY)
# The operator reads it (with tensorgrid_global_step) into the TrainingJob's status.progress.
TARGET_STEP = Gauge("tensorgrid_target_step",
                    "The global step at which this task's StopAtStepHook ends the training (0: no such hook).",
                    registry=REGISTRY)
# The scalar summaries this process wrote last (tf.summary.scalar through a FileWriter): the
# operator shows the one tagged "loss" in status.progress. At most MAX_SUMMARY_TAGS tags.
SUMMARY_SCALAR = Gauge("tensorgrid_summary_scalar",
                       "The last value of each scalar summary this process wrote, by tag.", ["tag"],
                       registry=REGISTRY)
MAX_SUMMARY_TAGS = 64
# The shard service of tf.data.experimental.dynamic_shards, on task 0 (for status.progress).
DATA_SHARDS_EPOCH = Gauge("tensorgrid_data_shards_epoch",
                          "The epoch (0-based) that task 0's shard service hands out, by data set.",
                          ["dataset"], registry=REGISTRY)
DATA_SHARDS_DONE_FRACTION = Gauge("tensorgrid_data_shards_done_fraction",
                                  "The fraction of the current epoch's shards that are done (or failed), by data set.",
                                  ["dataset"], registry=REGISTRY)
DATA_SHARDS_PER_EPOCH = Gauge("tensorgrid_data_shards_per_epoch",
                              "The number of shards in each epoch of the data set, by data set.",
                              ["dataset"], registry=REGISTRY)
DATA_SHARDS_FAILED = Counter("tensorgrid_data_shards_failed",
                             "Shards lost max_attempts times and not handed out again, by data set.",
                             ["dataset"], registry=REGISTRY)
_summary_tags: set[str] = set()
# A PS's live replica on another task (distributed/replication.py, docs/fault-tolerance.md).
PS_REPLICA_LAG_SECONDS = Gauge("tensorgrid_ps_replica_lag_seconds",
                               "How old the newest state of this PS that its replica holds is.", ["task"],
                               registry=REGISTRY)
PS_REPLICA_LAG_UPDATES = Gauge("tensorgrid_ps_replica_lag_updates",
                               "Variable updates on this PS that its replica does not hold yet.", ["task"],
                               registry=REGISTRY)
PS_REPLICA_BYTES = Counter("tensorgrid_ps_replica_bytes", "Value bytes this PS pushed to its replica.", ["task"],
                           registry=REGISTRY)
# How this PS process's state began, once it is known (absent while its replica loads): the
# operator tells a failover that loaded the live replica from one that fell back to the checkpoint.
PS_STARTED_FROM_REPLICA = Gauge(
    "tensorgrid_ps_started_from_replica",
    "1: this PS loaded its state from its live replica at start; 0: it started empty (no replica held, "
    "none reachable, or replication off), so the chief restores the checkpoint or initializes the model.",
    ["task"], registry=REGISTRY)
TENSORS_RECEIVED = Counter("tensorgrid_tensors_received", "Tensors this task received from peers or clients.",
                           registry=REGISTRY)

_servers: list[Any] = []
_lock = threading.Lock()
_http_started: set[int] = set()

# The chief's final figures (docs/metrics.md, "Final figures"): when the chief ends, its server
# writes them to the file this variable names, which the operator sets to the container's
# termination message, so that a finished job keeps its last step, rate and loss in its status
# after its metrics endpoints are gone.
FINAL_FIGURES_PATH_ENV = "TENSORGRID_TERMINATION_MESSAGE_PATH"
# The key of the figures in that message: a program's own termination message is not mistaken for them.
FINAL_FIGURES_KEY = "tensorgridFinalFigures"
# Kubernetes keeps at most 4096 bytes of a termination message.
MAX_TERMINATION_MESSAGE_BYTES = 4096
MAX_FINAL_LOSS_TAGS = 8
# The first and the last (global step, monotonic time) this process saw, from its hooks and summaries.
_steps_seen: list[tuple[int, float]] = []
_log = logging.getLogger("tensorgrid")


class _TaskCollector:
    """Reads gauges from the live servers at scrape time."""

    def collect(self) -> Iterator[Any]:
        updates = CounterMetricFamily("tensorgrid_variable_updates",
                                      "Updates applied to the variables this task holds.", labels=["task"])
        global_step = GaugeMetricFamily("tensorgrid_global_step", "Value of the global_step variable on this task.",
                                        labels=["task"])
        memory = GaugeMetricFamily("tensorgrid_device_memory_bytes", "Bytes held in variables on this task.",
                                   labels=["task", "device"])
        table_entries = GaugeMetricFamily(
            "tensorgrid_embedding_table_entries", "Keys stored in each embedding variable (or part) on this task.",
            labels=["task", "table"])
        table_bytes = GaugeMetricFamily(
            "tensorgrid_embedding_table_bytes",
            "Bytes held by each embedding variable (or part) on this task: keys, values, slots.",
            labels=["task", "table", "kind"])
        with _lock:
            servers = list(_servers)
        for server in servers:
            total_updates = 0
            held: dict[str, int] = {"CPU:0": 0}
            step: Optional[int] = None
            for _, name, resource in server.worker.resources.items():
                if callable(getattr(resource, "memory_bytes", None)):  # an embedding table (kernels layer)
                    table_entries.add_metric([server.task, name], resource.size())
                    for kind, nbytes in resource.memory_bytes().items():
                        table_bytes.add_metric([server.task, name, kind], nbytes)
                    continue
                value = getattr(resource, "value", None)
                if value is None or not hasattr(resource, "updates"):
                    continue
                total_updates += resource.updates
                backend = getattr(resource, "backend", None)
                device = f"{getattr(backend, 'device_type', 'CPU')}:{getattr(backend, 'index', 0)}"
                held[device] = held.get(device, 0) + int(getattr(value, "nbytes", 0))
                if name == "global_step":
                    step = int(value)  # a device scalar is copied to the host explicitly (cupy's __int__)
            updates.add_metric([server.task], total_updates)
            for device, nbytes in held.items():
                memory.add_metric([server.task, device], nbytes)
            if step is not None:
                global_step.add_metric([server.task], step)
        yield updates
        yield global_step
        yield memory
        yield table_entries
        yield table_bytes


REGISTRY.register(_TaskCollector())


def serve(port: int, server: Any, host: str = "") -> None:
    """Serves /metrics on ``port`` (once per process) and includes ``server``'s gauges.

    ``host`` as the task's own listeners (``distributed.rpc.ports.listen_host``): loopback for a
    task on loopback, ``""`` for every interface (a pod, scraped at its IP).
    """
    with _lock:
        _servers.append(server)
        if port in _http_started:
            return
        _http_started.add(port)
    start_http_server(port, addr=host or "0.0.0.0", registry=REGISTRY)


def record_summary_scalars(values: list[tuple[str, float]]) -> None:
    """Sets ``tensorgrid_summary_scalar`` for each (tag, value); tags beyond the first
    ``MAX_SUMMARY_TAGS`` are not exported (a program's summaries cannot grow the page without bound)."""
    for tag, value in values:
        with _lock:
            if tag not in _summary_tags:
                if len(_summary_tags) >= MAX_SUMMARY_TAGS:
                    continue
                _summary_tags.add(tag)
        SUMMARY_SCALAR.labels(tag=tag).set(value)


def record_global_step(step: int) -> None:
    """Notes a global step this process read (a hook's fetch, a summary's step) for its final figures;
    a step lower than the last one (a restored checkpoint) starts the rate over."""
    now = time.monotonic()
    with _lock:
        if not _steps_seen or step < _steps_seen[-1][0]:
            _steps_seen[:] = [(step, now), (step, now)]
        else:
            _steps_seen[1] = (step, now)


def final_figures() -> Optional[dict[str, Any]]:
    """The last global step this process saw, its rate since the first one, the target step and the
    last values of the summaries that name a loss; ``None`` when it saw no global step."""
    with _lock:
        if not _steps_seen:
            return None
        (first, first_time), (last, last_time) = _steps_seen
    scalars = {sample.labels["tag"]: sample.value for family in SUMMARY_SCALAR.collect() for sample in family.samples}
    # Tags that name a loss, the surest first: "loss", then ".../loss", then "...loss" (the operator's order).
    losses = sorted(((tag != "loss", tag.rsplit("/", 1)[-1].lower() != "loss", tag), value)
                    for tag, value in scalars.items()
                    if tag.rsplit("/", 1)[-1].lower().endswith("loss") and math.isfinite(value))
    figures: dict[str, Any] = {"globalStep": last}
    if last > first and last_time > first_time:
        figures["stepsPerSecond"] = round((last - first) / (last_time - first_time), 3)
    target = next((sample.value for family in TARGET_STEP.collect() for sample in family.samples), 0.0)
    if target >= 1:
        figures["targetStep"] = int(target)
    if losses:
        figures["losses"] = {tag: value for (_, _, tag), value in losses[:MAX_FINAL_LOSS_TAGS]}
    return figures


def write_final_figures() -> None:
    """Writes :func:`final_figures` as JSON to the file ``$TENSORGRID_TERMINATION_MESSAGE_PATH`` names
    (nothing without the variable or without figures); a failure is logged, never raised (the
    process is ending)."""
    path = os.environ.get(FINAL_FIGURES_PATH_ENV)
    figures = final_figures() if path else None
    if path is None or figures is None:
        return
    losses = dict(figures.pop("losses", {}))
    text = _termination_message(figures, losses)
    while len(text.encode()) > MAX_TERMINATION_MESSAGE_BYTES and losses:  # long tags: fewer of them
        losses.popitem()
        text = _termination_message(figures, losses)
    try:
        with open(path, "w", encoding="utf-8") as message:
            message.write(text)
    except OSError as e:
        _log.warning("could not write the final figures to %s (%s=%s): %s", path, FINAL_FIGURES_PATH_ENV, path, e)


def _termination_message(figures: dict[str, Any], losses: dict[str, float]) -> str:
    return json.dumps({FINAL_FIGURES_KEY: {**figures, **({"losses": losses} if losses else {})}}, sort_keys=True)


def forget(server: Any) -> None:
    with _lock:
        if server in _servers:
            _servers.remove(server)
