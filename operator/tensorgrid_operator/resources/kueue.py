"""What a TrainingJob's pods carry so that Kueue admits the whole job as one pod group.

Kueue has no integration for the TrainingJob kind, so it never suspends or resumes one.
Its plain-Pod integration does the job instead: a pod labelled
``kueue.x-k8s.io/queue-name`` is held by a scheduling gate until Kueue admits it, and
pods that share ``kueue.x-k8s.io/pod-group-name`` and the annotation
``kueue.x-k8s.io/pod-group-total-count`` are admitted together, as one Workload named
like the group, once that many pods exist: the job's parameter servers never start
without its workers (docs/operator.md, "Kueue"). A TrainingJob labelled with a queue
name hands that label, the group and its size (and a WorkloadPriorityClass label) to
every pod it creates. When the job ends, its pods get
``kueue.x-k8s.io/retriable-in-group: "false"``: Kueue does not wait for replacements
of the pods the operator deleted, and releases the group's quota. While Kueue holds the
group (every pod gated), the job's active clock waits, as a queued Job's does while Kueue
keeps it suspended.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
POD_GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
RETRIABLE_IN_GROUP_ANNOTATION = "kueue.x-k8s.io/retriable-in-group"
# The scheduling gate Kueue's webhook puts on a queued pod and removes when it admits the group.
ADMISSION_GATE = "kueue.x-k8s.io/admission"
# Label values are at most 63 characters; the group name is also the Workload's name.
MAX_LABEL_VALUE = 63
UID_PART = 8


def queue_name(job: Mapping[str, Any]) -> Optional[str]:
    """The LocalQueue the job is submitted to: its ``kueue.x-k8s.io/queue-name`` label, if any."""
    labels = (job.get("metadata") or {}).get("labels") or {}
    value = labels.get(QUEUE_NAME_LABEL)
    return str(value) if value else None


def pod_group_name(job: Mapping[str, Any]) -> str:
    """``<job>-<first 8 characters of its uid>``: one group (and Workload) per job, never reused.

    The uid keeps a job deleted and created again under the same name out of the old
    group, whose pods may still be terminating.
    """
    meta = job["metadata"]
    suffix = "-" + str(meta["uid"]).replace("-", "")[:UID_PART]
    return str(meta["name"])[:MAX_LABEL_VALUE - len(suffix)] + suffix


def pod_metadata(job: Mapping[str, Any], total_pods: int) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) that put a pod into the job's Kueue pod group; empty when not queued."""
    queue = queue_name(job)
    if queue is None:
        return {}, {}
    labels = {QUEUE_NAME_LABEL: queue, POD_GROUP_NAME_LABEL: pod_group_name(job)}
    priority = ((job.get("metadata") or {}).get("labels") or {}).get(PRIORITY_CLASS_LABEL)
    if priority:
        labels[PRIORITY_CLASS_LABEL] = str(priority)
    return labels, {POD_GROUP_TOTAL_COUNT_ANNOTATION: str(total_pods)}


def awaiting_admission(job: Mapping[str, Any], active_pod_gates: Iterable[Sequence[str]]) -> bool:
    """Whether ``job`` is queued and Kueue has not admitted its group: no active pod of it (pending or
    running, not terminating) is free of Kueue's admission gate (``active_pod_gates``: each such pod's
    scheduling gates). True before its pods exist, while Kueue holds them, and after a preemption until
    the recreated pods are admitted again."""
    if queue_name(job) is None:
        return False
    return not any(ADMISSION_GATE not in gates for gates in active_pod_gates)


def needs_group_closed(job: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether a pod of a finished queued job still lacks ``retriable-in-group: "false"``."""
    if queue_name(job) is None:
        return False
    meta = pod.get("metadata") or {}
    if (meta.get("labels") or {}).get(POD_GROUP_NAME_LABEL) is None:
        return False  # made before the job was queued, or by hand: not in a Kueue group
    return (meta.get("annotations") or {}).get(RETRIABLE_IN_GROUP_ANNOTATION) != "false"


def close_group_patch() -> dict[str, Any]:
    """The merge patch that tells Kueue the group is over: no replacement pods will come."""
    return {"metadata": {"annotations": {RETRIABLE_IN_GROUP_ANNOTATION: "false"}}}
