"""Fixtures for the operator tests that need a real control plane.

``controlplane`` is the run's one control plane, shared with the chart's tests
(kube_controlplane.py: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
from hack/controlplane.sh, the CRDs installed).

``operator`` runs the operator in this process (``running_operator``: ``kopf.operator``
on a thread of its own, its state in the memo ``state.memo_for`` makes), watching the
namespaces ``tg-*``; every test gets a fresh namespace of its own. A test may start
more operators beside it with ``running_operator``. The
tests play the kubelet: there are no nodes, so they move pods through their phases
by patching pod status, exactly as a kubelet would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import urllib.request
import uuid
from typing import Any, Iterator, Optional

import pytest

from kube_controlplane import ControlPlane, wait_for

# Where the operator under test is told Prometheus runs (the job's NetworkPolicy lets it reach the metrics port).
PROMETHEUS_PEERS = ({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                     "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}},)


class Operator:
    """The operator running in this process: its state (kopf's memo), and where its endpoints are."""

    def __init__(self, state: Any, metrics_port: int, liveness_port: int) -> None:
        self.state = state
        self.metrics_port = metrics_port
        self.liveness_port = liveness_port

    def metric(self, name: str, **labels: str) -> float:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
        want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else "")
        for line in text.splitlines():
            if line.startswith(want + " "):
                return float(line.split()[-1])
        return 0.0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def operator_settings(controlplane: ControlPlane, namespaces: tuple[str, ...]) -> Any:
    """The test operators' settings: short retry delays (1 s doubling to 4 s: the tests wait for
    restarts, not for the delays), progress read every second, pods stuck terminating reported
    2 s after their grace period, /metrics on a free port."""
    from tensorgrid_operator import config

    return config.Settings(namespaces=namespaces, metrics_port=0, kubeconfig=controlplane.kubeconfig,
                           peering=None, resync_seconds=30.0, retry_delay_seconds=1.0,
                           max_retry_delay_seconds=4.0, progress_interval_seconds=1.0,
                           stuck_terminating_seconds=2.0,
                           network_policy_metrics_from=PROMETHEUS_PEERS, ps_anti_affinity="preferred")


@contextlib.contextmanager
def running_operator(settings: Any, liveness_port: Optional[int] = None) -> Iterator[Operator]:
    """An operator with ``settings`` on a thread of this process (kopf.operator with its own memo,
    as ``tensorgrid-operator`` runs it), until the block ends: then it is stopped and cleaned up."""
    import kopf

    from tensorgrid_operator.controller import registrations  # noqa: F401 - registers the operator's handlers
    from tensorgrid_operator.controller import state as state_lib

    memo = state_lib.memo_for(settings)
    state = state_lib.state_of(memo)
    stop, ready = threading.Event(), threading.Event()
    failures: list[BaseException] = []
    liveness = f"http://127.0.0.1:{liveness_port}/healthz" if liveness_port is not None else None

    def operate() -> None:
        try:
            asyncio.run(kopf.operator(standalone=True, clusterwide=False, namespaces=settings.namespaces,
                                      liveness_endpoint=liveness, memo=memo, stop_flag=stop, ready_flag=ready))
        except BaseException as e:  # noqa: BLE001 - raised in the test's thread below
            failures.append(e)

    thread = threading.Thread(target=operate, name=f"operator {','.join(settings.namespaces)}", daemon=True)
    thread.start()
    try:
        wait_for(lambda: state.metrics_port is not None or not thread.is_alive(), 30, "the operator to start")
        if failures:
            raise failures[0]
        assert state.metrics_port is not None, "the operator stopped while starting"
        yield Operator(state, state.metrics_port, liveness_port or 0)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive(), "the operator did not stop within 60 s"
    if failures:
        raise failures[0]


@pytest.fixture(scope="session")
def operator(controlplane: ControlPlane) -> Iterator[Operator]:
    with running_operator(operator_settings(controlplane, ("tg-*",)), liveness_port=free_port()) as running:
        yield running


class Namespace:
    """A namespace of one test, with the kubelet's moves and the reads the tests need."""

    def __init__(self, cp: ControlPlane, name: str) -> None:
        self.cp = cp
        self.name = name

    def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        manifest = json.loads(json.dumps(manifest))
        manifest["metadata"]["namespace"] = self.name
        created: dict[str, Any] = self.cp.custom.create_namespaced_custom_object(
            "tensorgrid.io", "v1", self.name, "trainingjobs", manifest)
        return created

    def job(self, name: str) -> Optional[dict[str, Any]]:
        from kubernetes.client import exceptions

        try:
            job: dict[str, Any] = self.cp.custom.get_namespaced_custom_object(
                "tensorgrid.io", "v1", self.name, "trainingjobs", name)
            return job
        except exceptions.ApiException as e:
            if e.status == 404:
                return None
            raise

    def status(self, name: str) -> dict[str, Any]:
        job = self.job(name)
        return (job or {}).get("status") or {}

    def condition(self, name: str, ctype: str) -> dict[str, Any]:
        for cond in self.status(name).get("conditions") or []:
            if cond["type"] == ctype:
                return dict(cond)
        return {}

    def pods(self, job: Optional[str] = None) -> dict[str, dict[str, Any]]:
        selector = f"tensorgrid.io/job-name={job}" if job else "tensorgrid.io/job-name"
        items = self.cp.api.sanitize_for_serialization(
            self.cp.core.list_namespaced_pod(self.name, label_selector=selector).items)
        return {p["metadata"]["name"]: p for p in items}

    def services(self, job: Optional[str] = None) -> dict[str, dict[str, Any]]:
        selector = f"tensorgrid.io/job-name={job}" if job else "tensorgrid.io/job-name"
        items = self.cp.api.sanitize_for_serialization(
            self.cp.core.list_namespaced_service(self.name, label_selector=selector).items)
        return {s["metadata"]["name"]: s for s in items}

    def events(self, job: str) -> list[dict[str, Any]]:
        items = self.cp.api.sanitize_for_serialization(self.cp.core.list_namespaced_event(
            self.name, field_selector=f"involvedObject.name={job},involvedObject.kind=TrainingJob").items)
        return list(items)

    def set_phase(self, pod: str, phase: str, exit_code: Optional[int] = None, reason: str = "",
                  pod_ip: Optional[str] = None) -> None:
        """What a kubelet reports: the phase, the main container's state, and the pod's IP when given."""
        if exit_code is None:
            state: dict[str, Any] = {"running": {"startedAt": "2030-01-01T00:00:00Z"}}
        else:
            reason = reason or ("Completed" if exit_code == 0 else "Error")
            state = {"terminated": {"exitCode": exit_code, "reason": reason,
                                    "startedAt": "2030-01-01T00:00:00Z", "finishedAt": "2030-01-01T00:00:01Z"}}
        body = {"status": {"phase": phase, "containerStatuses": [{
            "name": "tensorgrid", "image": "tensorgrid:test", "imageID": "", "ready": exit_code is None,
            "restartCount": 0, "started": exit_code is None, "state": state}]}}
        if pod_ip is not None:
            body["status"].update(podIP=pod_ip, podIPs=[{"ip": pod_ip}])
        self.cp.core.patch_namespaced_pod_status(pod, self.name, body)

    def run_all(self, job: str) -> None:
        for name, pod in self.pods(job).items():
            if pod["status"].get("phase") == "Pending":
                self.set_phase(name, "Running")

    def wait_pods(self, job: str, names: set[str], timeout: float = 90) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}

        def ready() -> bool:
            nonlocal found
            found = self.pods(job)
            return set(found) == names and not any(p["metadata"].get("deletionTimestamp") for p in found.values())

        wait_for(ready, timeout, f"pods {sorted(names)} of {self.name}/{job}", lambda: sorted(found))
        return found

    def wait_state(self, job: str, state: str, timeout: float = 30) -> dict[str, Any]:
        wait_for(lambda: self.status(job).get("state") == state, timeout, f"{self.name}/{job} to be {state}",
                 lambda: self.status(job))
        return self.status(job)


def job_manifest(name: str, ps: int = 1, workers: int = 2, chief: int = 0, policy: Optional[str] = None,
                 run_policy: Optional[dict[str, Any]] = None, success_policy: Optional[str] = None) -> dict[str, Any]:
    specs: dict[str, Any] = {}
    for rtype, count in (("PS", ps), ("Worker", workers), ("Chief", chief)):
        if count:
            entry: dict[str, Any] = {"replicas": count, "template": {"spec": {"containers": [
                {"name": "tensorgrid", "image": "tensorgrid:test", "command": ["tensorgrid", "server"]}]}}}
            if policy:
                entry["restartPolicy"] = policy
            specs[rtype] = entry
    spec: dict[str, Any] = {"replicaSpecs": specs}
    if run_policy:
        spec["runPolicy"] = run_policy
    if success_policy:
        spec["successPolicy"] = success_policy
    return {"apiVersion": "tensorgrid.io/v1", "kind": "TrainingJob", "metadata": {"name": name}, "spec": spec}


@contextlib.contextmanager
def created_namespace(cp: ControlPlane, name: str) -> Iterator[Namespace]:
    """The namespace ``name``, created for the block and deleted after it."""
    cp.core.create_namespace({"metadata": {"name": name}})
    try:
        yield Namespace(cp, name)
    finally:
        cp.core.delete_namespace(name)


@contextlib.contextmanager
def namespace_of_stopped_operators(cp: ControlPlane, prefix: str) -> Iterator[Namespace]:
    """A new namespace (``prefix`` and a random suffix) for a test whose operators it stops: after the
    block its jobs, which keep the stopped operators' finalizer, are freed of it, so that the namespace
    goes (it may still be terminating when the next test starts: hence the suffix)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    cp.core.create_namespace({"metadata": {"name": name}})
    try:
        yield Namespace(cp, name)
    finally:
        for job in cp.kubectl("get", "tj", "-n", name, "-o", "name").stdout.split():
            cp.kubectl("patch", job, "-n", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
        cp.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def namespace(controlplane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[Namespace]:
    name = f"tg-{request.node.name.lower().replace('_', '-')[:40].strip('-')}-{uuid.uuid4().hex[:6]}"
    with created_namespace(controlplane, "".join(c if c.isalnum() or c == "-" else "-" for c in name)) as created:
        yield created

