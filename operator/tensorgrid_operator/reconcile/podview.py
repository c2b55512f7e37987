"""What the reconciler reads from one pod: its replica, how it ended, why it is stuck or was disrupted.

A pod object carries far more than a decision needs and says some things in several
places (the phase, each container's state, conditions); :func:`view_pod` boils it down
to a :class:`PodView`, so the decisions read one flat record and the rules for
reading a pod live in one place.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Mapping, Optional

from tensorgrid_operator.api import conditions
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import manifests
from tensorgrid_operator.resources import podgroups

# Waiting reasons of a pending pod that will not go away by themselves.
STUCK_WAITING_REASONS = frozenset({
    "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
    "CreateContainerConfigError", "CreateContainerError",
})
UNSCHEDULABLE = "Unschedulable"
# A pod held by scheduling gates (``spec.schedulingGates``): Kueue's ``kueue.x-k8s.io/admission``
# until it admits the job's pod group, or another admission controller's.
SCHEDULING_GATED = "SchedulingGated"
# Pods the cluster stopped, not the program: the kubelet's node-pressure evictions and
# graceful node shutdowns (phase Failed, reason below, often exit code 0 or 143), and
# any pod with the DisruptionTarget condition (preemption, eviction, taint manager).
# Like a Job's podFailurePolicy for DisruptionTarget, they are recreated without
# counting against backoffLimit.
DISRUPTION_REASONS = frozenset({"Evicted", "Terminated", "Shutdown", "NodeShutdown", "Preempted"})
DISRUPTION_TARGET = "DisruptionTarget"
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclasses.dataclass(frozen=True)
class PodView:
    """What the reconciler needs from one pod."""

    name: str
    uid: str
    key: Optional[spec_lib.ReplicaKey]
    phase: str
    terminating: bool
    exit_code: Optional[int]
    reason: str
    stuck_reason: str = ""
    stuck_message: str = ""
    disrupted: str = ""
    """Why the cluster stopped this pod (eviction, node shutdown, preemption); empty if it did not."""
    epoch: int = 0
    """The restart epoch the pod was created in (its label; 0 without one)."""
    sidecar_running: bool = False
    """The main container ended but the pod still runs: a sidecar (an injected istio-proxy) keeps it up."""
    deletion_time: Optional[datetime.datetime] = None
    """``metadata.deletionTimestamp``: when the grace period of a terminating pod ends."""
    node: str = ""
    """The node the pod is bound to (``spec.nodeName``); empty while unscheduled."""
    pod_group: str = ""
    """The gang scheduler's PodGroup the pod is in (its label or annotation, ``podgroups``); empty if none."""
    scheduling_gates: tuple[str, ...] = ()
    """The names of the pod's scheduling gates: the scheduler ignores it until they are removed."""
    termination_message: str = ""
    """What the main container left in its termination message when it ended (the chief's final
    figures, ``progress.final_progress``); empty while it runs."""
    finished_at: Optional[datetime.datetime] = None
    """When the main container ended; ``None`` while it runs."""
    container_exit_codes: tuple[tuple[str, int], ...] = ()
    """(name, exit code) of every terminated container, init containers first: what a podFailurePolicy's
    onExitCodes reads."""
    pod_conditions: tuple[tuple[str, str], ...] = ()
    """(type, status) of every pod condition: what a podFailurePolicy's onPodConditions reads."""

    @property
    def active(self) -> bool:
        """The replica has not ended (its pod is pending or its main container runs)."""
        return self.phase not in TERMINAL_PHASES and not self.terminating

    @property
    def pod_running(self) -> bool:
        """The pod still holds its node: it is active, or a sidecar outlives the main container."""
        return (self.active or self.sidecar_running) and not self.terminating


def replica_key(labels: Mapping[str, str]) -> Optional[spec_lib.ReplicaKey]:
    """The replica a pod (or a pod about to be created) belongs to, from its labels."""
    by_task_type = {t.task_type: t for t in spec_lib.ReplicaType}
    rtype = by_task_type.get(labels.get(spec_lib.LABEL_REPLICA_TYPE, ""))
    index = labels.get(spec_lib.LABEL_REPLICA_INDEX, "")
    if rtype is None or not index.isdigit():
        return None
    return spec_lib.ReplicaKey(rtype, int(index))


def _epoch(labels: Mapping[str, str]) -> int:
    value = labels.get(spec_lib.LABEL_RESTART_EPOCH, "")
    return int(value) if value.isdigit() else 0


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    """Whether the object with ``uid`` is the controller of ``obj``."""
    return any(ref.get("uid") == uid and ref.get("controller")
               for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


def _main_container_status(pod: Mapping[str, Any], strict: bool = False) -> Optional[Mapping[str, Any]]:
    """The status of the main container; unless ``strict``, the first status when it has none yet."""
    statuses: list[Mapping[str, Any]] = (pod.get("status") or {}).get("containerStatuses") or []
    main = manifests.main_container(pod.get("spec") or {})
    main_name = main.get("name") if main else None
    for cs in statuses:
        if cs.get("name") == main_name:
            return cs
    return statuses[0] if statuses and not strict else None


def _time_or_none(text: Any) -> Optional[datetime.datetime]:
    """An RFC 3339 time the kubelet wrote; ``None`` for a missing or unreadable one (only a
    final-figures timestamp depends on it)."""
    try:
        return conditions.parse_time(str(text)) if text else None
    except ValueError:
        return None


def _main_terminated(pod: Mapping[str, Any]) -> bool:
    state = (_main_container_status(pod, strict=True) or {}).get("state") or {}
    return "exitCode" in (state.get("terminated") or {})


def _other_container_alive(pod: Mapping[str, Any]) -> bool:
    """Whether a container besides the main one has not terminated (a sidecar)."""
    main = _main_container_status(pod, strict=True)
    return any(cs is not main and not ((cs.get("state") or {}).get("terminated"))
               for cs in (pod.get("status") or {}).get("containerStatuses") or [])


def _exit(pod: Mapping[str, Any]) -> tuple[Optional[int], str]:
    """The main container's exit code and reason; else the first failed container's."""
    status = pod.get("status") or {}
    candidates = [_main_container_status(pod)] + list(status.get("containerStatuses") or [])
    for cs in candidates:
        terminated = ((cs or {}).get("state") or {}).get("terminated") or {}
        if "exitCode" in terminated:
            return int(terminated["exitCode"]), str(terminated.get("reason") or "")
    return None, str(status.get("reason") or "")


def _container_exit_codes(pod: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    status = pod.get("status") or {}
    ended = []
    for cs in list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or []):
        terminated = (cs.get("state") or {}).get("terminated") or {}
        if "exitCode" in terminated:
            ended.append((str(cs.get("name") or ""), int(terminated["exitCode"])))
    return tuple(ended)


def _stuck(pod: Mapping[str, Any]) -> tuple[str, str]:
    status = pod.get("status") or {}
    if status.get("phase", "Pending") != "Pending":
        return "", ""
    for cs in list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or []):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK_WAITING_REASONS:
            return str(waiting["reason"]), str(waiting.get("message") or "")
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" \
                and cond.get("reason") == UNSCHEDULABLE:
            return UNSCHEDULABLE, str(cond.get("message") or "")
    return "", ""


def _disruption(pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == DISRUPTION_TARGET and cond.get("status") == "True":
            return f"{cond.get('reason') or DISRUPTION_TARGET}: {cond.get('message') or 'disrupted'}"
    if status.get("phase") == "Failed" and status.get("reason") in DISRUPTION_REASONS:
        return f"{status['reason']}: {status.get('message') or 'stopped by the node'}"
    return ""


def view_pod(pod: Mapping[str, Any]) -> PodView:
    """The pod as the decisions see it.

    The main container's end is the replica's end: a pod that a sidecar keeps Running
    after the main container exited reads as Succeeded (exit 0) or Failed, so the job
    does not wait forever for a pod that will never stop by itself.
    """
    meta = pod.get("metadata") or {}
    exit_code, reason = _exit(pod)
    stuck_reason, stuck_message = _stuck(pod)
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    main_ended = phase not in TERMINAL_PHASES and _main_terminated(pod)
    if main_ended:
        phase = "Succeeded" if exit_code == 0 else "Failed"
    # Not a pod whose only container just exited and whose phase the kubelet has not
    # updated yet: that pod holds nothing, and cleanPodPolicy Running must leave it be.
    sidecar_running = main_ended and _other_container_alive(pod)
    terminated = ((_main_container_status(pod, strict=True) or {}).get("state") or {}).get("terminated") or {}
    return PodView(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        key=replica_key(meta.get("labels") or {}),
        phase=phase,
        terminating=bool(meta.get("deletionTimestamp")),
        exit_code=exit_code,
        reason=reason,
        stuck_reason=stuck_reason,
        stuck_message=stuck_message,
        disrupted=_disruption(pod),
        epoch=_epoch(meta.get("labels") or {}),
        sidecar_running=sidecar_running,
        deletion_time=conditions.parse_time(meta.get("deletionTimestamp")),
        node=str((pod.get("spec") or {}).get("nodeName") or ""),
        pod_group=podgroups.group_of(meta),
        scheduling_gates=tuple(str(g.get("name")) for g in (pod.get("spec") or {}).get("schedulingGates") or []
                               if phase == "Pending"),
        termination_message=str(terminated.get("message") or ""),
        finished_at=_time_or_none(terminated.get("finishedAt")),
        container_exit_codes=_container_exit_codes(pod),
        pod_conditions=tuple((str(c.get("type") or ""), str(c.get("status") or ""))
                         for c in (pod.get("status") or {}).get("conditions") or []),
    )
