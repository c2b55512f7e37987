"""``tf.estimator.RunConfig``: where an Estimator runs and how often it saves, read from TF_CONFIG.

TF_CONFIG is the contract between the operator (or ``tensorgrid local``) and a training program:
``{"cluster": {"chief": [...], "worker": [...], "ps": [...]}, "task": {"type", "index"}}``, with an
``evaluator`` task outside ``cluster``. This module applies TensorFlow's Estimator rules to it: one
chief in a cluster (or the legacy ``master``), the task's own address as the session master, the
PS and worker counts, the evaluator outside the training cluster, and TensorFlow's ValueErrors
for a TF_CONFIG that breaks them.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
from typing import Any, Callable, Optional

from tensorgrid.client import config as config_lib
from tensorgrid.distributed import cluster as cluster_lib

TF_CONFIG_ENV = "TF_CONFIG"
LOCAL_MASTER = ""
GRPC_SCHEME = "grpc://"
DEFAULT_SAVE_CHECKPOINTS_SECS = 600
_SAVE_CHECKPOINTS_BOTH = "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set."
_USE_DEFAULT: Any = object()


class TaskType:
    """The task types of TF_CONFIG that Estimators know."""

    MASTER = "master"
    PS = "ps"
    WORKER = "worker"
    CHIEF = "chief"
    EVALUATOR = "evaluator"


REPLACEABLE = (
    "model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps", "save_checkpoints_secs",
    "session_config", "keep_checkpoint_max", "keep_checkpoint_every_n_hours", "log_step_count_steps",
    "train_distribute", "device_fn", "protocol", "eval_distribute", "experimental_distribute",
    "experimental_max_worker_delay_secs", "session_creation_timeout_secs", "checkpoint_save_graph_def",
)
"""The settings ``RunConfig.replace`` may change (TensorFlow's list): the cluster comes from TF_CONFIG only."""


class RunConfig:
    """The configuration of an Estimator's run (``tf.estimator.RunConfig``).

    The distributed properties (``cluster_spec``, ``task_type``, ``task_id``, ``master``,
    ``is_chief``, ``num_ps_replicas``, ``num_worker_replicas``, ``global_id_in_cluster``) come
    from the ``TF_CONFIG`` environment variable; without ``cluster`` the run is local (a single
    worker that is its own chief). ``save_checkpoints_secs`` defaults to 600 unless
    ``save_checkpoints_steps`` is given.
    """

    def __init__(self, model_dir: Any = None, tf_random_seed: Optional[int] = None, save_summary_steps: int = 100,
                 save_checkpoints_steps: Any = _USE_DEFAULT, save_checkpoints_secs: Any = _USE_DEFAULT,
                 session_config: Optional[config_lib.ConfigProto] = None, keep_checkpoint_max: int = 5,
                 keep_checkpoint_every_n_hours: float = 10000, log_step_count_steps: int = 100,
                 train_distribute: Any = None, device_fn: Optional[Callable[[Any], Any]] = None,
                 protocol: Optional[str] = None, eval_distribute: Any = None, experimental_distribute: Any = None,
                 experimental_max_worker_delay_secs: Optional[int] = None,
                 session_creation_timeout_secs: float = 7200, checkpoint_save_graph_def: bool = True) -> None:
        if save_checkpoints_steps is _USE_DEFAULT and save_checkpoints_secs is _USE_DEFAULT:
            save_checkpoints_steps, save_checkpoints_secs = None, DEFAULT_SAVE_CHECKPOINTS_SECS
        elif save_checkpoints_secs is _USE_DEFAULT:
            save_checkpoints_secs = None
        elif save_checkpoints_steps is _USE_DEFAULT:
            save_checkpoints_steps = None
        elif save_checkpoints_steps is not None and save_checkpoints_secs is not None:
            raise ValueError(_SAVE_CHECKPOINTS_BOTH)
        for name, strategy in (("train_distribute", train_distribute), ("eval_distribute", eval_distribute),
                               ("experimental_distribute", experimental_distribute)):
            if strategy is not None:
                raise ValueError(f"RunConfig({name}={strategy!r}): tensorgrid's Estimators take no distribution "
                                 "strategy; they train between-graph on the TF_CONFIG cluster "
                                 "(replica_device_setter over the PS tasks), as TF1's did")
        tf_config = json.loads(os.environ.get(TF_CONFIG_ENV) or "{}")
        if not isinstance(tf_config, dict):
            raise ValueError(f"TF_CONFIG must be a JSON object, got {tf_config!r}")
        self._model_dir: Optional[str] = _model_dir(tf_config, path_to_str(model_dir))
        self._tf_random_seed = tf_random_seed
        self._save_summary_steps = save_summary_steps
        self._save_checkpoints_steps = save_checkpoints_steps
        self._save_checkpoints_secs = save_checkpoints_secs
        self._session_config = session_config
        self._keep_checkpoint_max = keep_checkpoint_max
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._log_step_count_steps = log_step_count_steps
        self._train_distribute = train_distribute
        self._device_fn = device_fn
        self._protocol = protocol
        self._eval_distribute = eval_distribute
        self._experimental_distribute = experimental_distribute
        self._experimental_max_worker_delay_secs = experimental_max_worker_delay_secs
        self._session_creation_timeout_secs = session_creation_timeout_secs
        self._checkpoint_save_graph_def = checkpoint_save_graph_def
        _validate(self)
        self._read_cluster(tf_config)
        if self._session_config is None and self._cluster_spec:
            self._session_config = self._default_distributed_session_config()

    def _read_cluster(self, tf_config: dict[str, Any]) -> None:
        service = tf_config.get("service")
        if service is not None and not isinstance(service, dict):
            raise TypeError(f'If "service" is set in TF_CONFIG, it must be a dict. Given {type(service)}')
        self._service: Optional[dict[str, Any]] = service
        self._cluster_spec = cluster_lib.ClusterSpec(tf_config.get("cluster", {}))
        task = tf_config.get("task", {})
        self._evaluation_master = LOCAL_MASTER
        if not self._cluster_spec:
            self._task_type: Optional[str] = task.get("type", TaskType.WORKER)
            self._task_id = int(task.get("index", 0))
            if self._task_type != TaskType.WORKER:
                raise ValueError('If "cluster" is not set in TF_CONFIG, task type must be WORKER.')
            if self._task_id != 0:
                raise ValueError('If "cluster" is not set in TF_CONFIG, task index must be 0.')
            self._master = tf_config.get("session_master", LOCAL_MASTER)
            self._evaluation_master = tf_config.get("eval_session_master", LOCAL_MASTER)
            self._is_chief = True
            self._num_ps_replicas = 0
            self._num_worker_replicas = 1
            self._global_id_in_cluster: Optional[int] = 0
            return
        legacy_master = TaskType.MASTER in self._cluster_spec.jobs
        if legacy_master and TaskType.CHIEF in self._cluster_spec.jobs:
            raise ValueError("If `master` node exists in `cluster`, job `chief` is not supported.")
        chief_type = TaskType.MASTER if legacy_master else TaskType.CHIEF
        self._task_type, self._task_id = _task_in_cluster(self._cluster_spec, task, chief_type)
        if legacy_master and self._task_type == TaskType.EVALUATOR:
            raise ValueError("If `master` node exists in `cluster`, task_type `evaluator` is not supported.")
        self._is_chief = self._task_type == chief_type
        if self._task_type == TaskType.EVALUATOR:
            # The evaluator reads checkpoints on its own: it is not part of the training cluster.
            self._evaluation_master = tf_config.get("eval_session_master", LOCAL_MASTER)
            self._cluster_spec = cluster_lib.ClusterSpec({})
            self._master = LOCAL_MASTER
            self._num_ps_replicas = 0
            self._num_worker_replicas = 0
            self._global_id_in_cluster = None
            return
        self._master = _session_master(self._cluster_spec, self._task_type, self._task_id, tf_config)
        jobs = self._cluster_spec.as_dict()
        self._num_ps_replicas = len(jobs.get(TaskType.PS, []))
        self._num_worker_replicas = len(jobs.get(TaskType.WORKER, [])) + len(jobs.get(chief_type, []))
        self._global_id_in_cluster = _global_id(self._cluster_spec, self._task_type, self._task_id, chief_type)

    def _default_distributed_session_config(self) -> Optional[config_lib.ConfigProto]:
        """TensorFlow's device filters per task type: a worker sees the PS tasks and itself only."""
        filters = {
            TaskType.MASTER: ["/job:ps", "/job:master"],
            TaskType.CHIEF: ["/job:ps", "/job:chief"],
            TaskType.WORKER: ["/job:ps", f"/job:worker/task:{self._task_id}"],
            TaskType.PS: ["/job:ps", "/job:worker", "/job:chief", "/job:master"],
        }.get(self._task_type or "")
        if filters is None:
            return None
        return config_lib.ConfigProto(allow_soft_placement=True, device_filters=filters)

    def replace(self, **kwargs: Any) -> "RunConfig":
        """A copy with the given settings changed; only those of ``REPLACEABLE``."""
        new = copy.deepcopy(self)
        for key, value in kwargs.items():
            if key not in REPLACEABLE:
                raise ValueError(f"Replacing {key} is not supported. Allowed properties are {list(REPLACEABLE)}.")
            setattr(new, "_" + key, value)
        steps_given = "save_checkpoints_steps" in kwargs
        secs_given = "save_checkpoints_secs" in kwargs
        if steps_given and secs_given:
            if new._save_checkpoints_steps is not None and new._save_checkpoints_secs is not None:
                raise ValueError(_SAVE_CHECKPOINTS_BOTH)
        elif steps_given and new._save_checkpoints_steps is not None:
            new._save_checkpoints_secs = None
        elif secs_given and new._save_checkpoints_secs is not None:
            new._save_checkpoints_steps = None
        _validate(new)
        return new

    cluster_spec = property(lambda self: self._cluster_spec)
    task_type = property(lambda self: self._task_type)
    task_id = property(lambda self: self._task_id)
    master = property(lambda self: self._master)
    evaluation_master = property(lambda self: self._evaluation_master)
    is_chief = property(lambda self: self._is_chief)
    num_ps_replicas = property(lambda self: self._num_ps_replicas)
    num_worker_replicas = property(lambda self: self._num_worker_replicas)
    global_id_in_cluster = property(lambda self: self._global_id_in_cluster)
    service = property(lambda self: self._service)
    model_dir = property(lambda self: self._model_dir)
    tf_random_seed = property(lambda self: self._tf_random_seed)
    save_summary_steps = property(lambda self: self._save_summary_steps)
    save_checkpoints_steps = property(lambda self: self._save_checkpoints_steps)
    save_checkpoints_secs = property(lambda self: self._save_checkpoints_secs)
    session_config = property(lambda self: self._session_config)
    keep_checkpoint_max = property(lambda self: self._keep_checkpoint_max)
    keep_checkpoint_every_n_hours = property(lambda self: self._keep_checkpoint_every_n_hours)
    log_step_count_steps = property(lambda self: self._log_step_count_steps)
    train_distribute = property(lambda self: self._train_distribute)
    eval_distribute = property(lambda self: self._eval_distribute)
    device_fn = property(lambda self: self._device_fn)
    protocol = property(lambda self: self._protocol)
    experimental_max_worker_delay_secs = property(lambda self: self._experimental_max_worker_delay_secs)
    session_creation_timeout_secs = property(lambda self: self._session_creation_timeout_secs)
    checkpoint_save_graph_def = property(lambda self: self._checkpoint_save_graph_def)

    def __repr__(self) -> str:
        shown = ("model_dir", "task_type", "task_id", "cluster_spec", "master", "is_chief", "num_ps_replicas",
                 "num_worker_replicas", "save_checkpoints_steps", "save_checkpoints_secs", "save_summary_steps")
        return "RunConfig(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in shown) + ")"


def path_to_str(path: Any) -> Any:
    """The string of an ``os.PathLike`` model directory; anything else as it is."""
    return os.fspath(path) if isinstance(path, os.PathLike) else path


def _model_dir(tf_config: dict[str, Any], model_dir: Optional[str]) -> Optional[str]:
    """The model directory of the constructor or else TF_CONFIG's ``model_dir``; the two must agree."""
    if model_dir == "":
        raise ValueError("model_dir should be non-empty.")
    in_tf_config = tf_config.get("model_dir")
    if in_tf_config == "":
        raise ValueError("model_dir in TF_CONFIG should be non-empty.")
    if in_tf_config and model_dir and in_tf_config != model_dir:
        raise ValueError("`model_dir` provided in RunConfig construct, if set, must have the same value as the "
                         f'model_dir in TF_CONFIG. model_dir: {model_dir}\nTF_CONFIG["model_dir"]: {in_tf_config}.\n')
    return model_dir or in_tf_config


def _task_in_cluster(cluster: cluster_lib.ClusterSpec, task: dict[str, Any], chief_type: str) -> tuple[str, int]:
    """TF_CONFIG's task, checked against its cluster: one chief, a known type, an index in range."""
    if chief_type not in cluster.jobs:
        raise ValueError(f'If "cluster" is set in TF_CONFIG, it must have one "{chief_type}" node.')
    if cluster.num_tasks(chief_type) > 1:
        raise ValueError(f'The "cluster" in TF_CONFIG must have only one "{chief_type}" node.')
    task_type = task.get("type")
    task_id = task.get("index")
    if not task_type:
        raise ValueError('If "cluster" is set in TF_CONFIG, task type must be set.')
    if task_id is None:
        raise ValueError('If "cluster" is set in TF_CONFIG, task index must be set.')
    task_id = int(task_id)
    if task_id < 0:
        raise ValueError("Task index must be non-negative number.")
    if task_type == TaskType.EVALUATOR:
        return task_type, task_id
    if task_type not in cluster.jobs:
        raise ValueError(f"{task_type} is not a valid task_type in the cluster_spec:\n{cluster}\n\n"
                         "Note that these values may be coming from the TF_CONFIG environment variable.")
    if task_id not in cluster.task_indices(task_type):
        raise ValueError(f"{task_id} is not a valid task_id for task_type {task_type} in the cluster_spec:\n"
                         f"{cluster}\n\nNote that these values may be coming from the TF_CONFIG environment variable.")
    return task_type, task_id


def _session_master(cluster: cluster_lib.ClusterSpec, task_type: str, task_id: int,
                    tf_config: dict[str, Any]) -> str:
    """TF_CONFIG's ``session_master``, else '' for a one-task cluster, else this task's own server."""
    if "session_master" in tf_config:
        return str(tf_config["session_master"])
    jobs = cluster.jobs
    if len(jobs) == 1 and cluster.num_tasks(jobs[0]) == 1:
        return LOCAL_MASTER
    return GRPC_SCHEME + cluster.task_address(task_type, task_id)


def _global_id(cluster: cluster_lib.ClusterSpec, task_type: str, task_id: int, chief_type: str) -> int:
    """The chief is 0, then the other types but ps in name order, then ps (TensorFlow's numbering)."""
    order = [chief_type] + [job for job in sorted(cluster.jobs) if job not in (chief_type, TaskType.PS)]
    if TaskType.PS in cluster.jobs:
        order.append(TaskType.PS)
    first_id = 0
    for job in order:
        if job == task_type:
            return first_id + task_id
        first_id += cluster.num_tasks(job)
    raise ValueError(f"task type {task_type!r} is not in the cluster {cluster}")


def _validate(config: RunConfig) -> None:
    """TensorFlow's checks of the settings, each a ValueError naming the setting."""
    checks: list[tuple[str, Callable[[Any], bool], str]] = [
        ("model_dir", bool, "model_dir should be non-empty"),
        ("save_summary_steps", lambda v: v >= 0, "save_summary_steps should be >= 0"),
        ("save_checkpoints_steps", lambda v: v >= 0, "save_checkpoints_steps should be >= 0"),
        ("save_checkpoints_secs", lambda v: v >= 0, "save_checkpoints_secs should be >= 0"),
        ("session_config", lambda v: isinstance(v, config_lib.ConfigProto),
         "session_config must be instance of ConfigProto"),
        ("keep_checkpoint_max", lambda v: v >= 0, "keep_checkpoint_max should be >= 0"),
        ("keep_checkpoint_every_n_hours", lambda v: v > 0, "keep_checkpoint_every_n_hours should be > 0"),
        ("log_step_count_steps", lambda v: v > 0, "log_step_count_steps should be > 0"),
        ("tf_random_seed", lambda v: isinstance(v, int), "tf_random_seed must be integer."),
        ("experimental_max_worker_delay_secs", lambda v: isinstance(v, int),
         "experimental_max_worker_delay_secs must be an integer if set."),
        ("session_creation_timeout_secs", lambda v: v > 0, "session_creation_timeout_secs should be > 0"),
        ("device_fn", lambda v: callable(v) and list(inspect.signature(v).parameters) == ["op"],
         'device_fn must be callable with exactly one argument "op".'),
        ("protocol", lambda v: v in ("grpc", "grpc+verbs"), "protocol should be grpc or grpc+verbs"),
    ]
    for name, holds, message in checks:
        value = getattr(config, name)
        if value is not None and not holds(value):
            raise ValueError(f"{message} (got {value!r})")
