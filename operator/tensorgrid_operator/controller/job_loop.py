"""One loop per TrainingJob (a kopf daemon): read the job and what it owns, reconcile, apply, sleep until due.

Each pass reads the job (as last known, else a GET), makes sure its other objects exist
(``cluster.ensure_objects``), reads its pods and Services from kopf's indexes (or with a
consistent LIST while they lag the operator's own writes), resizes its PodGroup to its worker count, calls the pure
:func:`reconcile.reconcile` on a thread of its own, applies the plan
(``plan_application``), reads its PodGroup's status and its progress when due, and then
sleeps until something about the job changes or its next deadline, TTL or reading falls
due. Watch events only wake the loop (``registrations``), so bursts of pod events
coalesce into one reconcile and one job is never reconciled by two coroutines at once;
deadlines and TTLs fire on time because the loop sleeps exactly until them. An API
outage does not end the loop: it tries again after a growing delay.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import math
import time
from typing import Any, Optional, cast

import kopf

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.cluster import ensure_objects
from tensorgrid_operator.cluster import kube
from tensorgrid_operator.cluster import ps_standbys
from tensorgrid_operator.cluster import running_operator
from tensorgrid_operator import config
from tensorgrid_operator.controller import plan_application
from tensorgrid_operator.controller import progress_reader
from tensorgrid_operator.controller import state as state_lib
from tensorgrid_operator import metrics
from tensorgrid_operator.reconcile import observed
from tensorgrid_operator.reconcile import owned_objects
from tensorgrid_operator.reconcile import ps_takeover
from tensorgrid_operator.reconcile import reconcile
from tensorgrid_operator.reconcile import terminating

JobKey = tuple[str, str]
Obj = dict[str, Any]
JobIndex = kopf.Index[JobKey, Obj]
# Per job: (kind, name, controller owner's uid) of its NetworkPolicy and PodDisruptionBudget.
OwnedIndex = kopf.Index[JobKey, tuple[str, str, str]]
# States after which nothing happens to a job but its cleanup, which its pods' events wake, and its TTL.
FINISHED_STATES = ("Succeeded", "Failed")
# After an unexpected API error, try again after this long (doubling, capped).
ERROR_BACKOFF_SECONDS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


def _managed_here(spec: kopf.Spec, **_: Any) -> bool:
    """kopf filter: only jobs whose spec.managedBy is absent or names this operator get a daemon."""
    return spec_lib.managed_here(spec)


# No daemon, and so no finalizer, for a job another controller manages (spec.managedBy).
@kopf.daemon(spec_lib.GROUP, spec_lib.VERSION, spec_lib.PLURAL, cancellation_timeout=30.0, when=_managed_here)
async def job_daemon(*, stopped: kopf.DaemonStopped, namespace: Optional[str], name: str, logger: kopf.Logger,
                     memo: kopf.Memo, **kwargs: Any) -> None:
    """One loop per job: reconcile, then sleep until woken, a deadline, or the resync period."""
    # kopf passes each index (live) as the keyword of its function's name.
    pods_by_job, services_by_job = cast(JobIndex, kwargs["pods_by_job"]), cast(JobIndex, kwargs["services_by_job"])
    owned = (cast(OwnedIndex, kwargs["network_policies_by_job"]), cast(OwnedIndex, kwargs["disruption_budgets_by_job"]))
    operator = state_lib.operator_of(memo)
    key = (namespace or "", name)
    wake = asyncio.Event()
    operator.wakers[key] = wake

    async def wake_on_stop() -> None:
        await stopped.wait()
        wake.set()

    stop_watcher = asyncio.create_task(wake_on_stop())
    errors = 0
    try:
        while not stopped:
            wake.clear()
            try:
                delay = await _reconcile_once(operator, key, logger, pods_by_job, services_by_job, owned)
                errors = 0
            except kube.ConflictError:
                delay = 0.0
            except Exception as e:  # an API outage must not kill the job's loop
                operator.known_jobs.forget(key)
                delay = ERROR_BACKOFF_SECONDS[min(errors, len(ERROR_BACKOFF_SECONDS) - 1)]
                errors += 1
                # The first failure of a streak with its traceback (where it came from), the retries in a line.
                logger.warning("reconcile of %s/%s failed (%s: %s); retrying in %.1fs",
                               namespace, name, type(e).__name__, e, delay, exc_info=errors == 1)
            if delay is None:
                break
            if delay > 0:
                try:
                    await asyncio.wait_for(wake.wait(), timeout=None if math.isinf(delay) else delay)
                except asyncio.TimeoutError:
                    operator.known_jobs.forget(key)  # a timer or the resync: the job is read afresh
    finally:
        stop_watcher.cancel()
        if operator.wakers.get(key) is wake:
            del operator.wakers[key]
        operator.forget_job(key)


async def _reconcile_once(operator: running_operator.RunningOperator, key: JobKey, logger: kopf.Logger, pods_index: JobIndex,
                          services_index: JobIndex, owned: tuple[OwnedIndex, ...]) -> Optional[float]:
    """Read, decide (on a thread), apply. Returns seconds until the next reconcile is due (``math.inf``:
    only when woken); ``None`` once the job is gone."""
    namespace, name = key
    started = time.monotonic()
    try:
        k = operator.kube
        job = await operator.read_job(key)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return None
        job, held = await _ensure_job_objects(operator, key, job, [e for index in owned for e in index.get(key, [])])
        pods = [dict(p) for p in pods_index.get(key, [])]
        services = [dict(s) for s in services_index.get(key, [])]
        if observed.caught_up(operator.expectations.get(key), pods, services):
            operator.expectations.pop(key, None)
        else:
            # The watches have not shown this operator's last writes yet: a consistent read.
            metrics.CONSISTENT_READS.inc()
            pods, services = await asyncio.gather(operator.call(k.list_pods, namespace, name),
                                                  operator.call(k.list_services, namespace, name))
        # Read only when a standby could take over its PS: a job whose PS pods run costs no LIST.
        standbys = (await operator.call(k.list_standby_pods, namespace, name)
                    if ps_takeover.standbys_needed(job, pods) else [])
        # Before the plan adds or removes workers: the gang's size follows the worker count.
        await ensure_objects.resize_pod_group(k, operator.call, plan_application.say_on(job), job, pods,
                                              operator.job_objects.setdefault(key, owned_objects.Upkeep()),
                                              operator.settings.gang)
        now = datetime.datetime.now(datetime.timezone.utc)
        plan = await asyncio.get_running_loop().run_in_executor(operator.deciders, functools.partial(
            reconcile.reconcile, job, pods, services, now, plan_application.retry_delay(operator.settings),
            _stuck_policy(operator.settings), standbys))
        if operator.settings.verbose:
            logger.debug("plan for %s/%s: +%d pods, -%d pods, status %s", namespace, name,
                         len(plan.create_pods), len(plan.delete_pods), "changed" if plan.status else "same")
        job, requeue_after = await plan_application.apply(operator, key, job, plan, logger, held)
        job, group_after = await _read_pod_group(operator, key, job, pods)
        progress_after = await progress_reader.update_progress(operator, key, job, pods)
        finished = (job.get("status") or {}).get("state") in FINISHED_STATES
        reading_after = min((t for t in (progress_after, group_after) if t is not None), default=None)
        return next_reconcile_in(finished, requeue_after, reading_after, operator.settings.resync_seconds)
    finally:
        metrics.RECONCILE_DURATION.observe(time.monotonic() - started)


def next_reconcile_in(finished: bool, requeue_after: Optional[float], progress_after: Optional[float],
                      resync: float) -> float:
    """Seconds until a job is reconciled again if no event wakes it sooner.

    The earliest timer (a deadline, a TTL, a retry, the next progress or PodGroup reading), capped by the
    resync period. A finished job is not polled: it waits for its TTL, or for an event about
    it or its pods (``math.inf`` when it has no TTL), so thousands of finished jobs cost nothing.
    """
    due = [t for t in (requeue_after, progress_after) if t is not None]
    if finished:
        return max(min(due), 0.0) if due else math.inf
    return min(max(min(due), 0.0), resync) if due else resync


async def _ensure_job_objects(operator: running_operator.RunningOperator, key: JobKey, job: dict[str, Any],
                              indexed: list[tuple[str, str, str]]) -> tuple[dict[str, Any], Optional[str]]:
    """The job's NetworkPolicy, PS PodDisruptionBudget, PodGroup and cert-manager objects (ensure_objects):
    the job as it is now (its status may say why one is missing), and why its pods must wait, if so."""
    upkeep = operator.job_objects.setdefault(key, owned_objects.Upkeep())
    say = plan_application.say_on(job)
    await ensure_objects.job_objects(operator.kube, operator.call, say, job, indexed, upkeep,
                                     plan_application.job_object_settings(operator.settings))
    gang, certificates = operator.settings.gang, operator.settings.certificates
    await ps_standbys.ensure(operator.kube, operator.call, say, job, upkeep, operator.settings.network_policy,
                             certificates)
    # One after the other: each patch replaces the conditions, from the job as the last one left it.
    patch = await ensure_objects.pod_group(operator.kube, operator.call, say, job, upkeep, gang)
    if patch is not None:
        job = await operator.write_status(key, job, patch)
    patch = await ensure_objects.cert_manager_objects(operator.kube, operator.call, say, job, upkeep, certificates)
    if patch is not None:
        job = await operator.write_status(key, job, patch)
    return job, ensure_objects.why_pods_wait(job, upkeep, gang, certificates)


async def _read_pod_group(operator: running_operator.RunningOperator, key: JobKey, job: dict[str, Any],
                          pods: list[dict[str, Any]]) -> tuple[dict[str, Any], Optional[float]]:
    """The PodGroup's status into the job's, when due (ensure_objects.pod_group_status): the job as it is
    now, and seconds until the group is read next."""
    upkeep = operator.job_objects.setdefault(key, owned_objects.Upkeep())
    patch, after = await ensure_objects.pod_group_status(operator.kube, operator.call, plan_application.say_on(job), job, pods, upkeep,
                                                         operator.settings.gang)
    if patch is not None:
        job = await operator.write_status(key, job, patch)
    return job, after


def _stuck_policy(settings: config.Settings) -> terminating.StuckPolicy:
    return terminating.StuckPolicy(settings.stuck_terminating_seconds, settings.force_delete_stuck_pods)
