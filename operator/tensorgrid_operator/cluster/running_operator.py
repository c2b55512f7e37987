"""What a running operator holds between its startup and cleanup, and how it calls the API server.

Apart from ``controller`` (the kopf wiring) because it needs no kopf: the API client, the
thread pools for blocking API calls and for the pure reconcile, and the per-job
bookkeeping a pass reads and writes (each job as last known, what the last plans wrote
that the watches have not shown, the upkeep of a job's other objects, when its metrics
are read next). API calls go through :meth:`RunningOperator.call` onto the thread pool,
and a job's many calls through :meth:`RunningOperator.calls`, bounded so one big job
never fills the pool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import time
from typing import Any, Awaitable, Callable, Optional, Sequence, TypeVar

from tensorgrid_operator.api import conditions as cond_lib
from tensorgrid_operator.cluster import known_jobs
from tensorgrid_operator.cluster import kube
from tensorgrid_operator.cluster import tfjob_calls
from tensorgrid_operator import config
from tensorgrid_operator import metrics
from tensorgrid_operator.reconcile import jobstatus
from tensorgrid_operator.reconcile import observed
from tensorgrid_operator.reconcile import owned_objects
from tensorgrid_operator.reconcile import plans

T = TypeVar("T")
JobKey = tuple[str, str]
Obj = dict[str, Any]
# How often, at most, a job's status is written when only its counts of active and running pods changed.
PHASE_COUNTS_WRITE_SECONDS = 5.0


@dataclasses.dataclass
class RunningOperator:
    """What the operator holds between its startup and cleanup, and the API calls made through it."""

    settings: config.Settings
    kube: kube.Kube
    executor: concurrent.futures.ThreadPoolExecutor
    deciders: concurrent.futures.ThreadPoolExecutor
    """Threads that run ``reconcile.reconcile`` (apart from the API calls' threads)."""
    lag_watch: Optional["asyncio.Task[None]"] = None
    """The task measuring the event loop's lag (``looplag``)."""
    activity_watch: Optional["asyncio.Task[None]"] = None
    """The task keeping ``tensorgrid_operator_active`` (``controller.activity``)."""
    wakers: dict[JobKey, asyncio.Event] = dataclasses.field(default_factory=dict)
    known_jobs: known_jobs.KnownJobs = dataclasses.field(default_factory=known_jobs.KnownJobs)
    """Each job as last read or written, so a pass woken by its pods needs no GET of it."""
    phases: metrics.PhaseTracker = dataclasses.field(default_factory=metrics.PhaseTracker)
    expectations: dict[JobKey, observed.Expectations] = dataclasses.field(default_factory=dict)
    """Per job: what its last plans wrote that the indexes did not show yet."""
    job_objects: dict[JobKey, owned_objects.Upkeep] = dataclasses.field(default_factory=dict)
    """Per job: what this operator made and saw of its NetworkPolicy and PodDisruptionBudget."""
    progress_due: dict[JobKey, float] = dataclasses.field(default_factory=dict)
    """When (monotonic) each running job's metrics are read next."""
    status_written_at: dict[JobKey, float] = dataclasses.field(default_factory=dict)
    """When (monotonic) each job's status was last written by this operator."""
    managed_elsewhere: set[str] = dataclasses.field(default_factory=set)
    """uids of the jobs whose spec.managedBy names another controller, once said so."""
    tfjob_calls: Optional[tfjob_calls.TFJobCalls] = None
    """The calls of serving Kubeflow's TFJob (``--serve-tfjob``); ``None`` when it does not."""
    tfjob_wakers: dict[JobKey, asyncio.Event] = dataclasses.field(default_factory=dict)
    """Per TFJob: the event that wakes its loop (``controller.tfjob_loop``)."""

    def forget_job(self, key: JobKey) -> None:
        """Drops everything kept about a job whose loop ended (gone, or no longer this operator's):
        with thousands of jobs made and deleted, nothing of theirs may stay behind. ``wakers`` is
        the loop's own to drop (a newer loop of the job may have replaced it)."""
        self.known_jobs.drop(key)
        self.progress_due.pop(key, None)
        self.job_objects.pop(key, None)
        self.expectations.pop(key, None)
        self.status_written_at.pop(key, None)
        self.phases.set(key, None)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` (a blocking API call) on the operator's thread pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args))

    async def calls(self, coroutines: Sequence[Awaitable[T]]) -> list[T | BaseException]:
        """Many API calls of one job, at most half the pool's threads at a time (exceptions returned).

        A job of thousands of replicas queues thousands of creations at once: without a bound
        they fill the pool's queue, and every other job's reads and writes wait behind them.
        """
        limit = asyncio.Semaphore(max(1, self.settings.api_workers // 2))

        async def bounded(coroutine: Awaitable[T]) -> T:
            async with limit:
                return await coroutine

        return await asyncio.gather(*(bounded(c) for c in coroutines), return_exceptions=True)

    async def read_job(self, key: JobKey) -> Optional[Obj]:
        """The job as last read or written, else as the API server has it (``None``: gone)."""
        job = self.known_jobs.get(key)
        if job is None:
            changes = self.known_jobs.changes(key)
            job = await self.call(self.kube.get_job, *key)
            if job is not None:
                self.known_jobs.remember(key, job, changes)
        return job

    async def write_status(self, key: JobKey, job: Obj, status: Obj) -> Obj:
        """One status PATCH (``kube.Kube.patch_status``); the job it answers with is the one known.
        The conditions it writes were decided from ``job``: they carry its generation."""
        generation = (job.get("metadata") or {}).get("generation")
        if isinstance(status.get("conditions"), list) and isinstance(generation, int):
            status = {**status, "conditions": cond_lib.observed_at(status["conditions"], generation)}
        changes = self.known_jobs.changes(key)
        try:
            written = await self.call(self.kube.patch_status, job, status)
        except kube.ConflictError:
            self.known_jobs.forget(key)
            raise
        self.known_jobs.remember(key, written, changes, written=True)
        self.status_written_at[key] = time.monotonic()
        return written

    def phase_counts_wait(self, key: JobKey, job: Obj, plan: plans.Plan) -> float:
        """Seconds the plan's status should wait before it is written (0: write it now).

        A status whose only change is how many pods are active or running
        (``jobstatus.only_phase_counts_changed``) from a pass that changes nothing else is
        written at most every ``PHASE_COUNTS_WRITE_SECONDS``: the pods of a job start to run
        one by one, and a PATCH for each (and the watch event it makes) was most of a job's
        status writes at 1,000 jobs.
        """
        if plan.status is None or plan.has_actions or not jobstatus.only_phase_counts_changed(
                job.get("status") or {}, plan.status):
            return 0.0
        written = self.status_written_at.get(key)
        return 0.0 if written is None else max(0.0, written + PHASE_COUNTS_WRITE_SECONDS - time.monotonic())
