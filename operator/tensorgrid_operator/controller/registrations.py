"""The kopf registrations: what the operator watches and indexes, its startup and cleanup, and :func:`run`.

kopf calls these: ``login`` (the credentials of the operator's own API client),
``startup`` and ``cleanup`` (the running operator in the memo's :class:`state.OperatorState`),
the watches of TrainingJobs, their pods, Services, NetworkPolicies and
PodDisruptionBudgets (each event only wakes the job's loop), and the indexes a pass reads
instead of LISTs (kept slim by ``reconcile.indexed``). The job daemon itself, one loop per
job, is registered in ``job_loop``. :func:`run` starts kopf with all of them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import logging
import os
import random
import secrets
import socket
import typing
from typing import Any, Optional

import kopf

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.cluster import kube
from tensorgrid_operator.cluster import running_operator
from tensorgrid_operator.cluster import tfjob_calls
from tensorgrid_operator import config
from tensorgrid_operator.controller import activity
from tensorgrid_operator.controller import index_readiness
from tensorgrid_operator.controller import job_loop  # noqa: F401 - imported for kopf: it registers the job daemon
from tensorgrid_operator.controller import leadership
from tensorgrid_operator.controller import looplag
from tensorgrid_operator.controller import peering
from tensorgrid_operator.controller import state as state_lib
from tensorgrid_operator import metrics
from tensorgrid_operator.reconcile import indexed
from tensorgrid_operator.reconcile import owned_objects

JobKey = tuple[str, str]
Obj = dict[str, Any]
# Threads that run the pure reconcile, off the event loop: a job of thousands of replicas takes
# long enough to decide that on the loop it would stall the watches, /healthz and every other job.
RECONCILE_THREADS = 2


def _wake(memo: Any, key: JobKey) -> None:
    operator = state_lib.state_of(memo).running
    if operator is not None and key in operator.wakers:
        operator.wakers[key].set()


@kopf.on.login()
def login(*, memo: kopf.Memo, **_: Any) -> kopf.ConnectionInfo:
    """kopf's credentials, from the same place as the operator's own API client (kube.load_config):
    the kubeconfig of the settings, else $KUBECONFIG, else the pod's service account, else
    ~/.kube/config."""
    return _connection_info(kube.load_config(state_lib.state_of(memo).settings.kubeconfig))


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


# The reporting component of the operator's events (kubectl describe's "From"); the instance is the pod.
EVENT_REPORTER = "tensorgrid-operator"

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
    # Events say who reported them, as kubectl describe shows (kopf's defaults: "kopf", "dev").
    settings.posting.reporting_component = EVENT_REPORTER
    settings.posting.reporting_instance = os.environ.get("POD_NAME") or socket.gethostname()
    settings.posting.event_name_prefix = f"{EVENT_REPORTER}-"
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
    state = state_lib.state_of(memo)
    ours = state.settings
    configure_kopf(settings, ours)
    # Before kopf starts its watchers (after the startup handlers): see index_readiness.
    index_readiness.install(logger)
    configuration = kube.load_config(ours.kubeconfig)
    state.running = running_operator.RunningOperator(
        settings=ours,
        kube=kube.Kube(configuration, pool_size=ours.api_workers),
        executor=concurrent.futures.ThreadPoolExecutor(ours.api_workers, thread_name_prefix="tensorgrid-api"),
        deciders=concurrent.futures.ThreadPoolExecutor(RECONCILE_THREADS, thread_name_prefix="tensorgrid-reconcile"),
    )
    state.running.lag_watch = asyncio.create_task(looplag.watch_lag())
    state.running.activity_watch = asyncio.create_task(
        activity.watch_activity(state.running, state.peer_identity, state.peer_priority))
    if ours.serve_tfjob:
        state.running.tfjob_calls = tfjob_calls.TFJobCalls(configuration)
    if ours.metrics_port is not None and state.metrics_server is None:
        state.metrics_server = metrics.serve(ours.metrics_port)
        logger.info("metrics on :%d/metrics", state.metrics_server.port)


@kopf.on.cleanup()
async def cleanup(*, memo: kopf.Memo, **_: Any) -> None:
    state = state_lib.state_of(memo)
    if state.running is not None:
        if state.running.lag_watch is not None:
            state.running.lag_watch.cancel()
        if state.running.activity_watch is not None:
            state.running.activity_watch.cancel()
        metrics.ACTIVE.set(0)
        state.running.executor.shutdown(wait=False, cancel_futures=True)
        state.running.deciders.shutdown(wait=False, cancel_futures=True)
        state.running.kube.close()
        if state.running.tfjob_calls is not None:
            state.running.tfjob_calls.close()
        state.running = None
    if state.metrics_server is not None:
        state.metrics_server.close()
        state.metrics_server = None


@kopf.on.event(spec_lib.GROUP, spec_lib.VERSION, spec_lib.PLURAL)
async def job_event(*, event: kopf.RawEvent, body: kopf.Body, namespace: Optional[str], name: str,
                    logger: kopf.Logger, memo: kopf.Memo, **_: Any) -> None:
    key = (namespace or "", name)
    operator = state_lib.state_of(memo).running
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


def run(settings: config.Settings) -> None:
    """Run the operator until it is stopped (SIGTERM/SIGINT); with ``serve_tfjob``, exit with
    ``tfjob_loop.EXIT_TFJOB_NOT_OURS`` instead when the TFJob CRD is not the chart's."""
    kopf.configure(verbose=settings.verbose)
    if settings.serve_tfjob:
        calls = tfjob_calls.TFJobCalls(kube.load_config(settings.kubeconfig))
        try:
            # Imported here: kopf serves TFJobs only in an operator that serves them.
            from tensorgrid_operator.controller import tfjob_loop

            refused = tfjob_loop.refuse_unless_ours(calls, logging.getLogger("tensorgrid_operator"))
        finally:
            calls.close()
        if refused is not None:
            raise SystemExit(refused)
    settings = peering.resolve_peering(settings)
    if not settings.verbose:
        # kopf logs every watch event it hands to a handler at INFO: one line per pod change.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    priority = settings.priority if settings.priority is not None else random.SystemRandom().randint(1, 2**31 - 1)
    # kopf's own form of identity (pod or host, start time, a random part), known here so that
    # controller.activity can find this replica among the peering object's keep-alives.
    identity = (f"{os.environ.get('POD_ID') or socket.gethostname()}/"
                f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%d%H%M%S}/{secrets.token_hex(3)}")
    memo = state_lib.memo_for(settings)
    state = state_lib.state_of(memo)
    state.peer_identity, state.peer_priority = identity, priority
    if settings.leader_election_lease is not None:
        elector = leadership.wait_to_lead(settings, state, identity)
        renewing = leadership.keep_renewing(settings, elector)
        try:
            _run_kopf(settings, priority, identity, memo)
        finally:
            leadership.step_down(settings, elector, renewing)
        return
    _run_kopf(settings, priority, identity, memo)


def _run_kopf(settings: config.Settings, priority: int, identity: str, memo: kopf.Memo) -> None:
    kopf.run(
        standalone=settings.peering is None,
        peering_name=settings.peering,
        priority=priority,
        identity=typing.cast(Any, identity),
        liveness_endpoint=(f"http://0.0.0.0:{settings.liveness_port}/healthz"
                           if settings.liveness_port is not None else None),
        clusterwide=not settings.namespaces,
        namespaces=settings.namespaces,
        memo=memo,
    )
