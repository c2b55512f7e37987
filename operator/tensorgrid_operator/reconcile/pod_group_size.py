"""The PodGroup's ``minMember`` of a scaled job: what it must be now, and whether to change it.

A gang scheduler places a group's pods only while ``minMember`` of them can be placed together
(scheduler-plugins' coscheduling also refuses a pod outright while its group has fewer pods
than that). The PodGroup is made with the job (``resources.podgroups``), and without
``minAvailable`` or the Worker's ``minReplicas`` its ``minMember`` is every replica of the job:
scaled down (``kubectl scale``, ``reconcile.scaling``), such a job would have fewer pods than
its gang, so the next pod it restarts or replaces could never be placed; scaled up, its new
workers would not be part of the gang's count. So, when a job's worker count changes, the
operator resizes the group to what ``podgroups.min_member`` says of the spec the pass
reconciles (the worker count Kueue holds, if it holds one: ``scaling.hold_for_kueue``). With
``minAvailable`` or ``minReplicas`` set, ``minMember`` does not depend on the worker count and
is never changed: added workers are then placed one by one as they fit.

Pure: ``cluster.ensure_objects.resize_pod_group`` reads the group when the operator does not
know its size (after a restart), patches it, and says so with an Event.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import scaling
from tensorgrid_operator.resources import podgroups

Obj = dict[str, Any]

EVENT_REASON = "ResizedPodGroup"
FINISHED_STATES = ("Succeeded", "Failed")


@dataclasses.dataclass(frozen=True)
class Resize:
    """A change of the PodGroup's ``minMember``."""

    name: str
    """The PodGroup's name (the job's)."""
    old: int
    new: int

    def patch(self) -> Obj:
        """The merge patch of the PodGroup that makes the change."""
        return {"spec": {"minMember": self.new}}

    def message(self) -> str:
        """The Event that explains it."""
        return (f"PodGroup {self.name}: minMember {self.old} -> {self.new}, the job's replicas at its new worker "
                f"count (set schedulingPolicy.minAvailable or the Worker's minReplicas to keep it fixed)")


def wanted_min_member(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> Optional[int]:
    """The ``minMember`` the job's PodGroup should have now; ``None`` when the job has no say in it
    (finished, or a spec the reconcile fails the job for)."""
    if ((job.get("status") or {}).get("state")) in FINISHED_STATES:
        return None
    try:
        job_spec = spec_lib.parse_spec(job.get("spec") or {})
    except ValueError:
        return None
    reconciled, _ = scaling.hold_for_kueue(job, job_spec, pods)
    return podgroups.min_member(reconciled)


def member_count_of(group: Mapping[str, Any]) -> int:
    """``spec.minMember`` of a PodGroup as the API server gives it (absent: 0, the CRDs' default)."""
    value = (group.get("spec") or {}).get("minMember", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"PodGroup {group.get('metadata', {}).get('name')!r} has spec.minMember {value!r}; "
                         f"a count >= 0 was expected")
    return value


def resize(name: str, wanted: Optional[int], known: int) -> Optional[Resize]:
    """The change to make to PodGroup ``name``, whose ``minMember`` is ``known``, for the job to want
    ``wanted`` (``None``: nothing to change)."""
    if wanted is None or wanted == known:
        return None
    return Resize(name, known, wanted)
