"""Scaling a running job's workers: ``kubectl scale tj/NAME --replicas=N`` or an edit of
``spec.replicaSpecs.Worker.replicas``.

Why it exists: parameter-server training is asynchronous, so workers can be added and removed
while it runs (the runtime lets a worker whose TF_CONFIG lists more workers join the
parameter servers). The pass itself needs little for it: a new worker is a missing replica
(``reconcile._create_missing`` makes it, with the TF_CONFIG of the new count) and a removed
one a replica the spec no longer has (``reconcile._delete_undesired`` deletes it with its
pod's grace period, so the program gets SIGTERM; ``outcomes`` never judges a replica outside
the spec, so its end is not a failure). As a StatefulSet does, new workers take the next
indexes and scaling down removes the highest; worker 0 stays while it is the chief (the CRD
keeps a job without a Chief at one worker at least). This module owns the rest:

- what a Kueue-queued job can do: its pods form one Kueue pod group of a fixed size
  (``kueue.x-k8s.io/pod-group-total-count``), so the worker count its pods were created with
  is held until they are all created again (``hold_for_kueue``);
- the records a removed worker leaves behind (``forget_removed_workers``): a worker index
  scaled away and back is a new worker, not one that finished;
- the events that explain a scaling (``announce``), and the status it shows: the current and
  desired workers and the selector of the scale subresource (``current_workers``,
  ``desired_workers``, ``worker_selector``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import plans
from tensorgrid_operator.reconcile import podview
from tensorgrid_operator.resources import kueue

RT = spec_lib.ReplicaType


def desired_workers(job: Mapping[str, Any]) -> Optional[int]:
    """``spec.replicaSpecs.Worker.replicas`` as asked (1, the CRD's default, when absent); ``None`` without workers."""
    worker = ((job.get("spec") or {}).get("replicaSpecs") or {}).get(RT.WORKER.value)
    return None if worker is None else int(worker.get("replicas", 1))


def worker_selector(job_name: str) -> str:
    """The label selector of the job's worker pods (the scale subresource's ``status.selector``)."""
    return f"{spec_lib.LABEL_JOB_NAME}={job_name},{spec_lib.LABEL_REPLICA_TYPE}={RT.WORKER.task_type}"


def current_workers(views: Sequence[podview.PodView], creating: Sequence[spec_lib.ReplicaKey]) -> int:
    """Worker pods that exist and have not ended (one being removed until it is gone), and those created now."""
    existing = sum(1 for v in views if v.key is not None and v.key.rtype is RT.WORKER
                   and v.phase not in podview.TERMINAL_PHASES)
    return existing + sum(1 for k in creating if k.rtype is RT.WORKER)


def hold_for_kueue(job: Mapping[str, Any], job_spec: spec_lib.JobSpec,
                   pods: Sequence[Mapping[str, Any]]) -> tuple[spec_lib.JobSpec, Optional[str]]:
    """The spec to reconcile, and why its worker count is held (``None`` when it is not).

    A job queued in Kueue runs as one pod group whose size every pod carries: Kueue admits
    the group for that many pods, and would neither admit an extra pod nor expect fewer. While
    pods of the group exist, the worker count they were made with stands; a new count takes
    effect when the pods are all created again (suspend and resume the job).
    """
    if kueue.queue_name(job) is None or RT.WORKER not in job_spec.replica_specs:
        return job_spec, None
    sizes = {int(size) for pod in pods
             if not (pod.get("metadata") or {}).get("deletionTimestamp")
             and (size := ((pod.get("metadata") or {}).get("annotations") or {})
                  .get(kueue.POD_GROUP_TOTAL_COUNT_ANNOTATION, "")).isdigit()}
    if len(sizes) != 1:
        return job_spec, None  # no group yet (or pods made by hand): the spec's count is used
    others = sum(job_spec.replicas(t) for t in spec_lib.REPLICA_TYPES if t is not RT.WORKER)
    held = sizes.pop() - others
    asked = job_spec.replicas(RT.WORKER)
    if held == asked or held < 0:
        return job_spec, None
    worker = dataclasses.replace(job_spec.replica_specs[RT.WORKER], replicas=held)
    message = (f"the job is queued in Kueue ({kueue.QUEUE_NAME_LABEL}={kueue.queue_name(job)}), whose pod group "
               f"was admitted for {held + others} pods: it keeps {held} workers, not the {asked} asked for, until "
               f"its pods are all created again (suspend and resume the job)")
    return dataclasses.replace(job_spec, replica_specs={**job_spec.replica_specs, RT.WORKER: worker}), message


def removed_worker(job_name: str, name: str, desired: Mapping[str, spec_lib.ReplicaKey]) -> bool:
    """Whether ``name`` is the pod or Service of a worker index the spec no longer has (scaled away)."""
    prefix = f"{job_name}-{RT.WORKER.task_type}-"
    index = name[len(prefix):] if name.startswith(prefix) else ""
    return index.isdigit() and f"{RT.WORKER.task_type}-{int(index)}" not in desired


def forget_removed_workers(work: plans.Work, job_spec: spec_lib.JobSpec) -> None:
    """Drop the finished records of worker indexes the spec no longer has: scaled back, they are new workers."""
    count = job_spec.replicas(RT.WORKER)
    for short in [s for s, r in work.finished.items() if r["type"] == RT.WORKER.value and int(r["index"]) >= count]:
        del work.finished[short]


def announce(work: plans.Work, job_spec: spec_lib.JobSpec, old_status: Mapping[str, Any],
             held: Optional[str]) -> None:
    """One event when the worker count asked for changes: which workers come or go, or why it is held.
    A suspended job has no pods to add or remove: its next pods are made at the new count."""
    before, asked = old_status.get("desiredWorkerReplicas"), desired_workers(work.job)
    if before is None or asked is None or int(before) == asked or job_spec.suspended:
        return
    before = int(before)
    job_name = work.job["metadata"]["name"]
    if held is not None:
        work.event("Warning", "ScalingHeld", f"workers {before} -> {asked} not done: {held}")
        return
    def names(indexes: range) -> str:
        return ", ".join(spec_lib.pod_name(job_name, spec_lib.ReplicaKey(RT.WORKER, i)) for i in indexes)
    count = job_spec.replicas(RT.WORKER)
    if asked > before:
        work.event("Normal", "ScaledUp", f"workers {before} -> {asked}: creating {names(range(before, asked))}, "
                   f"which join the running job with a TF_CONFIG listing {count} workers; no other pod restarts")
    else:
        work.event("Normal", "ScaledDown", f"workers {before} -> {asked}: deleting {names(range(asked, before))} "
                   f"(the highest indexes) with their pods' grace period (SIGTERM); their end is not counted as a "
                   f"failure, and no other pod restarts")
