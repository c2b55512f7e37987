"""Reading a running job's metrics into ``status.progress``: the HTTP GETs, on the operator's thread pool.

Which pods to read, what their pages say and the new ``status.progress`` are pure
(``reconcile.progress``); this decides when a reading is due (every
``progress_interval_seconds`` while the job runs), GETs each task's /metrics page
(``http://<pod IP>:<metrics port>/metrics``, at most ``progress.MAX_PAGE_BYTES``) and
writes the progress when it changed (until the chief's final figures replace the
readings), with what the PS pods said of their start (``reconcile.ps_starts``: which
recovery a new PS pod made), in one status PATCH, then posts that recovery's Events.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import urllib.error
import urllib.request
from typing import Any, Optional

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.cluster import running_operator
from tensorgrid_operator.controller import plan_application
from tensorgrid_operator.reconcile import progress
from tensorgrid_operator.reconcile import ps_starts

JobKey = tuple[str, str]
# States in which the job's metrics are read into status.progress.
PROGRESS_STATES = ("Running", "Restarting")


async def update_progress(operator: running_operator.RunningOperator, key: JobKey, job: dict[str, Any],
                          pods: list[dict[str, Any]]) -> Optional[float]:
    """Read the running job's metrics into ``status.progress`` when due; seconds until the next reading."""
    interval = operator.settings.progress_interval_seconds
    status = job.get("status") or {}
    # Once the chief ended, its final figures (reconcile.progress.final_progress) are the last word.
    final = bool((status.get("progress") or {}).get("final"))
    if interval <= 0 or status.get("state") not in PROGRESS_STATES or final:
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
    now = datetime.datetime.now(datetime.timezone.utc)
    old = status.get("progress")
    new = progress.next_progress(old, readings, now)
    patch: dict[str, Any] = {}
    if new is not None and new != old:
        # A merge patch: keys the new progress no longer has are deleted by naming them null.
        patch["progress"] = {name: new.get(name) for name in set(old or {}) | set(new)}
    starts = ps_starts.report(status, [
        ps_starts.PSStart(target.ps_replica, target.pod, target.uid, reading.started_from_replica,
                          target.container_restarts)
        for target, reading in zip(targets, readings)
        if target.ps_replica and reading.started_from_replica is not None], now)
    patch.update(starts.patch(status))
    if patch:
        job = await operator.write_status(key, job, patch)
        say = plan_application.say_on(job)
        for kind, reason, message in starts.events:
            say(kind, reason, message)
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
