"""TrainingJobs queued by the real Kueue: held until admitted as one group, within quota, preempted and re-admitted.

Kueue's manager (kueue_manager.py) runs with its plain-Pod integration; its webhook gates the
pods of queued jobs, its scheduler admits each job's pod group as one Workload against a
ClusterQueue's CPU quota, and on admission removes the gates and writes the ResourceFlavor's
node labels and tolerations into the pods. The pods then run on KWOK nodes (kwok_nodes.py)
that only the flavor's pods select and tolerate: the jobs' own templates name no node and
tolerate no taint, so a pod that runs shows what Kueue injected. Each pod requests one CPU.

What is checked is what a user sees: which pods are gated or bound, the job's state, the
Workload's conditions, and that a job preempted by a higher-priority one comes back by itself
(the operator recreates the pods Kueue deleted, Kueue gates them again and re-admits the group
once the quota is free) without using up its ``backoffLimit``.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Callable, Iterator

import pytest

from kueue_manager import NAMESPACE_LABEL, Kueue, running_kueue
from kwok_nodes import TAINT, running_kwok
from operator_cluster import ControlPlane, Namespace, Operator, created_namespace, job_manifest, wait_for
from tensorgrid_operator.api import conditions
from tensorgrid_operator.resources import kueue as kueue_lib

pytestmark = [pytest.mark.controlplane, pytest.mark.kwok, pytest.mark.third_party, pytest.mark.timeout(300)]
NODE_CPUS = "2"
QUOTA_CPUS = 3
"""The ClusterQueue's quota: one job of 3 one-CPU pods at a time (the 2 nodes would fit 4)."""


@dataclasses.dataclass
class Queue:
    """A ClusterQueue of ``QUOTA_CPUS`` on the test's flavor, and a LocalQueue for it in the test's namespace."""

    kueue: Kueue
    namespace: Namespace
    name: str
    node_label: dict[str, str]


@pytest.fixture(scope="module")
def kueue_on_nodes(controlplane: ControlPlane) -> Iterator[tuple[Kueue, dict[str, str]]]:
    """Kueue, and 2 KWOK nodes of ``NODE_CPUS`` CPUs labelled for this module's flavors only."""
    tag = uuid.uuid4().hex[:8]
    node_label = {"tensorgrid.io/kueue-test": tag}
    with running_kwok(controlplane, 2, prefix=f"kueue-{tag}", allocatable={"cpu": NODE_CPUS, "memory": "8Gi"},
                      labels=node_label), running_kueue(controlplane) as kueue:
        yield kueue, node_label


@pytest.fixture
def queue(kueue_on_nodes: tuple[Kueue, dict[str, str]], operator: Operator, controlplane: ControlPlane,
          request: pytest.FixtureRequest) -> Iterator[Queue]:
    """A namespace of the shared operator (``tg-*``) that Kueue manages, with a LocalQueue of its own
    ClusterQueue (preempting lower priorities within it) on a flavor of the module's nodes."""
    kueue, node_label = kueue_on_nodes
    tag = uuid.uuid4().hex[:6]
    with created_namespace(controlplane, f"tg-kueue-{tag}") as namespace:
        controlplane.core.patch_namespace(namespace.name, {"metadata": {"labels": {NAMESPACE_LABEL: "true"}}})
        flavor, cluster_queue = f"kwok-{tag}", f"cq-{tag}"
        kueue.create("ResourceFlavor", flavor, {
            "nodeLabels": node_label, "tolerations": [{**TAINT, "operator": "Equal"}]})
        kueue.create("ClusterQueue", cluster_queue, {
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": QUOTA_CPUS}]}]}]})
        kueue.create("LocalQueue", "team-a", {"clusterQueue": cluster_queue}, namespace=namespace.name)
        for name, value in (("low", 100), ("high", 1000)):
            kueue.create("WorkloadPriorityClass", f"{name}-{tag}", {}, value=value)
        yield Queue(kueue, namespace, tag, node_label)


def _queued_job(queue: Queue, name: str, priority: str = "") -> dict[str, Any]:
    """1 PS + 2 workers of one CPU each in the LocalQueue; no node selector or toleration of its own."""
    manifest = job_manifest(name, ps=1, workers=2)
    manifest["metadata"]["labels"] = {kueue_lib.QUEUE_NAME_LABEL: "team-a"}
    if priority:
        manifest["metadata"]["labels"][kueue_lib.PRIORITY_CLASS_LABEL] = f"{priority}-{queue.name}"
    for replica in manifest["spec"]["replicaSpecs"].values():
        for container in replica["template"]["spec"]["containers"]:
            container["resources"] = {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    return manifest


def _workload(queue: Queue, job: dict[str, Any]) -> dict[str, Any]:
    """The job's Workload (Kueue names a pod group's Workload after the group)."""
    group = kueue_lib.pod_group_name(job)
    for workload in queue.kueue.workloads(queue.namespace.name):
        if workload["metadata"]["name"] == group:
            return workload
    return {}


def _condition(workload: dict[str, Any], ctype: str) -> dict[str, Any]:
    """The Workload's condition of that type, or ``{}``."""
    return dict(conditions.get_condition((workload.get("status") or {}).get("conditions") or [], ctype) or {})


def _gated(pod: dict[str, Any]) -> bool:
    return any(g["name"] == kueue_lib.ADMISSION_GATE for g in pod["spec"].get("schedulingGates") or [])


def _wait_job_pods(queue: Queue, job: str, each: Callable[[dict[str, Any]], bool], what: str) -> dict[str, dict[str, Any]]:
    """Waits until the job's 3 pods exist, none terminating and each one ``each``; returns them."""
    names = {f"{job}-ps-0", f"{job}-worker-0", f"{job}-worker-1"}
    found: dict[str, dict[str, Any]] = {}

    def done() -> bool:
        nonlocal found
        found = queue.namespace.pods(job)
        return set(found) == names and all(each(p) and not p["metadata"].get("deletionTimestamp")
                                           for p in found.values())

    wait_for(done, 60, f"the 3 pods of {job} {what}", lambda: {
        n: (p["status"].get("phase"), _gated(p), p["spec"].get("nodeName")) for n, p in found.items()})
    return found


def _running_on_flavor(queue: Queue, job: str) -> dict[str, dict[str, Any]]:
    """Waits until the job's 3 pods run on the module's nodes, placed there by what Kueue injected."""
    found = _wait_job_pods(queue, job, lambda p: p["status"].get("phase") == "Running", "to run")
    for pod in found.values():
        assert not _gated(pod)
        assert pod["spec"]["nodeSelector"] == queue.node_label  # Kueue's flavor, not the template
        assert {**TAINT, "operator": "Equal"} in pod["spec"]["tolerations"]
    return found


def _held(queue: Queue, job: str) -> dict[str, dict[str, Any]]:
    """Waits until the job's 3 pods exist, every one held by Kueue's gate and bound to no node."""
    return _wait_job_pods(queue, job, lambda p: _gated(p) and not p["spec"].get("nodeName"), "held by Kueue's gate")


def _finish(queue: Queue, job: str) -> None:
    """Worker 0 exits 0: the job succeeds, and the operator ends its other pods."""
    queue.namespace.set_phase(f"{job}-worker-0", "Succeeded", 0)
    queue.namespace.wait_state(job, "Succeeded")


def test_a_job_waits_gated_within_the_quota_and_is_admitted_as_one_group_when_it_frees(queue: Queue) -> None:
    namespace = queue.namespace
    first = namespace.apply(_queued_job(queue, "first"))
    _running_on_flavor(queue, "first")
    assert namespace.wait_state("first", "Running", timeout=60)["startTime"]  # the clock runs once admitted
    workload = _workload(queue, first)
    assert _condition(workload, "Admitted")["status"] == "True"
    # One Workload for the whole job: a pod set per shape of pod (Kueue's role hash), PS and workers.
    assert sorted(p["count"] for p in workload["spec"]["podSets"]) == [1, 2]

    second = namespace.apply(_queued_job(queue, "second"))  # 3 more CPUs: over the quota
    _held(queue, "second")
    wait_for(lambda: _condition(_workload(queue, second), "QuotaReserved").get("reason") == "Pending", 30,
             "Kueue to keep the second job's Workload pending", lambda: _workload(queue, second).get("status"))
    status = namespace.wait_state("second", "SchedulingGated")
    assert kueue_lib.ADMISSION_GATE in namespace.condition("second", "Running")["message"]
    assert [e["type"] for e in namespace.events("second") if e["reason"] == "SchedulingGated"] == ["Normal"]
    assert not status.get("startTime")  # time in the queue is not active time
    _held(queue, "second")  # still held once Kueue has decided

    _finish(queue, "first")
    wait_for(lambda: _condition(_workload(queue, first), "Finished").get("status") == "True", 60,
             "Kueue to finish the first job's Workload", lambda: _workload(queue, first).get("status"))
    _running_on_flavor(queue, "second")
    namespace.wait_state("second", "Running", timeout=60)
    assert _condition(_workload(queue, second), "Admitted")["status"] == "True"


def test_a_preempted_job_is_recreated_gated_and_readmitted_without_using_its_backoff_limit(queue: Queue) -> None:
    namespace = queue.namespace
    low = namespace.apply(_queued_job(queue, "low", priority="low"))
    first_uids = {name: pod["metadata"]["uid"] for name, pod in _running_on_flavor(queue, "low").items()}
    namespace.wait_state("low", "Running", timeout=60)

    high = namespace.apply(_queued_job(queue, "high", priority="high"))
    wait_for(lambda: _condition(_workload(queue, low), "Evicted").get("reason") == "Preempted", 60,
             "Kueue to preempt the low-priority job", lambda: _workload(queue, low).get("status"))
    held = _held(queue, "low")  # deleted by Kueue, recreated by the operator, gated by Kueue's webhook
    assert not set(first_uids.values()) & {pod["metadata"]["uid"] for pod in held.values()}
    _running_on_flavor(queue, "high")
    namespace.wait_state("high", "Running", timeout=60)
    namespace.wait_state("low", "SchedulingGated")
    assert namespace.status("low")["restarts"] == 0

    _finish(queue, "high")
    _running_on_flavor(queue, "low")
    namespace.wait_state("low", "Running", timeout=60)
    assert namespace.status("low")["restarts"] == 0
    assert _condition(_workload(queue, low), "Admitted")["status"] == "True"
    assert _condition(_workload(queue, high), "Finished")["status"] == "True"


def test_a_failed_replica_is_replaced_within_the_admitted_group(queue: Queue) -> None:
    """Kueue never recreates a pod group's pods; the operator replaces a failed replica, and Kueue lets
    the replacement into the group it has admitted (no new admission, the quota unchanged)."""
    namespace = queue.namespace
    job = namespace.apply(_queued_job(queue, "retried"))
    before = _running_on_flavor(queue, "retried")
    namespace.wait_state("retried", "Running", timeout=60)
    admitted = _condition(_workload(queue, job), "Admitted")
    namespace.set_phase("retried-worker-1", "Failed", 137, reason="OOMKilled")  # retryable (ExitCode policy)
    after = _running_on_flavor(queue, "retried")
    assert after["retried-worker-1"]["metadata"]["uid"] != before["retried-worker-1"]["metadata"]["uid"]
    status = namespace.wait_state("retried", "Running", timeout=60)
    assert status["restarts"] == 1
    workload = _workload(queue, job)
    assert _condition(workload, "Admitted") == admitted  # the same admission, not a new one
    assert not _condition(workload, "Finished")


def test_a_queued_job_suspended_by_hand_frees_its_quota_and_is_queued_again_when_resumed(queue: Queue) -> None:
    """The suspended job's pods go; its Workload, owned by them, goes with the last one (garbage
    collection), and with it the quota: another job runs meanwhile, and the resumed job waits its turn."""
    namespace = queue.namespace
    held = namespace.apply(_queued_job(queue, "held"))
    _running_on_flavor(queue, "held")
    namespace.wait_state("held", "Running", timeout=60)
    patch = namespace.cp.custom.patch_namespaced_custom_object
    patch("tensorgrid.io", "v1", namespace.name, "trainingjobs", "held", {"spec": {"suspend": True}})
    namespace.wait_state("held", "Suspended")
    namespace.wait_pods("held", set(), timeout=60)
    wait_for(lambda: not _workload(queue, held), 60, "the suspended job's Workload to be collected",
             lambda: _workload(queue, held).get("status"))

    namespace.apply(_queued_job(queue, "other"))
    _running_on_flavor(queue, "other")
    namespace.wait_state("other", "Running", timeout=60)
    patch("tensorgrid.io", "v1", namespace.name, "trainingjobs", "held", {"spec": {"suspend": False}})
    _held(queue, "held")
    status = namespace.wait_state("held", "SchedulingGated")
    assert not status.get("startTime") and status["restarts"] == 0

    _finish(queue, "other")
    _running_on_flavor(queue, "held")
    namespace.wait_state("held", "Running", timeout=60)
