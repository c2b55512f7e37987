"""What the gang scheduler thinks of a job: its PodGroup's status, mirrored into the job's.

A gang-scheduled job whose group does not fit keeps all of its pods Pending, and the
scheduler says why on the PodGroup, which ``kubectl describe tj`` does not show. With a
gang scheduler the operator reads the job's PodGroup (one GET; ``ensure_objects``) while
it matters, and writes here what it found:

- ``status.podGroup``: the group's name, ``phase`` as the scheduler reports it (Volcano:
  Pending, Inqueue, Running, Unknown, Completed; scheduler-plugins: Pending, Scheduling,
  Running, Unknown, Finished, Failed), ``minMember``, the member counts of the group's
  status (running, succeeded, failed; ``scheduled`` where a scheduler gives it), Volcano's
  ``Unschedulable`` condition (its reason and message, cut to ``MESSAGE_LIMIT``) and
  ``unscheduledSince``, when the operator first saw the group not placed;
- the condition ``PodGroupScheduled``: False once the group has not been placed for
  ``GangSettings.unscheduled_seconds``, saying how many pods wait and why in the
  scheduler's words (Volcano's condition, else the scheduler's message on the pods:
  scheduler-plugins' PodGroup status carries no reason), with a Warning event; True again,
  with a Normal event, once it is placed. A group placed in time never sets it. While the
  job is suspended (its pods deleted) it is False with reason ``JobSuspended``, and the time
  not placed counts again from the resume.

A group is placed when its phase says so, when ``minMember`` of the job's pods are bound
to nodes, or when all of the job's pods run. Pure: ``cluster.ensure_objects`` makes the GET, when
:func:`worth_reading` says the group's status still matters.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Mapping, Optional, Sequence

from tensorgrid_operator.api import conditions as cond_lib
from tensorgrid_operator.reconcile import podview
from tensorgrid_operator.resources import podgroups

Obj = dict[str, Any]

CONDITION = "PodGroupScheduled"
NOT_SCHEDULED = "PodGroupNotScheduled"
SUSPENDED = "JobSuspended"
FIELD = "podGroup"
# The phases in which a scheduler has placed the group's minMember pods (a Failed group of
# scheduler-plugins was placed: some of its pods failed afterwards).
PLACED_PHASES = {podgroups.VOLCANO: ("Running", "Completed"),
                 podgroups.SCHEDULER_PLUGINS: ("Running", "Finished", "Failed")}
# Member counts of a PodGroup's status: Volcano's v1beta1 and scheduler-plugins' v1alpha1 both have the
# first three (omitted when 0); older scheduler-plugins releases also count the scheduled pods.
COUNTS = ("running", "succeeded", "failed")
OPTIONAL_COUNTS = ("scheduled",)
# Volcano's condition type for a group that cannot be placed (PodGroupUnschedulableType).
VOLCANO_UNSCHEDULABLE = "Unschedulable"
# The longest scheduler message kept in the job's status (Volcano's can list every task's fit error).
MESSAGE_LIMIT = 1024
# Reads of a job whose pods all run, while its group's phase does not say Running yet (its controller lags
# behind the pods); then the operator stops asking until a pod stops running.
SETTLE_READS = 3


@dataclasses.dataclass(frozen=True)
class Report:
    """What one reading of the PodGroup changes in the job's status, and what is said."""

    pod_group: Obj
    """The new ``status.podGroup``."""
    conditions: list[Obj]
    """The job's conditions with ``PodGroupScheduled`` set, cleared or as they were."""
    events: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    """(type, reason, message) of the Events to post on the job."""

    def patch(self, old_status: Mapping[str, Any]) -> Optional[Obj]:
        """The status merge patch (``None``: nothing changed); keys the group's status no longer has are
        named null, which removes them."""
        patch: Obj = {}
        old_group = old_status.get(FIELD) or {}
        if self.pod_group != old_group:
            patch[FIELD] = {key: self.pod_group.get(key) for key in set(old_group) | set(self.pod_group)}
        if self.conditions != list(old_status.get("conditions") or []):
            patch["conditions"] = self.conditions
        return patch or None


def worth_reading(job_status: Mapping[str, Any], scheduler: str, reads_while_running: int) -> bool:
    """Whether the job's PodGroup is worth a GET: the job has not finished nor is suspended, and its pods
    do not all run, or they do but the group's phase (or the job's ``PodGroupScheduled``) does not say so yet
    (for at most ``SETTLE_READS`` reads while they run)."""
    conditions = job_status.get("conditions") or []
    if cond_lib.job_finished(conditions) or cond_lib.is_true(conditions, cond_lib.SUSPENDED):
        return False
    if not cond_lib.is_true(conditions, cond_lib.RUNNING):
        return True
    recorded = job_status.get(FIELD) or {}
    settled = recorded.get("phase") in PLACED_PHASES[scheduler]
    waiting = (cond_lib.get_condition(conditions, CONDITION) or {}).get("status") == "False"
    return reads_while_running < SETTLE_READS and (waiting or not settled)


def suspended(job_status: Mapping[str, Any], now: datetime.datetime) -> Optional[Obj]:
    """The status patch that says a suspended job's group waits for its resume (``None``: said already, or
    nothing to say). Its pods are gone, so ``PodGroupScheduled`` (placed or not) no longer holds, and the time
    not placed counts again from the resume: ``unscheduledSince`` goes."""
    conditions = [dict(c) for c in job_status.get("conditions") or []]
    if not cond_lib.is_true(conditions, cond_lib.SUSPENDED):
        return None
    before = cond_lib.get_condition(conditions, CONDITION)
    if before is not None:
        cond_lib.set_condition(conditions, CONDITION, False, SUSPENDED, "the job is suspended: its pods are deleted, "
                               "and the gang scheduler places its group again once it resumes", now)
    patch: Obj = {}
    if conditions != list(job_status.get("conditions") or []):
        patch["conditions"] = conditions
    if "unscheduledSince" in (job_status.get(FIELD) or {}):
        patch[FIELD] = {"unscheduledSince": None}
    return patch or None


def report(job_status: Mapping[str, Any], group: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
           scheduler: str, now: datetime.datetime, unscheduled_seconds: float) -> Report:
    """The job's ``status.podGroup`` and ``PodGroupScheduled`` from its PodGroup as read and its pods (as the
    pod index keeps them)."""
    name = str(group["metadata"]["name"])
    group_status = group.get("status") or {}
    phase = str(group_status.get("phase") or "")
    min_member = int((group.get("spec") or {}).get("minMember") or 0)
    views = [podview.view_pod(p) for p in pods]
    live = [v for v in views if not v.terminating]
    bound = sum(1 for v in live if v.node)
    conditions = [dict(c) for c in job_status.get("conditions") or []]
    placed = (phase in PLACED_PHASES[scheduler] or (min_member > 0 and bound >= min_member)
              or cond_lib.is_true(conditions, cond_lib.RUNNING))
    previous = job_status.get(FIELD) or {}
    summary: Obj = {"name": name, "phase": phase, "minMember": min_member}
    summary.update({count: int(group_status.get(count) or 0) for count in COUNTS})
    summary.update({count: int(group_status[count]) for count in OPTIONAL_COUNTS if count in group_status})
    unschedulable = _volcano_unschedulable(group_status) if scheduler == podgroups.VOLCANO and not placed else None
    if unschedulable is not None:
        summary["unschedulable"] = unschedulable
    since = cond_lib.parse_time(previous.get("unscheduledSince")) if previous.get("name") == name else None
    if not placed:
        since = since or now
        summary["unscheduledSince"] = cond_lib.format_time(since)
    events: list[tuple[str, str, str]] = []
    before = cond_lib.get_condition(conditions, CONDITION)
    if placed:
        if before is not None and before.get("status") == "False":
            message = f"PodGroup {name} is placed: phase {phase or 'not set'}, {summary['running']} running"
            cond_lib.set_condition(conditions, CONDITION, True, CONDITION, message, now)
            events.append(("Normal", CONDITION, message))
    elif since is not None and (now - since).total_seconds() >= unscheduled_seconds:
        message = not_scheduled_message(name, phase, min_member, live, unschedulable)
        said_before = before is not None and before.get("reason") == NOT_SCHEDULED  # not: False while suspended
        cond_lib.set_condition(conditions, CONDITION, False, NOT_SCHEDULED, message, now)
        if not said_before:
            events.append(("Warning", NOT_SCHEDULED, message))
    return Report(summary, conditions, events)


def next_check_in(report_: Report, now: datetime.datetime, unscheduled_seconds: float, interval: float) -> float:
    """Seconds until the group is worth reading again: the read interval, or sooner when the group's grace
    (``unscheduled_seconds`` after ``unscheduledSince``) ends first, so that the condition is set on time."""
    since = cond_lib.parse_time(report_.pod_group.get("unscheduledSince"))
    said = (cond_lib.get_condition(report_.conditions, CONDITION) or {}).get("status") == "False"
    if since is None or said:
        return interval
    due = (since - now).total_seconds() + unscheduled_seconds
    return min(interval, due) if due > 0 else interval


def not_scheduled_message(name: str, phase: str, min_member: int, live: Sequence[podview.PodView],
                          unschedulable: Optional[Mapping[str, str]]) -> str:
    """``PodGroup mnist: 3 of 5 pods cannot be scheduled ...: <why>``, in words a user reads in ``kubectl
    describe tj``."""
    total = len(live)
    waiting = sum(1 for v in live if not v.node)
    where = f" (phase {phase})" if phase else " (no phase yet: is the scheduler's controller running?)"
    if total < min_member:
        head = (f"PodGroup {name}{where}: {total} of its {min_member} pods (minMember) exist; the gang scheduler "
                f"places none of them until {min_member} exist and fit together")
    else:
        head = (f"PodGroup {name}{where}: {waiting} of {total} pods cannot be scheduled; the gang scheduler "
                f"places them only when {min_member} (minMember) fit together")
    return f"{head}: {_why(live, unschedulable)}"


def _why(live: Sequence[podview.PodView], unschedulable: Optional[Mapping[str, str]]) -> str:
    if unschedulable is not None:
        reason, message = unschedulable.get("reason") or "", unschedulable.get("message") or ""
        return f"{reason}: {message}" if reason and message else reason or message
    said: dict[str, list[str]] = {}
    for view in live:
        if not view.node and view.stuck_reason == podview.UNSCHEDULABLE and view.stuck_message:
            said.setdefault(view.stuck_message, []).append(view.name)
    if not said:
        return "the scheduler has not said why yet"
    # The message of most pods (the longer of two as common: it says more), with the pods it is about.
    message, names = max(said.items(), key=lambda item: (len(item[1]), len(item[0])))
    names = sorted(names)
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    others = len(said) - 1
    more = f" ({others} other message{'s' if others > 1 else ''} on its other pods)" if others else ""
    return f"the scheduler says of {'pod' if len(names) == 1 else 'pods'} {shown}: {_cut(message)}{more}"


def _volcano_unschedulable(group_status: Mapping[str, Any]) -> Optional[dict[str, str]]:
    """Volcano's ``Unschedulable`` condition, when True and not followed by a later ``Scheduled`` one
    (Volcano leaves the old one in place once the group is scheduled)."""
    found = [c for c in group_status.get("conditions") or [] if isinstance(c, Mapping)]
    unschedulable = [c for c in found if c.get("type") == VOLCANO_UNSCHEDULABLE and c.get("status") == "True"]
    if not unschedulable:
        return None
    latest = max(unschedulable, key=lambda c: str(c.get("lastTransitionTime") or ""))
    scheduled = [str(c.get("lastTransitionTime") or "") for c in found
                 if c.get("type") == "Scheduled" and c.get("status") == "True"]
    if scheduled and max(scheduled) > str(latest.get("lastTransitionTime") or ""):
        return None
    return {"reason": str(latest.get("reason") or ""), "message": _cut(str(latest.get("message") or ""))}


def _cut(text: str) -> str:
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT - 3] + "..."
