"""Applying a reconcile plan: the status first, in one PATCH; then deletions; then creations; then what to say.

A plan is what the pure reconcile decided (``reconcile.plans.Plan``); this carries it out
through the running operator's API calls: the job's certificates before its first pods,
the status before anything else (a crash after it never loses a counted restart), Kueue
told a group is over before its pods go, each creation on its own (one refused pod hides
neither the others nor the plan's events), and what the API server refused turned into
the job's status and events (``reconcile.creation``). It also holds how the controller
posts an Event on a job (:func:`say_on`), which the job loop shares.
"""

from __future__ import annotations

import asyncio
import datetime
import math
from typing import Any, Optional, cast

import kopf

from tensorgrid_operator.api import conditions as cond_lib
from tensorgrid_operator.cluster import certificate_secrets
from tensorgrid_operator.cluster import ensure_objects
from tensorgrid_operator.cluster import kube
from tensorgrid_operator.cluster import running_operator
from tensorgrid_operator import config
from tensorgrid_operator import metrics
from tensorgrid_operator.reconcile import creation
from tensorgrid_operator.reconcile import observed
from tensorgrid_operator.reconcile import owned_objects
from tensorgrid_operator.reconcile import plans
from tensorgrid_operator.reconcile import policies
from tensorgrid_operator.reconcile import ps_takeover
from tensorgrid_operator.resources import jobobjects
from tensorgrid_operator.resources import kueue
from tensorgrid_operator.resources import manifests
from tensorgrid_operator.resources import podgroups

JobKey = tuple[str, str]
Obj = dict[str, Any]


def job_body(job: dict[str, Any]) -> kopf.Body:
    return kopf.Body(cast(kopf.RawBody, job))


def say_on(job: dict[str, Any]) -> certificate_secrets.Say:
    """Posts an Event on the job: ``say(type, reason, message)``."""
    def say(kind: str, reason: str, message: str) -> None:
        kopf.event(job_body(job), type=kind, reason=reason, message=message)
    return say


def job_object_settings(settings: config.Settings) -> jobobjects.JobObjectSettings:
    return jobobjects.JobObjectSettings(settings.network_policy, settings.network_policy_metrics_from,
                                        settings.ps_disruption_budget, settings.ps_anti_affinity,
                                        settings.spread_over_nodes, settings.node_lost_toleration_seconds)


def retry_delay(settings: config.Settings) -> policies.RetryDelay:
    return policies.RetryDelay(settings.retry_delay_seconds, settings.max_retry_delay_seconds)


async def _take_over(operator: running_operator.RunningOperator, key: JobKey, job: dict[str, Any],
                     plan: plans.Plan) -> list[plans.PSTakeover]:
    """Each planned takeover's patch of its standby pod (``reconcile.ps_takeover``), said in an event;
    those that did not apply, said in a Warning event (the next pass decides again), returned."""
    namespace, _ = key
    results = await operator.calls([operator.call(operator.kube.patch_pod_metadata, namespace, t.pod, t.uid, t.patch)
                                    for t in plan.ps_takeovers])
    refused = []
    for takeover, result in zip(plan.ps_takeovers, results):
        if result is True:
            kopf.event(job_body(job), type="Normal", reason=ps_takeover.REASON, message=takeover.message)
            continue
        if isinstance(result, BaseException) and not isinstance(result, Exception):
            raise result  # cancelled: the operator is stopping
        if isinstance(result, Exception):
            code, message = kube.error_details(result)
            why = f"{message} (HTTP {code})"
        else:
            why = "the pod is gone"
        refused.append(takeover)
        kopf.event(job_body(job), type="Warning", reason=ps_takeover.FAILED_REASON,
                   message=f"could not make the standby {takeover.pod} {takeover.replica}: {why}")
    return refused


def _replacing(job: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """A reconcile's complete new status as a merge patch: fields it dropped (the startTime of a
    suspended job) are named null, which removes them."""
    return {**{field: None for field in job.get("status") or {} if field not in status}, **status}


async def apply(operator: running_operator.RunningOperator, key: JobKey, job: dict[str, Any], plan: plans.Plan, logger: kopf.Logger,
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
        certificates = await certificate_secrets.for_job(k, operator.call, say_on(job), job, first_pods,
                                                         operator.settings.certificates)
    counts_wait = operator.phase_counts_wait(key, job, plan)
    # Before the status that records them: a takeover the API server refused is not recorded.
    refused_takeovers = await _take_over(operator, key, job, plan)
    status = ps_takeover.without_refused(plan.status, job.get("status") or {}, refused_takeovers)
    if status is not None and not counts_wait:
        # First, so a crash after it never loses a counted restart or a finished replica.
        job = await operator.write_status(key, job, _replacing(job, status))
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
            k, operator.call, lambda kind, reason, message: kopf.event(job_body(job), type=kind, reason=reason,
                                                                       message=message),
            job, operator.job_objects.setdefault(key, owned_objects.Upkeep()), operator.settings.gang)
    # Each creation on its own: one refused pod must not hide the others, nor the plan's events.
    pod_settings = job_object_settings(operator.settings)
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
        await certificate_secrets.replica_secret(k, operator.call, say_on(job), job, certificates, pod.name,
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
    refused = {t.pod for t in refused_takeovers}
    written = observed.Expectations(
        pods=frozenset([p.name for p in plan.create_pods if ("Pod", p.name) not in failed]
                       + [t.pod for t in plan.ps_takeovers if t.pod not in refused]),
        services=frozenset(s["metadata"]["name"] for s in plan.create_services
                           if ("Service", s["metadata"]["name"]) not in failed),
        deleted_pods=frozenset(uid for _, uid in plan.delete_pods + plan.force_delete_pods),
        deleted_services=frozenset(plan.delete_services))
    if written:
        operator.expectations[key] = written.merged(operator.expectations.get(key))
    outcome = creation.after_creates(job, plan, failures, datetime.datetime.now(datetime.timezone.utc),
                                     retry_delay(operator.settings))
    for failure in failures:
        logger.warning("could not create %s %s/%s: %s (HTTP %s)", failure.kind.lower(), namespace,
                       failure.name, failure.message, failure.code)
    for event in outcome.events:
        kopf.event(job_body(job), type=event.type, reason=event.reason, message=event.message)
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
