"""spec.suspend, spec.managedBy and Kueue's pod-group metadata against a real API server and operator.

Kueue does not run here: these tests check what the operator writes and that the API server
accepts it. Kueue's own admission of these pods (its gate, quota, preemption) is tested with
its real manager in test_kueue_admission.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import exceptions

from operator_cluster import Namespace, Operator, job_manifest, wait_for
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import kueue

pytestmark = pytest.mark.controlplane

MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def patch_job(namespace: Namespace, name: str, patch: dict[str, Any]) -> None:
    namespace.cp.custom.patch_namespaced_custom_object("tensorgrid.io", "v1", namespace.name, "trainingjobs",
                                                       name, patch)


def test_spec_suspend(operator: Operator, namespace: Namespace) -> None:
    manifest = job_manifest("held")
    manifest["spec"]["suspend"] = True
    namespace.apply(manifest)
    status = namespace.wait_state("held", "Suspended")
    assert "startTime" not in status and namespace.pods("held") == {}
    assert namespace.condition("held", "Suspended")["message"] == "spec.suspend is true"

    patch_job(namespace, "held", {"spec": {"suspend": False}})
    names = {"held-ps-0", "held-worker-0", "held-worker-1"}
    namespace.wait_pods("held", names)
    namespace.run_all("held")
    status = namespace.wait_state("held", "Running")
    assert status["startTime"]

    patch_job(namespace, "held", {"spec": {"suspend": True}})
    namespace.wait_state("held", "Suspended")
    namespace.wait_pods("held", set())
    status = namespace.status("held")
    assert "startTime" not in status and status["restarts"] == 0
    patch_job(namespace, "held", {"spec": {"suspend": False}})
    namespace.wait_pods("held", names)
    assert namespace.status("held")["restarts"] == 0
    wait_for(lambda: {"Suspended", "Resumed", "DeletedPods"} <= {e["reason"] for e in namespace.events("held")},
             10, "the Suspended, DeletedPods and Resumed events")


def test_a_job_managed_by_another_controller_is_left_alone(operator: Operator, namespace: Namespace) -> None:
    manifest = job_manifest("remote")
    manifest["spec"]["managedBy"] = MULTIKUEUE
    namespace.apply(manifest)
    wait_for(lambda: any(e["reason"] == "ManagedElsewhere" for e in namespace.events("remote")), 15,
             "the ManagedElsewhere event")
    patch_job(namespace, "remote", {"metadata": {"labels": {"touched": "yes"}}})
    # A job of this operator created after it: once its pods exist, the watch has shown the
    # operator both the other job and its change.
    namespace.apply(job_manifest("local"))
    namespace.wait_pods("local", {"local-ps-0", "local-worker-0", "local-worker-1"})
    namespace.wait_state("local", "Unschedulable")

    job = namespace.job("remote")
    assert job is not None
    assert "status" not in job
    assert spec_lib.FINALIZER not in (job["metadata"].get("finalizers") or [])
    assert namespace.pods("remote") == {} and namespace.services("remote") == {}
    events = [e for e in namespace.events("remote") if e["reason"] == "ManagedElsewhere"]
    assert len(events) == 1 and events[0].get("count") in (None, 1)
    assert MULTIKUEUE in events[0]["message"] and spec_lib.CONTROLLER_NAME in events[0]["message"]
    local = namespace.job("local")
    assert local is not None and spec_lib.FINALIZER in local["metadata"]["finalizers"]


@pytest.mark.parametrize("patch, why", [
    ({"spec": {"managedBy": "example.com/other"}}, "immutable"),
    ({"spec": {"managedBy": None}}, "immutable"),
])
def test_managed_by_is_immutable(operator: Operator, namespace: Namespace, patch: dict[str, Any], why: str) -> None:
    manifest = job_manifest("fixed")
    manifest["spec"]["managedBy"] = MULTIKUEUE
    namespace.apply(manifest)
    with pytest.raises(exceptions.ApiException) as refused:
        patch_job(namespace, "fixed", patch)
    assert refused.value.status == 422 and why in str(refused.value.body)


def test_managed_by_cannot_be_added(operator: Operator, namespace: Namespace) -> None:
    namespace.apply(job_manifest("plain"))
    with pytest.raises(exceptions.ApiException) as refused:
        patch_job(namespace, "plain", {"spec": {"managedBy": MULTIKUEUE}})
    assert refused.value.status == 422 and "immutable" in str(refused.value.body)


@pytest.mark.parametrize("value", ["x" * 64, "no-domain", "Example.com/x", "example.com/"])
def test_managed_by_must_be_a_short_domain_prefixed_path(operator: Operator, namespace: Namespace,
                                                         value: str) -> None:
    manifest = job_manifest("bad")
    manifest["spec"]["managedBy"] = value
    with pytest.raises(exceptions.ApiException) as refused:
        namespace.apply(manifest)
    assert refused.value.status == 422 and "spec.managedBy" in str(refused.value.body)


def test_a_queued_job_is_one_kueue_pod_group(operator: Operator, namespace: Namespace) -> None:
    manifest = job_manifest("gang", ps=1, workers=2)
    manifest["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: "team-a", kueue.PRIORITY_CLASS_LABEL: "high"}
    created = namespace.apply(manifest)
    names = {"gang-ps-0", "gang-worker-0", "gang-worker-1"}
    pods = namespace.wait_pods("gang", names)
    group = kueue.pod_group_name(created)
    assert group.startswith("gang-")
    for pod in pods.values():
        labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
        assert labels[kueue.QUEUE_NAME_LABEL] == "team-a"
        assert labels[kueue.POD_GROUP_NAME_LABEL] == group
        assert labels[kueue.PRIORITY_CLASS_LABEL] == "high"
        assert annotations[kueue.POD_GROUP_TOTAL_COUNT_ANNOTATION] == "3"
        assert kueue.RETRIABLE_IN_GROUP_ANNOTATION not in annotations

    namespace.run_all("gang")
    namespace.wait_state("gang", "Running")
    namespace.set_phase("gang-worker-0", "Succeeded", 0)
    namespace.wait_state("gang", "Succeeded")
    pods = namespace.wait_pods("gang", {"gang-worker-0"})  # cleanPodPolicy Running deleted the others
    wait_for(lambda: namespace.pods("gang")["gang-worker-0"]["metadata"]["annotations"].get(
        kueue.RETRIABLE_IN_GROUP_ANNOTATION) == "false", 15, "the pod group closed for Kueue")


def test_closing_a_group_touches_only_the_pod_of_that_uid(namespace: Namespace) -> None:
    """The annotation patch carries the uid read: a newer pod of the same name is left alone."""
    from tensorgrid_operator.cluster import kube

    client = kube.Kube(kube.load_config(namespace.cp.kubeconfig), pool_size=2)
    try:
        pod = namespace.cp.core.create_namespaced_pod(namespace.name, {
            "metadata": {"name": "newer", "labels": {spec_lib.LABEL_JOB_NAME: "x"}},
            "spec": {"containers": [{"name": "tensorgrid", "image": "tensorgrid:test"}]}})
        client.patch_pod_metadata(namespace.name, "newer", "00000000-0000-0000-0000-000000000000",
                                  kueue.close_group_patch())
        assert not (namespace.pods()["newer"]["metadata"].get("annotations") or {})
        client.patch_pod_metadata(namespace.name, "gone", "00000000-0000-0000-0000-000000000000",
                                  kueue.close_group_patch())  # a pod already gone: nothing to do
        client.patch_pod_metadata(namespace.name, "newer", pod.metadata.uid, kueue.close_group_patch())
        annotations = namespace.pods()["newer"]["metadata"]["annotations"]
        assert annotations == {kueue.RETRIABLE_IN_GROUP_ANNOTATION: "false"}
    finally:
        client.close()
