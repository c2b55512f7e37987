"""Which recovery a PS's new pod made, on a real API server: the operator reads the PS's
``tensorgrid_ps_started_from_replica`` over HTTP with the progress, and says it in
``status.parameterServerStarts``, the ``PSStateRecovered`` condition and an Event.

The test plays the kubelet and the PS: pods get the IP 127.0.0.1, where it serves a PS's
metrics page on the port the job's template declares as ``metrics``.
"""

from __future__ import annotations

from typing import Iterator

import pytest

import metrics_pages
from operator_cluster import Namespace, Operator, job_manifest, wait_for

pytestmark = pytest.mark.controlplane
PS0 = "/job:ps/replica:0/task:0"


class PSMetricsPage(metrics_pages.MetricsPage):
    """A PS's /metrics page, as the runtime serves it: the global step and how its state began."""

    def __init__(self) -> None:
        super().__init__()
        self.global_step = self.gauge("tensorgrid_global_step", "global step", ["task"])
        self.started_from_replica = self.gauge("tensorgrid_ps_started_from_replica",
                                               "1: loaded its live replica; 0: started empty", ["task"])


@pytest.fixture
def ps_page() -> Iterator[PSMetricsPage]:
    with PSMetricsPage() as page:
        yield page


def starts(namespace: Namespace, job: str) -> list[tuple[str, str, str]]:
    return [(s["replica"], s["podUID"], s["source"]) for s in namespace.status(job).get("parameterServerStarts") or []]


def replace_ps0(namespace: Namespace, job: str, page: PSMetricsPage, from_replica: bool) -> str:
    """Deletes the PS pod (lost), waits for the operator's new one and runs it; its uid."""
    old_uid = namespace.pods(job)[f"{job}-ps-0"]["metadata"]["uid"]
    namespace.cp.core.delete_namespaced_pod(f"{job}-ps-0", namespace.name, grace_period_seconds=0)
    wait_for(lambda: namespace.pods(job).get(f"{job}-ps-0", {}).get("metadata", {}).get("uid") not in (None, old_uid),
             30, "the PS pod made again", lambda: sorted(namespace.pods(job)))
    page.started_from_replica.labels(task=PS0).set(1 if from_replica else 0)
    namespace.set_phase(f"{job}-ps-0", "Running", pod_ip="127.0.0.1")
    return str(namespace.pods(job)[f"{job}-ps-0"]["metadata"]["uid"])


def test_a_new_ps_pod_says_whether_it_loaded_the_live_replica_or_fell_back_to_the_checkpoint(
        operator: Operator, namespace: Namespace, ps_page: PSMetricsPage) -> None:
    manifest = job_manifest("failover", ps=1, workers=1)
    for replica in manifest["spec"]["replicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["ports"] = [{"name": "metrics", "containerPort": ps_page.port}]
    ps_page.global_step.labels(task=PS0).set(100)
    ps_page.started_from_replica.labels(task=PS0).set(0)
    namespace.apply(manifest)
    for name in namespace.wait_pods("failover", {"failover-ps-0", "failover-worker-0"}):
        namespace.set_phase(name, "Running", pod_ip="127.0.0.1")
    first = namespace.pods("failover")["failover-ps-0"]["metadata"]["uid"]
    wait_for(lambda: starts(namespace, "failover") == [("ps-0", first, "Initial")], 30,
             "the first PS pod recorded", lambda: namespace.status("failover"))
    assert namespace.condition("failover", "PSStateRecovered") == {}  # a first start recovers nothing

    second = replace_ps0(namespace, "failover", ps_page, from_replica=True)
    wait_for(lambda: starts(namespace, "failover") == [("ps-0", second, "LiveReplica")], 30,
             "the new PS pod's live replica in the status", lambda: namespace.status("failover"))
    condition = namespace.condition("failover", "PSStateRecovered")
    assert (condition["status"], condition["reason"]) == ("True", "LoadedLiveReplica"), condition
    assert "failover-ps-0 loaded its predecessor's state from the live replica" in condition["message"]

    third = replace_ps0(namespace, "failover", ps_page, from_replica=False)
    wait_for(lambda: starts(namespace, "failover") == [("ps-0", third, "Checkpoint")], 30,
             "the checkpoint fallback in the status", lambda: namespace.status("failover"))
    condition = namespace.condition("failover", "PSStateRecovered")
    assert (condition["status"], condition["reason"]) == ("False", "RestoredCheckpoint"), condition

    def said() -> list[tuple[str, str]]:
        return sorted((e["type"], e["reason"]) for e in namespace.events("failover")
                      if e["reason"] in ("LoadedLiveReplica", "RestoredCheckpoint"))
    wait_for(lambda: said() == [("Normal", "LoadedLiveReplica"), ("Warning", "RestoredCheckpoint")], 30,
             "an event for each recovery", said)
