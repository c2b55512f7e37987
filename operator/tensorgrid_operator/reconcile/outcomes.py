"""What the job's policies do in a reconcile pass: to a replica that ended, and to the job when it ends.

Everything a new policy touches, apart from the flow of the pass (``reconcile``) and the
status it writes (``jobstatus``): a replica that ended is recorded as finished, restarted
(counted against ``backoffLimit``, with its retry delay), recreated alone after a
disruption, or recreated as collateral of a parameter server's loss; the job then
succeeds or fails by its success policy; a finished job is cleaned up and deleted after
its TTL; a suspended one loses its pods. The verdicts themselves (retry or not, how long
to wait, who decides success) are small pure functions in ``policies``; this module
applies them to the pass's :class:`plans.Work`.
"""

from __future__ import annotations

import datetime
from typing import Any, Mapping, Optional, Sequence

from tensorgrid_operator.api import conditions as cond_lib
from tensorgrid_operator.api import pod_failure_policy
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import plans
from tensorgrid_operator.reconcile import podview
from tensorgrid_operator.reconcile import policies
from tensorgrid_operator.resources import kueue

# The reasons of restarts not counted against backoffLimit (tensorgrid_operator_replica_restarts_total).
RESTART_DISRUPTED = "Disrupted"
RESTART_PS_LOST = "ParameterServerLost"

Obj = dict[str, Any]
RT = spec_lib.ReplicaType
# What happens when a parameter server is lost, however it was lost (docs/operator.md, "PS failures").
PS_RECOVERY = ("the parameter server is recreated alone; the chief restores the latest checkpoint into it and "
               "the workers reconnect")


def delete_old_epochs(work: plans.Work, views: Sequence[podview.PodView], announce: bool) -> None:
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


def note_ps_loss(work: plans.Work, desired: Mapping[str, spec_lib.ReplicaKey],
                  by_name: Mapping[str, podview.PodView]) -> None:
    """Remember when a parameter server of a job that ran was last seen down (``status.parameterServerLoss``)."""
    if not (work.job.get("status") or {}).get("allPodsRunningTime"):
        return  # a PS still starting up is not a loss: workers failing then are judged as usual
    down = sorted(spec_lib.pod_name(work.job["metadata"]["name"], key) for short, key in desired.items()
                  if key.rtype is RT.PS and short not in work.finished and policies.ps_down(by_name.get(short)))
    if down:
        work.ps_loss = {"replicas": down, "lastSeenDown": cond_lib.format_time(work.now)}


def observe_outcomes(work: plans.Work, job_spec: spec_lib.JobSpec, desired: Mapping[str, spec_lib.ReplicaKey],
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
        rule = None if succeeded else pod_failure_policy.first_match(
            job_spec.replica_specs[key.rtype].pod_failure_policy,
            pod_failure_policy.FailedPod(short, view.container_exit_codes, view.pod_conditions))
        if rule is not None and rule.action is pod_failure_policy.Action.FAIL_JOB:
            # The job's Failed condition and its event (job_outcome, finish) say it, naming the rule.
            _record(work, key, view, cond_lib.FAILED, pod_failure_policy.REASON, rule.message, event=False)
            continue
        if rule is not None and rule.action is pod_failure_policy.Action.IGNORE:
            work.delete_pod(view)
            entry = work.back_off(short, pod_failure_policy.REASON, rule.message)
            message = (f"{rule.message}: recreating {view.name}, not counted against backoffLimit; "
                       f"{policies.retry_note(entry, work.now)}")
            cond_lib.set_condition(work.conditions, cond_lib.RESTARTING, True, pod_failure_policy.REASON, message,
                                   work.now)
            work.event("Normal", pod_failure_policy.REASON, message)
            work.plan.transitions.append(plans.Transition("restarted", pod_failure_policy.REASON, key.rtype.value))
            continue
        if rule is None and not succeeded and view.disrupted and policy is not spec_lib.RestartPolicy.NEVER:
            # Recreated alone, as a deleted pod is; the runtime reconnects to a new PS.
            work.delete_pod(view)
            work.event("Normal", "ReplicaDisrupted",
                       f"recreating {view.name}, stopped by the cluster ({view.disrupted}); "
                       f"not counted against backoffLimit")
            work.plan.transitions.append(plans.Transition("restarted", RESTART_DISRUPTED, key.rtype.value))
            continue
        collateral = "" if rule is not None else policies.collateral_of_ps_loss(key, policy, succeeded, work.ps_loss,
                                                                                work.now)
        if collateral:
            # A worker that failed because its parameter server went away: recreated, not counted.
            work.delete_pod(view)
            entry = work.back_off(short, "ReplicaRestarting", collateral)
            message = f"restarting {view.name}: {collateral}; {policies.retry_note(entry, work.now)}"
            cond_lib.set_condition(work.conditions, cond_lib.RESTARTING, True, "ReplicaRestarting", message, work.now)
            work.event("Normal", "ReplicaRestarting", message)
            work.plan.transitions.append(plans.Transition("restarted", RESTART_PS_LOST, key.rtype.value))
            continue
        if rule is not None and rule.action is pod_failure_policy.Action.RETRY:
            retry, why = True, f"{rule.message}: retried whatever restartPolicy {policy.value} says"
        else:
            retry, why = policies.retry_verdict(policy, succeeded, view.exit_code,
                                                policies.decides_success(job_spec, key))
            if rule is not None:  # Count: the built-in verdict, but no disruption or collateral exemption
                why = f"{rule.message}: counted; {why}"
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
        reason = "ReplicaRestarting" if rule is None else pod_failure_policy.REASON
        cond_lib.set_condition(work.conditions, cond_lib.RESTARTING, True, reason, message, work.now)
        cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, reason, message, work.now)
        work.event("Warning", reason, message)
        work.plan.transitions.append(plans.Transition(
            "restarted", (view.reason or "Error") if rule is None else pod_failure_policy.REASON, key.rtype.value))


def _record(work: plans.Work, key: spec_lib.ReplicaKey, view: podview.PodView, outcome: str, reason: str,
            message: str, event: bool = True) -> None:
    record: Obj = {"replica": key.short_name, "type": key.rtype.value, "index": key.index, "outcome": outcome,
                   "reason": reason, "message": message,
                   "finishedTime": cond_lib.format_time(work.now)}
    if view.exit_code is not None:
        record["exitCode"] = view.exit_code
    work.finished[key.short_name] = record
    if not event:
        return
    if outcome == cond_lib.FAILED:
        work.event("Warning", "ReplicaFailed", f"{view.name} failed: {message}")
    else:
        work.event("Normal", "ReplicaSucceeded", f"{view.name} succeeded")


def job_outcome(work: plans.Work, job_spec: spec_lib.JobSpec) -> Optional[tuple[str, str, str]]:
    """(condition, reason, message) of the job when it ends now; ``None`` while it goes on."""
    for record in sorted(work.finished.values(), key=lambda r: (r["type"], r["index"])):
        if record["outcome"] == cond_lib.FAILED and record["reason"] == pod_failure_policy.REASON:
            return cond_lib.FAILED, pod_failure_policy.REASON, record["message"]  # FailJob: whatever the type
    for record in sorted(work.finished.values(), key=lambda r: (r["type"], r["index"])):
        if record["outcome"] == cond_lib.FAILED and RT(record["type"]) in policies.FATAL_TYPES:
            reason = "BackoffLimitExceeded" if record["reason"] == "BackoffLimitExceeded" else "ReplicaFailed"
            return cond_lib.FAILED, reason, f"{record['replica']} failed: {record['message']}"
    message = policies.success_reached(job_spec, work.finished)
    if message is not None:
        return cond_lib.SUCCEEDED, "JobSucceeded", message
    return None



def suspend(work: plans.Work, job_spec: spec_lib.JobSpec, views: Sequence[podview.PodView], services: set[str]) -> None:
    """Delete the unfinished replicas' pods; restart counts and retry delays stay as they are."""
    work.suspended = True
    doomed = [v for v in views if v.active]
    for view in doomed:
        work.delete_pod(view)
    doomed_names = {v.name for v in doomed}
    doomed_services = sorted(s for s in services if s in doomed_names)
    work.plan.delete_services.extend(doomed_services)
    message = f"{job_spec.suspended_by} is true"
    if kueue.queue_name(work.job) is not None:
        # Kueue admits this job's pods, not the job: nothing would ever resume it.
        message += (f"; Kueue does not resume TrainingJobs: set it to false to let queue "
                    f"{kueue.queue_name(work.job)} admit the job's pods")
    if cond_lib.set_condition(work.conditions, cond_lib.SUSPENDED, True, "Suspended", message, work.now):
        work.event("Normal", "Suspended", f"{message}: the job's pods are deleted")
    cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, "Suspended", "the job is suspended", work.now)
    cond_lib.set_condition(work.conditions, cond_lib.RESTARTING, False, "Suspended", "the job is suspended", work.now)
    if doomed:
        work.event("Normal", "DeletedPods", f"suspended: deleted pods {', '.join(v.name for v in doomed)}")



def finish(work: plans.Work, job_spec: Optional[spec_lib.JobSpec], views: Sequence[podview.PodView], services: set[str],
            ctype: str, reason: str, message: str, stop_all: bool = False) -> None:
    now = work.now
    cond_lib.set_condition(work.conditions, ctype, True, reason, message, now)
    cond_lib.set_condition(work.conditions, cond_lib.RUNNING, False, reason, f"the job {ctype.lower()}", now)
    cond_lib.set_condition(work.conditions, cond_lib.RESTARTING, False, reason, f"the job {ctype.lower()}", now)
    work.event("Normal" if ctype == cond_lib.SUCCEEDED else "Warning", reason, message)
    work.plan.transitions.append(plans.Transition(ctype.lower(), reason if ctype == cond_lib.FAILED else ""))
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


def after_finish(work: plans.Work, job_spec: spec_lib.JobSpec, views: Sequence[podview.PodView],
                  services: set[str]) -> None:
    """A finished job only cleans up (idempotently) and waits for its TTL."""
    _clean_pods(work, job_spec, views, services)
    _ttl(work, job_spec, cond_lib.parse_time((work.job.get("status") or {}).get("completionTime")) or work.now)


def _clean_pods(work: plans.Work, job_spec: spec_lib.JobSpec, views: Sequence[podview.PodView], services: set[str]) -> None:
    policy = job_spec.run_policy.clean_pod_policy
    if policy is spec_lib.CleanPodPolicy.NONE:
        return
    if policy is spec_lib.CleanPodPolicy.ALL:
        doomed = [v for v in views if not v.terminating]
        doomed_services = sorted(services)
    else:
        doomed = [v for v in views if v.pod_running]
        doomed_names = {v.name for v in doomed}
        doomed_services = sorted(s for s in services if s in doomed_names)
    fresh = [v for v in doomed if not work.deleting(v)]
    for view in doomed:
        work.delete_pod(view)
    work.delete_services(doomed_services)
    if fresh:
        work.event("Normal", "CleanedUp",
                   f"cleanPodPolicy {policy.value}: deleted pods {', '.join(v.name for v in fresh)}")


def _ttl(work: plans.Work, job_spec: spec_lib.JobSpec, completed: datetime.datetime) -> None:
    ttl = job_spec.run_policy.ttl_seconds_after_finished
    if ttl is None:
        return
    due = completed + datetime.timedelta(seconds=ttl)
    if work.now >= due:
        work.plan.delete_job = True
        work.event("Normal", "TTLExpired", f"deleting the job: ttlSecondsAfterFinished ({ttl}s) passed")
    else:
        work.requeue((due - work.now).total_seconds())

