"""Creating what a job owns besides its pods and Services, before its pods: the API calls and what is said.

A pass first makes sure the job's NetworkPolicy and PS PodDisruptionBudget exist
(``jobobjects``; created again after a deletion, ``owned_objects``) and, with a gang
scheduler, its PodGroup (``podgroups``; created again, after a deletion, before the
next pods that need it), and in cert-manager's mode its Issuers and CA Certificate
(``cert_manager``); once the job's pods are read, it resizes the PodGroup to the job's worker
count (``pod_group_size``); after the pass, with a gang scheduler, it reads the PodGroup's
status into the job's while that matters (``podgroup_status``). The decisions are pure
functions of those modules; this module makes the calls (on the operator's thread pool, through ``call``)
and says what happened through ``say`` (an Event on the job), so kopf stays in the
controller.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from typing import Any, Awaitable, Callable, Mapping, Optional, Sequence

from tensorgrid_operator.api import conditions as cond_lib
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.cluster import kube as kube_lib
from tensorgrid_operator.reconcile import owned_objects
from tensorgrid_operator.reconcile import pod_group_size
from tensorgrid_operator.reconcile import podgroup_status
from tensorgrid_operator.resources import cert_manager
from tensorgrid_operator.resources import job_certificates
from tensorgrid_operator.resources import jobobjects
from tensorgrid_operator.resources import podgroups
from tensorgrid_operator.resources import tensorboard

Obj = dict[str, Any]
Call = Callable[..., Awaitable[Any]]
"""Runs a blocking API call ``fn(*args)`` off the event loop: ``await call(fn, *args)``."""
Say = Callable[[str, str, str], None]
"""Posts an Event on the job: ``say(type, reason, message)``."""
FINISHED_STATES = ("Succeeded", "Failed")
CERT_MANAGER_READY = ("CertManager", "")
"""``Upkeep.made`` holds this once the job's cert-manager objects exist, or the job keeps the operator's CA."""


class _NotServedError(Exception):
    """The API server does not serve cert-manager's Certificates."""


def _spec_or_none(job: Mapping[str, Any]) -> Optional[spec_lib.JobSpec]:
    try:
        return spec_lib.parse_spec(job.get("spec") or {})
    except ValueError:
        return None  # the reconcile fails the job for its spec


async def job_objects(kube: kube_lib.Kube, call: Call, say: Say, job: Mapping[str, Any],
                      indexed: list[tuple[str, str, str]], upkeep: owned_objects.Upkeep,
                      settings: jobobjects.JobObjectSettings) -> None:
    """Create the job's NetworkPolicy and PS PodDisruptionBudget, and again when one is deleted; and its
    TensorBoard's Deployment, Service and NetworkPolicy (``spec.tensorboard``), once per operator run
    (Deployments and Services without the job's label are not watched, so not made again after a deletion).

    An existing one is left as it is. A refusal is said once per distinct message (a Warning event) and
    tried again at the next reconcile; it does not stop the job's pods from being made.
    """
    if (job.get("status") or {}).get("state") in FINISHED_STATES:
        return
    wanted = [jobobjects.network_policy(job, settings)] if settings.network_policy else []
    job_spec = _spec_or_none(job)
    budget = jobobjects.ps_disruption_budget(job, job_spec) if job_spec is not None else None
    if settings.ps_disruption_budget and budget is not None:
        wanted.append(budget)
    errors: list[tuple[str, str]] = []
    try:
        wanted += tensorboard.job_objects(job, job_spec, settings.network_policy) if job_spec is not None else []
    except ValueError as e:
        errors.append(("TensorBoard", f"could not make the job's TensorBoard: {e}"))
    todo = owned_objects.creations(wanted, owned_objects.present(indexed, job["metadata"]["uid"]), upkeep)
    create = {"NetworkPolicy": kube.create_network_policy, "PodDisruptionBudget": kube.create_pod_disruption_budget,
              "Deployment": kube.create_deployment, "Service": kube.create_service}
    results = await asyncio.gather(*(call(create[c.kind], c.obj) for c in todo), return_exceptions=True)
    for item, result in zip(todo, results):
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):
                raise result
            code, message = kube_lib.error_details(result)
            errors.append((item.kind, f"could not create {item.kind} {item.name}: {message} (HTTP {code})"))
            continue
        owned_objects.created(upkeep, item)
        if item.recreated and result:
            say("Warning", f"Recreated{item.kind}", owned_objects.recreated_message(item))
    text = "; ".join(message for _, message in errors)
    if text and upkeep.last_error != text:
        for kind, message in errors:
            say("Warning", f"FailedCreate{kind}", message)
    upkeep.last_error = text


async def pod_group(kube: kube_lib.Kube, call: Call, say: Say, job: Mapping[str, Any], upkeep: owned_objects.Upkeep,
                    gang: podgroups.GangSettings) -> Optional[Obj]:
    """Create the job's PodGroup once (with a gang scheduler). Returns the status patch to write, if any.

    While it cannot be created (the scheduler's CRD missing: 404; a refusal), the job's condition
    ``PodGroupCreated`` is False with the reason, a Warning event says it once per distinct message,
    and :func:`why_pods_wait` holds the pods back: without their group they would never start.
    """
    status = job.get("status") or {}
    upkeep.pod_group_fresh = False
    if not gang.enabled or status.get("state") in FINISHED_STATES or ("PodGroup", job["metadata"]["name"]) in upkeep.made:
        return None
    job_spec = _spec_or_none(job)
    if job_spec is None:
        return None
    name = job["metadata"]["name"]
    api = podgroups.APIS[gang.scheduler]
    try:
        created = await _create_pod_group(kube, call, job, job_spec, gang)
    except Exception as e:  # noqa: BLE001 - every refusal is said, and tried again next pass
        code, message = kube_lib.error_details(e)
        reason, text = podgroups.failure_message(gang, name, code, message)
        if upkeep.pod_group_error != text:
            say("Warning", reason, text)
        upkeep.pod_group_error = text
        return _condition_patch(status, podgroups.CONDITION, False, reason, text)
    upkeep.made.add(("PodGroup", name))
    upkeep.pod_group_fresh = True
    upkeep.pod_group_min_member = podgroups.min_member(job_spec) if created else None
    upkeep.pod_group_error = ""
    if cond_lib.get_condition(status.get("conditions") or [], podgroups.CONDITION) is None:
        return None  # created at the first try: nothing to report in the status
    return _condition_patch(status, podgroups.CONDITION, True, "PodGroupCreated",
                            f"created PodGroup {name} ({api.api_version})")


async def pod_group_before_pods(kube: kube_lib.Kube, call: Call, say: Say, job: Mapping[str, Any],
                                upkeep: owned_objects.Upkeep, gang: podgroups.GangSettings) -> Optional[str]:
    """Before a pass creates pods (a restart, a replaced pod): their PodGroup again, if it was deleted since
    :func:`pod_group` made it. Returns why the pods must wait, if it cannot be made.

    Without its PodGroup a pod is never placed by the gang scheduler (scheduler-plugins answers "PodGroup
    not found"), so the job would hang at its next restart. The operator may only create PodGroups
    (no watch: the chart grants ``create`` alone), so it asks at the only time the group matters: a create
    answered 409 means it is there. The pass that made it skips this (``upkeep.pod_group_fresh``).
    """
    name = job["metadata"]["name"]
    if not gang.enabled or ("PodGroup", name) not in upkeep.made or upkeep.pod_group_fresh:
        return None
    job_spec = _spec_or_none(job)
    if job_spec is None:
        return None
    try:
        created = await _create_pod_group(kube, call, job, job_spec, gang)
    except Exception as e:  # noqa: BLE001 - said; the next pass's pod_group tries again and sets the condition
        code, message = kube_lib.error_details(e)
        reason, text = podgroups.failure_message(gang, name, code, message)
        say("Warning", reason, text)
        upkeep.made.discard(("PodGroup", name))
        upkeep.pod_group_error = text
        return text
    if created:
        upkeep.pod_group_min_member = podgroups.min_member(job_spec)
        say("Warning", "RecreatedPodGroup", podgroups.recreated_message(name))
    return None


async def resize_pod_group(kube: kube_lib.Kube, call: Call, say: Say, job: Mapping[str, Any],
                           pods: Sequence[Mapping[str, Any]], upkeep: owned_objects.Upkeep,
                           gang: podgroups.GangSettings) -> None:
    """The PodGroup's ``minMember`` to what the job's worker count needs now (``pod_group_size``), before the
    pass adds or removes workers: one PATCH when it changes, said with a Normal event.

    Only for a group this operator made or found; its size is known from the creation, else read once (a GET).
    A group that is gone is left to :func:`pod_group_before_pods`, which makes it at the current count. A
    refused patch is said once (a Warning event) and tried again next pass; the job goes on.
    """
    name = job["metadata"]["name"]
    if not gang.enabled or ("PodGroup", name) not in upkeep.made:
        return
    wanted = pod_group_size.wanted_min_member(job, pods)
    if wanted is None or wanted == upkeep.pod_group_min_member:
        return
    api = podgroups.APIS[gang.scheduler]
    namespace = job["metadata"]["namespace"]
    try:
        if upkeep.pod_group_min_member is None:
            group = await call(kube.get_pod_group, api.group, api.version, api.plural, namespace, name)
            if group is None:
                return
            upkeep.pod_group_min_member = pod_group_size.member_count_of(group)
        change = pod_group_size.resize(name, wanted, upkeep.pod_group_min_member)
        if change is None:
            return
        patched = await call(kube.patch_pod_group, api.group, api.version, api.plural, namespace, name,
                             change.patch())
    except Exception as e:  # noqa: BLE001 - said once; the next pass tries again
        code, message = kube_lib.error_details(e)
        text = (f"could not resize PodGroup {name} ({api.api_version}) to minMember {wanted}: {message}"
                f"{f' (HTTP {code})' if code else ''}; the operator needs get and patch on {api.plural}.{api.group}")
        if upkeep.pod_group_resize_error != text:
            say("Warning", "FailedResizePodGroup", text)
        upkeep.pod_group_resize_error = text
        return
    upkeep.pod_group_resize_error = ""
    if patched is None:
        upkeep.pod_group_min_member = None  # deleted: made again, at the current count, before the next pods
        return
    upkeep.pod_group_min_member = change.new
    say("Normal", pod_group_size.EVENT_REASON, change.message())


async def pod_group_status(kube: kube_lib.Kube, call: Call, say: Say, job: Mapping[str, Any],
                           pods: Sequence[Mapping[str, Any]], upkeep: owned_objects.Upkeep,
                           gang: podgroups.GangSettings,
                           clock: Callable[[], float] = time.monotonic) -> tuple[Optional[Obj], Optional[float]]:
    """Read the job's PodGroup into ``status.podGroup`` and the condition ``PodGroupScheduled``
    (``podgroup_status``) when due. Returns the status patch to write, if any, and the seconds until the next
    reading (``None``: none is due, the group's status no longer matters).

    One GET of the group, at most every ``gang.status_interval_seconds``, and only while
    :func:`podgroup_status.worth_reading` says so: never for a job without a PodGroup this operator made (no
    gang scheduler, the CRD missing: the job says so already), nor once its pods all run and the group says so,
    nor once it finished. A group that is gone (deleted: created again before the next pods) is skipped; a
    refused read is said once (a Warning event) and tried again after the interval. A suspended job's status
    says its group waits for the resume (:func:`podgroup_status.suspended`), without a GET.
    """
    name = job["metadata"]["name"]
    status = job.get("status") or {}
    interval = gang.status_interval_seconds
    if not gang.enabled or interval <= 0 or ("PodGroup", name) not in upkeep.made:
        return None, None
    said_suspended = podgroup_status.suspended(status, datetime.datetime.now(datetime.timezone.utc))
    if said_suspended is not None:
        return said_suspended, None
    running = cond_lib.is_true(status.get("conditions") or [], cond_lib.RUNNING)
    if not running:
        upkeep.pod_group_reads_while_running = 0
    if not podgroup_status.worth_reading(status, gang.scheduler, upkeep.pod_group_reads_while_running):
        return None, None
    wait = upkeep.pod_group_read_due - clock()
    if wait > 0:
        return None, wait
    upkeep.pod_group_read_due = clock() + interval
    if running:
        upkeep.pod_group_reads_while_running += 1
    api = podgroups.APIS[gang.scheduler]
    try:
        group = await call(kube.get_pod_group, api.group, api.version, api.plural, job["metadata"]["namespace"], name)
    except Exception as e:  # noqa: BLE001 - said once; the job goes on, and the next reading tries again
        code, message = kube_lib.error_details(e)
        text = (f"could not read PodGroup {name} ({api.api_version}): {message} (HTTP {code}); status.podGroup "
                f"is not updated (the operator needs get on {api.plural}.{api.group})")
        if upkeep.pod_group_read_error != text:
            say("Warning", "FailedGetPodGroup", text)
        upkeep.pod_group_read_error = text
        return None, interval
    upkeep.pod_group_read_error = ""
    if group is None:
        return None, interval
    now = datetime.datetime.now(datetime.timezone.utc)
    found = podgroup_status.report(status, group, pods, gang.scheduler, now, gang.unscheduled_seconds)
    for kind, reason, message in found.events:
        say(kind, reason, message)
    return found.patch(status), podgroup_status.next_check_in(found, now, gang.unscheduled_seconds, interval)


async def _create_pod_group(kube: kube_lib.Kube, call: Call, job: Mapping[str, Any], job_spec: spec_lib.JobSpec,
                            gang: podgroups.GangSettings) -> Any:
    """Asks the API server for the job's PodGroup; what ``kube.create_pod_group`` answers."""
    group = podgroups.pod_group(job, job_spec, gang)
    assert group is not None
    api = podgroups.APIS[gang.scheduler]
    return await call(kube.create_pod_group, api.group, api.version, api.plural, group)


async def cert_manager_objects(kube: kube_lib.Kube, call: Call, say: Say, job: Mapping[str, Any],
                               upkeep: owned_objects.Upkeep, settings: cert_manager.CertManagerSettings) -> Optional[Obj]:
    """In cert-manager's mode, the job's Issuers and CA Certificate (``cert_manager.job_objects``), once per
    operator process; with an issuer of the chart's, a look that cert-manager's API is served. Returns the
    status patch to write, if any.

    While they cannot be made (cert-manager's CRDs missing: 404; a refusal; one of their names taken), the
    job's condition ``CertificateIssuerCreated`` is False with the reason, a Warning event says it once per
    distinct message (and the operator logs it), and :func:`why_pods_wait` holds the pods back: their
    certificates would never be issued. A job that already made pods with a CA Secret of the operator's
    keeps it: cert-manager would take that Secret over.
    """
    status = job.get("status") or {}
    if not settings.enabled or status.get("state") in FINISHED_STATES or CERT_MANAGER_READY in upkeep.made \
            or _spec_or_none(job) is None:
        return None
    meta = job["metadata"]
    what = f"the Certificates of job {meta['name']}"
    try:
        if cond_lib.is_true(status.get("conditions") or [], cond_lib.CREATED):
            secret = await call(kube.get_secret, meta["namespace"], job_certificates.ca_secret_name(meta["name"]))
            if secret is not None and not cert_manager.issued_by_cert_manager(secret):
                upkeep.made.add(CERT_MANAGER_READY)  # signed by the operator: certificate_secrets goes on so
                return None
        wanted = cert_manager.job_objects(job, settings)
        for obj in wanted:
            what = f"{obj['kind']} {obj['metadata']['name']}"
            if not await call(kube.create_cert_manager_object, obj):
                found = await call(kube.get_cert_manager_object, obj["kind"], meta["namespace"], obj["metadata"]["name"])
                if found is not None and not job_certificates.owned_by(found, job):
                    raise ValueError(f"{what} exists and is not this job's: delete or rename it (if it belonged to a "
                                     f"deleted job of the same name, it goes away shortly)")
        if not wanted and "certificates" not in (await call(kube.cert_manager_resources) or set()):
            raise _NotServedError()
    except Exception as e:  # noqa: BLE001 - every refusal is said, and tried again next pass
        code, message = kube_lib.error_details(e)
        if isinstance(e, _NotServedError) or code == 404:
            reason = cert_manager.MISSING
            text = cert_manager.missing_message(what, await call(kube.cert_manager_resources))
        else:
            reason = "FailedCreateIssuer"
            text = (f"could not create {what}: {message}{f' (HTTP {code})' if code else ''}; the job's pods are not "
                    f"created until it is")
        if upkeep.cert_manager_error != text:
            say("Warning", reason, text)
            logging.getLogger("tensorgrid_operator").warning("%s/%s: %s", meta["namespace"], meta["name"], text)
        upkeep.cert_manager_error = text
        return _condition_patch(status, cert_manager.CONDITION, False, reason, text)
    upkeep.made.add(CERT_MANAGER_READY)
    upkeep.cert_manager_error = ""
    if cond_lib.get_condition(status.get("conditions") or [], cert_manager.CONDITION) is None:
        return None  # made at the first try: nothing to report in the status
    made = ", ".join(f"{o['kind']} {o['metadata']['name']}" for o in wanted) or "nothing (cert-manager is served)"
    return _condition_patch(status, cert_manager.CONDITION, True, "IssuerCreated", f"created {made}")


def why_pods_wait(job: Mapping[str, Any], upkeep: owned_objects.Upkeep, gang: podgroups.GangSettings,
                  certificates: cert_manager.CertManagerSettings = cert_manager.CertManagerSettings()) -> Optional[str]:
    """Why the job's pods must not be created yet (its PodGroup, or its cert-manager objects, are missing);
    ``None``: they may be.

    For a finished job or one whose spec the reconcile fails, never.
    """
    name = job["metadata"]["name"]
    if _spec_or_none(job) is None or (job.get("status") or {}).get("state") in FINISHED_STATES:
        return None
    if gang.enabled and ("PodGroup", name) not in upkeep.made:
        return upkeep.pod_group_error or f"PodGroup {name} does not exist yet"
    if certificates.enabled and CERT_MANAGER_READY not in upkeep.made:
        return upkeep.cert_manager_error or f"the cert-manager objects of job {name} do not exist yet"
    return None


def _condition_patch(status: Mapping[str, Any], ctype: str, value: bool, reason: str, message: str) -> Optional[Obj]:
    conditions = [dict(c) for c in status.get("conditions") or []]
    before = [dict(c) for c in conditions]
    cond_lib.set_condition(conditions, ctype, value, reason, message, datetime.datetime.now(datetime.timezone.utc))
    return None if conditions == before else {"conditions": conditions}
