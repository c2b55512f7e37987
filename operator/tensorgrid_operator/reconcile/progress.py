"""Training progress in ``status.progress``: the global step, its rate, the target and when it is reached.

The data path: every task serves Prometheus metrics on its ``metrics`` port, and the
task holding the ``global_step`` variable (a parameter server, under
``replica_device_setter``) exports ``tensorgrid_global_step``; the chief's
``StopAtStepHook`` exports the last step as ``tensorgrid_target_step``, its scalar
summaries as ``tensorgrid_summary_scalar{tag}`` (the loss among them), and, when the program
reads ``tf.data.experimental.dynamic_shards``, its shard service's epoch, fraction of shards
done and shards per epoch per data set (``tensorgrid_data_shards_epoch`` / ``_done_fraction`` /
``_per_epoch{dataset}``). While a job
runs, the operator GETs ``http://<pod IP>:<metrics port>/metrics`` of its chief and
parameter servers and keeps what it read in the status. It needs no permission
beyond reading the job's pods (which it has); the job's NetworkPolicy lets the
operator's pods reach the metrics port (docs/operator.md, "Progress").

When the chief ends, its metrics endpoint goes with it: so the runtime writes the chief's
final figures (last global step, steps per second, target, losses) into its termination message
(``tensorgrid.monitoring.write_final_figures``, at ``$TENSORGRID_TERMINATION_MESSAGE_PATH``),
which the kubelet keeps in the pod's status. :func:`final_progress` makes them the job's last
``status.progress`` (``final: true``; no reading replaces it), so a finished job keeps its
figures, and a job shorter than the progress interval reports once all the same.

This module is the pure part: which pods to read, what the text says, and the new
``status.progress`` from the old one and what was read. The HTTP GETs are in
``controller.progress_reader``.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from typing import Any, Mapping, Optional, Sequence

from prometheus_client import parser as prom_parser

from tensorgrid_operator.api import conditions as cond_lib
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import podview
from tensorgrid_operator.resources import manifests

Obj = dict[str, Any]
GLOBAL_STEP = "tensorgrid_global_step"
TARGET_STEP = "tensorgrid_target_step"
SUMMARY_SCALAR = "tensorgrid_summary_scalar"
# The shard service of tf.data.experimental.dynamic_shards, on the chief: per data set, the epoch it hands
# out (0-based), the fraction of that epoch's shards done and (from runtimes that export it) the
# number of shards in an epoch.
DATA_SHARDS_EPOCH = "tensorgrid_data_shards_epoch"
DATA_SHARDS_DONE_FRACTION = "tensorgrid_data_shards_done_fraction"
DATA_SHARDS_PER_EPOCH = "tensorgrid_data_shards_per_epoch"
# The most data sets kept in status.progress.dataShards (a program has one or two).
MAX_DATA_SETS = 8
# 1 or 0 once a PS's start ended: it loaded its live replica, or started empty (reconcile/ps_starts.py).
STARTED_FROM_REPLICA = "tensorgrid_ps_started_from_replica"
# The most of a metrics page that is read: a task's page is a few KiB.
MAX_PAGE_BYTES = 1 << 20
# The key of the chief's final figures in its termination message (tensorgrid.monitoring).
FINAL_FIGURES_KEY = "tensorgridFinalFigures"


@dataclasses.dataclass(frozen=True)
class Target:
    """One metrics endpoint to read."""

    pod: str
    url: str
    uid: str = ""
    ps_replica: str = ""
    """The PS replica the pod runs (``ps-0``); empty for the chief."""
    container_restarts: int = 0
    """The restarts of the pod's main container (a PS restarted in its pod is a new start of it)."""


@dataclasses.dataclass(frozen=True)
class Reading:
    """What one endpoint said, or why it said nothing."""

    pod: str
    global_step: Optional[int] = None
    target_step: Optional[int] = None
    error: str = ""
    loss: Optional[float] = None
    loss_tag: str = ""
    started_from_replica: Optional[bool] = None
    """A PS's ``tensorgrid_ps_started_from_replica``; None while its start's load runs, or not a PS."""
    data_shards: tuple[tuple[str, int, float, Optional[int]], ...] = ()
    """(data set, epoch, fraction of the epoch's shards done, shards per epoch or None where the page
    does not say) of the chief's ``dynamic_shards`` service."""


def loss_rank(tag: str) -> Optional[int]:
    """How surely a summary tag names the loss: 0 for ``loss``, 1 for ``.../loss``, 2 for a
    last path segment ending in ``loss`` (``total_loss``); None for other tags."""
    last = tag.rsplit("/", 1)[-1].lower()
    if tag == "loss":
        return 0
    if last == "loss":
        return 1
    return 2 if last.endswith("loss") else None


def scrape_targets(job_spec: spec_lib.JobSpec, pods: Sequence[Mapping[str, Any]]) -> list[Target]:
    """The running chief and parameter-server pods that have an IP, with their metrics URLs."""
    chief = spec_lib.chief_key(job_spec)
    port = {rtype: manifests.replica_port(job_spec, rtype, spec_lib.METRICS_PORT_NAME)
            for rtype in job_spec.replica_specs}
    targets = []
    for pod in pods:
        view = podview.view_pod(pod)
        ip = (pod.get("status") or {}).get("podIP")
        if view.key is None or not ip or view.phase != "Running" or view.terminating:
            continue
        if view.key == chief or view.key.rtype is spec_lib.ReplicaType.PS:
            host = f"[{ip}]" if ":" in ip else ip
            ps_replica = view.key.short_name if view.key.rtype is spec_lib.ReplicaType.PS else ""
            main = manifests.main_container(pod.get("spec") or {}) or {}
            restarts = sum(int(s.get("restartCount") or 0) for s in (pod.get("status") or {}).get("containerStatuses")
                           or [] if s.get("name") == main.get("name"))
            targets.append(Target(view.name, f"http://{host}:{port[view.key.rtype]}/metrics", view.uid, ps_replica,
                                  restarts))
    return sorted(targets, key=lambda t: t.pod)


def read_page(pod: str, text: str) -> Reading:
    """The largest ``tensorgrid_global_step`` and ``tensorgrid_target_step`` on a metrics
    page, the loss: the ``tensorgrid_summary_scalar`` whose tag names it most surely, and
    whether a PS started from its live replica (``tensorgrid_ps_started_from_replica``)."""
    steps: dict[str, list[int]] = {GLOBAL_STEP: [], TARGET_STEP: []}
    started_from_replica: Optional[bool] = None
    losses: list[tuple[int, str, float]] = []
    shards: dict[str, dict[str, float]] = {}
    try:
        for family in prom_parser.text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in (DATA_SHARDS_EPOCH, DATA_SHARDS_DONE_FRACTION, DATA_SHARDS_PER_EPOCH):
                    if math.isfinite(sample.value) and sample.value >= 0 and sample.labels.get("dataset"):
                        shards.setdefault(sample.labels["dataset"], {})[sample.name] = sample.value
                    continue
                if sample.name == SUMMARY_SCALAR:
                    tag = sample.labels.get("tag", "")
                    rank = loss_rank(tag)
                    if rank is not None:
                        losses.append((rank, tag, sample.value))
                    continue
                if sample.name == STARTED_FROM_REPLICA and sample.value in (0, 1):
                    started_from_replica = bool(started_from_replica) or sample.value == 1
                    continue
                minimum = 1 if sample.name == TARGET_STEP else 0  # a target of 0: no StopAtStepHook
                if sample.name in steps and math.isfinite(sample.value) and sample.value >= minimum:
                    steps[sample.name].append(int(sample.value))
    except (ValueError, TypeError, IndexError) as e:
        return Reading(pod, error=f"{pod}: the metrics page is not Prometheus text ({e})")
    _, tag, loss = min(losses, default=(0, "", None))
    data_shards = tuple((name, int(found[DATA_SHARDS_EPOCH]), min(found[DATA_SHARDS_DONE_FRACTION], 1.0),
                         int(found[DATA_SHARDS_PER_EPOCH]) if DATA_SHARDS_PER_EPOCH in found else None)
                        for name, found in sorted(shards.items())
                        if DATA_SHARDS_EPOCH in found and DATA_SHARDS_DONE_FRACTION in found)
    return Reading(pod, max(steps[GLOBAL_STEP], default=None), max(steps[TARGET_STEP], default=None),
                   loss=loss, loss_tag=tag, started_from_replica=started_from_replica,
                   data_shards=data_shards[:MAX_DATA_SETS])


def _with_data_shards(progress: Obj, old: Mapping[str, Any], readings: Sequence[Reading]) -> None:
    """Puts the chief's ``dynamic_shards`` progress (per data set: epoch, fraction of its shards done, shards
    per epoch where the page says) into ``progress``, or keeps the last known one while no page gives it."""
    reported = [r.data_shards for r in readings if r.data_shards]
    if not reported:
        if "dataShards" in old:
            progress["dataShards"] = old["dataShards"]
        return
    progress["dataShards"] = [{"dataset": name, "epoch": epoch, "fractionDone": round(fraction, 4),
                               **({} if shards is None else {"shardsPerEpoch": shards})}
                              for name, epoch, fraction, shards in reported[0]]


def _with_loss(progress: Obj, old: Mapping[str, Any], readings: Sequence[Reading]) -> list[str]:
    """Puts the freshest loss (or the last known one) into ``progress``; a non-finite loss
    is not a number the status can hold, so it is reported in the message instead."""
    reported = [r for r in readings if r.loss is not None]
    if not reported:
        for key in ("loss", "lossTag"):
            if key in old:
                progress[key] = old[key]
        return []
    reading = reported[0]
    assert reading.loss is not None
    if not math.isfinite(reading.loss):
        return [f"{reading.pod} reports a non-finite loss ({reading.loss_tag} = {reading.loss})"]
    progress["loss"] = float(f"{reading.loss:.6g}")
    progress["lossTag"] = reading.loss_tag
    return []


def next_progress(old: Optional[Mapping[str, Any]], readings: Sequence[Reading],
                  now: datetime.datetime) -> Optional[Obj]:
    """The new ``status.progress``; ``None`` when there is nothing to say yet.

    ``stepsPerSecond`` is the rate between this reading and the previous one; a step
    lower than before (a parameter server restored an older checkpoint) starts the
    rate over. When no endpoint gave a step, the last known progress stays and
    ``message`` says why it is not fresh.
    """
    old = dict(old or {})
    steps = [r.global_step for r in readings if r.global_step is not None]
    targets = [r.target_step for r in readings if r.target_step is not None]
    errors = [r.error for r in readings if r.error]
    if not steps:
        if not readings:
            return old or None  # no chief or PS pod runs with an IP yet
        stale = dict(old)
        stale["message"] = ("; ".join(errors) if errors
                            else f"no task of the job exports {GLOBAL_STEP} yet")
        return stale
    step = max(steps)
    progress: Obj = {"globalStep": step, "lastUpdateTime": cond_lib.format_time(now)}
    target = max(targets) if targets else old.get("targetStep")
    if target is not None:
        progress["targetStep"] = int(target)
    last_time = cond_lib.parse_time(old.get("lastUpdateTime"))
    last_step = old.get("globalStep")
    if last_time is not None and isinstance(last_step, int) and step >= last_step and now > last_time:
        rate = (step - last_step) / (now - last_time).total_seconds()
        progress["stepsPerSecond"] = round(rate, 3)
        if target is not None and rate > 0 and step < target:
            eta = now + datetime.timedelta(seconds=math.ceil((int(target) - step) / rate))
            progress["estimatedCompletionTime"] = cond_lib.format_time(eta)
    errors += _with_loss(progress, old, readings)
    _with_data_shards(progress, old, readings)
    if errors:
        progress["message"] = "; ".join(errors)
    return progress


def final_figures(message: str) -> Optional[Mapping[str, Any]]:
    """The chief's final figures in its termination message; ``None`` when it holds none (a
    program's own message, the runtime not reached, a job run by an older runtime)."""
    try:
        document = json.loads(message) if message else None
    except ValueError:
        return None
    figures = document.get(FINAL_FIGURES_KEY) if isinstance(document, dict) else None
    if not isinstance(figures, dict) or not _is_number(figures.get("globalStep"), integer=True):
        return None
    return figures


def _is_number(value: Any, integer: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) if integer else math.isfinite(value)


def final_progress(old: Optional[Mapping[str, Any]], job_spec: spec_lib.JobSpec, views: Sequence[podview.PodView],
                   job_finished: bool, now: datetime.datetime) -> Optional[Obj]:
    """``status.progress`` from the chief's final figures once its pod ended for good (it succeeded,
    or the job finished); ``None`` when there are none, or the progress holds them already.

    The figures the chief left win over the last reading; one it left out (no loss summary, no
    StopAtStepHook) keeps the last reading's value.
    """
    previous = dict(old or {})
    if previous.get("final"):
        return None
    chief = spec_lib.chief_key(job_spec)
    ended: list[tuple[datetime.datetime, Mapping[str, Any]]] = []
    for view in views:
        if view.key == chief and view.phase in podview.TERMINAL_PHASES and (view.phase == "Succeeded" or job_finished):
            left = final_figures(view.termination_message)
            if left is not None:
                ended.append((view.finished_at or now, left))
    if not ended:
        return None
    finished_at, figures = max(ended, key=lambda e: e[0])
    progress: Obj = {"globalStep": int(figures["globalStep"]),
                     "lastUpdateTime": cond_lib.format_time(finished_at), "final": True}
    rate: Any = figures.get("stepsPerSecond")
    target: Any = figures.get("targetStep")
    if _is_number(rate) and rate >= 0:
        progress["stepsPerSecond"] = round(float(rate), 3)
    elif "stepsPerSecond" in previous:
        progress["stepsPerSecond"] = previous["stepsPerSecond"]
    if _is_number(target, integer=True) and target >= 1:
        progress["targetStep"] = int(target)
    elif "targetStep" in previous:
        progress["targetStep"] = previous["targetStep"]
    losses: Any = figures.get("losses") if isinstance(figures.get("losses"), dict) else {}
    ranked = [(rank, str(tag), float(value)) for tag, value in losses.items()
              if _is_number(value) and (rank := loss_rank(str(tag))) is not None]
    if ranked:
        _, tag, loss = min(ranked)
        progress["loss"], progress["lossTag"] = float(f"{loss:.6g}"), tag
    else:
        progress.update({key: previous[key] for key in ("loss", "lossTag") if key in previous})
    if "dataShards" in previous:
        progress["dataShards"] = previous["dataShards"]  # the last reading's: the chief leaves none
    return progress
