"""The operator with nodes that behave (KWOK): pods scheduled and run, deleted gracefully, lost with their node.

No test here patches a pod's phase: the scheduler binds the job's pods to KWOK's nodes
and KWOK runs them and ends them (kwok_nodes.py), so each step below is the cluster's
own doing, and the operator must follow it through its watches.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from kwok_nodes import KwokNodes, running_kwok, tolerate_kwok
from operator_cluster import ControlPlane, Namespace, Operator, job_manifest, wait_for

pytestmark = [pytest.mark.controlplane, pytest.mark.kwok]


@pytest.fixture(scope="module")
def kwok(controlplane: ControlPlane) -> Iterator[KwokNodes]:
    with running_kwok(controlplane, nodes=2) as nodes:
        yield nodes


def _running_pod_uids(namespace: Namespace, job: str) -> dict[str, str]:
    return {name: pod["metadata"]["uid"] for name, pod in namespace.pods(job).items()
            if pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")}


def test_pods_run_on_kwok_nodes_and_a_graceful_deletion_is_followed_by_a_new_pod(
        operator: Operator, namespace: Namespace, kwok: KwokNodes) -> None:
    namespace.apply(tolerate_kwok(job_manifest("sim", ps=1, workers=2)))
    names = {"sim-ps-0", "sim-worker-0", "sim-worker-1"}
    status = namespace.wait_state("sim", "Running", timeout=60)
    assert status["workers"] == "2/2" and status["ps"] == "1/1"
    pods = namespace.pods("sim")
    assert set(pods) == names
    assert {p["spec"]["nodeName"] for p in pods.values()} <= set(kwok.names)
    assert all(p["status"].get("podIP") for p in pods.values())

    # A graceful deletion (kubectl delete, a drain): the kubelet ends the pod, the operator makes a new one.
    old_uid = pods["sim-worker-1"]["metadata"]["uid"]
    namespace.cp.core.delete_namespaced_pod("sim-worker-1", namespace.name)
    wait_for(lambda: _running_pod_uids(namespace, "sim").get("sim-worker-1", old_uid) != old_uid, 60,
             "a new sim-worker-1 running", lambda: namespace.pods("sim").get("sim-worker-1", {}).get("status"))
    status = namespace.wait_state("sim", "Running", timeout=60)
    assert status["restarts"] == 0  # a pod that vanished is recreated without using a retry


def test_a_pod_on_a_lost_node_stays_terminating_is_reported_and_replaced_when_the_node_returns(
        operator: Operator, namespace: Namespace, kwok: KwokNodes) -> None:
    namespace.apply(tolerate_kwok(job_manifest("lost", ps=1, workers=1)))
    namespace.wait_state("lost", "Running", timeout=60)
    pod = namespace.pods("lost")["lost-worker-0"]
    node, old_uid = pod["spec"]["nodeName"], pod["metadata"]["uid"]

    kwok.lose(node)
    try:
        # A drain of a node whose kubelet is gone: the deletion is never confirmed.
        namespace.cp.core.delete_namespaced_pod("lost-worker-0", namespace.name, grace_period_seconds=1)
        wait_for(lambda: namespace.condition("lost", "StuckTerminating").get("status") == "True", 60,
                 "the StuckTerminating condition", lambda: namespace.status("lost"))
        message = namespace.condition("lost", "StuckTerminating")["message"]
        assert f"lost-worker-0 (node {node}, grace period ended at" in message, message
        assert namespace.pods("lost")["lost-worker-0"]["metadata"]["uid"] == old_uid  # still Terminating
        wait_for(lambda: any(e["reason"] == "PodStuckTerminating" and e["type"] == "Warning"
                             for e in namespace.events("lost")), 10, "the PodStuckTerminating warning")
    finally:
        kwok.restore(node)

    # The kubelet is back: it ends the pod, and the operator replaces it.
    wait_for(lambda: _running_pod_uids(namespace, "lost").get("lost-worker-0", old_uid) != old_uid, 60,
             "a new lost-worker-0 running", lambda: namespace.pods("lost").get("lost-worker-0", {}).get("metadata"))
    wait_for(lambda: namespace.condition("lost", "StuckTerminating").get("status") == "False", 30,
             "the StuckTerminating condition to clear", lambda: namespace.status("lost"))
    assert namespace.wait_state("lost", "Running", timeout=60)["restarts"] == 0
