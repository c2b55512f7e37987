"""Gang scheduling on a real API server: the PodGroups the operator creates, validated by the schedulers'
own CRDs (tests/operator/support/crds, copied from Volcano and scheduler-plugins), the pods' fields, the
schedulingPolicy checks of the TrainingJob CRD, and a job whose PodGroup CRD is not installed.

No gang scheduler runs here: these tests check what the operator writes and that the API server
accepts it; the pods stay Pending (their scheduler does not run). A real one schedules them in
test_coscheduling.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from typing import Any, Iterator, Optional

import pytest
from kubernetes.client import exceptions

from gang_scheduler import PLUGINS_CRD, VOLCANO_CRD
from gang_scheduler import install_crds as _install
from operator_cluster import ControlPlane, Namespace, created_namespace, Operator, job_manifest, operator_settings, running_operator
from kube_controlplane import wait_for
from tensorgrid_operator.resources import podgroups

pytestmark = pytest.mark.controlplane


@pytest.fixture(scope="module")
def podgroup_crds(controlplane: ControlPlane) -> None:
    _install(controlplane, VOLCANO_CRD, PLUGINS_CRD)


@contextlib.contextmanager
def gang_operator(cp: ControlPlane, gang: podgroups.GangSettings) -> Iterator[tuple[Operator, Namespace]]:
    """An operator with this gang scheduler, alone on a namespace of its own (not the shared operator's tg-*)."""
    with created_namespace(cp, f"tgg-{uuid.uuid4().hex[:8]}") as namespace:
        settings = dataclasses.replace(operator_settings(cp, (namespace.name,)), gang=gang)
        with running_operator(settings) as operator:
            yield operator, namespace


def _pod_group(namespace: Namespace, gang: podgroups.GangSettings, name: str) -> Optional[dict[str, Any]]:
    api = podgroups.APIS[gang.scheduler]
    try:
        group: dict[str, Any] = namespace.cp.custom.get_namespaced_custom_object(
            api.group, api.version, namespace.name, api.plural, name)
        return group
    except exceptions.ApiException as e:
        if e.status == 404:
            return None
        raise


@pytest.mark.parametrize("gang, policy, group_spec", [
    (podgroups.GangSettings(podgroups.VOLCANO), {"minAvailable": 3, "queue": "research", "priorityClass": "high"},
     {"minMember": 3, "queue": "research", "priorityClassName": "high"}),
    (podgroups.GangSettings(podgroups.SCHEDULER_PLUGINS, "coscheduler"), {"scheduleTimeoutSeconds": 120},
     {"minMember": 4, "scheduleTimeoutSeconds": 120}),
], ids=["volcano", "scheduler-plugins"])
def test_a_job_gets_one_pod_group_and_its_pods_join_it(controlplane: ControlPlane, podgroup_crds: None,
                                                       gang: podgroups.GangSettings, policy: dict[str, Any],
                                                       group_spec: dict[str, Any]) -> None:
    with gang_operator(controlplane, gang) as (_, namespace):
        job = namespace.apply(job_manifest("gang", ps=1, workers=3, run_policy={"schedulingPolicy": policy}))
        pods = namespace.wait_pods("gang", {"gang-ps-0", "gang-worker-0", "gang-worker-1", "gang-worker-2"})
        group = _pod_group(namespace, gang, "gang")
        assert group is not None, "no PodGroup"
        assert {k: v for k, v in group["spec"].items() if k in group_spec} == group_spec
        (owner,) = group["metadata"]["ownerReferences"]
        assert owner["uid"] == job["metadata"]["uid"] and owner["kind"] == "TrainingJob"
        for name, pod in pods.items():
            assert pod["spec"]["schedulerName"] == gang.pod_scheduler_name, name
            if gang.scheduler == podgroups.VOLCANO:
                assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "gang", name
            else:
                assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "gang", name
        assert namespace.condition("gang", podgroups.CONDITION) == {}, "created at once: nothing to say"


def test_a_deleted_pod_group_is_created_again_before_the_next_pods(controlplane: ControlPlane,
                                                                   podgroup_crds: None) -> None:
    gang = podgroups.GangSettings(podgroups.SCHEDULER_PLUGINS)
    api = podgroups.APIS[gang.scheduler]
    with gang_operator(controlplane, gang) as (_, namespace):
        namespace.apply(job_manifest("regroup", ps=1, workers=1))
        pods = namespace.wait_pods("regroup", {"regroup-ps-0", "regroup-worker-0"})
        first = _pod_group(namespace, gang, "regroup")
        assert first is not None
        controlplane.custom.delete_namespaced_custom_object(api.group, api.version, namespace.name, api.plural,
                                                            "regroup")
        # Nothing needs the group while no pod is made: the operator does not watch PodGroups (it may only create).
        # A replaced pod does: the group comes back first, and the event says why.
        controlplane.core.delete_namespaced_pod("regroup-worker-0", namespace.name, grace_period_seconds=0)
        wait_for(lambda: namespace.pods("regroup").get("regroup-worker-0", {}).get("metadata", {}).get("uid")
                 not in (None, pods["regroup-worker-0"]["metadata"]["uid"]), 30, "a new regroup-worker-0")
        again = _pod_group(namespace, gang, "regroup")
        assert again is not None and again["metadata"]["uid"] != first["metadata"]["uid"]
        assert again["spec"]["minMember"] == 2
        wait_for(lambda: any(e["reason"] == "RecreatedPodGroup" for e in namespace.events("regroup")), 10,
                 "the RecreatedPodGroup event")
        (event,) = [e for e in namespace.events("regroup") if e["reason"] == "RecreatedPodGroup"]
        assert event["type"] == "Warning" and "PodGroup regroup of the job was deleted" in event["message"]


def test_without_the_pod_group_crd_the_job_says_so_and_creates_no_pods(controlplane: ControlPlane,
                                                                       podgroup_crds: None) -> None:
    gang = podgroups.GangSettings(podgroups.VOLCANO)
    controlplane.kubectl("delete", "crd", VOLCANO_CRD, "--wait=true")
    try:
        with gang_operator(controlplane, gang) as (_, namespace):
            namespace.apply(job_manifest("lonely", ps=1, workers=1))
            wait_for(lambda: namespace.condition("lonely", podgroups.CONDITION).get("status") == "False", 30,
                     "the PodGroupCreated condition", lambda: namespace.status("lonely"))
            condition = namespace.condition("lonely", podgroups.CONDITION)
            assert condition["reason"] == "PodGroupCRDMissing"
            assert "podgroups.scheduling.volcano.sh (scheduling.volcano.sh/v1beta1)" in condition["message"]
            events = [e for e in namespace.events("lonely") if e["reason"] == "PodGroupCRDMissing"]
            assert events and events[0]["type"] == "Warning" and "install volcano" in events[0]["message"]
            assert namespace.pods("lonely") == {}, "pods without their PodGroup would never start"
            # The held pods are refused creations: state FailedCreate, retried after their delay.
            status = namespace.wait_state("lonely", "FailedCreate")
            assert "PodGroup lonely" in namespace.condition("lonely", "Running")["message"]
            assert {b["replica"] for b in status["replicaBackoff"]} == {"ps-0", "worker-0"}
            refused = [e["message"] for e in namespace.events("lonely") if e["reason"] == "FailedCreatePod"]
            assert refused and "could not create pods lonely-ps-0, lonely-worker-0" in refused[0]

            _install(controlplane, VOLCANO_CRD)
            # No nudge: the refused pods' retry (1 s doubling to 4 s here) creates the group, then them.
            namespace.wait_pods("lonely", {"lonely-ps-0", "lonely-worker-0"}, timeout=60)
            assert _pod_group(namespace, gang, "lonely") is not None
            wait_for(lambda: namespace.condition("lonely", podgroups.CONDITION).get("status") == "True", 30,
                     "the condition to turn True", lambda: namespace.status("lonely"))
    finally:
        _install(controlplane, VOLCANO_CRD)


@pytest.mark.parametrize("policy, message", [
    ({"minAvailable": 4}, "spec.runPolicy.schedulingPolicy.minAvailable is more than the job's replicas in all "
                          "(Chief + PS + Worker + Evaluator)"),
    ({"minAvailable": 0}, "spec.runPolicy.schedulingPolicy.minAvailable: Invalid value: 0"),
    ({"scheduleTimeoutSeconds": 0}, "scheduleTimeoutSeconds: Invalid value: 0"),
])
def test_the_crd_refuses_a_bad_scheduling_policy(operator: Operator, namespace: Namespace, policy: dict[str, Any],
                                                 message: str) -> None:
    with pytest.raises(exceptions.ApiException) as refused:
        namespace.apply(job_manifest("bad", ps=1, workers=2, run_policy={"schedulingPolicy": policy}))
    assert refused.value.status == 422
    assert message in str(refused.value.body)
