"""What a reconcile makes of the API server refusing to create a job's pods or Services.

The plan's status was written before the creations (it counts the new pods as active
and says they were created); when some creations fail, :func:`after_creates` returns
the status and events that tell the truth instead. A 422 (the object is invalid)
fails the job: the template is the same every time. Anything else (quota exceeded,
PodSecurity or LimitRange or a webhook saying no, 429, 5xx, the API server out of
reach) may pass later: the replica waits its retry delay (``status.replicaBackoff``)
and the condition ``Running=False``, reason ``FailedCreate``, says why, with the API's
own message.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
from typing import Any, Mapping, Optional, Sequence

from tensorgrid_operator.api import conditions as cond_lib
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import jobstatus
from tensorgrid_operator.reconcile import plans
from tensorgrid_operator.reconcile import podview
from tensorgrid_operator.reconcile import policies

Obj = dict[str, Any]
INVALID = 422


@dataclasses.dataclass(frozen=True)
class CreateFailure:
    """One object the API server did not create (an AlreadyExists is not a failure)."""

    kind: str
    """``Pod`` or ``Service``."""
    name: str
    code: Optional[int]
    """The HTTP status; ``None`` when no answer came (connection refused, timeout)."""
    message: str
    """The API server's message (``status.message``), or the client's error."""

    @property
    def permanent(self) -> bool:
        """422 Invalid: the object itself is wrong, so the same object fails again."""
        return self.code == INVALID


@dataclasses.dataclass
class Outcome:
    """What to write and say once the plan's creations are done."""

    status: Optional[Obj]
    """The status to write over the plan's, or ``None`` when the plan's is right."""
    events: list[plans.Event]
    """Every event of the plan, with the creations as they happened (replaces ``plan.events``)."""
    requeue_after: Optional[float]
    transitions: list[plans.Transition]


def after_creates(job: Mapping[str, Any], plan: plans.Plan, failures: Sequence[CreateFailure],
                  now: datetime.datetime, retry_delay: policies.RetryDelay = policies.RetryDelay()) -> Outcome:
    """The outcome of ``plan`` whose creations ended in ``failures``; ``job`` carries the status written."""
    if not failures:
        return Outcome(None, list(plan.events), plan.requeue_after, list(plan.transitions))
    failed = {(f.kind, f.name) for f in failures}
    created_pods = [p.name for p in plan.create_pods if ("Pod", p.name) not in failed]
    created_services = [s["metadata"]["name"] for s in plan.create_services
                        if ("Service", s["metadata"]["name"]) not in failed]
    events = [e for e in plan.events if e.reason not in ("CreatedPods", "CreatedServices")]
    if created_pods:
        events.append(plans.Event("Normal", "CreatedPods", f"created pods {', '.join(created_pods)}"))
    if created_services:
        events.append(plans.Event("Normal", "CreatedServices",
                                      f"created headless services {', '.join(created_services)}"))
    status: Obj = copy.deepcopy(dict(job.get("status") or {}))
    conditions: list[Obj] = status.setdefault("conditions", [])

    rejected = [f for f in failures if f.permanent]
    if rejected:
        text = f"the API server rejected {rejected[0].kind.lower()} {rejected[0].name}: {rejected[0].message}"
        cond_lib.set_condition(conditions, cond_lib.FAILED, True, "PodTemplateRejected", text, now)
        cond_lib.set_condition(conditions, cond_lib.RUNNING, False, "PodTemplateRejected", "the job failed", now)
        status["completionTime"] = cond_lib.format_time(now)
        status["state"] = jobstatus.job_state(conditions)
        events.append(plans.Event("Warning", "PodTemplateRejected", text))
        # Look again at once: the finished job cleans up by the usual path.
        transitions = [t for t in plan.transitions if t.name != "created" or created_pods]
        return Outcome(status, events, 0.0, transitions + [plans.Transition("failed", "PodTemplateRejected")])

    replicas: dict[tuple[str, str], Optional[spec_lib.ReplicaKey]] = {
        **{("Pod", p.name): p.replica for p in plan.create_pods},
        **{("Service", s["metadata"]["name"]): podview.replica_key(s["metadata"].get("labels") or {})
           for s in plan.create_services}}
    before = {e["replica"]: dict(e) for e in status.get("replicaBackoff") or []}
    backoff = dict(before)
    refused: dict[str, Obj] = {}
    for failure in failures:
        key = replicas.get((failure.kind, failure.name))
        if key is None:
            continue
        previous = before.get(key.short_name)
        if key.short_name not in refused:  # a replica whose pod and Service both failed waits once
            refused[key.short_name] = backoff[key.short_name] = policies.backoff_entry(
                previous, retry_delay, now, key.short_name, plans.FAILED_CREATE,
                f"could not create {failure.kind.lower()} {failure.name}: {failure.message}")
        # The plan counted the pod as active, unless it was the retry of a refused one.
        if failure.kind == "Pod" and (previous or {}).get("reason") != plans.FAILED_CREATE:
            counts = (status.get("replicaStatuses") or {}).get(key.rtype.value)
            if counts is not None:
                counts["active"] = max(0, int(counts.get("active", 0)) - 1)
            if key.rtype is spec_lib.ReplicaType.WORKER and "workerReplicas" in status:
                status["workerReplicas"] = max(0, int(status["workerReplicas"]) - 1)
    status["replicaBackoff"] = sorted(backoff.values(), key=lambda e: str(e["replica"]))
    message = jobstatus.refused_message(job["metadata"]["name"],
                                        sorted(refused.values(), key=lambda e: str(e["replica"])))
    cond_lib.set_condition(conditions, cond_lib.RUNNING, False, plans.FAILED_CREATE, message, now)
    transitions = list(plan.transitions)
    if plans.Transition("created") in plan.transitions:  # the plan created the job's pods: say how many exist
        existing = sum(int(c.get("active", 0)) for c in (status.get("replicaStatuses") or {}).values())
        if existing:
            cond_lib.set_condition(conditions, cond_lib.CREATED, True, "PodsCreated",
                                   f"created {existing} pods and their headless services", now)
        else:
            cond_lib.set_condition(conditions, cond_lib.CREATED, False, plans.FAILED_CREATE,
                                   "no pod could be created yet", now)
            transitions.remove(plans.Transition("created"))
    status["state"] = jobstatus.job_state(conditions)
    for kind in ("Pod", "Service"):
        mine = [f for f in failures if f.kind == kind]
        if mine:
            events.append(plans.Event("Warning", f"FailedCreate{kind}", _failure_message(mine, refused)))
    waits = [policies.seconds_until_retry(e, now) for e in refused.values()]
    requeue = min([w for w in (plan.requeue_after, *waits) if w is not None], default=None)
    return Outcome(status, events, requeue, transitions)


def _failure_message(failures: Sequence[CreateFailure], refused: Mapping[str, Mapping[str, Any]]) -> str:
    """``could not create pods a, b: <API message of a> (403); next attempt at <time>``, a clause per distinct cause.

    Refusals that differ only in the object's name (a quota names the pod) are one cause.
    """
    groups: dict[str, list[CreateFailure]] = {}
    for failure in failures:
        groups.setdefault(f"{failure.message.replace(failure.name, '')} {failure.code}", []).append(failure)
    kind = failures[0].kind.lower()
    clauses = []
    for group in groups.values():
        names = ", ".join(f.name for f in group)
        code = f" ({group[0].code})" if group[0].code is not None else ""
        clauses.append(f"could not create {kind if len(group) == 1 else kind + 's'} {names}: {group[0].message}{code}")
    retry = min((str(e["nextRetryTime"]) for e in refused.values()), default="")
    return "; ".join(clauses) + (f"; next attempt at {retry}" if retry else "")
