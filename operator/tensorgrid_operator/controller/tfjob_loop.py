"""One loop per Kubeflow TFJob (a kopf daemon), registered only when the operator serves TFJob (``--serve-tfjob``).

Why it exists: a TFJob applied unchanged runs under this operator. Its loop makes the TrainingJob
that runs it (``api.tfjob_serving.training_job_for``: TFJob's defaults written out), writes the
TrainingJob's status back into the TFJob as Kubeflow does (``kubeflow_status``), and deletes the
TFJob ``runPolicy.ttlSecondsAfterFinished`` after it finished. Everything else (pods, restarts,
backoffLimit, activeDeadlineSeconds, cleanPodPolicy) is the TrainingJob's own loop (``job_loop``).
The TrainingJob's watch events wake the TFJob's loop. ``registrations.run`` imports this module,
and so registers it with kopf, only after ``refuse_unless_ours`` found the TFJob CRD to be the chart's.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import math
from typing import Any, Optional

import kopf

from tensorgrid_operator.api import tfjob_conversion
from tensorgrid_operator.api import tfjob_serving
from tensorgrid_operator.cluster import running_operator
from tensorgrid_operator.cluster import tfjob_calls
from tensorgrid_operator.controller import plan_application
from tensorgrid_operator.controller import state as state_lib

JobKey = tuple[str, str]
Obj = dict[str, Any]
# Exit status of an operator asked to serve TFJob under a CRD that is not the chart's (or none).
EXIT_TFJOB_NOT_OURS = 3
# After an unexpected API error, try again after this long.
ERROR_RETRY_SECONDS = 5.0


def refuse_unless_ours(calls: tfjob_calls.TFJobCalls, logger: logging.Logger) -> Optional[int]:
    """``None`` when the cluster's TFJob CRD is the chart's; else the exit status, after a log line saying why."""
    problem = tfjob_serving.crd_owner_problem(calls.get_crd())
    if problem is None:
        return None
    logger.error("refusing to serve TFJob (--serve-tfjob): %s", problem)
    return EXIT_TFJOB_NOT_OURS


def _calls(operator: running_operator.RunningOperator) -> tfjob_calls.TFJobCalls:
    if operator.tfjob_calls is None:
        raise RuntimeError("the operator serves TFJob but made no client for it at startup")
    return operator.tfjob_calls


@kopf.daemon("kubeflow.org", "v1", "tfjobs", cancellation_timeout=30.0)
async def tfjob_daemon(*, stopped: kopf.DaemonStopped, namespace: Optional[str], name: str, logger: kopf.Logger,
                       memo: kopf.Memo, **_: Any) -> None:
    """One loop per TFJob: serve it, then sleep until its TrainingJob changes, its TTL, or the resync."""
    operator = state_lib.operator_of(memo)
    key = (namespace or "", name)
    wake = asyncio.Event()
    operator.tfjob_wakers[key] = wake

    async def wake_on_stop() -> None:
        await stopped.wait()
        wake.set()

    stop_watcher = asyncio.create_task(wake_on_stop())
    try:
        while not stopped:
            wake.clear()
            try:
                delay = await _serve_once(operator, key, logger)
            except Exception as e:  # an API outage must not end the loop
                logger.warning("serving TFJob %s/%s failed (%s: %s); retrying in %.0fs", namespace, name,
                               type(e).__name__, e, ERROR_RETRY_SECONDS, exc_info=True)
                delay = ERROR_RETRY_SECONDS
            if delay is None:
                break
            try:
                await asyncio.wait_for(wake.wait(), timeout=None if math.isinf(delay) else max(delay, 0.0))
            except asyncio.TimeoutError:
                pass
    finally:
        stop_watcher.cancel()
        if operator.tfjob_wakers.get(key) is wake:
            del operator.tfjob_wakers[key]


async def _serve_once(operator: running_operator.RunningOperator, key: JobKey, logger: kopf.Logger) -> Optional[float]:
    """One pass: returns seconds until the next (``math.inf``: only when woken), ``None`` once the TFJob is gone."""
    calls = _calls(operator)
    tfjob = await operator.call(calls.get_tfjob, *key)
    if tfjob is None or tfjob["metadata"].get("deletionTimestamp"):
        return None
    job = await operator.call(calls.get_training_job, *key)
    now = datetime.datetime.now(datetime.timezone.utc)
    if job is None and not tfjob_serving.finished(tfjob.get("status") or {}):
        refusal = await _create_training_job(operator, tfjob, logger)
        if refusal is not None:
            return await _write_refusal(operator, tfjob, refusal, now)
        job = await operator.call(calls.get_training_job, *key)
    elif job is not None and not _owned_by(job, tfjob):
        message = (f"a TrainingJob named {key[1]} exists in {key[0]} and is not this TFJob's: the TFJob is not "
                   f"run until it is gone")
        kopf.event(plan_application.job_body(tfjob), type="Warning", reason="TrainingJobExists", message=message)
        return operator.settings.resync_seconds
    status = tfjob_serving.kubeflow_status(tfjob, (job or {}).get("status"), now)
    if status != (tfjob.get("status") or {}):
        written = await operator.call(calls.patch_tfjob_status, tfjob, status)
        if written is None:
            return 0.0  # the TFJob changed since it was read: again, from a fresh read
        tfjob = written
    ttl = tfjob_serving.ttl_remaining(tfjob, now)
    if ttl is not None and ttl <= 0:
        logger.info("TFJob %s/%s finished %ss ago: deleted (runPolicy.ttlSecondsAfterFinished)", *key,
                    tfjob["spec"]["runPolicy"]["ttlSecondsAfterFinished"])
        await operator.call(calls.delete_tfjob, tfjob)
        return None
    if ttl is not None:
        return ttl
    return math.inf if tfjob_serving.finished(tfjob.get("status") or {}) else operator.settings.resync_seconds


def _owned_by(job: Obj, tfjob: Obj) -> bool:
    return any(ref.get("uid") == tfjob["metadata"]["uid"] for ref in job["metadata"].get("ownerReferences") or [])


async def _create_training_job(operator: running_operator.RunningOperator, tfjob: Obj,
                               logger: kopf.Logger) -> Optional[str]:
    """Creates the TFJob's TrainingJob; returns why it cannot be run instead, when it cannot."""
    try:
        job, warnings = tfjob_serving.training_job_for(tfjob)
    except tfjob_conversion.ConversionError as e:
        return str(e)
    for warning in warnings:
        logger.info("TFJob %s/%s: %s", tfjob["metadata"]["namespace"], tfjob["metadata"]["name"], warning)
    if await operator.call(_calls(operator).create_training_job, job):
        kopf.event(plan_application.job_body(tfjob), type="Normal", reason="TrainingJobCreated",
                   message=f"TrainingJob {job['metadata']['name']} runs this TFJob (tensorgrid's operator)")
    return None


async def _write_refusal(operator: running_operator.RunningOperator, tfjob: Obj, reason: str,
                         now: datetime.datetime) -> Optional[float]:
    """A TFJob that cannot run: Failed, saying why, as Kubeflow's validation would have refused it."""
    status = tfjob_serving.kubeflow_status(tfjob, {"conditions": [
        {"type": "Failed", "status": "True", "message": f"it cannot be run: {reason}"}]}, now)
    if status != (tfjob.get("status") or {}):
        kopf.event(plan_application.job_body(tfjob), type="Warning", reason="TFJobInvalid", message=reason)
        if await operator.call(_calls(operator).patch_tfjob_status, tfjob, status) is None:
            return 0.0
    return math.inf


@kopf.on.event("tensorgrid.io", "v1", "trainingjobs", labels={tfjob_serving.LABEL_TFJOB: kopf.PRESENT})
async def training_job_event(*, namespace: Optional[str], labels: kopf.Labels, memo: kopf.Memo, **_: Any) -> None:
    """A TFJob's TrainingJob changed (its status, or it is gone): the TFJob's loop writes the status."""
    operator = state_lib.state_of(memo).running
    key = (namespace or "", labels[tfjob_serving.LABEL_TFJOB])
    if operator is not None and key in operator.tfjob_wakers:
        operator.tfjob_wakers[key].set()


@kopf.on.event("kubeflow.org", "v1", "tfjobs")
async def tfjob_event(*, namespace: Optional[str], name: str, memo: kopf.Memo, **_: Any) -> None:
    """A TFJob changed (a TTL set on a finished one, its status edited): its loop reads it again."""
    operator = state_lib.state_of(memo).running
    key = (namespace or "", name)
    if operator is not None and key in operator.tfjob_wakers:
        operator.tfjob_wakers[key].set()
