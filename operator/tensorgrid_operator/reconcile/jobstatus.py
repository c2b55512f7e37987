"""The status a reconcile pass writes: replica counts, the Running condition, the State column.

Apart from the decisions (``reconcile``, ``outcomes``): given what the pass decided,
this assembles the complete new ``status`` (counts per replica type, the finished
replicas, restart bookkeeping, retry delays still to keep, timestamps), says why pods do
not run (unschedulable, stuck waiting, gated by Kueue, refused by the API server,
stuck terminating), and phrases the messages conditions and events carry. ``creation``
uses the same messages and State when the API server refuses a plan's creations.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from tensorgrid_operator.api import conditions as cond_lib
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import finished_replicas
from tensorgrid_operator.reconcile import plans
from tensorgrid_operator.reconcile import podview
from tensorgrid_operator.reconcile import policies
from tensorgrid_operator.reconcile import progress
from tensorgrid_operator.reconcile import scaling
from tensorgrid_operator.reconcile import terminating
from tensorgrid_operator.resources import kueue
from tensorgrid_operator.resources import podgroups

Obj = dict[str, Any]
RT = spec_lib.ReplicaType
# Reasons of a False Running condition whose message only counts running pods ("N of M ...").
PODS_NOT_RUNNING, PODS_PENDING = "PodsNotRunning", "PodsPending"
COUNTING_REASONS = (PODS_NOT_RUNNING, PODS_PENDING)
# Reasons of Running=False that name why pods do not run (the State column shows them).
NOT_RUNNING_REASONS = (podview.UNSCHEDULABLE, *podview.STUCK_WAITING_REASONS, plans.FAILED_CREATE,
                       podview.SCHEDULING_GATED)


def running_conditions(work: plans.Work, job_spec: spec_lib.JobSpec, desired: Mapping[str, spec_lib.ReplicaKey],
                        by_name: Mapping[str, podview.PodView]) -> None:
    """Running when every unfinished replica's pod runs; else say why not, if a pod is stuck."""
    now = work.now
    deleting = {name for name, _ in work.plan.delete_pods}
    waiting = [s for s in desired if s not in work.finished]
    running = [s for s in waiting if s in by_name and by_name[s].phase == "Running"
               and by_name[s].name not in deleting and not by_name[s].terminating]
    stuck = [by_name[s] for s in waiting if s in by_name and by_name[s].stuck_reason]
    if waiting and len(running) == len(waiting):
        message = f"all {len(waiting)} unfinished replicas are running"
        if cond_lib.set_condition(work.conditions, cond_lib.RUNNING, True, "AllPodsRunning", message, now):
            work.event("Normal", "Running", message)
        if cond_lib.get_condition(work.conditions, cond_lib.RESTARTING) is not None:
            cond_lib.set_condition(work.conditions, cond_lib.RESTARTING, False, "AllPodsRunning", message, now)
        return
    if stuck:
        reason = stuck[0].stuck_reason
        message = _stuck_message(stuck)
        groups = sorted({v.pod_group for v in stuck if v.pod_group and v.stuck_reason == podview.UNSCHEDULABLE})
        if groups:
            message += "; " + podgroups.waiting_message(groups[0], job_spec)
        previous = cond_lib.get_condition(work.conditions, cond_lib.RUNNING)
        if previous is None or previous.get("reason") != reason:
            work.event("Warning", reason, message)
        cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, reason, message, now)
        return
    gated = [by_name[s] for s in waiting if s in by_name and by_name[s].scheduling_gates]
    if gated:
        # Waiting to be admitted (Kueue's gate until it admits the pod group): not a fault.
        message = _gated_message(gated)
        previous = cond_lib.get_condition(work.conditions, cond_lib.RUNNING)
        if previous is None or previous.get("reason") != podview.SCHEDULING_GATED:
            work.event("Normal", podview.SCHEDULING_GATED, message)
        cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, podview.SCHEDULING_GATED, message, now)
        return
    refused = [work.backoff[s] for s in sorted(waiting) if s not in by_name and work.refused(s)]
    if refused:
        message = refused_message(work.job["metadata"]["name"], refused)
        cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, plans.FAILED_CREATE, message, now)
        return
    running_cond = cond_lib.get_condition(work.conditions, cond_lib.RUNNING)
    if running_cond is not None and running_cond.get("status") == "True":
        message = f"{len(running)} of {len(waiting)} unfinished replicas are running"
        cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, PODS_NOT_RUNNING, message, now)
    elif running_cond is not None and running_cond.get("reason") in NOT_RUNNING_REASONS:
        cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, PODS_PENDING,
                      f"{len(running)} of {len(waiting)} unfinished replicas are running", now)


def refused_message(job_name: str, entries: Sequence[Mapping[str, Any]]) -> str:
    """The first refusal in full, which other replicas were refused, and when the next attempt is.

    ``entries`` sorted by replica name; each replica's own message is in ``status.replicaBackoff``.
    """
    others = [f"{job_name}-{e['replica']}" for e in entries[1:]]
    shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
    also = f"; also refused: {shown}" if others else ""
    return f"{entries[0]['message']}{also}; next attempt at {min(str(e['nextRetryTime']) for e in entries)}"


def _gated_message(gated: Sequence[podview.PodView]) -> str:
    """``pods a, b wait for the removal of their scheduling gates: kueue.x-k8s.io/admission``."""
    names = [v.name for v in gated]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    gates = sorted({g for v in gated for g in v.scheduling_gates})
    message = (f"{'pod' if len(names) == 1 else 'pods'} {shown} wait for the removal of scheduling gates "
               f"{', '.join(gates)}")
    if kueue.ADMISSION_GATE in gates:
        message += f" (Kueue removes {kueue.ADMISSION_GATE} when it admits the job's pod group)"
    return message


def _stuck_message(stuck: Sequence[podview.PodView]) -> str:
    """``pods a, b: Unschedulable: <scheduler's message>``, one clause per distinct cause."""
    groups: dict[tuple[str, str], list[str]] = {}
    for view in stuck:
        groups.setdefault((view.stuck_reason, view.stuck_message), []).append(view.name)
    clauses = []
    for (reason, detail), names in groups.items():
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        clauses.append(f"{'pod' if len(names) == 1 else 'pods'} {shown}: {reason}" + (f": {detail}" if detail else ""))
    return "; ".join(clauses)


def job_state(conditions: Sequence[Mapping[str, Any]]) -> str:
    """The State printer column: the most telling true condition, or why pods are stuck."""
    for ctype in (cond_lib.FAILED, cond_lib.SUCCEEDED, cond_lib.SUSPENDED, cond_lib.RESTARTING, cond_lib.RUNNING):
        if cond_lib.is_true(conditions, ctype):
            return ctype
    running = cond_lib.get_condition(conditions, cond_lib.RUNNING)
    if running is not None and running.get("reason") in NOT_RUNNING_REASONS:
        return str(running["reason"])
    return cond_lib.CREATED if cond_lib.is_true(conditions, cond_lib.CREATED) else "Pending"



def conclude(work: plans.Work, old_status: Mapping[str, Any], job_spec: Optional[spec_lib.JobSpec],
              views: Sequence[podview.PodView]) -> plans.Plan:
    """Assemble the new status; keep ``plan.status`` ``None`` when it equals the old one."""
    _stuck_terminating(work, views)
    now, plan = work.now, work.plan
    deleting = {uid for _, uid in plan.delete_pods}
    live = [v for v in views if v.key is not None and not v.terminating and v.uid not in deleting]
    replica_statuses: dict[str, Obj] = {}
    types = [t for t in spec_lib.REPLICA_TYPES if job_spec is not None and t in job_spec.replica_specs]
    # Pods created by this plan count as active already, so the next reconcile, which
    # sees them Pending, finds the status unchanged and writes nothing; a retry of a
    # refused creation counts once its pod is seen.
    creating = [p.replica for p in plan.create_pods if not work.refused(p.replica.short_name)]
    for rtype in types:
        records = [r for r in work.finished.values() if r["type"] == rtype.value]
        replica_statuses[rtype.value] = {
            "active": sum(1 for v in live if v.key is not None and v.key.rtype is rtype and v.active)
            + sum(1 for k in creating if k.rtype is rtype),
            "running": sum(1 for v in live if v.key is not None and v.key.rtype is rtype and v.phase == "Running"),
            "succeeded": sum(1 for r in records if r["outcome"] == cond_lib.SUCCEEDED),
            "failed": sum(1 for r in records if r["outcome"] == cond_lib.FAILED),
            "restarts": work.restarts.get(rtype.value, 0),
        }
    status: Obj = dict(old_status)
    status["conditions"] = work.conditions
    status["replicaStatuses"] = replica_statuses
    status["finishedReplicas"] = finished_replicas.compact(work.finished.values())
    observed_uids = {v.uid for v in views}
    status["restartedPods"] = sorted(({"name": n, "uid": u} for u, n in work.restarted_uids.items()
                                      if u in observed_uids), key=lambda r: (r["name"], r["uid"]))
    status["restarts"] = work.total_restarts()
    status["restartEpoch"] = work.epoch
    if work.ps_loss is not None:
        status["parameterServerLoss"] = work.ps_loss
    status.update(work.status_fields)
    status["replicaBackoff"] = _backoff_to_keep(work, job_spec)
    status["observedGeneration"] = work.job["metadata"].get("generation", 0)
    if work.start_time is not None:
        status["startTime"] = cond_lib.format_time(work.start_time)
    if work.suspended or work.awaiting_admission:
        status.pop("startTime", None)
    if work.finished_now:
        status["completionTime"] = cond_lib.format_time(now)
    status["state"] = job_state(work.conditions)
    if job_spec is not None:
        final = progress.final_progress(old_status.get("progress"), job_spec, views,
                                        cond_lib.job_finished(work.conditions), now)
        if final is not None:  # the chief ended: its last figures stay (no reading follows them)
            status["progress"] = final
        workers = replica_statuses.get(RT.WORKER.value, {})
        ps = replica_statuses.get(RT.PS.value, {})
        status["workers"] = f"{workers.get('running', 0)}/{job_spec.replicas(RT.WORKER)}"
        status["ps"] = f"{ps.get('running', 0)}/{job_spec.replicas(RT.PS)}"
        desired = scaling.desired_workers(work.job)
        if desired is not None:  # the scale subresource's view: kubectl scale, kubectl get tj
            status["workerReplicas"] = scaling.current_workers(views, creating)
            status["desiredWorkerReplicas"] = desired
            status["workerSelector"] = scaling.worker_selector(work.job["metadata"]["name"])
    if cond_lib.is_true(work.conditions, cond_lib.RUNNING) and not old_status.get("allPodsRunningTime"):
        status["allPodsRunningTime"] = cond_lib.format_time(now)
        created = cond_lib.parse_time(work.job["metadata"].get("creationTimestamp"))
        if created is not None:
            plan.all_running_seconds = max(0.0, (now - created).total_seconds())
    plan.status = None if status == dict(old_status) else status
    return plan


# What follows the pods' phases alone: per replica type ``active`` and ``running``, and the
# ``workers``/``ps`` columns made of them. A status that changed in these only is written at
# most every few seconds (``cluster.running_operator``), not once for each pod that starts to run.
PHASE_COUNTS = ("active", "running")
PHASE_COLUMNS = ("workers", "ps", "workerReplicas")


def only_phase_counts_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``new`` differs from ``old`` only in the counts of pods by phase (``PHASE_COUNTS``,
    ``PHASE_COLUMNS``, the message of a Running condition that counts them): nothing that a later
    pass derives from the status written (restarts, finished replicas, conditions, backoff) is in
    them, so a later write loses nothing."""
    def without_counts(status: Mapping[str, Any]) -> Obj:
        kept = {k: v for k, v in status.items() if k not in PHASE_COLUMNS}
        kept["replicaStatuses"] = {rtype: {k: v for k, v in counts.items() if k not in PHASE_COUNTS}
                                   for rtype, counts in (status.get("replicaStatuses") or {}).items()}
        kept["conditions"] = [{**c, "message": None} if _counts_in_message(c) else c
                              for c in status.get("conditions") or []]
        return kept

    return dict(old) != dict(new) and without_counts(old) == without_counts(new)


def _counts_in_message(condition: Mapping[str, Any]) -> bool:
    return (condition.get("type") == cond_lib.RUNNING and condition.get("status") == "False"
            and condition.get("reason") in COUNTING_REASONS)


def _stuck_terminating(work: plans.Work, views: Sequence[podview.PodView]) -> None:
    """Say which pods are stuck terminating (a Warning when that changes); force-delete them if told to."""
    stuck, due = terminating.stuck_pods(views, work.now, work.stuck)
    if due is not None:
        work.requeue(due)
    previous = cond_lib.get_condition(work.conditions, cond_lib.STUCK_TERMINATING)
    if not stuck:
        if previous is not None and previous.get("status") == "True":
            cond_lib.set_condition(work.conditions, cond_lib.STUCK_TERMINATING, False, "NoPodStuckTerminating",
                                   "no pod of the job is stuck terminating", work.now)
        return
    message = terminating.describe(stuck, work.stuck)
    if previous is None or previous.get("status") != "True" or previous.get("message") != message:
        work.event("Warning", terminating.REASON, message)
    cond_lib.set_condition(work.conditions, cond_lib.STUCK_TERMINATING, True, terminating.REASON, message, work.now)
    if work.stuck.force_delete:
        work.plan.force_delete_pods.extend((v.name, v.uid) for v in stuck)
        work.requeue(work.stuck.after_seconds)  # look again, in case a deletion is lost


def _backoff_to_keep(work: plans.Work, job_spec: Optional[spec_lib.JobSpec]) -> list[Obj]:
    """The replicas still waiting, or that failed recently enough for the next failure to wait longer."""
    if job_spec is None or cond_lib.job_finished(work.conditions):
        return []
    desired = {k.short_name for k in spec_lib.all_replicas(job_spec)}
    kept = [e for short, e in work.backoff.items() if short in desired and short not in work.finished
            and not policies.backoff_expired(e, work.retry_delay, work.now)]
    return sorted(kept, key=lambda e: str(e["replica"]))