"""The PodGroup's status in the job's: status.podGroup, the condition PodGroupScheduled, and when to read.

Volcano cannot run here (its Go module is refused by the module proxy), so its shapes are
covered here alone, from its API types (volcano-sh/apis pkg/apis/scheduling/v1beta1/types.go:
phases Pending/Inqueue/Running/Unknown/Completed, the Unschedulable and Scheduled condition
types, the NotEnoughResources reason) and the messages its gang plugin writes
("%d/%d tasks in gang unschedulable: %s"). scheduler-plugins' shapes (v0.34.7
apis/scheduling/v1alpha1: phases Pending/Scheduling/Running/Unknown/Finished/Failed, no
conditions) are also checked against its real scheduler and controller in
test_coscheduling.py.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any, Optional

import pytest
from kubernetes.client import exceptions

from tensorgrid_operator.cluster import ensure_objects
from tensorgrid_operator.reconcile import owned_objects
from tensorgrid_operator.reconcile import podgroup_status
from tensorgrid_operator.resources import podgroups

NOW = datetime.datetime(2026, 9, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)
GRACE = 60.0
VOLCANO, PLUGINS = podgroups.VOLCANO, podgroups.SCHEDULER_PLUGINS
NOT_ENOUGH = ("5/5 tasks in gang unschedulable: pod group is not ready, 5 minAvailable, 5 Pending; "
              "Pending: 5 Unschedulable")
SAYS = "0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible"


def _ago(seconds: float) -> str:
    return (NOW - datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _group(phase: Optional[str], min_member: int = 5, conditions: Optional[list[dict[str, Any]]] = None,
           **counts: int) -> dict[str, Any]:
    status: dict[str, Any] = dict(counts)
    if phase is not None:
        status["phase"] = phase
    if conditions is not None:
        status["conditions"] = conditions
    return {"metadata": {"name": "mnist", "namespace": "team"}, "spec": {"minMember": min_member}, "status": status}


def _unschedulable(at: float = 30, status: str = "True") -> dict[str, Any]:
    return {"type": "Unschedulable", "status": status, "reason": "NotEnoughResources", "message": NOT_ENOUGH,
            "transitionID": "606145d1-660f-4e01-850d-ed556cebc098", "lastTransitionTime": _ago(at)}


def _scheduled(at: float) -> dict[str, Any]:
    return {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled",
            "transitionID": "57e6ba9e-55cc-47ce-a37e-d8bddd99d54b", "lastTransitionTime": _ago(at)}


def _pods(bound: int, waiting: int, said: str = "") -> list[dict[str, Any]]:
    """``bound`` pods Running on a node, ``waiting`` Pending ones (with the scheduler's Unschedulable, if said)."""
    pods = [{"metadata": {"name": f"mnist-worker-{i}", "uid": f"u{i}"}, "spec": {"nodeName": "node-1"},
             "status": {"phase": "Running"}} for i in range(bound)]
    for i in range(bound, bound + waiting):
        conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": said}]
        pods.append({"metadata": {"name": f"mnist-worker-{i}", "uid": f"u{i}"}, "spec": {},
                     "status": {"phase": "Pending", "conditions": conditions if said else []}})
    return pods


def _status(since: Optional[float] = None, condition: Optional[str] = None, running: bool = False,
            **group: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "Running", "status": "True" if running else "False",
                                              "reason": "x", "message": "", "lastTransitionTime": _ago(100)}]}
    if since is not None or group:
        status["podGroup"] = {"name": "mnist", **group}
        if since is not None:
            status["podGroup"]["unscheduledSince"] = _ago(since)
    if condition is not None:
        reason = "PodGroupNotScheduled" if condition == "False" else "PodGroupScheduled"
        status["conditions"].append({"type": "PodGroupScheduled", "status": condition, "reason": reason, "message": "m",
                                     "lastTransitionTime": _ago(90)})
    return status


def _condition(report: podgroup_status.Report) -> dict[str, Any]:
    return next((c for c in report.conditions if c["type"] == "PodGroupScheduled"), {})


@pytest.mark.parametrize("scheduler, status, group, pods, summary, condition, message, events", [
    # Volcano, first seen not placed: the group's counts and its reason, no condition before the grace ends
    (VOLCANO, _status(), _group("Inqueue", conditions=[_unschedulable()]), _pods(0, 5),
     {"phase": "Inqueue", "unschedulable": {"reason": "NotEnoughResources", "message": NOT_ENOUGH},
      "unscheduledSince": _ago(0)}, None, None, []),
    # ... not placed for longer than the grace: False, in words, with Volcano's own reason; one Warning
    (VOLCANO, _status(since=61), _group("Pending", conditions=[_unschedulable()]), _pods(0, 5),
     {"phase": "Pending", "unschedulable": {"reason": "NotEnoughResources", "message": NOT_ENOUGH},
      "unscheduledSince": _ago(61)}, "False",
     f"PodGroup mnist (phase Pending): 5 of 5 pods cannot be scheduled; the gang scheduler places them only when "
     f"5 (minMember) fit together: NotEnoughResources: {NOT_ENOUGH}", [("Warning", "PodGroupNotScheduled")]),
    # ... still not placed: the message follows, no second Warning
    (VOLCANO, _status(since=200, condition="False"), _group("Pending", conditions=[_unschedulable()]), _pods(0, 5),
     {"phase": "Pending", "unschedulable": {"reason": "NotEnoughResources", "message": NOT_ENOUGH},
      "unscheduledSince": _ago(200)}, "False", "5 of 5 pods cannot be scheduled", []),
    # Unknown: part of minMember runs, the rest cannot be placed
    (VOLCANO, _status(since=61), _group("Unknown", conditions=[_unschedulable()], running=2), _pods(2, 3),
     {"phase": "Unknown", "running": 2, "unschedulable": {"reason": "NotEnoughResources", "message": NOT_ENOUGH},
      "unscheduledSince": _ago(61)}, "False", "(phase Unknown): 3 of 5 pods cannot be scheduled",
     [("Warning", "PodGroupNotScheduled")]),
    # Running, with the old Unschedulable condition Volcano leaves behind a later Scheduled: placed, cleared
    (VOLCANO, _status(since=300, condition="False"),
     _group("Running", conditions=[_unschedulable(at=60), _scheduled(at=10)], running=5), _pods(5, 0),
     {"phase": "Running", "running": 5}, "True", "PodGroup mnist is placed: phase Running, 5 running",
     [("Normal", "PodGroupScheduled")]),
    # placed in time: nothing to say at all
    (VOLCANO, _status(since=5), _group("Running", running=5), _pods(5, 0), {"phase": "Running", "running": 5},
     None, None, []),
    (VOLCANO, _status(), _group("Completed", succeeded=5), [], {"phase": "Completed", "succeeded": 5},
     None, None, []),
    # scheduler-plugins: no reason on the group; the scheduler's words on the pods say why
    (PLUGINS, _status(since=61), _group("Scheduling", min_member=4), _pods(0, 4, SAYS),
     {"phase": "Scheduling", "minMember": 4, "unscheduledSince": _ago(61)}, "False",
     f"PodGroup mnist (phase Scheduling): 4 of 4 pods cannot be scheduled; the gang scheduler places them only when "
     f"4 (minMember) fit together: the scheduler says of pods mnist-worker-0, mnist-worker-1, mnist-worker-2 and 1 "
     f"more: {SAYS}", [("Warning", "PodGroupNotScheduled")]),
    # ... fewer pods than minMember (some held back or refused): said so
    (PLUGINS, _status(since=61), _group("Pending", min_member=4), _pods(0, 2),
     {"phase": "Pending", "minMember": 4, "unscheduledSince": _ago(61)}, "False",
     "PodGroup mnist (phase Pending): 2 of its 4 pods (minMember) exist; the gang scheduler places none of them "
     "until 4 exist and fit together: the scheduler has not said why yet", [("Warning", "PodGroupNotScheduled")]),
    # ... no phase (its controller does not run) but minMember pods bound: placed
    (PLUGINS, _status(since=300, condition="False"), _group(None, min_member=4), _pods(4, 0),
     {"phase": "", "minMember": 4}, "True", "PodGroup mnist is placed: phase not set, 0 running",
     [("Normal", "PodGroupScheduled")]),
    # ... an older release's scheduled count is kept where given; Finished and Failed were placed
    (PLUGINS, _status(), _group("Scheduling", min_member=4, scheduled=4), _pods(4, 0),
     {"phase": "Scheduling", "minMember": 4, "scheduled": 4}, None, None, []),
    (PLUGINS, _status(), _group("Failed", min_member=4, running=3, failed=1), _pods(3, 0),
     {"phase": "Failed", "minMember": 4, "running": 3, "failed": 1}, None, None, []),
])
def test_the_groups_status_in_the_jobs(scheduler: str, status: dict[str, Any], group: dict[str, Any],
                                       pods: list[dict[str, Any]], summary: dict[str, Any], condition: Optional[str],
                                       message: Optional[str], events: list[tuple[str, str]]) -> None:
    report = podgroup_status.report(status, group, pods, scheduler, NOW, GRACE)
    expected = {"name": "mnist", "minMember": 5, "running": 0, "succeeded": 0, "failed": 0, **summary}
    assert report.pod_group == expected
    assert _condition(report).get("status") == condition
    assert message is None or message in _condition(report)["message"], _condition(report)
    assert [(kind, reason) for kind, reason, _ in report.events] == events
    assert all(text == _condition(report)["message"] for _, _, text in report.events)


def test_volcanos_message_is_kept_small() -> None:
    long = _unschedulable()
    long["message"] = "x" * 5000
    report = podgroup_status.report(_status(), _group("Pending", conditions=[long]), [], VOLCANO, NOW, GRACE)
    assert len(report.pod_group["unschedulable"]["message"]) == podgroup_status.MESSAGE_LIMIT


def test_the_patch_writes_what_changed_and_removes_what_went() -> None:
    old = _status(since=300, condition="False", phase="Pending", minMember=5, running=0, succeeded=0, failed=0,
                  unschedulable={"reason": "NotEnoughResources", "message": NOT_ENOUGH})
    report = podgroup_status.report(old, _group("Running", running=5), _pods(5, 0), VOLCANO, NOW, GRACE)
    patch = report.patch(old)
    assert patch is not None
    assert patch["podGroup"] == {"name": "mnist", "phase": "Running", "minMember": 5, "running": 5, "succeeded": 0,
                                 "failed": 0, "unschedulable": None, "unscheduledSince": None}
    assert [c["status"] for c in patch["conditions"] if c["type"] == "PodGroupScheduled"] == ["True"]
    again = {**old, "podGroup": report.pod_group, "conditions": report.conditions}
    assert podgroup_status.report(again, _group("Running", running=5), _pods(5, 0), VOLCANO, NOW,
                                  GRACE).patch(again) is None


@pytest.mark.parametrize("since, condition, expected", [
    (None, None, 10.0),   # placed: the interval
    (55, None, 5.0),      # the grace ends in 5 s: then
    (61, "False", 10.0),  # said already
])
def test_the_next_reading_comes_when_the_grace_ends(since: Optional[float], condition: Optional[str],
                                                    expected: float) -> None:
    pod_group: dict[str, Any] = {"name": "mnist"}
    if since is not None:
        pod_group["unscheduledSince"] = _ago(since)
    conditions = [{"type": "PodGroupScheduled", "status": condition}] if condition else []
    report = podgroup_status.Report(pod_group, conditions)
    assert podgroup_status.next_check_in(report, NOW, GRACE, 10.0) == pytest.approx(expected)


@pytest.mark.parametrize("status, scheduler, reads, expected", [
    (_status(), VOLCANO, 0, True),                                         # pods not all running
    (_status(running=True, phase="Running"), VOLCANO, 0, False),           # running, and the group says so
    (_status(running=True, phase="Inqueue"), VOLCANO, 2, True),            # its controller lags: a few reads
    (_status(running=True, phase="Scheduling"), PLUGINS, 3, False),        # ... then no more
    (_status(running=True, condition="False", phase="Running"), PLUGINS, 0, True),  # the condition to clear
    ({"conditions": [{"type": "Succeeded", "status": "True"}]}, VOLCANO, 0, False),
    ({"conditions": [{"type": "Suspended", "status": "True"}]}, PLUGINS, 0, False),
])
def test_the_group_is_read_only_while_it_matters(status: dict[str, Any], scheduler: str, reads: int,
                                                 expected: bool) -> None:
    assert podgroup_status.worth_reading(status, scheduler, reads) is expected


class _Groups:
    """The API server's answers to a PodGroup GET: the group, ``None`` (404), or an error."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.gets: list[tuple[str, ...]] = []

    def get_pod_group(self, *args: str) -> Any:
        self.gets.append(args)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def _call(fn: Any, *args: Any) -> Any:
    return fn(*args)


def _read(kube: _Groups, job: dict[str, Any], upkeep: owned_objects.Upkeep, clock: float,
          gang: podgroups.GangSettings = podgroups.GangSettings(PLUGINS, unscheduled_seconds=0),
          said: Optional[list[tuple[str, str]]] = None) -> tuple[Optional[dict[str, Any]], Optional[float]]:
    return asyncio.run(ensure_objects.pod_group_status(
        kube, _call, lambda kind, reason, _: (said if said is not None else []).append((kind, reason)), job,
        _pods(0, 4, SAYS), upkeep, gang, clock=lambda: clock))


JOB = {"metadata": {"name": "mnist", "namespace": "team"}, "status": _status()}
MADE = {("PodGroup", "mnist")}


def test_a_reading_is_throttled_and_writes_the_status() -> None:
    kube, upkeep = _Groups(_group("Scheduling", min_member=4)), owned_objects.Upkeep(made=set(MADE))
    said: list[tuple[str, str]] = []
    patch, after = _read(kube, JOB, upkeep, clock=100.0, said=said)
    assert kube.gets == [("scheduling.x-k8s.io", "v1alpha1", "podgroups", "team", "mnist")]
    assert patch is not None and patch["podGroup"]["phase"] == "Scheduling" and after == 10.0
    assert said == [("Warning", "PodGroupNotScheduled")]  # no grace here
    assert _read(kube, JOB, upkeep, clock=104.0) == (None, pytest.approx(6.0))  # not due: no GET
    assert len(kube.gets) == 1
    _read(kube, JOB, upkeep, clock=110.0)
    assert len(kube.gets) == 2


@pytest.mark.parametrize("gang, made, status", [
    (podgroups.GangSettings(), MADE, _status()),                                       # no gang scheduler
    (podgroups.GangSettings(PLUGINS, status_interval_seconds=0), MADE, _status()),      # reading turned off
    (podgroups.GangSettings(PLUGINS), set(), _status()),                               # no group (its CRD missing)
    (podgroups.GangSettings(PLUGINS), MADE, _status(running=True, phase="Running")),   # all runs, and it says so
])
def test_no_reading_where_it_does_not_matter(gang: podgroups.GangSettings, made: set[Any],
                                             status: dict[str, Any]) -> None:
    kube = _Groups(_group("Running"))
    assert _read(kube, {**JOB, "status": status}, owned_objects.Upkeep(made=set(made)), 100.0, gang) == (None, None)
    assert kube.gets == []


def test_a_group_that_cannot_be_read_is_said_once_and_leaves_the_status() -> None:
    kube = _Groups(exceptions.ApiException(status=403, reason="Forbidden"))
    upkeep, said = owned_objects.Upkeep(made=set(MADE)), []
    assert _read(kube, JOB, upkeep, 100.0, said=said) == (None, 10.0)
    assert _read(kube, JOB, upkeep, 120.0, said=said) == (None, 10.0)
    assert said == [("Warning", "FailedGetPodGroup")]
    assert "get on podgroups.scheduling.x-k8s.io" in upkeep.pod_group_read_error
    gone = _Groups(None)  # deleted (or its CRD): created again before the next pods
    assert _read(gone, JOB, owned_objects.Upkeep(made=set(MADE)), 100.0) == (None, 10.0)


def test_the_flags_and_their_bounds() -> None:
    from tensorgrid_operator import cli

    gang = cli.parse_args(["--gang-scheduler", "volcano", "--gang-status-interval-seconds", "5",
                           "--gang-unscheduled-seconds", "120"]).gang
    assert (gang.status_interval_seconds, gang.unscheduled_seconds) == (5.0, 120.0)
    with pytest.raises(ValueError, match="--gang-unscheduled-seconds -1 must be a number of seconds >= 0"):
        podgroups.GangSettings(VOLCANO, unscheduled_seconds=-1)


def test_the_scheduler_message_of_most_pods_is_the_one_said() -> None:
    pods = _pods(0, 3, SAYS) + _pods(0, 1, "pre-filter pod mnist-worker-9 cannot find enough sibling pods")
    pods[-1]["metadata"]["name"] = "mnist-ps-0"
    report = podgroup_status.report(_status(since=61), _group("Scheduling", min_member=4), pods, PLUGINS, NOW, GRACE)
    assert _condition(report)["message"].endswith(
        f"the scheduler says of pods mnist-worker-0, mnist-worker-1, mnist-worker-2: {SAYS} (1 other message on its "
        f"other pods)")


def _suspended(status: dict[str, Any]) -> dict[str, Any]:
    status = {**status, "conditions": [*status["conditions"], {
        "type": "Suspended", "status": "True", "reason": "Suspended", "message": "", "lastTransitionTime": _ago(5)}]}
    return status


@pytest.mark.parametrize("condition", ["False", "True"])
def test_a_suspended_jobs_group_waits_for_the_resume_and_its_grace_starts_again(condition: str) -> None:
    status = _suspended(_status(since=200, condition=condition, phase="Pending"))
    patch = podgroup_status.suspended(status, NOW)
    assert patch is not None and patch["podGroup"] == {"unscheduledSince": None}
    said = next(c for c in patch["conditions"] if c["type"] == "PodGroupScheduled")
    assert (said["status"], said["reason"]) == ("False", "JobSuspended") and "suspended" in said["message"]
    written = {**status, "conditions": patch["conditions"], "podGroup": {"name": "mnist", "phase": "Pending"}}
    assert podgroup_status.suspended(written, NOW) is None, "said once"
    assert podgroup_status.suspended(_status(since=200, condition="False"), NOW) is None, "not suspended"
    # Through the reading path: no GET while suspended.
    kube = _Groups(_group("Pending", min_member=4))
    read, after_read = _read(kube, {**JOB, "status": status}, owned_objects.Upkeep(made=set(MADE)), 100.0)
    assert read is not None and read["podGroup"] == patch["podGroup"] and after_read is None
    assert kube.gets == []
    # Resumed (Suspended False) and still not placed after the grace: a new Warning, the grace counted anew.
    resumed = {**written, "conditions": [{**c, "status": "False"} if c["type"] == "Suspended" else c
                                         for c in written["conditions"]]}
    first = podgroup_status.report(resumed, _group("Pending", min_member=4), _pods(0, 4, SAYS), PLUGINS, NOW, GRACE)
    assert first.pod_group["unscheduledSince"] == _ago(0) and first.events == []
    later = {**resumed, "podGroup": first.pod_group}
    after = podgroup_status.report(later, _group("Pending", min_member=4), _pods(0, 4, SAYS), PLUGINS,
                                   NOW + datetime.timedelta(seconds=GRACE), GRACE)
    assert _condition(after)["reason"] == "PodGroupNotScheduled"
    assert after.events and after.events[0][:2] == ("Warning", "PodGroupNotScheduled")
