"""The PodGroup of a scaled job, decided without a cluster: ``minMember`` follows the worker count only where
it is the job's every replica (no minAvailable, no minReplicas), a Kueue-held count is the one used, and
``ensure_objects.resize_pod_group`` patches once per change, reads a group it did not make, and says a
refusal once."""

from __future__ import annotations

import asyncio
from typing import Any, Optional

import pytest
from kubernetes.client import exceptions

from tensorgrid_operator.cluster import ensure_objects
from tensorgrid_operator.reconcile import owned_objects
from tensorgrid_operator.reconcile import pod_group_size
from tensorgrid_operator.resources import kueue
from tensorgrid_operator.resources import podgroups

PLUGINS = podgroups.GangSettings(podgroups.SCHEDULER_PLUGINS)
MADE = ("PodGroup", "mnist")


def _job(workers: int, ps: int = 1, worker_fields: Optional[dict[str, Any]] = None,
         policy: Optional[dict[str, Any]] = None, state: Optional[str] = None,
         labels: Optional[dict[str, str]] = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicaSpecs": {"PS": {"replicas": ps},
                                             "Worker": {"replicas": workers, **(worker_fields or {})}}}
    if policy is not None:
        spec["runPolicy"] = {"schedulingPolicy": policy}
    return {"metadata": {"name": "mnist", "namespace": "team", "uid": "u-1", "labels": labels or {}},
            "spec": spec, "status": {"state": state} if state else {}}


@pytest.mark.parametrize("job, wanted", [
    (_job(workers=4), 5),  # every replica at the current count
    (_job(workers=1, ps=2), 3),
    (_job(workers=4, worker_fields={"minReplicas": 2, "maxReplicas": 8}), 3),  # fixed at minReplicas
    (_job(workers=4, policy={"minAvailable": 2}), 2),  # fixed by the user
    (_job(workers=4, state="Succeeded"), None),  # finished: nothing to place
    (_job(workers=-1), None),  # a spec the reconcile fails the job for
])
def test_the_wanted_min_member(job: dict[str, Any], wanted: Optional[int]) -> None:
    assert pod_group_size.wanted_min_member(job, []) == wanted


def test_a_kueue_held_worker_count_is_the_one_counted() -> None:
    job = _job(workers=4, labels={kueue.QUEUE_NAME_LABEL: "research"})
    pods = [{"metadata": {"name": f"mnist-{short}",
                          "annotations": {kueue.POD_GROUP_TOTAL_COUNT_ANNOTATION: "3"}}}
            for short in ("ps-0", "worker-0", "worker-1")]
    assert pod_group_size.wanted_min_member(job, pods) == 3  # Kueue admitted 3 pods: 2 workers kept
    assert pod_group_size.wanted_min_member(job, []) == 5


def test_a_resize_and_what_it_says() -> None:
    assert pod_group_size.resize("mnist", 5, 5) is None
    assert pod_group_size.resize("mnist", None, 5) is None
    change = pod_group_size.resize("mnist", 2, 5)
    assert change is not None and change.patch() == {"spec": {"minMember": 2}}
    assert change.message().startswith("PodGroup mnist: minMember 5 -> 2, the job's replicas at its new worker count")


@pytest.mark.parametrize("group, count", [({"spec": {"minMember": 4}}, 4), ({"spec": {}}, 0)])
def test_the_member_count_of_a_group(group: dict[str, Any], count: int) -> None:
    assert pod_group_size.member_count_of(group) == count


@pytest.mark.parametrize("value", [-1, "3", True, None])
def test_a_bad_member_count_is_named(value: Any) -> None:
    with pytest.raises(ValueError, match=f"PodGroup 'mnist' has spec.minMember {value!r}; a count >= 0"):
        pod_group_size.member_count_of({"metadata": {"name": "mnist"}, "spec": {"minMember": value}})


class _Groups:
    """A PodGroup API: the group's minMember (``None``: gone), and what a patch answers (an error, if set)."""

    def __init__(self, min_member: Optional[int], refusal: Optional[Exception] = None) -> None:
        self.min_member = min_member
        self.refusal = refusal
        self.gets = 0
        self.patches: list[dict[str, Any]] = []

    def get_pod_group(self, group: str, version: str, plural: str, namespace: str, name: str) -> Optional[dict[str, Any]]:
        self.gets += 1
        return None if self.min_member is None else {"metadata": {"name": name}, "spec": {"minMember": self.min_member}}

    def patch_pod_group(self, group: str, version: str, plural: str, namespace: str, name: str,
                        patch: dict[str, Any]) -> Optional[dict[str, Any]]:
        assert (group, version, plural, namespace, name) == ("scheduling.x-k8s.io", "v1alpha1", "podgroups", "team",
                                                             "mnist")
        self.patches.append(patch)
        if self.refusal is not None:
            raise self.refusal
        if self.min_member is None:
            return None
        self.min_member = patch["spec"]["minMember"]
        return {"spec": {"minMember": self.min_member}}


async def _call(fn: Any, *args: Any) -> Any:
    return fn(*args)


def _resize(groups: _Groups, job: dict[str, Any], upkeep: owned_objects.Upkeep,
            gang: podgroups.GangSettings = PLUGINS) -> list[tuple[str, str, str]]:
    said: list[tuple[str, str, str]] = []
    asyncio.run(ensure_objects.resize_pod_group(groups, _call, lambda *event: said.append(event), job, [], upkeep,
                                                gang))  # type: ignore[arg-type]
    return said


def test_a_scaled_job_has_its_group_patched_once_per_change() -> None:
    groups = _Groups(3)
    upkeep = owned_objects.Upkeep(made={MADE}, pod_group_min_member=3)
    assert _resize(groups, _job(workers=2), upkeep) == [] and groups.patches == []
    said = _resize(groups, _job(workers=4), upkeep)
    assert groups.patches == [{"spec": {"minMember": 5}}] and upkeep.pod_group_min_member == 5
    assert said == [("Normal", "ResizedPodGroup", pod_group_size.Resize("mnist", 3, 5).message())]
    assert _resize(groups, _job(workers=4), upkeep) == [] and len(groups.patches) == 1
    _resize(groups, _job(workers=1), upkeep)
    assert groups.patches[-1] == {"spec": {"minMember": 2}} and groups.min_member == 2
    assert groups.gets == 0, "the size it made is known"


def test_a_group_of_unknown_size_is_read_first() -> None:
    groups = _Groups(5)
    upkeep = owned_objects.Upkeep(made={MADE})  # found there (409), after the operator's restart
    assert _resize(groups, _job(workers=4), upkeep) == [] and groups.gets == 1 and groups.patches == []
    assert upkeep.pod_group_min_member == 5
    _resize(groups, _job(workers=2), upkeep)
    assert groups.gets == 1 and groups.patches == [{"spec": {"minMember": 3}}]


@pytest.mark.parametrize("upkeep, gang, job", [
    (owned_objects.Upkeep(), PLUGINS, _job(workers=4)),  # never made: its creation says why
    (owned_objects.Upkeep(made={MADE}, pod_group_min_member=3), podgroups.GangSettings(), _job(workers=4)),
    (owned_objects.Upkeep(made={MADE}, pod_group_min_member=3), PLUGINS,
     _job(workers=4, worker_fields={"minReplicas": 2})),
])
def test_nothing_is_asked_where_nothing_can_change(upkeep: owned_objects.Upkeep, gang: podgroups.GangSettings,
                                                   job: dict[str, Any]) -> None:
    groups = _Groups(3)
    assert _resize(groups, job, upkeep, gang) == [] and groups.gets == 0 and groups.patches == []


def test_a_deleted_group_is_left_to_its_recreation() -> None:
    groups = _Groups(None)
    upkeep = owned_objects.Upkeep(made={MADE}, pod_group_min_member=3)
    assert _resize(groups, _job(workers=4), upkeep) == []
    assert len(groups.patches) == 1 and upkeep.pod_group_min_member is None
    assert _resize(groups, _job(workers=4), upkeep) == [] and groups.gets == 1  # still gone: asked, not patched


def test_a_refused_resize_is_said_once_and_tried_again() -> None:
    refusal = exceptions.ApiException(status=403, reason="Forbidden")
    groups = _Groups(3, refusal)
    upkeep = owned_objects.Upkeep(made={MADE}, pod_group_min_member=3)
    said = _resize(groups, _job(workers=4), upkeep) + _resize(groups, _job(workers=4), upkeep)
    assert [reason for _, reason, _ in said] == ["FailedResizePodGroup"]
    assert "could not resize PodGroup mnist (scheduling.x-k8s.io/v1alpha1) to minMember 5: Forbidden (HTTP 403)" \
        in said[0][2] and "needs get and patch on podgroups.scheduling.x-k8s.io" in said[0][2]
    assert len(groups.patches) == 2 and upkeep.pod_group_min_member == 3
    groups.refusal = None
    assert [reason for _, reason, _ in _resize(groups, _job(workers=4), upkeep)] == ["ResizedPodGroup"]
    assert upkeep.pod_group_resize_error == ""
