"""Gang scheduling: the PodGroup of a job, and what its pods carry to join it.

A parameter-server job whose PS pods start while its workers cannot be placed holds
nodes and makes no progress, and two such jobs can hold each other's nodes forever. A
gang scheduler places a job's pods all together or not at all, given a PodGroup that
says how many of them must fit (``minMember``). With ``--gang-scheduler`` the operator
creates one PodGroup per job, named like the job and owned by it, before the job's
first pods, from ``spec.runPolicy.schedulingPolicy`` (Kubeflow's field names):

- ``volcano``: a ``scheduling.volcano.sh/v1beta1`` PodGroup (minMember, queue,
  priorityClassName); pods get ``schedulerName: volcano`` and the annotation
  ``scheduling.k8s.io/group-name``;
- ``scheduler-plugins`` (the coscheduling plugin): a ``scheduling.x-k8s.io/v1alpha1``
  PodGroup (minMember, scheduleTimeoutSeconds); pods get the label
  ``scheduling.x-k8s.io/pod-group`` and the scheduler name the operator is given.

``minMember`` is ``minAvailable``, else all of the job's replicas, the workers counted at
``minReplicas`` when the Worker spec sets it: a job scaled within its bounds never has fewer pods
than its gang, so a restarted pod can always be placed again. The PodGroup is made once; without
``minAvailable`` or ``minReplicas`` scaling resizes its ``minMember`` to the new count
(``reconcile.pod_group_size``; docs/operator.md, "Scaling a running job"). Pure functions;
``cluster.ensure_objects`` creates the object, hold the pods back while it cannot be created, and create it
again before new pods if it was deleted.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import manifests

Obj = dict[str, Any]

NONE = "none"
VOLCANO = "volcano"
SCHEDULER_PLUGINS = "scheduler-plugins"
GANG_SCHEDULERS = (NONE, VOLCANO, SCHEDULER_PLUGINS)

VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
SCHEDULER_PLUGINS_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
# The scheduler name of scheduler-plugins' own install (its Helm chart's default).
DEFAULT_SCHEDULER_PLUGINS_NAME = "scheduler-plugins-scheduler"

# The condition a job carries while its PodGroup cannot be created (its pods are held back).
CONDITION = "PodGroupCreated"


@dataclasses.dataclass(frozen=True)
class Api:
    """Where a gang scheduler's PodGroups live."""

    group: str
    version: str
    plural: str = "podgroups"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


APIS = {VOLCANO: Api("scheduling.volcano.sh", "v1beta1"), SCHEDULER_PLUGINS: Api("scheduling.x-k8s.io", "v1alpha1")}


@dataclasses.dataclass(frozen=True)
class GangSettings:
    """The operator's gang scheduling (flags ``--gang-scheduler``, ``--gang-scheduler-name``; chart values)."""

    scheduler: str = NONE
    """``none``, ``volcano`` or ``scheduler-plugins``."""
    scheduler_name: str = ""
    """The pods' schedulerName; empty: ``volcano``, or ``scheduler-plugins-scheduler`` for scheduler-plugins."""
    status_interval_seconds: float = 10.0
    """How often, at most, a job's PodGroup is read into ``status.podGroup`` while its pods do not all run
    (``podgroup_status``); 0 turns the reading off."""
    unscheduled_seconds: float = 60.0
    """How long a group may stay unplaced before the job's condition ``PodGroupScheduled`` turns False and a
    Warning event says why."""

    def __post_init__(self) -> None:
        if self.scheduler not in GANG_SCHEDULERS:
            raise ValueError(f"gang scheduler {self.scheduler!r} is not one of {', '.join(GANG_SCHEDULERS)}")
        for flag, value in (("--gang-status-interval-seconds", self.status_interval_seconds),
                            ("--gang-unscheduled-seconds", self.unscheduled_seconds)):
            if not value >= 0:  # NaN too
                raise ValueError(f"{flag} {value!r} must be a number of seconds >= 0")

    @property
    def enabled(self) -> bool:
        return self.scheduler != NONE

    @property
    def pod_scheduler_name(self) -> str:
        if self.scheduler_name:
            return self.scheduler_name
        return VOLCANO if self.scheduler == VOLCANO else DEFAULT_SCHEDULER_PLUGINS_NAME


def min_member(job_spec: spec_lib.JobSpec) -> int:
    """``schedulingPolicy.minAvailable``, else every replica of the job, the workers at their
    ``minReplicas`` when it is set (the fewest the job may be scaled to)."""
    wanted = job_spec.run_policy.scheduling_policy.min_available
    if wanted is not None:
        return wanted
    worker = job_spec.replica_specs.get(spec_lib.ReplicaType.WORKER)
    return sum(job_spec.replicas(t) if t is not spec_lib.ReplicaType.WORKER or worker is None
               or worker.min_replicas is None else worker.min_replicas for t in spec_lib.REPLICA_TYPES)


def pod_group(job: Mapping[str, Any], job_spec: spec_lib.JobSpec, gang: GangSettings) -> Optional[Obj]:
    """The job's PodGroup for the operator's gang scheduler; ``None`` without one."""
    if not gang.enabled:
        return None
    policy = job_spec.run_policy.scheduling_policy
    meta = job["metadata"]
    spec: Obj = {"minMember": min_member(job_spec)}
    if gang.scheduler == VOLCANO:
        if policy.queue:
            spec["queue"] = policy.queue
        if policy.priority_class:
            spec["priorityClassName"] = policy.priority_class
    elif policy.schedule_timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = policy.schedule_timeout_seconds
    return {
        "apiVersion": APIS[gang.scheduler].api_version,
        "kind": "PodGroup",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                     "labels": {spec_lib.LABEL_JOB_NAME: meta["name"]},
                     "ownerReferences": [manifests.owner_reference(job)]},
        "spec": spec,
    }


def with_gang_fields(pod: Mapping[str, Any], gang: GangSettings) -> Obj:
    """The pod in its job's PodGroup: the gang scheduler's name (unless the template names a scheduler)
    and the group's annotation (Volcano) or label (scheduler-plugins)."""
    if not gang.enabled:
        return dict(pod)
    meta = dict(pod["metadata"])
    group = meta["labels"][spec_lib.LABEL_JOB_NAME]
    if gang.scheduler == VOLCANO:
        meta["annotations"] = {**(meta.get("annotations") or {}), VOLCANO_GROUP_ANNOTATION: group}
    else:
        meta["labels"] = {**meta["labels"], SCHEDULER_PLUGINS_GROUP_LABEL: group}
    spec = dict(pod["spec"])
    spec.setdefault("schedulerName", gang.pod_scheduler_name)
    return {**pod, "metadata": meta, "spec": spec}


def group_of(pod_metadata: Mapping[str, Any]) -> str:
    """The PodGroup a pod is in (scheduler-plugins' label or Volcano's annotation); empty if none."""
    labels = pod_metadata.get("labels") or {}
    annotations = pod_metadata.get("annotations") or {}
    return str(labels.get(SCHEDULER_PLUGINS_GROUP_LABEL) or annotations.get(VOLCANO_GROUP_ANNOTATION) or "")


def waiting_message(group: str, job_spec: spec_lib.JobSpec) -> str:
    """What a job whose gang-scheduled pods are unschedulable adds to the scheduler's words."""
    wanted = min_member(job_spec)
    return (f"the job is gang scheduled: its PodGroup {group} has pods placed only when {wanted} of them "
            f"(minMember) fit together, and waits whole until then")


def failure_message(gang: GangSettings, name: str, code: Optional[int], message: str) -> tuple[str, str]:
    """(reason, message) of a PodGroup that could not be created: the job's pods wait for it."""
    api = APIS[gang.scheduler]
    if code == 404:
        return ("PodGroupCRDMissing",
                f"could not create PodGroup {name}: the API server has no {api.plural}.{api.group} "
                f"({api.api_version}) resource: install {gang.scheduler} (its PodGroup CRD), or run the operator "
                f"with --gang-scheduler {NONE}; the job's pods are not created until the PodGroup is")
    return ("FailedCreatePodGroup", f"could not create PodGroup {name}: {message} (HTTP {code}); the job's pods "
                                    f"are not created until it is")


def recreated_message(name: str) -> str:
    return (f"PodGroup {name} of the job was deleted; created it again before the job's new pods, which the gang "
            f"scheduler places only in their group (delete the TrainingJob, or run the operator with "
            f"--gang-scheduler {NONE}, to do without it)")
