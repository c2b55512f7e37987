"""The TrainingJob resource as the operator reads it: names, labels and a typed spec.

Owns everything both the reconciler and the controller must agree on: the API group,
label keys, ports, how a replica's pod and Service are named, and the parsing of
``spec`` into dataclasses with the CRD's defaults applied (the API server applies
them too; applying them here keeps the pure functions correct on hand-made input).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Mapping, Optional, TypeVar

from tensorgrid_operator.api import pod_failure_policy as pod_failure_policy_lib
from tensorgrid_operator.api import ps_replication as ps_replication_lib

GROUP = "tensorgrid.io"
VERSION = "v1"
PLURAL = "trainingjobs"
KIND = "TrainingJob"
API_VERSION = f"{GROUP}/{VERSION}"

LABEL_JOB_NAME = "tensorgrid.io/job-name"
LABEL_REPLICA_TYPE = "tensorgrid.io/replica-type"
LABEL_REPLICA_INDEX = "tensorgrid.io/replica-index"
LABEL_JOB_ROLE = "tensorgrid.io/job-role"
# On pods only (not in Service selectors): the job's status.restartEpoch when the pod was made.
LABEL_RESTART_EPOCH = "tensorgrid.io/restart-epoch"

# kopf's finalizer on every TrainingJob the operator holds (kopf daemons require one);
# `tensorgrid-operator --remove-finalizers` strips it for an uninstall.
FINALIZER = "tensorgrid.io/operator"

MAIN_CONTAINER = "tensorgrid"
# Kubeflow TFJob's main container (TF_CONFIG goes to it there): the main one here when no
# container is named MAIN_CONTAINER, so a converted TFJob's template works unchanged.
KUBEFLOW_MAIN_CONTAINER = "tensorflow"
PORT_NAME = "tensorgrid"
DEFAULT_PORT = 2222
# The runtime's raw TCP data channel (tensors and step calls between tasks), beside gRPC:
# the port the main container declares under this name, else the gRPC port + 1 (2223).
DATA_PORT_NAME = "tensorgrid-data"
METRICS_PORT_NAME = "metrics"
METRICS_PORT = 9090

# Kubernetes names of Services (and hence pods, which share them) are DNS-1035
# labels: at most 63 characters.
MAX_NAME_LENGTH = 63
# The most pods (all replica types together) one job may have; the CRD's CEL rule says the
# same. Every pod's TF_CONFIG names every other one (about 40 bytes each), and the API
# server, etcd and the operator hold all of them: 2,000 keeps TF_CONFIG near 80 KB, under
# the 128 KiB one environment variable can hold (manifests.MAX_TF_CONFIG_BYTES).
MAX_REPLICAS = 2000
DEFAULT_BACKOFF_LIMIT = 6

# spec.managedBy (as batch/v1 Job's): absent or this value, the operator reconciles the job;
# any other value (MultiKueue's ``kueue.x-k8s.io/multikueue``) and it leaves the job alone.
CONTROLLER_NAME = "tensorgrid.io/trainingjob-controller"
MAX_MANAGED_BY_LENGTH = 63


class ReplicaType(str, enum.Enum):
    """A role in the training cluster; the value is the key under ``spec.replicaSpecs``."""

    CHIEF = "Chief"
    PS = "PS"
    WORKER = "Worker"
    EVALUATOR = "Evaluator"

    @property
    def task_type(self) -> str:
        """The TF_CONFIG job name (and the lower-case part of pod names)."""
        return self.value.lower()


# Order of creation and of TF_CONFIG keys: PS first, so the servers workers dial exist.
REPLICA_TYPES = (ReplicaType.PS, ReplicaType.CHIEF, ReplicaType.WORKER, ReplicaType.EVALUATOR)


class RestartPolicy(str, enum.Enum):
    NEVER = "Never"
    ON_FAILURE = "OnFailure"
    ALWAYS = "Always"
    EXIT_CODE = "ExitCode"


class CleanPodPolicy(str, enum.Enum):
    ALL = "All"
    RUNNING = "Running"
    NONE = "None"


class SuccessPolicy(str, enum.Enum):
    CHIEF = "Chief"
    ALL_WORKERS = "AllWorkers"


@dataclasses.dataclass(frozen=True)
class ReplicaSpec:
    replicas: int
    """How many pods of this type (indices 0..replicas-1)."""
    restart_policy: RestartPolicy
    """What the operator does when one of these pods ends (pods themselves never restart in place)."""
    template: Mapping[str, Any]
    """The user's PodTemplateSpec, copied into every pod of this type."""
    min_replicas: Optional[int] = None
    """Worker only: the fewest replicas the job may be scaled to (``kubectl scale``); ``None``: no bound."""
    max_replicas: Optional[int] = None
    """Worker only: the most replicas the job may be scaled to; ``None``: no bound but the job's cap."""
    pod_failure_policy: pod_failure_policy_lib.PodFailurePolicy = pod_failure_policy_lib.PodFailurePolicy()
    """Rules deciding a failed pod's fate before ``restart_policy`` and the exit-code table (none: those alone)."""


@dataclasses.dataclass(frozen=True)
class SchedulingPolicy:
    """Kubeflow's spec.runPolicy.schedulingPolicy: the job's PodGroup when a gang scheduler is set (podgroups)."""

    min_available: Optional[int] = None
    """Pods that must be schedulable together before any starts; ``None``: all of the job's replicas."""
    queue: Optional[str] = None
    """The Volcano queue of the PodGroup."""
    priority_class: Optional[str] = None
    """The PriorityClass of the PodGroup (Volcano orders queued groups by it)."""
    schedule_timeout_seconds: Optional[int] = None
    """scheduler-plugins: how long the group may wait to be scheduled whole before it is retried."""


@dataclasses.dataclass(frozen=True)
class RunPolicy:
    clean_pod_policy: CleanPodPolicy = CleanPodPolicy.RUNNING
    """Which pods to delete when the job finishes."""
    backoff_limit: int = DEFAULT_BACKOFF_LIMIT
    """Retries (replica restarts) allowed before the job fails."""
    active_deadline_seconds: Optional[int] = None
    """Seconds from start (or resume) after which the job fails and its pods stop."""
    ttl_seconds_after_finished: Optional[int] = None
    """Seconds after completion after which the TrainingJob itself is deleted."""
    suspend: bool = False
    """Kubeflow TFJob's spec.runPolicy.suspend: the same as ``JobSpec.suspend`` (either one suspends)."""
    scheduling_policy: SchedulingPolicy = SchedulingPolicy()
    """Gang scheduling: what the job's PodGroup asks (used only when the operator has a gang scheduler set)."""


@dataclasses.dataclass(frozen=True)
class TensorBoardSpec:
    """spec.tensorboard: a TensorBoard over the job's summaries (``resources.tensorboard``)."""

    enabled: bool = False
    """Run the TensorBoard (a Deployment and a Service owned by the job)."""
    log_dir: str = ""
    """The absolute path, in the chief's (else worker 0's) main container, the job writes its summaries to."""
    image: Optional[str] = None
    """The TensorBoard's image; ``None``: the main container's image of that replica."""
    resources: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The TensorBoard container's resources; empty: ``resources.tensorboard.DEFAULT_RESOURCES``."""


@dataclasses.dataclass(frozen=True)
class JobSpec:
    replica_specs: Mapping[ReplicaType, ReplicaSpec]
    run_policy: RunPolicy
    success_policy: SuccessPolicy
    suspend: bool = False
    """spec.suspend (as batch/v1 Job's): when true, the job's pods are deleted; false again recreates them."""
    tensorboard: TensorBoardSpec = TensorBoardSpec()
    """spec.tensorboard: whether the operator runs a TensorBoard over the job's log directory, and how."""
    synchronous: bool = False
    """spec.synchronous: the program trains with SyncReplicasOptimizer, so its worker count is fixed
    (the API server refuses a change of spec.replicaSpecs.Worker.replicas)."""
    ps_replication: ps_replication_lib.PSReplication = ps_replication_lib.PSReplication()
    """spec.replicaSpecs.PS.replication: live replicas of the parameter servers' state (off when absent)."""

    @property
    def suspended(self) -> bool:
        """Whether the job is suspended, by spec.suspend or by Kubeflow's spec.runPolicy.suspend."""
        return self.suspend or self.run_policy.suspend

    @property
    def suspended_by(self) -> str:
        """The field that suspends the job, for messages (``spec.suspend`` when both do)."""
        return "spec.suspend" if self.suspend else "spec.runPolicy.suspend"

    def replicas(self, rtype: ReplicaType) -> int:
        spec = self.replica_specs.get(rtype)
        return spec.replicas if spec is not None else 0


@dataclasses.dataclass(frozen=True, order=True)
class ReplicaKey:
    """One replica: a (type, index) pair, named like its pod without the job prefix."""

    rtype: ReplicaType
    index: int

    @property
    def short_name(self) -> str:
        return f"{self.rtype.task_type}-{self.index}"


def pod_name(job_name: str, key: ReplicaKey) -> str:
    """``<job>-<type in lower case>-<index>``: the pod's and its Service's name."""
    return f"{job_name}-{key.short_name}"


def chief_key(spec: JobSpec) -> Optional[ReplicaKey]:
    """The replica whose success ends the job: the chief, else worker 0."""
    if spec.replicas(ReplicaType.CHIEF) > 0:
        return ReplicaKey(ReplicaType.CHIEF, 0)
    if spec.replicas(ReplicaType.WORKER) > 0:
        return ReplicaKey(ReplicaType.WORKER, 0)
    return None


def all_replicas(spec: JobSpec) -> list[ReplicaKey]:
    return [ReplicaKey(rtype, i) for rtype in REPLICA_TYPES for i in range(spec.replicas(rtype))]


def parse_spec(raw: Mapping[str, Any]) -> JobSpec:
    """The typed spec, with the CRD's defaults for anything missing.

    Raises ``ValueError`` naming the field for values the CRD schema would reject,
    so hand-made specs fail loudly instead of reconciling into something odd.
    """
    replica_specs: dict[ReplicaType, ReplicaSpec] = {}
    raw_replicas = raw.get("replicaSpecs") or {}
    for key in raw_replicas:
        if key not in {t.value for t in ReplicaType}:
            raise ValueError(f"spec.replicaSpecs.{key}: unknown replica type; valid: Chief, PS, Worker, Evaluator")
    for rtype in REPLICA_TYPES:
        entry = raw_replicas.get(rtype.value)
        if entry is None:
            continue
        replicas = int(entry.get("replicas", 1))
        if replicas < 0:
            raise ValueError(f"spec.replicaSpecs.{rtype.value}.replicas: must be >= 0, got {replicas}")
        policy = _enum(RestartPolicy, entry.get("restartPolicy", RestartPolicy.EXIT_CODE.value),
                       f"spec.replicaSpecs.{rtype.value}.restartPolicy")
        bounds = _replica_bounds(rtype, entry, replicas)
        if rtype is not ReplicaType.PS and entry.get("replication") is not None:
            raise ValueError(f"spec.replicaSpecs.{rtype.value}.replication: only spec.replicaSpecs.PS takes "
                             f"replication (the parameter servers' state)")
        template = entry.get("template") or {}
        failure_policy = pod_failure_policy_lib.parse(entry.get("podFailurePolicy"),
                                                      f"spec.replicaSpecs.{rtype.value}.podFailurePolicy",
                                                      _container_names(template))
        replica_specs[rtype] = ReplicaSpec(replicas, policy, template, *bounds, pod_failure_policy=failure_policy)
    total = sum(r.replicas for r in replica_specs.values())
    if total > MAX_REPLICAS:
        counts = " + ".join(f"{t.value} {s.replicas}" for t, s in replica_specs.items() if s.replicas)
        raise ValueError(f"spec.replicaSpecs: {total} replicas in all ({counts}); a job has at most {MAX_REPLICAS} "
                         f"(docs/operator.md, Limits)")
    run = raw.get("runPolicy") or {}
    run_policy = RunPolicy(
        clean_pod_policy=_enum(CleanPodPolicy, run.get("cleanPodPolicy", CleanPodPolicy.RUNNING.value),
                               "spec.runPolicy.cleanPodPolicy"),
        backoff_limit=int(run.get("backoffLimit", DEFAULT_BACKOFF_LIMIT)),
        active_deadline_seconds=_optional_int(run.get("activeDeadlineSeconds")),
        ttl_seconds_after_finished=_optional_int(run.get("ttlSecondsAfterFinished")),
        suspend=bool(run.get("suspend", False)),
        scheduling_policy=_scheduling_policy(run.get("schedulingPolicy") or {}, total),
    )
    success = _enum(SuccessPolicy, raw.get("successPolicy", SuccessPolicy.CHIEF.value), "spec.successPolicy")
    return JobSpec(replica_specs, run_policy, success, suspend=bool(raw.get("suspend", False)),
                   tensorboard=_tensorboard(raw.get("tensorboard") or {}),
                   synchronous=bool(raw.get("synchronous", False)),
                   ps_replication=ps_replication_lib.parse((raw_replicas.get(ReplicaType.PS.value) or {}).get(
                       "replication"), replica_specs[ReplicaType.PS].replicas if ReplicaType.PS in replica_specs else 0))


def _container_names(template: Mapping[str, Any]) -> list[str]:
    """The names of a pod template's containers and init containers."""
    pod_spec = template.get("spec") or {}
    return [str(c.get("name")) for key in ("containers", "initContainers") for c in pod_spec.get(key) or []
            if isinstance(c, Mapping) and c.get("name")]


def _tensorboard(raw: Mapping[str, Any]) -> TensorBoardSpec:
    enabled = raw.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ValueError(f"spec.tensorboard.enabled: {enabled!r} is not a boolean (true or false)")
    log_dir = raw.get("logDir") or ""
    if not isinstance(log_dir, str) or (log_dir and not log_dir.startswith("/")):
        raise ValueError(f"spec.tensorboard.logDir: {log_dir!r} is not an absolute path; give the directory "
                         f"the job writes its summaries to, as its chief's main container sees it")
    if enabled and not log_dir:
        raise ValueError("spec.tensorboard.logDir is required when spec.tensorboard.enabled is true: the directory "
                         "the job writes its summaries to")
    resources = raw.get("resources") or {}
    if not isinstance(resources, Mapping) or not set(resources) <= {"requests", "limits"}:
        raise ValueError(f"spec.tensorboard.resources: {resources!r} is not a container's resources "
                         f"(an object with requests and/or limits)")
    return TensorBoardSpec(enabled, log_dir, raw.get("image") or None, dict(resources))


def _replica_bounds(rtype: ReplicaType, entry: Mapping[str, Any], replicas: int) -> tuple[Optional[int], Optional[int]]:
    """(minReplicas, maxReplicas) of a replica spec: only Worker may be scaled, within them."""
    field = f"spec.replicaSpecs.{rtype.value}"
    minimum, maximum = _optional_int(entry.get("minReplicas")), _optional_int(entry.get("maxReplicas"))
    if rtype is not ReplicaType.WORKER and (minimum is not None or maximum is not None):
        raise ValueError(f"{field}: minReplicas and maxReplicas bound the scaling of workers; only "
                         f"spec.replicaSpecs.Worker takes them")
    if minimum is not None and minimum < 0:
        raise ValueError(f"{field}.minReplicas: must be >= 0, got {minimum}")
    if maximum is not None and minimum is not None and maximum < minimum:
        raise ValueError(f"{field}: maxReplicas {maximum} is less than minReplicas {minimum}")
    if minimum is not None and replicas < minimum:
        raise ValueError(f"{field}.replicas: {replicas} is less than minReplicas {minimum}")
    if maximum is not None and replicas > maximum:
        raise ValueError(f"{field}.replicas: {replicas} is more than maxReplicas {maximum}")
    return minimum, maximum


def _scheduling_policy(raw: Mapping[str, Any], total: int) -> SchedulingPolicy:
    minimum = _optional_int(raw.get("minAvailable"))
    if minimum is not None and not 1 <= minimum <= total:
        raise ValueError(f"spec.runPolicy.schedulingPolicy.minAvailable: {minimum} must be >= 1 and <= the job's "
                         f"{total} replicas in all (absent: all of them)")
    timeout = _optional_int(raw.get("scheduleTimeoutSeconds"))
    if timeout is not None and timeout < 1:
        raise ValueError(f"spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds: {timeout} must be >= 1")
    return SchedulingPolicy(minimum, raw.get("queue") or None, raw.get("priorityClass") or None, timeout)


def managed_by(raw_spec: Mapping[str, Any]) -> str:
    """The controller that owns the job's pods and status: spec.managedBy, this operator when absent."""
    value = raw_spec.get("managedBy")
    return CONTROLLER_NAME if value is None else str(value)


def managed_here(raw_spec: Mapping[str, Any]) -> bool:
    """Whether this operator reconciles the job (spec.managedBy absent or ``CONTROLLER_NAME``)."""
    return managed_by(raw_spec) == CONTROLLER_NAME


def _optional_int(value: Any) -> Optional[int]:
    return None if value is None else int(value)


_E = TypeVar("_E", bound=enum.Enum)


def _enum(cls: type[_E], value: Any, field: str) -> _E:
    try:
        return cls(value)
    except ValueError:
        valid = ", ".join(m.value for m in cls)
        raise ValueError(f"{field}: unsupported value {value!r}; valid: {valid}") from None
