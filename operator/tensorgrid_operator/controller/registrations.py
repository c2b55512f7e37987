"""The kopf wiring: watch TrainingJobs, their pods and Services, and apply reconcile plans.

The only module that imports kopf. Each TrainingJob gets one kopf daemon: a loop that
reads the job, its pods and its Services, calls :func:`reconcile.reconcile`, applies
the plan (status first, in one PATCH; then deletions; then creations), and sleeps
until something about the job changes or its next deadline or TTL falls due. Watch
events only wake that loop, so bursts of pod events coalesce into one reconcile and
one job is never reconciled by two coroutines at once. Deadlines and TTLs fire on
time because the loop sleeps exactly until them.

An operator's state (its settings, API client, thread pool, per-job bookkeeping and
/metrics server) is one :class:`OperatorState` that kopf hands to every handler in its
memo (``memo_for``): nothing lives in module globals, so two operators can run in one
process (the tests do) without sharing anything but the Prometheus registry.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import datetime
import functools
import logging
import math
import random
import time
import urllib.error
import urllib.request
from typing import Any, Optional, cast

import kopf

from tensorgrid_operator.cluster import certificate_secrets
from tensorgrid_operator.api import conditions as cond_lib
from tensorgrid_operator import config
from tensorgrid_operator.reconcile import creation
from tensorgrid_operator.cluster import ensure_objects
from tensorgrid_operator.reconcile import indexed
from tensorgrid_operator.resources import jobobjects
from tensorgrid_operator.cluster import kube
from tensorgrid_operator.resources import kueue
from tensorgrid_operator.controller import looplag
from tensorgrid_operator.resources import manifests
from tensorgrid_operator import metrics
from tensorgrid_operator.reconcile import observed
from tensorgrid_operator.cluster import running_operator
from tensorgrid_operator.reconcile import owned_objects
from tensorgrid_operator.reconcile import plans
from tensorgrid_operator.resources import podgroups
from tensorgrid_operator.reconcile import policies
from tensorgrid_operator.reconcile import progress
from tensorgrid_operator.reconcile import reconcile
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import terminating

JobKey = tuple[str, str]
Obj = dict[str, Any]
JobIndex = kopf.Index[JobKey, Obj]
# Per job: (kind, name, controller owner's uid) of its NetworkPolicy and PodDisruptionBudget.
OwnedIndex = kopf.Index[JobKey, tuple[str, str, str]]

# States in which the job's metrics are read into status.progress.
PROGRESS_STATES = ("Running", "Restarting")
# States after which nothing happens to a job but its cleanup, which its pods' events wake, and its TTL.
FINISHED_STATES = ("Succeeded", "Failed")
# Threads that run the pure reconcile, off the event loop: a job of thousands of replicas takes
# long enough to decide that on the loop it would stall the watches, /healthz and every other job.
RECONCILE_THREADS = 2
# After an unexpected API error, try again after this long (doubling, capped).
ERROR_BACKOFF_SECONDS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


# The key of the OperatorState in kopf's memo.
MEMO_KEY = "tensorgrid"


@dataclasses.dataclass
class OperatorState:
    """One operator: its settings, and what it holds while it runs."""

    settings: config.Settings
    running: Optional[running_operator.RunningOperator] = None
    """The API client, thread pool and per-job state, from startup to cleanup."""
    metrics_server: Optional[metrics.MetricsServer] = None
    """The /metrics endpoint, from startup to cleanup (none with ``metrics_port=None``)."""

    @property
    def metrics_port(self) -> Optional[int]:
        """The port /metrics is served on, once the operator started."""
        return self.metrics_server.port if self.metrics_server is not None else None


def memo_for(settings: config.Settings) -> kopf.Memo:
    """kopf's memo for an operator with these settings (``kopf.run(memo=...)``, ``kopf.operator(memo=...)``)."""
    return kopf.Memo({MEMO_KEY: OperatorState(settings)})


def state_of(memo: Any) -> OperatorState:
    """The OperatorState in a kopf memo; an operator started without one (``kopf run -m
    tensorgrid_operator.controller.registrations``) gets one with the default settings."""
    state = memo.get(MEMO_KEY)
    if state is None:
        state = memo[MEMO_KEY] = OperatorState(config.Settings())
    if not isinstance(state, OperatorState):
        raise TypeError(f"kopf's memo[{MEMO_KEY!r}] is a {type(state).__name__}, not the OperatorState "
                        f"that registrations.memo_for makes")
    return state


def _operator_of(memo: Any) -> running_operator.RunningOperator:
    operator = state_of(memo).running
    if operator is None:
        raise RuntimeError("the operator has not started")
    return operator


def _body(job: dict[str, Any]) -> kopf.Body:
    return kopf.Body(cast(kopf.RawBody, job))


def _say_on(job: dict[str, Any]) -> certificate_secrets.Say:
    """Posts an Event on the job: ``say(type, reason, message)``."""
    def say(kind: str, reason: str, message: str) -> None:
        kopf.event(_body(job), type=kind, reason=reason, message=message)
    return say


def _wake(memo: Any, key: JobKey) -> None:
    operator = state_of(memo).running
    if operator is not None and key in operator.wakers:
        operator.wakers[key].set()


@kopf.on.login()
def login(*, memo: kopf.Memo, **_: Any) -> kopf.ConnectionInfo:
    """kopf's credentials, from the same place as the operator's own API client (kube.load_config):
    the kubeconfig of the settings, else $KUBECONFIG, else the pod's service account, else
    ~/.kube/config."""
    return _connection_info(kube.load_config(state_of(memo).settings.kubeconfig))


def _connection_info(configuration: Any) -> kopf.ConnectionInfo:
    """A kubernetes client configuration as kopf's ConnectionInfo."""
    # "Bearer <token>" of a kubeconfig's token or exec plugin, or of the pod's service account
    # (the client library reads or refreshes it here).
    bearer = configuration.auth_settings().get("BearerToken") or {}
    scheme, _, token = (bearer.get("value") or "").partition(" ")
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert or None,
        insecure=not configuration.verify_ssl,
        username=configuration.username or None,
        password=configuration.password or None,
        scheme=scheme or None,
        token=token or None,
        certificate_path=configuration.cert_file or None,
        private_key_path=configuration.key_file or None,
    )


def configure_kopf(settings: kopf.OperatorSettings, ours: config.Settings) -> None:
    """kopf's settings for this operator."""
    # Only the job's own objects are watched: server-side label selectors.
    settings.watching.label_selectors["v1", "pods"] = spec_lib.LABEL_JOB_NAME
    settings.watching.label_selectors["v1", "services"] = spec_lib.LABEL_JOB_NAME
    settings.watching.label_selectors["networking.k8s.io", "networkpolicies"] = spec_lib.LABEL_JOB_NAME
    settings.watching.label_selectors["policy", "poddisruptionbudgets"] = spec_lib.LABEL_JOB_NAME
    settings.persistence.finalizer = spec_lib.FINALIZER
    settings.persistence.diffbase_storage = NoDiffBase()
    # kopf's own chatter stays in the log; the events users see are the ones reconcile explains.
    settings.posting.level = logging.WARNING
    # Without timeouts a watch whose connection stalls (a proxy or load balancer dropping it
    # silently) waits forever, and new jobs go unseen: the API server ends each watch after
    # server_timeout (kopf resumes from the last resourceVersion, no new list), the client
    # gives up on one it did not end in time, and a connection must open within connect_timeout.
    settings.watching.server_timeout = int(ours.watch_server_timeout_seconds)  # "300.0" is a 400 Bad Request
    settings.watching.client_timeout = ours.watch_client_timeout_seconds
    settings.watching.connect_timeout = ours.watch_connect_timeout_seconds
    # Each watched object's task holds its last event whole until it idles out: at a thousand
    # starting jobs, the operator's peak memory (docs/limits.md).
    settings.queueing.idle_timeout = ours.watch_worker_idle_seconds


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf keeps, for each event, a copy of the object's last handled state to compare the
    next one with, for on.create/update/field handlers. This operator has none (its daemons
    read the job themselves), so that copy, a deepcopy of every pod and Service event's
    whole body, was the largest single cost of an event (bench/README.md, the operator at scale).
    ``test_the_operator_has_no_handlers_that_compare_states`` keeps it true."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> Optional[kopf.BodyEssence]:
        return kopf.BodyEssence()

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        raise AssertionError("no handler of this operator compares an object's states: nothing to store")


@kopf.on.startup()
async def startup(*, settings: kopf.OperatorSettings, logger: kopf.Logger, memo: kopf.Memo, **_: Any) -> None:
    state = state_of(memo)
    ours = state.settings
    configure_kopf(settings, ours)
    configuration = kube.load_config(ours.kubeconfig)
    state.running = running_operator.RunningOperator(
        settings=ours,
        kube=kube.Kube(configuration, pool_size=ours.api_workers),
        executor=concurrent.futures.ThreadPoolExecutor(ours.api_workers, thread_name_prefix="tensorgrid-api"),
        deciders=concurrent.futures.ThreadPoolExecutor(RECONCILE_THREADS, thread_name_prefix="tensorgrid-reconcile"),
    )
    state.running.lag_watch = asyncio.create_task(looplag.watch_lag())
    if ours.metrics_port is not None and state.metrics_server is None:
        state.metrics_server = metrics.serve(ours.metrics_port)
        logger.info("metrics on :%d/metrics", state.metrics_server.port)


@kopf.on.cleanup()
async def cleanup(*, memo: kopf.Memo, **_: Any) -> None:
    state = state_of(memo)
    if state.running is not None:
        if state.running.lag_watch is not None:
            state.running.lag_watch.cancel()
        state.running.executor.shutdown(wait=False, cancel_futures=True)
        state.running.deciders.shutdown(wait=False, cancel_futures=True)
        state.running.kube.close()
        state.running = None
    if state.metrics_server is not None:
        state.metrics_server.close()
        state.metrics_server = None


def _managed_here(spec: kopf.Spec, **_: Any) -> bool:
    """kopf filter: only jobs whose spec.managedBy is absent or names this operator get a daemon."""
    return spec_lib.managed_here(spec)


@kopf.on.event(spec_lib.GROUP, spec_lib.VERSION, spec_lib.PLURAL)
async def job_event(*, event: kopf.RawEvent, body: kopf.Body, namespace: Optional[str], name: str,
                    logger: kopf.Logger, memo: kopf.Memo, **_: Any) -> None:
    key = (namespace or "", name)
    operator = state_of(memo).running
    if not spec_lib.managed_here(body.spec):
        if event.get("type") == "DELETED":
            if operator is not None:
                operator.managed_elsewhere.discard(str(body.metadata.get("uid")))
        else:
            _say_managed_elsewhere(operator, body, logger)
        return
    if operator is not None and not operator.known_jobs.seen(key, body.metadata.get("resourceVersion")):
        return  # the echo of our own status patch: nothing new to see
    _wake(memo, key)


def _say_managed_elsewhere(operator: Optional[running_operator.RunningOperator], body: kopf.Body, logger: kopf.Logger) -> None:
    """Once per job and operator run: a log line and an event saying the job is left alone."""
    uid = str(body.metadata.get("uid"))
    if operator is None or uid in operator.managed_elsewhere or body.metadata.get("deletionTimestamp"):
        return
    operator.managed_elsewhere.add(uid)
    message = (f"spec.managedBy is {spec_lib.managed_by(body.spec)!r}, not {spec_lib.CONTROLLER_NAME!r}: "
               f"this operator leaves the job, its pods and its status to that controller")
    logger.info("%s", message)
    kopf.event(body, type="Normal", reason="ManagedElsewhere", message=message)


# The index functions are coroutines though they never await: kopf runs a plain function
# on a thread for each call, a hand-off that cost more than the function on every pod event.
@kopf.index("v1", "pods", labels={spec_lib.LABEL_JOB_NAME: kopf.PRESENT})
async def pods_by_job(*, namespace: Optional[str], labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict[JobKey, Obj]:
    """Every job's pods, kept by the pod watch: a reconcile reads them here, not with a LIST.
    Only the fields it reads (:func:`indexed.pod`): the whole pods would be most of the memory."""
    return {(namespace or "", labels[spec_lib.LABEL_JOB_NAME]): indexed.pod(body)}


@kopf.index("v1", "services", labels={spec_lib.LABEL_JOB_NAME: kopf.PRESENT})
async def services_by_job(*, namespace: Optional[str], labels: kopf.Labels, body: kopf.Body,
                          **_: Any) -> dict[JobKey, Obj]:
    """Every job's Services, kept by the Service watch (:func:`indexed.service`: their names and owners)."""
    return {(namespace or "", labels[spec_lib.LABEL_JOB_NAME]): indexed.service(body)}


@kopf.on.event("v1", "pods", labels={spec_lib.LABEL_JOB_NAME: kopf.PRESENT})
async def pod_event(*, namespace: Optional[str], labels: kopf.Labels, memo: kopf.Memo, **_: Any) -> None:
    _wake(memo, (namespace or "", labels[spec_lib.LABEL_JOB_NAME]))


@kopf.on.event("v1", "services", labels={spec_lib.LABEL_JOB_NAME: kopf.PRESENT})
async def service_event(*, namespace: Optional[str], labels: kopf.Labels, memo: kopf.Memo, **_: Any) -> None:
    _wake(memo, (namespace or "", labels[spec_lib.LABEL_JOB_NAME]))


@kopf.index("networking.k8s.io", "v1", "networkpolicies", labels={spec_lib.LABEL_JOB_NAME: kopf.PRESENT})
async def network_policies_by_job(*, namespace: Optional[str], name: str, labels: kopf.Labels, meta: kopf.Meta,
                                  **_: Any) -> dict[JobKey, tuple[str, str, str]]:
    """Every job's NetworkPolicy (kind, name, owner), so a deleted one is noticed without a LIST."""
    return {(namespace or "", labels[spec_lib.LABEL_JOB_NAME]): ("NetworkPolicy", name, owned_objects.owner_uid(meta))}


@kopf.index("policy", "v1", "poddisruptionbudgets", labels={spec_lib.LABEL_JOB_NAME: kopf.PRESENT})
async def disruption_budgets_by_job(*, namespace: Optional[str], name: str, labels: kopf.Labels, meta: kopf.Meta,
                                    **_: Any) -> dict[JobKey, tuple[str, str, str]]:
    """Every job's PodDisruptionBudget (kind, name, owner)."""
    return {(namespace or "", labels[spec_lib.LABEL_JOB_NAME]): ("PodDisruptionBudget", name,
                                                                 owned_objects.owner_uid(meta))}


@kopf.on.event("networking.k8s.io", "v1", "networkpolicies", labels={spec_lib.LABEL_JOB_NAME: kopf.PRESENT})
async def network_policy_event(*, event: kopf.RawEvent, namespace: Optional[str], labels: kopf.Labels,
                               memo: kopf.Memo, **_: Any) -> None:
    if event.get("type") == "DELETED":  # the job's pass creates it again
        _wake(memo, (namespace or "", labels[spec_lib.LABEL_JOB_NAME]))


@kopf.on.event("policy", "v1", "poddisruptionbudgets", labels={spec_lib.LABEL_JOB_NAME: kopf.PRESENT})
async def disruption_budget_event(*, event: kopf.RawEvent, namespace: Optional[str], labels: kopf.Labels,
                                  memo: kopf.Memo, **_: Any) -> None:
    if event.get("type") == "DELETED":
        _wake(memo, (namespace or "", labels[spec_lib.LABEL_JOB_NAME]))


# No daemon, and so no finalizer, for a job another controller manages (spec.managedBy).
@kopf.daemon(spec_lib.GROUP, spec_lib.VERSION, spec_lib.PLURAL, cancellation_timeout=30.0, when=_managed_here)
async def job_daemon(*, stopped: kopf.DaemonStopped, namespace: Optional[str], name: str, logger: kopf.Logger,
                     memo: kopf.Memo, **kwargs: Any) -> None:
    """One loop per job: reconcile, then sleep until woken, a deadline, or the resync period."""
    # kopf passes each index (live) as the keyword of its function's name.
    pods_by_job, services_by_job = cast(JobIndex, kwargs["pods_by_job"]), cast(JobIndex, kwargs["services_by_job"])
    owned = (cast(OwnedIndex, kwargs["network_policies_by_job"]), cast(OwnedIndex, kwargs["disruption_budgets_by_job"]))
    operator = _operator_of(memo)
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
            except Exception as e:  # noqa: BLE001 - an API outage must not kill the job's loop
                operator.known_jobs.forget(key)
                delay = ERROR_BACKOFF_SECONDS[min(errors, len(ERROR_BACKOFF_SECONDS) - 1)]
                errors += 1
                logger.warning("reconcile of %s/%s failed (%s: %s); retrying in %.1fs",
                               namespace, name, type(e).__name__, e, delay)
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
        now = datetime.datetime.now(datetime.timezone.utc)
        plan = await asyncio.get_running_loop().run_in_executor(operator.deciders, functools.partial(
            reconcile.reconcile, job, pods, services, now, _retry_delay(operator.settings),
            _stuck_policy(operator.settings)))
        if operator.settings.verbose:
            logger.debug("plan for %s/%s: +%d pods, -%d pods, status %s", namespace, name,
                         len(plan.create_pods), len(plan.delete_pods), "changed" if plan.status else "same")
        job, requeue_after = await _apply(operator, key, job, plan, logger, held)
        job, group_after = await _read_pod_group(operator, key, job, pods)
        progress_after = await _update_progress(operator, key, job, pods)
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


def _job_object_settings(settings: config.Settings) -> jobobjects.JobObjectSettings:
    return jobobjects.JobObjectSettings(settings.network_policy, settings.network_policy_metrics_from,
                                        settings.ps_disruption_budget, settings.ps_anti_affinity)


async def _ensure_job_objects(operator: running_operator.RunningOperator, key: JobKey, job: dict[str, Any],
                              indexed: list[tuple[str, str, str]]) -> tuple[dict[str, Any], Optional[str]]:
    """The job's NetworkPolicy, PS PodDisruptionBudget, PodGroup and cert-manager objects (ensure_objects):
    the job as it is now (its status may say why one is missing), and why its pods must wait, if so."""
    upkeep = operator.job_objects.setdefault(key, owned_objects.Upkeep())
    say = _say_on(job)
    await ensure_objects.job_objects(operator.kube, operator.call, say, job, indexed, upkeep,
                                     _job_object_settings(operator.settings))
    gang, certificates = operator.settings.gang, operator.settings.certificates
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
    patch, after = await ensure_objects.pod_group_status(operator.kube, operator.call, _say_on(job), job, pods, upkeep,
                                                         operator.settings.gang)
    if patch is not None:
        job = await operator.write_status(key, job, patch)
    return job, after


def _stuck_policy(settings: config.Settings) -> terminating.StuckPolicy:
    return terminating.StuckPolicy(settings.stuck_terminating_seconds, settings.force_delete_stuck_pods)


def _retry_delay(settings: config.Settings) -> policies.RetryDelay:
    return policies.RetryDelay(settings.retry_delay_seconds, settings.max_retry_delay_seconds)


def _replacing(job: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """A reconcile's complete new status as a merge patch: fields it dropped (the startTime of a
    suspended job) are named null, which removes them."""
    return {**{field: None for field in job.get("status") or {} if field not in status}, **status}


async def _apply(operator: running_operator.RunningOperator, key: JobKey, job: dict[str, Any], plan: plans.Plan, logger: kopf.Logger,
                 held: Optional[str] = None) -> tuple[dict[str, Any], Optional[float]]:
    """Apply a plan: status, deletions, creations, then what to say about them.

    ``held``: why the plan's pods must not be created yet (their PodGroup is missing); they count as
    refused creations, which say so and are retried after their delay.

    Returns the job as last written and when to look again.
    """
    namespace, name = key
    k = operator.kube
    first_pods = not cond_lib.is_true((job.get("status") or {}).get("conditions") or [], cond_lib.CREATED)
    certificates = None
    if plan.create_pods:  # before anything is written: the pods mount them
        certificates = await certificate_secrets.for_job(k, operator.call, _say_on(job), job, first_pods,
                                                         operator.settings.certificates)
    counts_wait = operator.phase_counts_wait(key, job, plan)
    if plan.status is not None and not counts_wait:
        # First, so a crash after it never loses a counted restart or a finished replica.
        job = await operator.write_status(key, job, _replacing(job, plan.status))
    # Before the deletions: Kueue must know the group is over before it sees its pods go.
    await asyncio.gather(*(operator.call(k.patch_pod_metadata, namespace, pod_name, uid, kueue.close_group_patch())
                           for pod_name, uid in plan.close_group_pods))
    deletions = await operator.calls([
        *(operator.call(k.delete_pod, namespace, pod_name, uid) for pod_name, uid in plan.delete_pods),
        *(operator.call(k.delete_pod, namespace, pod_name, uid, True) for pod_name, uid in plan.force_delete_pods),
        *(operator.call(k.delete_service, namespace, svc) for svc in plan.delete_services)])
    for result in deletions:
        if isinstance(result, BaseException):
            raise result  # as before: the next reconcile (after the error backoff) deletes again
    if plan.create_pods and held is None:
        held = await ensure_objects.pod_group_before_pods(
            k, operator.call, lambda kind, reason, message: kopf.event(_body(job), type=kind, reason=reason,
                                                                      message=message),
            job, operator.job_objects.setdefault(key, owned_objects.Upkeep()), operator.settings.gang)
    # Each creation on its own: one refused pod must not hide the others, nor the plan's events.
    pod_settings = _job_object_settings(operator.settings)
    pods = plan.create_pods if held is None else []

    def sent(pod: plans.PodToCreate) -> Obj:
        """The manifest as the API server gets it, built on an API thread as it is sent: never all at
        once (a 2,000-replica job's took 144 MB) and never on the event loop (0.7 ms each)."""
        assert certificates is not None  # made above whenever the plan creates pods
        manifest = podgroups.with_gang_fields(jobobjects.with_pod_defaults(pod.manifest(), pod_settings),
                                              operator.settings.gang)
        return manifests.with_job_wide_tls(manifest, name) if certificates.job_wide else manifest

    async def create_pod(pod: plans.PodToCreate) -> None:
        assert certificates is not None
        await certificate_secrets.replica_secret(k, operator.call, _say_on(job), job, certificates, pod.name,
                                                 first_pods, operator.settings.certificates)
        await operator.call(lambda: k.create_pod(sent(pod)))

    objects = [("Service", svc["metadata"]["name"]) for svc in plan.create_services] + [
        ("Pod", pod.name) for pod in pods]
    results = await operator.calls([operator.call(k.create_service, svc) for svc in plan.create_services]
                                  + [create_pod(pod) for pod in pods])
    failures = [creation.CreateFailure("Pod", p.name, None, held) for p in plan.create_pods if held]
    for (kind, object_name), result in zip(objects, results):
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):
                raise result  # cancelled: the operator is stopping
            code, message = kube.error_details(result)
            failures.append(creation.CreateFailure(kind, object_name, code, message))
    failed = {(f.kind, f.name) for f in failures}
    written = observed.Expectations(
        pods=frozenset(p.name for p in plan.create_pods if ("Pod", p.name) not in failed),
        services=frozenset(s["metadata"]["name"] for s in plan.create_services
                           if ("Service", s["metadata"]["name"]) not in failed),
        deleted_pods=frozenset(uid for _, uid in plan.delete_pods + plan.force_delete_pods),
        deleted_services=frozenset(plan.delete_services))
    if written:
        operator.expectations[key] = written.merged(operator.expectations.get(key))
    outcome = creation.after_creates(job, plan, failures, datetime.datetime.now(datetime.timezone.utc),
                                     _retry_delay(operator.settings))
    for failure in failures:
        logger.warning("could not create %s %s/%s: %s (HTTP %s)", failure.kind.lower(), namespace,
                       failure.name, failure.message, failure.code)
    for event in outcome.events:
        kopf.event(_body(job), type=event.type, reason=event.reason, message=event.message)
    if outcome.status is not None:
        job = await operator.write_status(key, job, _replacing(job, outcome.status))
    metrics.count_transitions(namespace, outcome.transitions)
    if plan.all_running_seconds is not None:
        metrics.TIME_TO_ALL_PODS_RUNNING.observe(plan.all_running_seconds)
    operator.phases.set(key, (job.get("status") or {}).get("state"))
    if plan.delete_job:
        await operator.call(k.delete_job, job)
    if counts_wait:  # the counts are written by the pass then, if nothing else changed them first
        return job, min(counts_wait, outcome.requeue_after if outcome.requeue_after is not None else math.inf)
    return job, outcome.requeue_after


async def _update_progress(operator: running_operator.RunningOperator, key: JobKey, job: dict[str, Any],
                           pods: list[dict[str, Any]]) -> Optional[float]:
    """Read the running job's metrics into ``status.progress`` when due; seconds until the next reading."""
    interval = operator.settings.progress_interval_seconds
    status = job.get("status") or {}
    if interval <= 0 or status.get("state") not in PROGRESS_STATES:
        operator.progress_due.pop(key, None)
        return None
    wait = operator.progress_due.get(key, 0.0) - time.monotonic()
    if wait > 0:
        return wait
    operator.progress_due[key] = time.monotonic() + interval
    try:
        job_spec = spec_lib.parse_spec(job.get("spec") or {})
    except ValueError:
        return None
    targets = progress.scrape_targets(job_spec, pods)
    readings = await asyncio.gather(*(operator.call(_read_metrics, t, operator.settings.progress_timeout_seconds)
                                      for t in targets))
    old = status.get("progress")
    new = progress.next_progress(old, readings, datetime.datetime.now(datetime.timezone.utc))
    if new is not None and new != old:
        # A merge patch: keys the new progress no longer has are deleted by naming them null.
        patch = {name: new.get(name) for name in set(old or {}) | set(new)}
        job = await operator.write_status(key, job, {"progress": patch})
    return interval


def _read_metrics(target: progress.Target, timeout: float) -> progress.Reading:
    """GET one task's /metrics page (at most ``progress.MAX_PAGE_BYTES``)."""
    try:
        with urllib.request.urlopen(target.url, timeout=timeout) as response:  # http to a pod IP
            text = response.read(progress.MAX_PAGE_BYTES).decode("utf-8", errors="replace")
    except (OSError, ValueError) as e:  # URLError, timeouts and refused connections are OSErrors
        reason = e.reason if isinstance(e, urllib.error.URLError) else e
        return progress.Reading(target.pod, error=f"{target.pod}: could not read {target.url}: {reason}")
    return progress.read_page(target.pod, text)


def resolve_peering(settings: config.Settings) -> config.Settings:
    """Settings with the peering mode decided, logged with the reason (peering objects are looked up).

    kopf with a peering name but no peering object waits for it forever, doing nothing: so
    without an explicit ``--peering`` the operator runs standalone unless the object exists.
    """
    log = logging.getLogger("tensorgrid_operator")
    if settings.peering is None:
        log.info("running standalone (--standalone): this replica acts on every TrainingJob")
        return settings
    missing = kube.missing_peering_objects(kube.load_config(settings.kubeconfig), settings.peering,
                                           settings.namespaces)
    if not missing:
        log.info("running with kopf peering %r: of the replicas sharing it, the one with the highest priority acts "
                 "and the others stand by (kopf logs 'Pausing operations in favour of ...' while one does)",
                 settings.peering)
        return settings
    if settings.peering_required:
        raise SystemExit(f"tensorgrid-operator: --peering {settings.peering} given, but {', '.join(missing)} does "
                         f"not exist: apply crds/kopf-peering.yaml and create it (the Helm chart does both), "
                         f"or run one replica with --standalone")
    log.info("running standalone: %s does not exist, so this replica acts on every TrainingJob; to run several "
             "replicas, create it (the Helm chart does) or pass --peering", ", ".join(missing))
    return dataclasses.replace(settings, peering=None)


def run(settings: config.Settings) -> None:
    """Run the operator until it is stopped (SIGTERM/SIGINT)."""
    kopf.configure(verbose=settings.verbose)
    settings = resolve_peering(settings)
    if not settings.verbose:
        # kopf logs every watch event it hands to a handler at INFO: one line per pod change.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    priority = settings.priority if settings.priority is not None else random.SystemRandom().randint(1, 2**31 - 1)
    kopf.run(
        standalone=settings.peering is None,
        peering_name=settings.peering,
        priority=priority,
        liveness_endpoint=(f"http://0.0.0.0:{settings.liveness_port}/healthz"
                           if settings.liveness_port is not None else None),
        clusterwide=not settings.namespaces,
        namespaces=settings.namespaces,
        memo=memo_for(settings),
    )
