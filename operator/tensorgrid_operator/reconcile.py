"""Every decision the operator takes, as one pure function of what it observes.

``reconcile(job, pods, services, now)`` returns a :class:`Plan`: pods and Services to
create or delete, the new ``status`` (or ``None`` when nothing changed), the events
that explain each action, whether to delete the job (TTL), when to look again even
if nothing happens (deadlines, TTL), and which job-level transitions happened (for
metrics). It is level-triggered: it reads the whole observed state every time and
never relies on having seen a particular event, so running it twice, or after a
crash half-way through applying a plan, converges to the same place.

What must survive pods disappearing lives in ``status`` and is carried forward here:
the record of finished replicas (a completed pod that is deleted is never re-run),
restart counts (``backoffLimit`` bounds every retry), and the uids of failed pods
whose restart was already counted (a repeated reconcile does not count it twice).
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Iterable, Mapping, Optional, Sequence

from tensorgrid_operator import exitcodes
from tensorgrid_operator import manifests
from tensorgrid_operator import spec as spec_lib

Obj = dict[str, Any]
RT = spec_lib.ReplicaType

# Condition types, in the order a job usually meets them.
CREATED = "Created"
RUNNING = "Running"
RESTARTING = "Restarting"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
SUSPENDED = "Suspended"
CONDITION_TYPES = (CREATED, RUNNING, RESTARTING, SUCCEEDED, FAILED, SUSPENDED)

# Waiting reasons of a pending pod that will not go away by themselves.
STUCK_WAITING_REASONS = frozenset({
    "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
    "CreateContainerConfigError", "CreateContainerError",
})
UNSCHEDULABLE = "Unschedulable"
# Pods the cluster stopped, not the program: the kubelet's node-pressure evictions and
# graceful node shutdowns (phase Failed, reason below, often exit code 0 or 143), and
# any pod with the DisruptionTarget condition (preemption, eviction, taint manager).
# Like a Job's podFailurePolicy for DisruptionTarget, they are recreated without
# counting against backoffLimit.
DISRUPTION_REASONS = frozenset({"Evicted", "Terminated", "Shutdown", "NodeShutdown", "Preempted"})
DISRUPTION_TARGET = "DisruptionTarget"

# Replica types whose permanent failure fails the job (an evaluator's does not).
FATAL_TYPES = frozenset({RT.CHIEF, RT.WORKER, RT.PS})


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
    status: Optional[Obj] = None
    """The complete new status, or ``None`` when it did not change."""
    events: list[Event] = dataclasses.field(default_factory=list)
    delete_job: bool = False
    requeue_after: Optional[float] = None
    """Seconds until a deadline or TTL falls due; ``None`` when no timer is pending."""
    transitions: list[str] = dataclasses.field(default_factory=list)
    """Job-level transitions for metrics: ``created``, ``restarted``, ``succeeded``, ``failed``."""
    all_running_seconds: Optional[float] = None
    """Set once, when every pod first runs: seconds since the job was created."""

    @property
    def has_actions(self) -> bool:
        return bool(self.create_pods or self.create_services or self.delete_pods or self.delete_services
                    or self.delete_job)


# --- time -----------------------------------------------------------------------

def format_time(t: datetime.datetime) -> str:
    return t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: Optional[str]) -> Optional[datetime.datetime]:
    if not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


# --- conditions -----------------------------------------------------------------

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


# --- observed pods ----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PodView:
    """What the reconciler needs from one pod."""

    name: str
    uid: str
    key: Optional[spec_lib.ReplicaKey]
    phase: str
    terminating: bool
    exit_code: Optional[int]
    reason: str
    stuck_reason: str = ""
    stuck_message: str = ""
    disrupted: str = ""
    """Why the cluster stopped this pod (eviction, node shutdown, preemption); empty if it did not."""

    @property
    def active(self) -> bool:
        return self.phase not in ("Succeeded", "Failed") and not self.terminating


def _replica_key(labels: Mapping[str, str]) -> Optional[spec_lib.ReplicaKey]:
    by_task_type = {t.task_type: t for t in RT}
    rtype = by_task_type.get(labels.get(spec_lib.LABEL_REPLICA_TYPE, ""))
    index = labels.get(spec_lib.LABEL_REPLICA_INDEX, "")
    if rtype is None or not index.isdigit():
        return None
    return spec_lib.ReplicaKey(rtype, int(index))


def _main_container_status(pod: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    statuses: list[Mapping[str, Any]] = (pod.get("status") or {}).get("containerStatuses") or []
    main = manifests.main_container(pod.get("spec") or {})
    main_name = main.get("name") if main else None
    for cs in statuses:
        if cs.get("name") == main_name:
            return cs
    return statuses[0] if statuses else None


def _exit(pod: Mapping[str, Any]) -> tuple[Optional[int], str]:
    """The main container's exit code and reason; else the first failed container's."""
    status = pod.get("status") or {}
    candidates = [_main_container_status(pod)] + list(status.get("containerStatuses") or [])
    for cs in candidates:
        terminated = ((cs or {}).get("state") or {}).get("terminated") or {}
        if "exitCode" in terminated:
            return int(terminated["exitCode"]), str(terminated.get("reason") or "")
    return None, str(status.get("reason") or "")


def _stuck(pod: Mapping[str, Any]) -> tuple[str, str]:
    status = pod.get("status") or {}
    if status.get("phase", "Pending") != "Pending":
        return "", ""
    for cs in list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or []):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK_WAITING_REASONS:
            return str(waiting["reason"]), str(waiting.get("message") or "")
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" \
                and cond.get("reason") == UNSCHEDULABLE:
            return UNSCHEDULABLE, str(cond.get("message") or "")
    return "", ""


def _disruption(pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == DISRUPTION_TARGET and cond.get("status") == "True":
            return f"{cond.get('reason') or DISRUPTION_TARGET}: {cond.get('message') or 'disrupted'}"
    if status.get("phase") == "Failed" and status.get("reason") in DISRUPTION_REASONS:
        return f"{status['reason']}: {status.get('message') or 'stopped by the node'}"
    return ""


def view_pod(pod: Mapping[str, Any]) -> PodView:
    meta = pod.get("metadata") or {}
    exit_code, reason = _exit(pod)
    stuck_reason, stuck_message = _stuck(pod)
    return PodView(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        key=_replica_key(meta.get("labels") or {}),
        phase=(pod.get("status") or {}).get("phase") or "Pending",
        terminating=bool(meta.get("deletionTimestamp")),
        exit_code=exit_code,
        reason=reason,
        stuck_reason=stuck_reason,
        stuck_message=stuck_message,
        disrupted=_disruption(pod),
    )


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid and ref.get("controller")
               for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


# --- restart policy -----------------------------------------------------------------

def retry_verdict(policy: spec_lib.RestartPolicy, succeeded: bool, exit_code: Optional[int],
                  decides_success: bool) -> tuple[bool, str]:
    """Whether a replica that ended should run again, and why (for events and status).

    ``Always`` restarts a replica that exited 0 too, unless its success is what ends
    the job (the chief, or every worker under ``AllWorkers``): that exit is the
    job finishing, not something to undo.
    """
    if succeeded:
        if policy is spec_lib.RestartPolicy.ALWAYS and not decides_success:
            return True, "exited 0 and restartPolicy is Always"
        return False, "exited 0"
    code = "no exit code" if exit_code is None else f"exit code {exit_code}"
    if policy is spec_lib.RestartPolicy.NEVER:
        return False, f"{code}; restartPolicy is Never"
    if policy in (spec_lib.RestartPolicy.ON_FAILURE, spec_lib.RestartPolicy.ALWAYS):
        return True, f"{code}; restartPolicy is {policy.value}"
    verdict = exitcodes.classify(exit_code)
    if verdict is exitcodes.ExitClass.RETRYABLE:
        return True, f"{code} is retryable under restartPolicy ExitCode"
    return False, f"{code} is permanent under restartPolicy ExitCode"


def decides_success(job_spec: spec_lib.JobSpec, key: spec_lib.ReplicaKey) -> bool:
    if job_spec.success_policy is spec_lib.SuccessPolicy.ALL_WORKERS:
        return key.rtype in (RT.CHIEF, RT.WORKER)
    return key == spec_lib.chief_key(job_spec)


def success_reached(job_spec: spec_lib.JobSpec, finished: Mapping[str, Mapping[str, Any]]) -> Optional[str]:
    """The success message when the success policy is met, else ``None``. PS and Evaluator never decide."""
    def ok(key: spec_lib.ReplicaKey) -> bool:
        return finished.get(key.short_name, {}).get("outcome") == SUCCEEDED

    if job_spec.success_policy is spec_lib.SuccessPolicy.ALL_WORKERS:
        deciders = [k for k in spec_lib.all_replicas(job_spec) if k.rtype in (RT.CHIEF, RT.WORKER)]
        if deciders and all(ok(k) for k in deciders):
            return f"all {len(deciders)} chief and worker replicas succeeded"
        return None
    chief = spec_lib.chief_key(job_spec)
    if chief is not None and ok(chief):
        return f"{chief.short_name} succeeded"
    return None


# --- the reconciler ------------------------------------------------------------------

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
    start_time: Optional[datetime.datetime] = None
    """The startTime to write, when this reconcile (re)starts the active clock."""
    finished_now: bool = False
    """Whether the job reached Succeeded or Failed in this reconcile."""

    def event(self, etype: str, reason: str, message: str) -> None:
        self.plan.events.append(Event(etype, reason, message))

    def total_restarts(self) -> int:
        return sum(self.restarts.values())

    def delete_pod(self, view: PodView) -> None:
        if (view.name, view.uid) not in self.plan.delete_pods:
            self.plan.delete_pods.append((view.name, view.uid))


def reconcile(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], services: Iterable[Mapping[str, Any]],
              now: datetime.datetime) -> Plan:
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
    )
    owned = [p for p in pods if _owned_by(p, meta["uid"])]
    foreign_names = {(p.get("metadata") or {}).get("name") for p in pods if not _owned_by(p, meta["uid"])}
    views = [view_pod(p) for p in owned]
    own_services = {s["metadata"]["name"] for s in services if _owned_by(s, meta["uid"])}
    foreign_names |= {s["metadata"]["name"] for s in services if not _owned_by(s, meta["uid"])}

    try:
        job_spec = spec_lib.parse_spec(job.get("spec") or {})
    except ValueError as e:
        if not (is_true(work.conditions, FAILED) or is_true(work.conditions, SUCCEEDED)):
            _finish(work, None, views, own_services, FAILED, "InvalidSpec", str(e))
        return _conclude(work, old_status, None, views)

    if is_true(work.conditions, SUCCEEDED) or is_true(work.conditions, FAILED):
        _after_finish(work, job_spec, views, own_services)
        return _conclude(work, old_status, job_spec, views)

    desired = {k.short_name: k for k in spec_lib.all_replicas(job_spec)}
    _delete_undesired(work, views, own_services, desired)

    if job_spec.run_policy.suspend:
        _suspend(work, views, own_services)
        return _conclude(work, old_status, job_spec, views)

    start_time = parse_time(old_status.get("startTime"))
    if is_true(work.conditions, SUSPENDED):
        set_condition(work.conditions, SUSPENDED, False, "Resumed", "the job was resumed", now)
        work.event("Normal", "Resumed", "spec.runPolicy.suspend is false: recreating the job's pods")
        start_time = None  # the active deadline counts from the resume
    if start_time is None:
        start_time = now
    work.start_time = start_time

    deadline = job_spec.run_policy.active_deadline_seconds
    if deadline is not None:
        due = start_time + datetime.timedelta(seconds=deadline)
        if now >= due:
            _finish(work, job_spec, views, own_services, FAILED, "DeadlineExceeded",
                    f"the job ran longer than activeDeadlineSeconds ({deadline}s)", stop_all=True)
            return _conclude(work, old_status, job_spec, views)
        plan.requeue_after = (due - now).total_seconds()

    by_name = {v.key.short_name: v for v in views if v.key is not None}
    restart_job_reason = _observe_outcomes(work, job_spec, desired, by_name)

    outcome = _outcome(work, job_spec)
    if outcome is not None:
        ctype, reason, message = outcome
        _finish(work, job_spec, views, own_services, ctype, reason, message)
        return _conclude(work, old_status, job_spec, views)

    if restart_job_reason:
        for view in views:
            if view.active or (view.phase == "Failed" and not view.terminating):
                work.delete_pod(view)
        set_condition(work.conditions, RESTARTING, True, "JobRestarting", restart_job_reason, now)
        set_condition(work.conditions, RUNNING, False, "JobRestarting", restart_job_reason, now)
        work.event("Warning", "JobRestarting", restart_job_reason)
        plan.transitions.append("restarted")

    _create_missing(work, job_spec, desired, by_name, own_services, foreign_names)
    _running_conditions(work, job_spec, desired, by_name)
    return _conclude(work, old_status, job_spec, views)


def _observe_outcomes(work: _Work, job_spec: spec_lib.JobSpec, desired: Mapping[str, spec_lib.ReplicaKey],
                      by_name: Mapping[str, PodView]) -> str:
    """Record finished replicas and schedule restarts; returns why the whole job restarts, if it does."""
    restart_job_reason = ""
    limit = job_spec.run_policy.backoff_limit
    for short, key in desired.items():
        view = by_name.get(short)
        if view is None or view.terminating or short in work.finished or view.phase not in ("Succeeded", "Failed"):
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
        retry, why = retry_verdict(policy, succeeded, view.exit_code, decides_success(job_spec, key))
        if retry and restart_job_reason:
            work.restarted_uids[view.uid] = view.name  # goes down with the whole-job restart, uncounted
            continue
        if retry and work.total_restarts() >= limit:
            _record(work, key, view, FAILED, "BackoffLimitExceeded",
                    f"{why}, but the job already used its {limit} retries (backoffLimit)")
            continue
        if not retry:
            outcome = SUCCEEDED if succeeded else FAILED
            reason = "Completed" if succeeded else (view.reason or "Error")
            _record(work, key, view, outcome, reason, why)
            continue
        work.restarts[key.rtype.value] = work.restarts.get(key.rtype.value, 0) + 1
        work.restarted_uids[view.uid] = view.name
        work.delete_pod(view)
        if key.rtype is RT.PS:
            restart_job_reason = (f"{view.name} ended ({why}): a parameter server's state is gone, so every pod "
                                  f"is recreated and training resumes from the latest checkpoint "
                                  f"(retry {work.total_restarts()} of {limit})")
        else:
            message = f"restarting {view.name}: {why} (retry {work.total_restarts()} of {limit})"
            set_condition(work.conditions, RESTARTING, True, "ReplicaRestarting", message, work.now)
            set_condition(work.conditions, RUNNING, False, "ReplicaRestarting", message, work.now)
            work.event("Warning", "ReplicaRestarting", message)
            work.plan.transitions.append("restarted")
    return restart_job_reason


def _record(work: _Work, key: spec_lib.ReplicaKey, view: PodView, outcome: str, reason: str, message: str) -> None:
    record: Obj = {"replica": key.short_name, "type": key.rtype.value, "index": key.index, "outcome": outcome,
                   "reason": reason, "message": message, "podUID": view.uid, "finishedTime": format_time(work.now)}
    if view.exit_code is not None:
        record["exitCode"] = view.exit_code
    work.finished[key.short_name] = record
    if outcome == FAILED:
        work.event("Warning", "ReplicaFailed", f"{view.name} failed: {message}")
    else:
        work.event("Normal", "ReplicaSucceeded", f"{view.name} succeeded")


def _outcome(work: _Work, job_spec: spec_lib.JobSpec) -> Optional[tuple[str, str, str]]:
    for record in sorted(work.finished.values(), key=lambda r: (r["type"], r["index"])):
        if record["outcome"] == FAILED and RT(record["type"]) in FATAL_TYPES:
            reason = "BackoffLimitExceeded" if record["reason"] == "BackoffLimitExceeded" else "ReplicaFailed"
            return FAILED, reason, f"{record['replica']} failed: {record['message']}"
    message = success_reached(job_spec, work.finished)
    if message is not None:
        return SUCCEEDED, "JobSucceeded", message
    return None


def _delete_undesired(work: _Work, views: Sequence[PodView], services: set[str],
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


def _suspend(work: _Work, views: Sequence[PodView], services: set[str]) -> None:
    doomed = [v for v in views if v.active]
    for view in doomed:
        work.delete_pod(view)
    doomed_services = sorted(s for s in services if s in {v.name for v in doomed})
    work.plan.delete_services.extend(doomed_services)
    if set_condition(work.conditions, SUSPENDED, True, "Suspended", "spec.runPolicy.suspend is true", work.now):
        work.event("Normal", "Suspended", "spec.runPolicy.suspend is true: the job's pods are deleted")
    set_condition(work.conditions, RUNNING, False, "Suspended", "the job is suspended", work.now)
    set_condition(work.conditions, RESTARTING, False, "Suspended", "the job is suspended", work.now)
    if doomed:
        work.event("Normal", "DeletedPods", f"suspended: deleted pods {', '.join(v.name for v in doomed)}")


def _finish(work: _Work, job_spec: Optional[spec_lib.JobSpec], views: Sequence[PodView], services: set[str],
            ctype: str, reason: str, message: str, stop_all: bool = False) -> None:
    now = work.now
    set_condition(work.conditions, ctype, True, reason, message, now)
    set_condition(work.conditions, RUNNING, False, reason, f"the job {ctype.lower()}", now)
    set_condition(work.conditions, RESTARTING, False, reason, f"the job {ctype.lower()}", now)
    work.event("Normal" if ctype == SUCCEEDED else "Warning", reason, message)
    work.plan.transitions.append(ctype.lower())
    work.finished_now = True
    if stop_all:
        stopped = [v for v in views if v.active]
        for view in stopped:
            work.delete_pod(view)
        if stopped:
            work.event("Normal", "DeletedPods", f"stopped the job's running pods: {', '.join(v.name for v in stopped)}")
    if job_spec is not None:
        _clean_pods(work, job_spec, views, services)
        _ttl(work, job_spec, now)


def _after_finish(work: _Work, job_spec: spec_lib.JobSpec, views: Sequence[PodView], services: set[str]) -> None:
    """A finished job only cleans up (idempotently) and waits for its TTL."""
    _clean_pods(work, job_spec, views, services)
    _ttl(work, job_spec, parse_time((work.job.get("status") or {}).get("completionTime")) or work.now)


def _clean_pods(work: _Work, job_spec: spec_lib.JobSpec, views: Sequence[PodView], services: set[str]) -> None:
    policy = job_spec.run_policy.clean_pod_policy
    if policy is spec_lib.CleanPodPolicy.NONE:
        return
    if policy is spec_lib.CleanPodPolicy.ALL:
        doomed = [v for v in views if not v.terminating]
        doomed_services = sorted(services)
    else:
        doomed = [v for v in views if v.active]
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
        work.plan.requeue_after = (due - work.now).total_seconds()


def _create_missing(work: _Work, job_spec: spec_lib.JobSpec, desired: Mapping[str, spec_lib.ReplicaKey],
                    by_name: Mapping[str, PodView], services: set[str], foreign_names: set[Any]) -> None:
    job = work.job
    deleting = {name for name, _ in work.plan.delete_pods}
    created_pods: list[str] = []
    created_services: list[str] = []
    for short, key in desired.items():
        name = spec_lib.pod_name(job["metadata"]["name"], key)
        if name in foreign_names:
            continue  # an object of an earlier job of this name still waits for garbage collection
        if name not in services:
            work.plan.create_services.append(manifests.build_service(job, job_spec, key))
            created_services.append(name)
        if short in work.finished or short in by_name or name in deleting:
            continue
        work.plan.create_pods.append(manifests.build_pod(job, job_spec, key))
        created_pods.append(name)
    if created_pods:
        work.event("Normal", "CreatedPods", f"created pods {', '.join(created_pods)}")
    if created_services:
        work.event("Normal", "CreatedServices", f"created headless services {', '.join(created_services)}")
    if created_pods and not is_true(work.conditions, CREATED):
        set_condition(work.conditions, CREATED, True, "PodsCreated",
                      f"created {len(created_pods)} pods and their headless services", work.now)
        work.plan.transitions.append("created")


def _running_conditions(work: _Work, job_spec: spec_lib.JobSpec, desired: Mapping[str, spec_lib.ReplicaKey],
                        by_name: Mapping[str, PodView]) -> None:
    """Running when every unfinished replica's pod runs; else say why not, if a pod is stuck."""
    now = work.now
    deleting = {name for name, _ in work.plan.delete_pods}
    waiting = [s for s in desired if s not in work.finished]
    running = [s for s in waiting if s in by_name and by_name[s].phase == "Running"
               and by_name[s].name not in deleting and not by_name[s].terminating]
    stuck = [by_name[s] for s in waiting if s in by_name and by_name[s].stuck_reason]
    if waiting and len(running) == len(waiting):
        message = f"all {len(waiting)} unfinished replicas are running"
        if set_condition(work.conditions, RUNNING, True, "AllPodsRunning", message, now):
            work.event("Normal", "Running", message)
        if get_condition(work.conditions, RESTARTING) is not None:
            set_condition(work.conditions, RESTARTING, False, "AllPodsRunning", message, now)
        return
    if stuck:
        reason = stuck[0].stuck_reason
        message = _stuck_message(stuck)
        previous = get_condition(work.conditions, RUNNING)
        if previous is None or previous.get("reason") != reason:
            work.event("Warning", reason, message)
        set_condition(work.conditions, RUNNING, False, reason, message, now)
        return
    running_cond = get_condition(work.conditions, RUNNING)
    if running_cond is not None and running_cond.get("status") == "True":
        message = f"{len(running)} of {len(waiting)} unfinished replicas are running"
        set_condition(work.conditions, RUNNING, False, "PodsNotRunning", message, now)
    elif running_cond is not None and running_cond.get("reason") in (UNSCHEDULABLE, *STUCK_WAITING_REASONS):
        set_condition(work.conditions, RUNNING, False, "PodsPending",
                      f"{len(running)} of {len(waiting)} unfinished replicas are running", now)


def _stuck_message(stuck: Sequence[PodView]) -> str:
    """``pods a, b: Unschedulable: <scheduler's message>``, one clause per distinct cause."""
    groups: dict[tuple[str, str], list[str]] = {}
    for view in stuck:
        groups.setdefault((view.stuck_reason, view.stuck_message), []).append(view.name)
    clauses = []
    for (reason, detail), names in groups.items():
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        clauses.append(f"{'pod' if len(names) == 1 else 'pods'} {shown}: {reason}" + (f": {detail}" if detail else ""))
    return "; ".join(clauses)


def _state(conditions: Sequence[Mapping[str, Any]]) -> str:
    """The State printer column: the most telling true condition, or why pods are stuck."""
    for ctype in (FAILED, SUCCEEDED, SUSPENDED, RESTARTING, RUNNING):
        if is_true(conditions, ctype):
            return ctype
    running = get_condition(conditions, RUNNING)
    if running is not None and running.get("reason") in (UNSCHEDULABLE, *STUCK_WAITING_REASONS):
        return str(running["reason"])
    return CREATED if is_true(conditions, CREATED) else "Pending"


def _conclude(work: _Work, old_status: Mapping[str, Any], job_spec: Optional[spec_lib.JobSpec],
              views: Sequence[PodView]) -> Plan:
    """Assemble the new status; keep ``plan.status`` ``None`` when it equals the old one."""
    now, plan = work.now, work.plan
    deleting = {uid for _, uid in plan.delete_pods}
    live = [v for v in views if v.key is not None and not v.terminating and v.uid not in deleting]
    replica_statuses: dict[str, Obj] = {}
    types = [t for t in spec_lib.REPLICA_TYPES if job_spec is not None and t in job_spec.replica_specs]
    # Pods created by this plan count as active already, so the next reconcile, which
    # sees them Pending, finds the status unchanged and writes nothing.
    creating = [_replica_key(p["metadata"]["labels"]) for p in plan.create_pods]
    for rtype in types:
        records = [r for r in work.finished.values() if r["type"] == rtype.value]
        replica_statuses[rtype.value] = {
            "active": sum(1 for v in live if v.key is not None and v.key.rtype is rtype and v.active)
            + sum(1 for k in creating if k is not None and k.rtype is rtype),
            "running": sum(1 for v in live if v.key is not None and v.key.rtype is rtype and v.phase == "Running"),
            "succeeded": sum(1 for r in records if r["outcome"] == SUCCEEDED),
            "failed": sum(1 for r in records if r["outcome"] == FAILED),
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
    status["observedGeneration"] = work.job["metadata"].get("generation", 0)
    if work.start_time is not None:
        status["startTime"] = format_time(work.start_time)
    if work.finished_now:
        status["completionTime"] = format_time(now)
    status["state"] = _state(work.conditions)
    if job_spec is not None:
        workers = replica_statuses.get(RT.WORKER.value, {})
        ps = replica_statuses.get(RT.PS.value, {})
        status["workers"] = f"{workers.get('running', 0)}/{job_spec.replicas(RT.WORKER)}"
        status["ps"] = f"{ps.get('running', 0)}/{job_spec.replicas(RT.PS)}"
    if is_true(work.conditions, RUNNING) and not old_status.get("allPodsRunningTime"):
        status["allPodsRunningTime"] = format_time(now)
        created = parse_time(work.job["metadata"].get("creationTimestamp"))
        if created is not None:
            plan.all_running_seconds = max(0.0, (now - created).total_seconds())
    plan.status = None if status == dict(old_status) else status
    return plan


def rejected_status(job: Mapping[str, Any], pod_name: str, message: str, now: datetime.datetime) -> tuple[Obj, Event]:
    """The job failed because the API server refused one of its pods (an invalid template).

    Retrying cannot help: the template is the same every time.
    """
    status: Obj = dict(job.get("status") or {})
    conditions = [dict(c) for c in status.get("conditions") or []]
    text = f"the API server rejected pod {pod_name}: {message}"
    set_condition(conditions, FAILED, True, "PodTemplateRejected", text, now)
    set_condition(conditions, RUNNING, False, "PodTemplateRejected", "the job failed", now)
    status["conditions"] = conditions
    status["completionTime"] = format_time(now)
    status["state"] = _state(conditions)
    return status, Event("Warning", "PodTemplateRejected", text)
