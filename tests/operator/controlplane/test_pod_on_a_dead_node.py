"""A pod stuck Terminating on a node whose kubelet is gone, on a real API server.

The node is a Node object with no kubelet behind it (cordoned and tainted, so the
scheduler puts nothing else there); the test binds a pod to it as the scheduler would
and deletes the pod as a drain would: no kubelet ever confirms the deletion, so the pod
stays Terminating, exactly as on a dead or NotReady node.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from operator_cluster import ControlPlane, Namespace, Operator, job_manifest, wait_for
from tensorgrid_operator.cluster import kube

pytestmark = pytest.mark.controlplane


@pytest.fixture
def dead_node(controlplane: ControlPlane, namespace: Namespace) -> Iterator[str]:
    name = f"dead-{namespace.name}"[:63]
    controlplane.core.create_node({"metadata": {"name": name}, "spec": {
        "unschedulable": True, "taints": [{"key": "tensorgrid.io/test", "value": "dead", "effect": "NoSchedule"}]}})
    try:
        yield name
    finally:
        controlplane.core.delete_node(name)


def test_a_pod_stuck_terminating_is_reported_and_a_forced_deletion_lets_it_be_replaced(
        operator: Operator, namespace: Namespace, dead_node: str) -> None:
    namespace.apply(job_manifest("stuck", ps=1, workers=1))
    namespace.wait_pods("stuck", {"stuck-ps-0", "stuck-worker-0"})
    namespace.cp.core.create_namespaced_pod_binding("stuck-ps-0", namespace.name, {
        "metadata": {"name": "stuck-ps-0"}, "target": {"kind": "Node", "name": dead_node}}, _preload_content=False)
    namespace.run_all("stuck")
    namespace.wait_state("stuck", "Running")
    old = namespace.pods("stuck")["stuck-ps-0"]
    namespace.cp.core.delete_namespaced_pod("stuck-ps-0", namespace.name, grace_period_seconds=1)

    wait_for(lambda: namespace.condition("stuck", "StuckTerminating").get("status") == "True", 30,
             "the StuckTerminating condition", lambda: namespace.status("stuck"))
    message = namespace.condition("stuck", "StuckTerminating")["message"]
    assert f"stuck-ps-0 (node {dead_node}, grace period ended at" in message, message
    wait_for(lambda: any(e["reason"] == "PodStuckTerminating" and e["type"] == "Warning"
                         for e in namespace.events("stuck")), 10, "the PodStuckTerminating warning")
    assert namespace.pods("stuck")["stuck-ps-0"]["metadata"]["uid"] == old["metadata"]["uid"]  # still there

    # What --force-delete-stuck-pods does, through the operator's own API call.
    client = kube.Kube(kube.load_config(namespace.cp.kubeconfig), pool_size=2)
    try:
        client.delete_pod(namespace.name, "stuck-ps-0", old["metadata"]["uid"], force=True)
    finally:
        client.close()
    wait_for(lambda: namespace.pods("stuck").get("stuck-ps-0", old)["metadata"]["uid"] != old["metadata"]["uid"],
             30, "a new stuck-ps-0")
    wait_for(lambda: namespace.condition("stuck", "StuckTerminating").get("status") == "False", 30,
             "the StuckTerminating condition to clear", lambda: namespace.status("stuck"))
