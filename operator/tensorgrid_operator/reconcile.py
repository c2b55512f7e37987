"""Every decision the operator takes, as one pure function of what it observes.

``reconcile(job, pods, services, now)`` returns a :class:`Plan`: pods and Services to
create or delete, the new ``status`` (or ``None`` when nothing changed), the events
that explain each action, whether to delete the job (TTL), when to look again even
if nothing happens (deadlines, TTL, retry delays), and which job-level transitions
happened (for metrics). What the API server's refusals to create make of the plan is
``creation.after_creates``. It is level-triggered: it reads the whole observed state every time and
never relies on having seen a particular event, so running it twice, or after a
crash half-way through applying a plan, converges to the same place.

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

import dataclasses
import datetime
from typing import Any, Iterable, Mapping, Optional, Sequence

from tensorgrid_operator import conditions as cond_lib
from tensorgrid_operator import manifests
from tensorgrid_operator import podview
from tensorgrid_operator import policies
from tensorgrid_operator import spec as spec_lib
from tensorgrid_operator import terminating

Obj = dict[str, Any]
RT = spec_lib.ReplicaType
# The API server refused to create a pod or Service (quota, admission, an outage): retried after a delay.
FAILED_CREATE = "FailedCreate"
# Reasons of Running=False that name why pods do not run (the State column shows them).
NOT_RUNNING_REASONS = (podview.UNSCHEDULABLE, *podview.STUCK_WAITING_REASONS, FAILED_CREATE)
# What happens when a parameter server is lost, however it was lost (docs/operator.md, "PS failures").
PS_RECOVERY = ("the parameter server is recreated alone; the chief restores the latest checkpoint into it and "
               "the workers reconnect")


@dataclasses.dataclass(frozen=True)
class Event:
    type: str
    """``Normal`` or ``Warning``."""
    reason: str
    message: str


@dataclasses.dataclass
class Plan:
    create_pods: list[Obj] = dataclasses.field(default_factory=list)
    create_services: list[Obj] = dataclasses.field(default_factory=list)
    delete_pods: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    """(name, uid): deleted with a uid precondition, so a newer pod of that name is never hit."""
    delete_services: list[str] = dataclasses.field(default_factory=list)
    force_delete_pods: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    """(name, uid) of pods stuck terminating, deleted with a grace period of 0 (``terminating``)."""
    status: Optional[Obj] = None
    """The complete new status, or ``None`` when it did not change."""
    events: list[Event] = dataclasses.field(default_factory=list)
    delete_job: bool = False
    requeue_after: Optional[float] = None
    """Seconds until a deadline, a TTL or a retry falls due; ``None`` when no timer is pending."""
    transitions: list[str] = dataclasses.field(default_factory=list)
    """Job-level transitions for metrics: ``created``, ``restarted``, ``succeeded``, ``failed``."""
    all_running_seconds: Optional[float] = None
    """Set once, when every pod first runs: seconds since the job was created."""

    @property
    def has_actions(self) -> bool:
        return bool(self.create_pods or self.create_services or self.delete_pods or self.delete_services
                    or self.force_delete_pods or self.delete_job)


@dataclasses.dataclass
class _Work:
    """Mutable scratch state of one reconcile."""

    job: Mapping[str, Any]
    now: datetime.datetime
    plan: Plan
    conditions: list[Obj]
    finished: dict[str, Obj]
    restarted_uids: dict[str, str]
    restarts: dict[str, int]
    epoch: int
    """The restart epoch: pods labelled with an older one belong to a run the job restarted away from."""
    backoff: dict[str, Obj]
    """``status.replicaBackoff`` by replica: how many times in a row it failed, when it may be created again."""
    retry_delay: policies.RetryDelay
    stuck: terminating.StuckPolicy
    ps_loss: Optional[Obj]
    """``status.parameterServerLoss``: which parameter servers were last seen down, and when."""
    start_time: Optional[datetime.datetime] = None
    """The startTime to write, when this reconcile (re)starts the active clock."""
    finished_now: bool = False
    """Whether the job reached Succeeded or Failed in this reconcile."""

    def event(self, etype: str, reason: str, message: str) -> None:
        self.plan.events.append(Event(etype, reason, message))

    def total_restarts(self) -> int:
        return sum(self.restarts.values())

    def delete_pod(self, view: podview.PodView) -> None:
        if (view.name, view.uid) not in self.plan.delete_pods:
            self.plan.delete_pods.append((view.name, view.uid))

    def deleting(self, view: podview.PodView) -> bool:
        return (view.name, view.uid) in self.plan.delete_pods

    def back_off(self, short: str, reason: str, message: str) -> Obj:
        """Record that a replica failed: it is created again only after its (growing) delay."""
        entry = policies.backoff_entry(self.backoff.get(short), self.retry_delay, self.now, short, reason, message)
        self.backoff[short] = entry
        return entry

    def refused(self, short: str) -> bool:
        """Whether the API server refused this replica's last creation (and it was not seen since)."""
        return self.backoff.get(short, {}).get("reason") == FAILED_CREATE

    def wait_before_creating(self, short: str) -> float:
        """Seconds this replica must still wait; while a parameter server waits, every replica does."""
        waits = [policies.seconds_until_retry(e, self.now) for name, e in self.backoff.items()
                 if name == short or name.startswith(RT.PS.task_type + "-")]
        return max(waits, default=0.0)

    def requeue(self, seconds: float) -> None:
        """Look again in ``seconds`` at the latest (a deadline, a TTL, a retry falls due)."""
        if self.plan.requeue_after is None or seconds < self.plan.requeue_after:
            self.plan.requeue_after = seconds


def reconcile(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], services: Iterable[Mapping[str, Any]],
              now: datetime.datetime, retry_delay: policies.RetryDelay = policies.RetryDelay(),
              stuck: terminating.StuckPolicy = terminating.StuckPolicy()) -> Plan:
    """The plan that moves the cluster from what is observed towards what ``job`` asks for."""
    meta = job["metadata"]
    old_status: Mapping[str, Any] = job.get("status") or {}
    plan = Plan()
    if meta.get("deletionTimestamp"):
        return plan  # garbage collection removes what the job owns
    work = _Work(
        job=job, now=now, plan=plan,
        conditions=[dict(c) for c in old_status.get("conditions") or []],
        finished={r["replica"]: dict(r) for r in old_status.get("finishedReplicas") or []},
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
        if not _finished(work.conditions):
            _finish(work, None, views, own_services, cond_lib.FAILED, "InvalidSpec", str(e))
        return _conclude(work, old_status, None, views)

    if _finished(work.conditions):
        _after_finish(work, job_spec, views, own_services)
        return _conclude(work, old_status, job_spec, views)

    desired = {k.short_name: k for k in spec_lib.all_replicas(job_spec)}
    _delete_undesired(work, views, own_services, desired)

    if job_spec.run_policy.suspend:
        _suspend(work, views, own_services)
        return _conclude(work, old_status, job_spec, views)

    start_time = cond_lib.parse_time(old_status.get("startTime"))
    if cond_lib.is_true(work.conditions, cond_lib.SUSPENDED):
        cond_lib.set_condition(work.conditions, cond_lib.SUSPENDED, False, "Resumed", "the job was resumed", now)
        work.event("Normal", "Resumed", "spec.runPolicy.suspend is false: recreating the job's pods")
        start_time = None  # the active deadline counts from the resume
    if start_time is None:
        start_time = now
    work.start_time = start_time

    deadline = job_spec.run_policy.active_deadline_seconds
    if deadline is not None:
        due = start_time + datetime.timedelta(seconds=deadline)
        if now >= due:
            _finish(work, job_spec, views, own_services, cond_lib.FAILED, "DeadlineExceeded",
                    f"the job ran longer than activeDeadlineSeconds ({deadline}s)", stop_all=True)
            return _conclude(work, old_status, job_spec, views)
        work.requeue((due - now).total_seconds())

    # A whole-job restart (by an earlier operator) whose status landed but whose deletions did not.
    _delete_old_epochs(work, views, announce=True)
    by_name = {v.key.short_name: v for v in views if v.key is not None}
    _note_ps_loss(work, desired, by_name)
    _observe_outcomes(work, job_spec, desired, by_name)

    outcome = _outcome(work, job_spec)
    if outcome is not None:
        ctype, reason, message = outcome
        _finish(work, job_spec, views, own_services, ctype, reason, message)
        return _conclude(work, old_status, job_spec, views)

    _create_missing(work, job_spec, desired, by_name, own_services, foreign_names)
    _running_conditions(work, job_spec, desired, by_name)
    return _conclude(work, old_status, job_spec, views)


def _finished(conditions: Sequence[Mapping[str, Any]]) -> bool:
    return cond_lib.is_true(conditions, cond_lib.SUCCEEDED) or cond_lib.is_true(conditions, cond_lib.FAILED)


def _delete_old_epochs(work: _Work, views: Sequence[podview.PodView], announce: bool) -> None:
    """Delete the pods of an earlier restart epoch, but those of replicas that finished for good.

    The epoch is in the status before any pod is deleted, so a restart whose deletions
    were lost (an operator crash, an API error) is completed by the next reconcile: no
    worker keeps training against the parameter servers of the run that was restarted.
    """
    old = [v for v in views if v.key is not None and v.epoch < work.epoch and not v.terminating
           and v.key.short_name not in work.finished and not work.deleting(v)]
    for view in old:
        work.delete_pod(view)
    if old and announce:
        work.event("Normal", "DeletedPods", f"deleted pods of an earlier run (the job restarted; restart epoch "
                                            f"{work.epoch}): {', '.join(v.name for v in old)}")


def _note_ps_loss(work: _Work, desired: Mapping[str, spec_lib.ReplicaKey],
                  by_name: Mapping[str, podview.PodView]) -> None:
    """Remember when a parameter server of a job that ran was last seen down (``status.parameterServerLoss``)."""
    if not (work.job.get("status") or {}).get("allPodsRunningTime"):
        return  # a PS still starting up is not a loss: workers failing then are judged as usual
    down = sorted(spec_lib.pod_name(work.job["metadata"]["name"], key) for short, key in desired.items()
                  if key.rtype is RT.PS and short not in work.finished and policies.ps_down(by_name.get(short)))
    if down:
        work.ps_loss = {"replicas": down, "lastSeenDown": cond_lib.format_time(work.now)}


def _observe_outcomes(work: _Work, job_spec: spec_lib.JobSpec, desired: Mapping[str, spec_lib.ReplicaKey],
                      by_name: Mapping[str, podview.PodView]) -> None:
    """Record finished replicas and schedule restarts."""
    limit = job_spec.run_policy.backoff_limit
    for short, key in desired.items():
        view = by_name.get(short)
        if view is None or view.terminating or work.deleting(view) or short in work.finished \
                or view.phase not in podview.TERMINAL_PHASES:
            continue
        if view.uid in work.restarted_uids:
            work.delete_pod(view)  # counted already; the deletion did not happen yet
            continue
        succeeded = view.phase == "Succeeded"
        policy = job_spec.replica_specs[key.rtype].restart_policy
        if not succeeded and view.disrupted and policy is not spec_lib.RestartPolicy.NEVER:
            # Recreated alone, as a deleted pod is; the runtime reconnects to a new PS.
            work.delete_pod(view)
            work.event("Normal", "ReplicaDisrupted",
                       f"recreating {view.name}, stopped by the cluster ({view.disrupted}); "
                       f"not counted against backoffLimit")
            continue
        collateral = policies.collateral_of_ps_loss(key, policy, succeeded, work.ps_loss, work.now)
        if collateral:
            # A worker that failed because its parameter server went away: recreated, not counted.
            work.delete_pod(view)
            entry = work.back_off(short, "ReplicaRestarting", collateral)
            message = f"restarting {view.name}: {collateral}; {policies.retry_note(entry, work.now)}"
            cond_lib.set_condition(work.conditions, cond_lib.RESTARTING, True, "ReplicaRestarting", message, work.now)
            work.event("Normal", "ReplicaRestarting", message)
            continue
        retry, why = policies.retry_verdict(policy, succeeded, view.exit_code, policies.decides_success(job_spec, key))
        if retry and work.total_restarts() >= limit:
            _record(work, key, view, cond_lib.FAILED, "BackoffLimitExceeded",
                    f"{why}, but the job already used its {limit} retries (backoffLimit)")
            continue
        if not retry:
            outcome = cond_lib.SUCCEEDED if succeeded else cond_lib.FAILED
            reason = "Completed" if succeeded else (view.reason or "Error")
            _record(work, key, view, outcome, reason, why)
            continue
        work.restarts[key.rtype.value] = work.restarts.get(key.rtype.value, 0) + 1
        work.restarted_uids[view.uid] = view.name
        work.delete_pod(view)
        budget = f"retry {work.total_restarts()} of {limit}"
        entry = work.back_off(short, "ReplicaRestarting", why)
        message = f"restarting {view.name}: {why} ({budget}; {policies.retry_note(entry, work.now)})"
        if key.rtype is RT.PS:
            message += f"; {PS_RECOVERY}"
        cond_lib.set_condition(work.conditions, cond_lib.RESTARTING, True, "ReplicaRestarting", message, work.now)
        cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, "ReplicaRestarting", message, work.now)
        work.event("Warning", "ReplicaRestarting", message)
        work.plan.transitions.append("restarted")


def _record(work: _Work, key: spec_lib.ReplicaKey, view: podview.PodView, outcome: str, reason: str,
            message: str) -> None:
    record: Obj = {"replica": key.short_name, "type": key.rtype.value, "index": key.index, "outcome": outcome,
                   "reason": reason, "message": message, "podUID": view.uid,
                   "finishedTime": cond_lib.format_time(work.now)}
    if view.exit_code is not None:
        record["exitCode"] = view.exit_code
    work.finished[key.short_name] = record
    if outcome == cond_lib.FAILED:
        work.event("Warning", "ReplicaFailed", f"{view.name} failed: {message}")
    else:
        work.event("Normal", "ReplicaSucceeded", f"{view.name} succeeded")


def _outcome(work: _Work, job_spec: spec_lib.JobSpec) -> Optional[tuple[str, str, str]]:
    for record in sorted(work.finished.values(), key=lambda r: (r["type"], r["index"])):
        if record["outcome"] == cond_lib.FAILED and RT(record["type"]) in policies.FATAL_TYPES:
            reason = "BackoffLimitExceeded" if record["reason"] == "BackoffLimitExceeded" else "ReplicaFailed"
            return cond_lib.FAILED, reason, f"{record['replica']} failed: {record['message']}"
    message = policies.success_reached(job_spec, work.finished)
    if message is not None:
        return cond_lib.SUCCEEDED, "JobSucceeded", message
    return None


def _delete_undesired(work: _Work, views: Sequence[podview.PodView], services: set[str],
                      desired: Mapping[str, spec_lib.ReplicaKey]) -> None:
    """Pods and Services of replicas the spec no longer has (or with labels it never set)."""
    job_name = work.job["metadata"]["name"]
    wanted = {spec_lib.pod_name(job_name, k) for k in desired.values()}
    stale = [v for v in views if v.key is None or v.key.short_name not in desired]
    for view in stale:
        if not view.terminating:
            work.delete_pod(view)
    stale_services = sorted(s for s in services if s not in wanted)
    work.plan.delete_services.extend(stale_services)
    names = sorted({v.name for v in stale if not v.terminating} | set(stale_services))
    if names:
        work.event("Normal", "DeletedStale", f"deleted objects of replicas the spec does not have: {', '.join(names)}")


def _suspend(work: _Work, views: Sequence[podview.PodView], services: set[str]) -> None:
    doomed = [v for v in views if v.active]
    for view in doomed:
        work.delete_pod(view)
    doomed_services = sorted(s for s in services if s in {v.name for v in doomed})
    work.plan.delete_services.extend(doomed_services)
    if cond_lib.set_condition(work.conditions, cond_lib.SUSPENDED, True, "Suspended", "spec.runPolicy.suspend is true",
                              work.now):
        work.event("Normal", "Suspended", "spec.runPolicy.suspend is true: the job's pods are deleted")
    cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, "Suspended", "the job is suspended", work.now)
    cond_lib.set_condition(work.conditions, cond_lib.RESTARTING, False, "Suspended", "the job is suspended", work.now)
    if doomed:
        work.event("Normal", "DeletedPods", f"suspended: deleted pods {', '.join(v.name for v in doomed)}")


def _finish(work: _Work, job_spec: Optional[spec_lib.JobSpec], views: Sequence[podview.PodView], services: set[str],
            ctype: str, reason: str, message: str, stop_all: bool = False) -> None:
    now = work.now
    cond_lib.set_condition(work.conditions, ctype, True, reason, message, now)
    cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, reason, f"the job {ctype.lower()}", now)
    cond_lib.set_condition(work.conditions, cond_lib.RESTARTING, False, reason, f"the job {ctype.lower()}", now)
    work.event("Normal" if ctype == cond_lib.SUCCEEDED else "Warning", reason, message)
    work.plan.transitions.append(ctype.lower())
    work.finished_now = True
    if stop_all:
        stopped = [v for v in views if v.pod_running]
        for view in stopped:
            work.delete_pod(view)
        if stopped:
            work.event("Normal", "DeletedPods", f"stopped the job's running pods: {', '.join(v.name for v in stopped)}")
    if job_spec is not None:
        _clean_pods(work, job_spec, views, services)
        _ttl(work, job_spec, now)


def _after_finish(work: _Work, job_spec: spec_lib.JobSpec, views: Sequence[podview.PodView],
                  services: set[str]) -> None:
    """A finished job only cleans up (idempotently) and waits for its TTL."""
    _clean_pods(work, job_spec, views, services)
    _ttl(work, job_spec, cond_lib.parse_time((work.job.get("status") or {}).get("completionTime")) or work.now)


def _clean_pods(work: _Work, job_spec: spec_lib.JobSpec, views: Sequence[podview.PodView], services: set[str]) -> None:
    policy = job_spec.run_policy.clean_pod_policy
    if policy is spec_lib.CleanPodPolicy.NONE:
        return
    if policy is spec_lib.CleanPodPolicy.ALL:
        doomed = [v for v in views if not v.terminating]
        doomed_services = sorted(services)
    else:
        doomed = [v for v in views if v.pod_running]
        doomed_services = sorted(s for s in services if s in {v.name for v in doomed})
    fresh = [v for v in doomed if (v.name, v.uid) not in work.plan.delete_pods]
    for view in doomed:
        work.delete_pod(view)
    work.plan.delete_services.extend(s for s in doomed_services if s not in work.plan.delete_services)
    if fresh:
        work.event("Normal", "CleanedUp",
                   f"cleanPodPolicy {policy.value}: deleted pods {', '.join(v.name for v in fresh)}")


def _ttl(work: _Work, job_spec: spec_lib.JobSpec, completed: datetime.datetime) -> None:
    ttl = job_spec.run_policy.ttl_seconds_after_finished
    if ttl is None:
        return
    due = completed + datetime.timedelta(seconds=ttl)
    if work.now >= due:
        work.plan.delete_job = True
        work.event("Normal", "TTLExpired", f"deleting the job: ttlSecondsAfterFinished ({ttl}s) passed")
    else:
        work.requeue((due - work.now).total_seconds())


def _create_missing(work: _Work, job_spec: spec_lib.JobSpec, desired: Mapping[str, spec_lib.ReplicaKey],
                    by_name: Mapping[str, podview.PodView], services: set[str], foreign_names: set[Any]) -> None:
    """Create the pods and Services that are missing, but those of replicas still waiting out a retry delay."""
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
        work.plan.create_pods.append(manifests.build_pod(job, job_spec, key, work.epoch))
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
        work.plan.transitions.append("created")


def _running_conditions(work: _Work, job_spec: spec_lib.JobSpec, desired: Mapping[str, spec_lib.ReplicaKey],
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
        previous = cond_lib.get_condition(work.conditions, cond_lib.RUNNING)
        if previous is None or previous.get("reason") != reason:
            work.event("Warning", reason, message)
        cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, reason, message, now)
        return
    refused = [work.backoff[s] for s in sorted(waiting) if s not in by_name and work.refused(s)]
    if refused:
        message = refused_message(work.job["metadata"]["name"], refused)
        cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, FAILED_CREATE, message, now)
        return
    running_cond = cond_lib.get_condition(work.conditions, cond_lib.RUNNING)
    if running_cond is not None and running_cond.get("status") == "True":
        message = f"{len(running)} of {len(waiting)} unfinished replicas are running"
        cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, "PodsNotRunning", message, now)
    elif running_cond is not None and running_cond.get("reason") in NOT_RUNNING_REASONS:
        cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, "PodsPending",
                      f"{len(running)} of {len(waiting)} unfinished replicas are running", now)


def refused_message(job_name: str, entries: Sequence[Mapping[str, Any]]) -> str:
    """The first refusal in full, which other replicas were refused, and when the next attempt is.

    ``entries`` sorted by replica name; each replica's own message is in ``status.replicaBackoff``.
    """
    others = [f"{job_name}-{e['replica']}" for e in entries[1:]]
    shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
    also = f"; also refused: {shown}" if others else ""
    return f"{entries[0]['message']}{also}; next attempt at {min(str(e['nextRetryTime']) for e in entries)}"


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


def _conclude(work: _Work, old_status: Mapping[str, Any], job_spec: Optional[spec_lib.JobSpec],
              views: Sequence[podview.PodView]) -> Plan:
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
    creating = [k for k in (podview.replica_key(p["metadata"]["labels"]) for p in plan.create_pods)
                if k is not None and not work.refused(k.short_name)]
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
    status["finishedReplicas"] = sorted(work.finished.values(), key=lambda r: (r["type"], r["index"]))
    observed_uids = {v.uid for v in views}
    status["restartedPods"] = sorted(({"name": n, "uid": u} for u, n in work.restarted_uids.items()
                                      if u in observed_uids), key=lambda r: (r["name"], r["uid"]))
    status["restarts"] = work.total_restarts()
    status["restartEpoch"] = work.epoch
    if work.ps_loss is not None:
        status["parameterServerLoss"] = work.ps_loss
    status["replicaBackoff"] = _backoff_to_keep(work, job_spec)
    status["observedGeneration"] = work.job["metadata"].get("generation", 0)
    if work.start_time is not None:
        status["startTime"] = cond_lib.format_time(work.start_time)
    if work.finished_now:
        status["completionTime"] = cond_lib.format_time(now)
    status["state"] = job_state(work.conditions)
    if job_spec is not None:
        workers = replica_statuses.get(RT.WORKER.value, {})
        ps = replica_statuses.get(RT.PS.value, {})
        status["workers"] = f"{workers.get('running', 0)}/{job_spec.replicas(RT.WORKER)}"
        status["ps"] = f"{ps.get('running', 0)}/{job_spec.replicas(RT.PS)}"
    if cond_lib.is_true(work.conditions, cond_lib.RUNNING) and not old_status.get("allPodsRunningTime"):
        status["allPodsRunningTime"] = cond_lib.format_time(now)
        created = cond_lib.parse_time(work.job["metadata"].get("creationTimestamp"))
        if created is not None:
            plan.all_running_seconds = max(0.0, (now - created).total_seconds())
    plan.status = None if status == dict(old_status) else status
    return plan


def _stuck_terminating(work: _Work, views: Sequence[podview.PodView]) -> None:
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


def _backoff_to_keep(work: _Work, job_spec: Optional[spec_lib.JobSpec]) -> list[Obj]:
    """The replicas still waiting, or that failed recently enough for the next failure to wait longer."""
    if job_spec is None or _finished(work.conditions):
        return []
    desired = {k.short_name for k in spec_lib.all_replicas(job_spec)}
    kept = [e for short, e in work.backoff.items() if short in desired and short not in work.finished
            and not policies.backoff_expired(e, work.retry_delay, work.now)]
    return sorted(kept, key=lambda e: str(e["replica"]))
