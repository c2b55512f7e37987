"""The reconcile pass: one pure function from what the operator observes to what it does.

``reconcile(job, pods, services, now)`` returns a :class:`plans.Plan`: pods and Services
to create or delete, the new ``status`` (or ``None`` when nothing changed), the events
that explain each action, whether to delete the job (TTL), when to look again even if
nothing happens (deadlines, TTL, retry delays), and which job-level transitions happened
(for metrics). This module is the flow of a pass: read the status, parse the spec, take
the branches (finished, suspended, past its deadline), then observe, decide, create.
What the job's policies do when replicas or the job end is in ``outcomes`` (with the
verdicts in ``policies``), the status the pass writes in ``jobstatus``, and what the API
server's refusals to create make of the plan in ``creation.after_creates``.

It is level-triggered: it reads the whole observed state every time and never relies on
having seen a particular event, so running it twice, or after a crash half-way through
applying a plan, converges to the same place.

What must survive pods disappearing lives in ``status`` and is carried forward here:
the record of finished replicas (a completed pod that is deleted is never re-run),
restart counts (``backoffLimit`` bounds every retry), the uids of failed pods
whose restart was already counted (a repeated reconcile does not count it twice),
the restart epoch (the pods of a run that a whole-job restart by an earlier operator
replaced are deleted even when the deletions of that restart were lost), when a
parameter server was last seen down (``status.parameterServerLoss``: workers failing
soon after are collateral), and each failed replica's retry delay
(``status.replicaBackoff``: it is created again only when its delay is over).
"""

from __future__ import annotations

import datetime
import functools
from typing import Any, Iterable, Mapping, Sequence

from tensorgrid_operator.api import conditions as cond_lib
from tensorgrid_operator.api import pod_failure_policy
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import finished_replicas
from tensorgrid_operator.reconcile import jobstatus
from tensorgrid_operator.reconcile import outcomes
from tensorgrid_operator.reconcile import plans
from tensorgrid_operator.reconcile import podview
from tensorgrid_operator.reconcile import policies
from tensorgrid_operator.reconcile import ps_takeover
from tensorgrid_operator.reconcile import scaling
from tensorgrid_operator.reconcile import terminating
from tensorgrid_operator.resources import kueue
from tensorgrid_operator.resources import manifests


def reconcile(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], services: Iterable[Mapping[str, Any]],
              now: datetime.datetime, retry_delay: policies.RetryDelay = policies.RetryDelay(),
              stuck: terminating.StuckPolicy = terminating.StuckPolicy(),
              standbys: Sequence[Mapping[str, Any]] = ()) -> plans.Plan:
    """The plan that moves the cluster from what is observed towards what ``job`` asks for.

    ``standbys``: the pods of the job's PS standbys, read when one may take over its PS
    (``ps_takeover.standbys_needed``); empty otherwise."""
    meta = job["metadata"]
    old_status: Mapping[str, Any] = job.get("status") or {}
    plan = plans.Plan()
    if meta.get("deletionTimestamp"):
        return plan  # garbage collection removes what the job owns
    work = plans.Work(
        job=job, now=now, plan=plan,
        conditions=[dict(c) for c in old_status.get("conditions") or []],
        finished=finished_replicas.expand(old_status.get("finishedReplicas") or []),
        restarted_uids={r["uid"]: r["name"] for r in old_status.get("restartedPods") or []},
        restarts={t: int(s.get("restarts", 0)) for t, s in (old_status.get("replicaStatuses") or {}).items()},
        epoch=int(old_status.get("restartEpoch") or 0),
        backoff={e["replica"]: dict(e) for e in old_status.get("replicaBackoff") or []},
        retry_delay=retry_delay,
        stuck=stuck,
        ps_loss=old_status.get("parameterServerLoss"),
    )
    owned = [p for p in pods if podview.owned_by(p, meta["uid"])]
    foreign_names = {(p.get("metadata") or {}).get("name") for p in pods if not podview.owned_by(p, meta["uid"])}
    views = [podview.view_pod(p) for p in owned]
    own_services = {s["metadata"]["name"] for s in services if podview.owned_by(s, meta["uid"])}
    foreign_names |= {s["metadata"]["name"] for s in services if not podview.owned_by(s, meta["uid"])}

    try:
        job_spec = spec_lib.parse_spec(job.get("spec") or {})
    except ValueError as e:
        if not cond_lib.job_finished(work.conditions):
            outcomes.finish(work, None, views, own_services, cond_lib.FAILED, "InvalidSpec", str(e))
        return jobstatus.conclude(work, old_status, None, views)

    if cond_lib.job_finished(work.conditions):
        outcomes.after_finish(work, job_spec, views, own_services)
        _close_kueue_group(work, owned)
        return jobstatus.conclude(work, old_status, job_spec, views)

    job_spec, held = scaling.hold_for_kueue(job, job_spec, owned)
    scaling.announce(work, job_spec, old_status, held)
    try:
        cluster = manifests.cluster_json(meta["name"], meta["namespace"], job_spec)  # once per pass, not per pod
    except ValueError as e:
        outcomes.finish(work, job_spec, views, own_services, cond_lib.FAILED, "InvalidSpec", str(e))
        return jobstatus.conclude(work, old_status, job_spec, views)

    desired = {k.short_name: k for k in spec_lib.all_replicas(job_spec)}
    scaling.forget_removed_workers(work, job_spec)
    _delete_undesired(work, views, own_services, desired)

    if job_spec.suspended:
        outcomes.suspend(work, job_spec, views, own_services)
        return jobstatus.conclude(work, old_status, job_spec, views)

    start_time = cond_lib.parse_time(old_status.get("startTime"))
    if cond_lib.is_true(work.conditions, cond_lib.SUSPENDED):
        cond_lib.set_condition(work.conditions, cond_lib.SUSPENDED, False, "Resumed", "the job was resumed", now)
        work.event("Normal", "Resumed", "the job is no longer suspended: recreating the job's pods, which "
                                        "resume from the latest checkpoint")
        start_time = None  # the active deadline counts from the resume
    # A queued job's clock starts when Kueue admits its group, and stops again when a preemption
    # takes the group back: the time waiting for quota is not active time.
    work.awaiting_admission = kueue.awaiting_admission(job, (v.scheduling_gates for v in views if v.active))
    if not work.awaiting_admission:
        work.start_time = start_time or now

    deadline = job_spec.run_policy.active_deadline_seconds
    if deadline is not None and work.start_time is not None:
        due = work.start_time + datetime.timedelta(seconds=deadline)
        if now >= due:
            outcomes.finish(work, job_spec, views, own_services, cond_lib.FAILED, "DeadlineExceeded",
                    f"the job ran longer than activeDeadlineSeconds ({deadline}s)", stop_all=True)
            _close_kueue_group(work, owned)
            return jobstatus.conclude(work, old_status, job_spec, views)
        work.requeue((due - now).total_seconds())

    # A whole-job restart (by an earlier operator) whose status landed but whose deletions did not.
    outcomes.delete_old_epochs(work, views, announce=True)
    by_name = {v.key.short_name: v for v in views if v.key is not None}
    outcomes.note_ps_loss(work, desired, by_name)
    outcomes.observe_outcomes(work, job_spec, desired, by_name)

    outcome = outcomes.job_outcome(work, job_spec)
    if outcome is not None:
        ctype, reason, message = outcome
        # FailJob fails the whole job at once, as a Job's podFailurePolicy does: its running pods stop.
        outcomes.finish(work, job_spec, views, own_services, ctype, reason, message,
                        stop_all=reason == pod_failure_policy.REASON)
        _close_kueue_group(work, owned)
        return jobstatus.conclude(work, old_status, job_spec, views)

    promoted = ps_takeover.take_over_lost_ps(work, job_spec, desired, views, standbys)
    by_name = {**by_name, **promoted}  # a standby that took over is its PS's pod: none is made
    _create_missing(work, job_spec, cluster, desired, by_name, own_services, foreign_names)
    jobstatus.running_conditions(work, job_spec, desired, by_name)
    return jobstatus.conclude(work, old_status, job_spec, [*views, *promoted.values()])


def _delete_undesired(work: plans.Work, views: Sequence[podview.PodView], services: set[str],
                      desired: Mapping[str, spec_lib.ReplicaKey]) -> None:
    """Pods and Services of replicas the spec no longer has (or with labels it never set)."""
    job_name = work.job["metadata"]["name"]
    wanted = {spec_lib.pod_name(job_name, k) for k in desired.values()}
    stale = [v for v in views if v.key is None or v.key.short_name not in desired]
    for view in stale:
        if not view.terminating:
            work.delete_pod(view)  # with its grace period: a worker scaled away gets SIGTERM
    stale_services = sorted(s for s in services if s not in wanted)
    work.plan.delete_services.extend(stale_services)
    # Workers scaled away are announced by scaling.announce; the rest are leftovers.
    names = sorted(n for n in {v.name for v in stale if not v.terminating} | set(stale_services)
                   if not scaling.removed_worker(job_name, n, desired))
    if names:
        work.event("Normal", "DeletedStale", f"deleted objects of replicas the spec does not have: {', '.join(names)}")



def _close_kueue_group(work: plans.Work, pods: Sequence[Mapping[str, Any]]) -> None:
    """A finished job's Kueue pod group is over: no replacement comes for the pods it deletes."""
    for pod in pods:
        if kueue.needs_group_closed(work.job, pod):
            work.plan.close_group_pods.append((pod["metadata"]["name"], pod["metadata"]["uid"]))


def _create_missing(work: plans.Work, job_spec: spec_lib.JobSpec, cluster: str,
                    desired: Mapping[str, spec_lib.ReplicaKey], by_name: Mapping[str, podview.PodView],
                    services: set[str], foreign_names: set[Any]) -> None:
    """Create the pods and Services that are missing, but those of replicas still waiting out a retry delay.

    ``cluster`` is the job's ``manifests.cluster_json``, shared by every pod made here.
    """
    job = work.job
    deleting = {name for name, _ in work.plan.delete_pods}
    created_pods: dict[str, str] = {}  # replica -> pod name
    created_services: list[str] = []
    for short, key in desired.items():
        name = spec_lib.pod_name(job["metadata"]["name"], key)
        if name in foreign_names:
            continue  # an object of an earlier job of this name still waits for garbage collection
        wait = work.wait_before_creating(short)
        if wait > 0:
            work.requeue(wait)
            continue
        if name not in services:
            work.plan.create_services.append(manifests.build_service(job, job_spec, key))
            created_services.append(name)
        if short in work.finished or short in by_name or name in deleting:
            continue
        work.plan.create_pods.append(plans.PodToCreate(
            name, key, functools.partial(manifests.build_pod, job, job_spec, key, work.epoch, cluster)))
        created_pods[short] = name
    if created_pods:
        work.event("Normal", "CreatedPods", f"created pods {', '.join(created_pods.values())}")
    if created_services:
        work.event("Normal", "CreatedServices", f"created headless services {', '.join(created_services)}")
    # A retry of a refused creation is taken to fail again until its pod is seen: the status
    # does not flip to Created and back on every attempt.
    made = {s for s in created_pods if not work.refused(s)} | {s for s in by_name if s in desired}
    if made and not cond_lib.is_true(work.conditions, cond_lib.CREATED):
        cond_lib.set_condition(work.conditions, cond_lib.CREATED, True, "PodsCreated",
                               f"created {len(made)} pods and their headless services", work.now)
        work.plan.transitions.append(plans.Transition("created"))

