"""Gang scheduling's pure parts: the PodGroup of a job, its pods' fields, schedulingPolicy and the flags."""

from __future__ import annotations

import asyncio
from typing import Any, Optional

import pytest
from kubernetes.client import exceptions

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator import cli
from tensorgrid_operator.cluster import ensure_objects
from tensorgrid_operator.reconcile import owned_objects
from tensorgrid_operator.resources import podgroups

JOB = {"metadata": {"name": "mnist", "namespace": "team", "uid": "u-1"}}
VOLCANO = podgroups.GangSettings(podgroups.VOLCANO)
PLUGINS = podgroups.GangSettings(podgroups.SCHEDULER_PLUGINS)


def _spec(policy: Optional[dict[str, Any]] = None, ps: int = 2, workers: int = 4) -> spec_lib.JobSpec:
    run = {"schedulingPolicy": policy} if policy is not None else {}
    return spec_lib.parse_spec({"replicaSpecs": {"PS": {"replicas": ps}, "Worker": {"replicas": workers}},
                                "runPolicy": run})


@pytest.mark.parametrize("gang, policy, api_version, spec", [
    (VOLCANO, None, "scheduling.volcano.sh/v1beta1", {"minMember": 6}),
    (VOLCANO, {"minAvailable": 3, "queue": "research", "priorityClass": "high", "scheduleTimeoutSeconds": 60},
     "scheduling.volcano.sh/v1beta1", {"minMember": 3, "queue": "research", "priorityClassName": "high"}),
    (PLUGINS, None, "scheduling.x-k8s.io/v1alpha1", {"minMember": 6}),
    (PLUGINS, {"minAvailable": 5, "queue": "research", "priorityClass": "high", "scheduleTimeoutSeconds": 60},
     "scheduling.x-k8s.io/v1alpha1", {"minMember": 5, "scheduleTimeoutSeconds": 60}),
])
def test_the_pod_group_of_a_job(gang: podgroups.GangSettings, policy: Optional[dict[str, Any]], api_version: str,
                                spec: dict[str, Any]) -> None:
    group = podgroups.pod_group(JOB, _spec(policy), gang)
    assert group is not None
    assert group["apiVersion"] == api_version and group["kind"] == "PodGroup"
    assert group["metadata"]["name"] == "mnist" and group["metadata"]["namespace"] == "team"
    assert group["metadata"]["labels"] == {"tensorgrid.io/job-name": "mnist"}
    (owner,) = group["metadata"]["ownerReferences"]
    assert owner["uid"] == "u-1" and owner["controller"] is True
    assert group["spec"] == spec


def test_no_pod_group_without_a_gang_scheduler() -> None:
    assert podgroups.pod_group(JOB, _spec(), podgroups.GangSettings()) is None


def _pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "mnist-ps-0", "labels": {"tensorgrid.io/job-name": "mnist"},
                         "annotations": {"a": "b"}}, "spec": {"containers": [], **spec}}


@pytest.mark.parametrize("gang, pod, scheduler, labels, annotations", [
    (podgroups.GangSettings(), _pod(), None, {"tensorgrid.io/job-name": "mnist"}, {"a": "b"}),
    (VOLCANO, _pod(), "volcano", {"tensorgrid.io/job-name": "mnist"},
     {"a": "b", "scheduling.k8s.io/group-name": "mnist"}),
    (PLUGINS, _pod(), "scheduler-plugins-scheduler",
     {"tensorgrid.io/job-name": "mnist", "scheduling.x-k8s.io/pod-group": "mnist"}, {"a": "b"}),
    (podgroups.GangSettings(podgroups.SCHEDULER_PLUGINS, "gang-scheduler"), _pod(), "gang-scheduler",
     {"tensorgrid.io/job-name": "mnist", "scheduling.x-k8s.io/pod-group": "mnist"}, {"a": "b"}),
    (VOLCANO, _pod(schedulerName="mine"), "mine", {"tensorgrid.io/job-name": "mnist"},
     {"a": "b", "scheduling.k8s.io/group-name": "mnist"}),
])
def test_a_pod_joins_its_jobs_group(gang: podgroups.GangSettings, pod: dict[str, Any], scheduler: Optional[str],
                                    labels: dict[str, str], annotations: dict[str, str]) -> None:
    result = podgroups.with_gang_fields(pod, gang)
    assert result["spec"].get("schedulerName") == scheduler
    assert result["metadata"]["labels"] == labels and result["metadata"]["annotations"] == annotations
    assert pod == _pod(**({"schedulerName": "mine"} if "schedulerName" in pod["spec"] else {})), "input changed"


@pytest.mark.parametrize("policy, message", [
    ({"minAvailable": 0}, "minAvailable: 0 must be >= 1 and <= the job's 6 replicas"),
    ({"minAvailable": 7}, "minAvailable: 7 must be >= 1 and <= the job's 6 replicas"),
    ({"scheduleTimeoutSeconds": 0}, "scheduleTimeoutSeconds: 0 must be >= 1"),
])
def test_bad_scheduling_policies_are_named(policy: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _spec(policy)


def test_min_member_defaults_to_every_replica() -> None:
    assert podgroups.min_member(_spec()) == 6
    assert podgroups.min_member(_spec({"minAvailable": 6})) == 6
    assert podgroups.min_member(_spec({"minAvailable": 1})) == 1


def test_a_missing_crd_is_said_plainly() -> None:
    reason, message = podgroups.failure_message(VOLCANO, "mnist", 404, "the server could not find the resource")
    assert reason == "PodGroupCRDMissing"
    assert "podgroups.scheduling.volcano.sh (scheduling.volcano.sh/v1beta1)" in message
    assert "--gang-scheduler none" in message and "pods are not created" in message
    reason, message = podgroups.failure_message(PLUGINS, "mnist", 403, "forbidden")
    assert reason == "FailedCreatePodGroup" and "forbidden (HTTP 403)" in message


def test_the_flags() -> None:
    assert cli.parse_args([]).gang == podgroups.GangSettings()
    settings = cli.parse_args(["--gang-scheduler", "scheduler-plugins", "--gang-scheduler-name", "sched"])
    assert settings.gang == podgroups.GangSettings("scheduler-plugins", "sched")
    with pytest.raises(SystemExit):
        cli.parse_args(["--gang-scheduler", "kueue"])
    with pytest.raises(ValueError, match="'kueue' is not one of none, volcano, scheduler-plugins"):
        podgroups.GangSettings("kueue")


@pytest.mark.parametrize("gang, made, error, state, spec, expected", [
    (podgroups.GangSettings(), set(), "", None, {"replicaSpecs": {"Worker": {"replicas": 1}}}, None),
    (VOLCANO, {("PodGroup", "mnist")}, "", None, {"replicaSpecs": {"Worker": {"replicas": 1}}}, None),
    (VOLCANO, set(), "", None, {"replicaSpecs": {"Worker": {"replicas": 1}}}, "PodGroup mnist does not exist yet"),
    (VOLCANO, set(), "no CRD", None, {"replicaSpecs": {"Worker": {"replicas": 1}}}, "no CRD"),
    (VOLCANO, set(), "no CRD", "Failed", {"replicaSpecs": {"Worker": {"replicas": 1}}}, None),
    # an invalid spec: the reconcile fails the job, nothing waits
    (VOLCANO, set(), "", None, {"replicaSpecs": {"Worker": {"replicas": -1}}}, None),
])
def test_why_pods_wait(gang: podgroups.GangSettings, made: set[Any], error: str, state: Optional[str],
                       spec: dict[str, Any], expected: Optional[str]) -> None:
    job = {**JOB, "spec": spec, "status": {"state": state} if state else {}}
    upkeep = owned_objects.Upkeep(made=set(made), pod_group_error=error)
    assert ensure_objects.why_pods_wait(job, upkeep, gang) == expected


class _Answers:
    """What the API server answers a PodGroup create with: True (created), False (409: there), or an error."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.creates: list[dict[str, Any]] = []

    def create_pod_group(self, group: str, version: str, plural: str, pod_group: dict[str, Any]) -> bool:
        self.creates.append(pod_group)
        if isinstance(self.answer, Exception):
            raise self.answer
        return bool(self.answer)


async def _call(fn: Any, *args: Any) -> Any:
    return fn(*args)


@pytest.mark.parametrize("made, fresh, answer, held, events, still_made", [
    # made in this very pass: no second create
    ({("PodGroup", "mnist")}, True, True, None, [], True),
    # never made (its creation failed: why_pods_wait holds the pods already): nothing to ask
    (set(), False, True, None, [], False),
    # made in an earlier pass and still there (409)
    ({("PodGroup", "mnist")}, False, False, None, [], True),
    # made earlier and deleted since: created again, said with a Warning
    ({("PodGroup", "mnist")}, False, True, None, [("Warning", "RecreatedPodGroup")], True),
    # deleted, and the CRD with it: the pods wait, and the next pass's pod_group sets the condition
    ({("PodGroup", "mnist")}, False, exceptions.ApiException(status=404, reason="Not Found"),
     "could not create PodGroup mnist", [("Warning", "PodGroupCRDMissing")], False),
])
def test_a_pod_group_is_asked_for_before_new_pods(made: set[Any], fresh: bool, answer: Any, held: Optional[str],
                                                  events: list[tuple[str, str]], still_made: bool) -> None:
    kube = _Answers(answer)
    said: list[tuple[str, str]] = []
    job = {**JOB, "spec": {"replicaSpecs": {"PS": {"replicas": 1}, "Worker": {"replicas": 2}}}}
    upkeep = owned_objects.Upkeep(made=set(made), pod_group_fresh=fresh)
    result = asyncio.run(ensure_objects.pod_group_before_pods(
        kube, _call, lambda kind, reason, message: said.append((kind, reason)), job, upkeep, PLUGINS))
    assert (result is None) == (held is None) and (held is None or held in str(result))
    assert said == events
    assert (("PodGroup", "mnist") in upkeep.made) == still_made
    expected_creates = 0 if fresh or not made else 1
    assert len(kube.creates) == expected_creates
    assert all(c["spec"] == {"minMember": 3} for c in kube.creates)
