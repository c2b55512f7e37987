"""``tf.estimator.train_and_evaluate``: one call that does what each TF_CONFIG task should do.

Locally (no cluster), it trains and evaluates each new checkpoint as training saves it, at most
once per ``throttle_secs``, and once more at the end. On a cluster it starts this task's server
and then: the chief and the workers train (between-graph, the variables on the PS tasks), a PS
serves until training ends, and the evaluator, outside the cluster, evaluates each new
checkpoint of ``model_dir`` until one reaches ``TrainSpec.max_steps``. After each evaluation the
``EvalSpec``'s exporters export the checkpoint just evaluated (``exporter.py``).
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any, Callable, Optional, Sequence

from tensorgrid.distributed.rpc import server as server_lib
from tensorgrid.estimator import estimator as estimator_lib
from tensorgrid.estimator import exporter as exporter_lib
from tensorgrid.estimator import run_config as run_config_lib
from tensorgrid.train import basic_session_run_hooks as hooks_lib
from tensorgrid.train import checkpoint_management
from tensorgrid.train import session_run_hook

log = logging.getLogger("tensorgrid.estimator")
TaskType = run_config_lib.TaskType
EVALUATOR_POLL_SECONDS = 1.0
"""How often the evaluator looks for a new checkpoint once ``throttle_secs`` have passed."""


def _checked_input_fn(input_fn: Any) -> Any:
    if not callable(input_fn):
        raise TypeError(f"`input_fn` must be callable, given: {input_fn}")
    return input_fn


def _checked_hooks(hooks: Optional[Sequence[Any]]) -> tuple[Any, ...]:
    checked = tuple(hooks or [])
    for hook in checked:
        if not isinstance(hook, session_run_hook.SessionRunHook):
            raise TypeError(f"All hooks must be `SessionRunHook` instances, given: {hook}")
    return checked


class TrainSpec(collections.namedtuple("TrainSpec", ["input_fn", "max_steps", "hooks", "saving_listeners"])):
    """What ``train_and_evaluate`` trains on and until which global step (None: until the input ends)."""

    def __new__(cls, input_fn: Callable[..., Any], max_steps: Optional[int] = None,
                hooks: Optional[Sequence[Any]] = None, saving_listeners: Optional[Sequence[Any]] = None) -> "TrainSpec":
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        listeners = tuple(saving_listeners or [])
        for listener in listeners:
            if not isinstance(listener, hooks_lib.CheckpointSaverListener):
                raise TypeError("All saving_listeners must be `CheckpointSaverListener` instances, "
                                f"given: {listener}")
        return super().__new__(cls, _checked_input_fn(input_fn), max_steps, _checked_hooks(hooks), listeners)


class EvalSpec(collections.namedtuple("EvalSpec", ["input_fn", "steps", "name", "hooks", "exporters",
                                                   "start_delay_secs", "throttle_secs"])):
    """What ``train_and_evaluate`` evaluates on: ``steps`` batches (None: the whole input), no
    sooner than ``start_delay_secs`` after the start and ``throttle_secs`` after the last one."""

    def __new__(cls, input_fn: Callable[..., Any], steps: Optional[int] = 100, name: Optional[str] = None,
                hooks: Optional[Sequence[Any]] = None, exporters: Any = None, start_delay_secs: float = 120,
                throttle_secs: float = 600) -> "EvalSpec":
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"`name` must be string, given: {name}")
        if start_delay_secs < 0:
            raise ValueError(f"Must specify start_delay_secs >= 0, given: {start_delay_secs}")
        if throttle_secs < 0:
            raise ValueError(f"Must specify throttle_secs >= 0, given: {throttle_secs}")
        return super().__new__(cls, _checked_input_fn(input_fn), steps, name, _checked_hooks(hooks),
                               exporter_lib.checked_exporters(exporters), start_delay_secs, throttle_secs)


def train_and_evaluate(estimator: estimator_lib.Estimator, train_spec: TrainSpec,
                       eval_spec: EvalSpec) -> tuple[Optional[dict[str, Any]], list[Any]]:
    """Trains and evaluates as this task's TF_CONFIG says; locally, returns the last evaluation's
    metrics and what its exporters returned, as TensorFlow does; on a cluster, (None, [])."""
    if not isinstance(estimator, estimator_lib.Estimator):
        raise TypeError(f"`estimator` must have type `tf.estimator.Estimator`. Got: {type(estimator)}")
    if not isinstance(train_spec, TrainSpec):
        raise TypeError(f"`train_spec` must have type `tf.estimator.TrainSpec`. Got: {type(train_spec)}")
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError(f"`eval_spec` must be either `None` or have type `tf.estimator.EvalSpec`. "
                        f"Got: {type(eval_spec)}")
    config = estimator.config
    if not config.cluster_spec and config.task_type != TaskType.EVALUATOR:
        return _run_local(estimator, train_spec, eval_spec)
    if config.task_type == TaskType.EVALUATOR:
        if config.task_id > 0:
            raise ValueError("For distributed training, there can only be one `evaluator` task (with task id 0).  "
                             f"Given task id {config.task_id}")
        _run_evaluator(estimator, train_spec, eval_spec)
        return None, []
    if config.task_type not in (TaskType.CHIEF, TaskType.MASTER, TaskType.WORKER, TaskType.PS):
        raise ValueError(f"Task type {config.task_type} is not supported. Supported task types are "
                         "['chief', 'evaluator', 'master', 'ps', 'worker']")
    server = server_lib.Server(config.cluster_spec, job_name=config.task_type, task_index=config.task_id,
                               config=config.session_config)
    if config.task_type == TaskType.PS:
        server.join()
        return None, []
    # The master of RunConfig is this task's address: its in-process server runs the sessions.
    estimator.train(train_spec.input_fn, hooks=train_spec.hooks, max_steps=train_spec.max_steps,
                    saving_listeners=train_spec.saving_listeners)
    return None, []


class _EvaluateEachNewCheckpoint(hooks_lib.CheckpointSaverListener):
    """Evaluates after a checkpoint is saved, at most once per ``throttle_secs``, never for the
    checkpoint of the session's start, and at the end unless the last step was just evaluated."""

    def __init__(self, estimator: estimator_lib.Estimator, eval_spec: EvalSpec, max_steps: Optional[int]) -> None:
        self._estimator = estimator
        self._eval_spec = eval_spec
        self._max_steps = max_steps
        self.eval_result: Optional[dict[str, Any]] = None
        self.export_results: list[Any] = []

    def begin(self) -> None:
        self._first_save = True
        self._last_evaluated_step: Optional[int] = None
        self._last_evaluation_start = float("-inf")

    def after_save(self, session: Any, global_step_value: int) -> None:
        if self._first_save:
            self._first_save = False
            return
        if time.monotonic() >= self._last_evaluation_start + self._eval_spec.throttle_secs:
            self._evaluate(global_step_value)
        else:
            log.info("Skip the current checkpoint eval due to throttle secs (%s secs).", self._eval_spec.throttle_secs)

    def end(self, session: Any, global_step_value: int) -> None:
        if global_step_value != self._last_evaluated_step:
            self._evaluate(global_step_value)

    def _evaluate(self, global_step_value: int) -> None:
        self._last_evaluated_step = global_step_value
        self._last_evaluation_start = time.monotonic()
        checkpoint = self._estimator.latest_checkpoint()
        self.eval_result = self._estimator.evaluate(self._eval_spec.input_fn, steps=self._eval_spec.steps,
                                                    hooks=self._eval_spec.hooks, checkpoint_path=checkpoint,
                                                    name=self._eval_spec.name)
        self.export_results = _export(self._estimator, self._eval_spec, checkpoint, self.eval_result, self._max_steps)


def _export(estimator: estimator_lib.Estimator, eval_spec: EvalSpec, checkpoint: Optional[str],
            eval_result: dict[str, Any], max_steps: Optional[int]) -> list[Any]:
    """Runs the EvalSpec's exporters on the checkpoint just evaluated; the final export is the one
    of a checkpoint at ``max_steps`` (none without ``max_steps``, as in TensorFlow)."""
    if not eval_spec.exporters or checkpoint is None:
        return []
    is_the_final_export = max_steps is not None and int(eval_result["global_step"]) >= max_steps
    return exporter_lib.export_all(eval_spec.exporters, estimator, checkpoint, eval_result, is_the_final_export)


def _run_local(estimator: estimator_lib.Estimator, train_spec: TrainSpec,
               eval_spec: EvalSpec) -> tuple[Optional[dict[str, Any]], list[Any]]:
    config = estimator.config
    if not (config.save_checkpoints_secs or config.save_checkpoints_steps):
        raise ValueError("train_and_evaluate evaluates each new checkpoint: set RunConfig's save_checkpoints_steps "
                         "or save_checkpoints_secs")
    listener = _EvaluateEachNewCheckpoint(estimator, eval_spec, train_spec.max_steps)
    estimator.train(train_spec.input_fn, hooks=train_spec.hooks, max_steps=train_spec.max_steps,
                    saving_listeners=list(train_spec.saving_listeners) + [listener])
    return listener.eval_result, listener.export_results


def _run_evaluator(estimator: estimator_lib.Estimator, train_spec: TrainSpec, eval_spec: EvalSpec) -> None:
    """Evaluates each new checkpoint of model_dir until one is at ``train_spec.max_steps``."""
    time.sleep(eval_spec.start_delay_secs)
    last_evaluated: Optional[str] = None
    last_start = float("-inf")
    while True:
        wait = last_start + eval_spec.throttle_secs - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        checkpoint = checkpoint_management.latest_checkpoint(estimator.model_dir)
        if checkpoint is None or checkpoint == last_evaluated:
            time.sleep(EVALUATOR_POLL_SECONDS)
            continue
        last_start = time.monotonic()
        result = estimator.evaluate(eval_spec.input_fn, steps=eval_spec.steps, hooks=eval_spec.hooks,
                                    checkpoint_path=checkpoint, name=eval_spec.name)
        last_evaluated = checkpoint
        _export(estimator, eval_spec, checkpoint, result, train_spec.max_steps)
        global_step = int(result["global_step"])
        if train_spec.max_steps is not None and global_step >= train_spec.max_steps:
            log.info("Exiting evaluation, global_step=%d >= train max_steps=%d", global_step, train_spec.max_steps)
            return
