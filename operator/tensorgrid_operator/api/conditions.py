"""Kubernetes-style conditions and the timestamps they carry, apart from what they mean for a job.

A condition is ``{type, status, reason, message, lastTransitionTime, observedGeneration}``
(metav1.Condition's shape); the time moves only when the status flips, as the Kubernetes API
conventions ask, and ``observedGeneration`` is the job's ``metadata.generation`` the operator
had read when it wrote the condition (:func:`observed_at`, stamped as the status is written). The job's condition
types are listed here so conditions keep one order in the status whatever order they
were first set in.
"""

from __future__ import annotations

import datetime
from typing import Any, Mapping, Optional, Sequence

Obj = dict[str, Any]

# Condition types of a TrainingJob, in the order a job usually meets them.
CREATED = "Created"
RUNNING = "Running"
RESTARTING = "Restarting"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
SUSPENDED = "Suspended"
STUCK_TERMINATING = "StuckTerminating"
CONDITION_TYPES = (CREATED, RUNNING, RESTARTING, SUCCEEDED, FAILED, SUSPENDED, STUCK_TERMINATING)


def format_time(t: datetime.datetime) -> str:
    return t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: Optional[str]) -> Optional[datetime.datetime]:
    if not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def get_condition(conditions: Sequence[Mapping[str, Any]], ctype: str) -> Optional[Mapping[str, Any]]:
    for cond in conditions:
        if cond.get("type") == ctype:
            return cond
    return None


def is_true(conditions: Sequence[Mapping[str, Any]], ctype: str) -> bool:
    cond = get_condition(conditions, ctype)
    return cond is not None and cond.get("status") == "True"


def set_condition(conditions: list[Obj], ctype: str, status: bool, reason: str, message: str,
                  now: datetime.datetime) -> bool:
    """Set a condition in place; ``lastTransitionTime`` moves only when the status flips.

    Returns whether the status flipped (or the condition is new and true).
    """
    value = "True" if status else "False"
    for cond in conditions:
        if cond.get("type") == ctype:
            flipped = cond.get("status") != value
            if flipped:
                cond["lastTransitionTime"] = format_time(now)
            cond.update(status=value, reason=reason, message=message)
            return flipped
    conditions.append({"type": ctype, "status": value, "reason": reason, "message": message,
                       "lastTransitionTime": format_time(now)})
    conditions.sort(key=lambda c: CONDITION_TYPES.index(c["type"]) if c["type"] in CONDITION_TYPES else 99)
    return status


def observed_at(conditions: Sequence[Mapping[str, Any]], generation: int) -> list[Obj]:
    """The conditions as decided from the job at ``generation``: each one's ``observedGeneration``."""
    return [{**c, "observedGeneration": generation} for c in conditions]


def job_finished(conditions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a job's conditions say it ended (Succeeded or Failed): nothing runs again."""
    return is_true(conditions, SUCCEEDED) or is_true(conditions, FAILED)
