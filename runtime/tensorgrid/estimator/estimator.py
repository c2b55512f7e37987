"""``tf.estimator.Estimator``: train, evaluate and predict a ``model_fn`` with checkpoints in ``model_dir``.

Each call builds a fresh graph: the global step, the input (``input_fn``'s Dataset or tensors),
then the model (``model_fn`` in the call's mode). Training runs a MonitoredTrainingSession on
``RunConfig``'s master (this task's server on a cluster, in-process otherwise), with the variables
placed by ``replica_device_setter`` on the PS tasks, checkpoints and summaries in ``model_dir``;
a later call resumes from the latest checkpoint. Evaluation and prediction restore that
checkpoint into a session of their own. This is TensorFlow 1.x's Estimator, written against
tensorgrid's train layer.
"""

from __future__ import annotations

import copy
import inspect
import logging
import os
import shutil
import tempfile
import time
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np

from tensorgrid.client import session as session_lib
from tensorgrid.data import dataset_ops
from tensorgrid.estimator import evaluation
from tensorgrid.estimator import export as export_lib
from tensorgrid.estimator import export_output
from tensorgrid.estimator import model_fn as model_fn_lib
from tensorgrid.estimator import run_config as run_config_lib
from tensorgrid.estimator import warm_starting
from tensorgrid.framework import errors
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import lookup_ops
from tensorgrid.ops import metrics_impl
from tensorgrid.ops import summary_ops
from tensorgrid.ops import variables
from tensorgrid.train import basic_session_run_hooks as hooks_lib
from tensorgrid.train import checkpoint_management
from tensorgrid.train import device_setter
from tensorgrid.train import monitored_session
from tensorgrid.train import saved_model_io
from tensorgrid.train import saver as saver_lib
from tensorgrid.train import session_run_hook
from tensorgrid.train import training_util

log = logging.getLogger("tensorgrid.estimator")

ModeKeys = model_fn_lib.ModeKeys
_EXPORT_TAGS = {ModeKeys.TRAIN: [saved_model_io.TRAINING], ModeKeys.EVAL: [saved_model_io.EVAL],
                ModeKeys.PREDICT: [saved_model_io.SERVING]}
"""The tags of each mode's exported meta graph, in the order they are written (TRAIN has the most variables)."""
_SIGNATURE_KEYS = {ModeKeys.TRAIN: saved_model_io.DEFAULT_TRAIN_SIGNATURE_DEF_KEY,
                   ModeKeys.EVAL: saved_model_io.DEFAULT_EVAL_SIGNATURE_DEF_KEY}
_MODEL_FN_ARGS = {"features", "labels", "mode", "params", "self", "config"}


class Estimator:
    """Trains, evaluates and predicts with a ``model_fn`` (``tf.estimator.Estimator``).

    ``model_fn(features, labels, mode, params, config)`` (any subset beyond ``features``, by
    name) builds the model and returns an ``EstimatorSpec``. ``model_dir`` (or
    ``config.model_dir``; a new temporary directory when neither is given) holds the
    checkpoints, the training summaries and, under ``eval``, the evaluation summaries.
    """

    def __init__(self, model_fn: Callable[..., model_fn_lib.EstimatorSpec], model_dir: Any = None,
                 config: Optional[run_config_lib.RunConfig] = None, params: Optional[dict[str, Any]] = None,
                 warm_start_from: Any = None) -> None:
        if config is None:
            config = run_config_lib.RunConfig()
        elif not isinstance(config, run_config_lib.RunConfig):
            raise ValueError(f"config must be an instance of `RunConfig`, but provided {config}.")
        model_dir = run_config_lib.path_to_str(model_dir)
        if model_dir and config.model_dir and model_dir != config.model_dir:
            raise ValueError("`model_dir` are set both in constructor and `RunConfig`, but with different values. "
                             f"In constructor: '{model_dir}', in `RunConfig`: '{config.model_dir}' ")
        model_dir = model_dir or config.model_dir
        if not model_dir:
            model_dir = tempfile.mkdtemp()
            log.warning("Using temporary folder as model directory: %s", model_dir)
        if config.model_dir != model_dir:
            config = config.replace(model_dir=model_dir)
        if model_fn is None:
            raise ValueError("model_fn must be provided to Estimator.")
        _verify_model_fn_args(model_fn, params)
        self._model_fn = model_fn
        self._config = config
        self._model_dir: str = model_dir
        self._params = copy.deepcopy(params or {})
        self._device_fn = config.device_fn or _replica_device_setter(config)
        self._session_config = config.session_config
        self._warm_start_settings = warm_starting.settings_from(warm_start_from)

    model_dir = property(lambda self: self._model_dir)
    model_fn = property(lambda self: self._model_fn)
    config = property(lambda self: copy.deepcopy(self._config))
    params = property(lambda self: copy.deepcopy(self._params))

    def latest_checkpoint(self) -> Optional[str]:
        """The prefix of the newest checkpoint in ``model_dir``, or None."""
        return checkpoint_management.latest_checkpoint(self._model_dir)

    def get_variable_names(self) -> list[str]:
        """The names of the variables in the latest checkpoint."""
        self._require_checkpoint()
        return [name for name, _ in checkpoint_management.list_variables(self._model_dir)]

    def get_variable_value(self, name: str) -> np.ndarray:
        """A variable's value in the latest checkpoint."""
        self._require_checkpoint()
        return checkpoint_management.load_variable(self._model_dir, name)

    def _require_checkpoint(self) -> None:
        if not self.latest_checkpoint():
            raise ValueError(f"Could not find trained model in model_dir: {self._model_dir}.")

    # --- training ---------------------------------------------------------------------------

    def train(self, input_fn: Callable[..., Any], hooks: Optional[Sequence[Any]] = None,
              steps: Optional[int] = None, max_steps: Optional[int] = None,
              saving_listeners: Optional[Sequence[Any]] = None) -> "Estimator":
        """Trains until the input ends, ``steps`` more steps, or the global step reaches
        ``max_steps`` (counted across calls: nothing is done when a checkpoint is already there)."""
        if self._config.task_type in (run_config_lib.TaskType.EVALUATOR, run_config_lib.TaskType.PS):
            raise ValueError("Train has been called wrong configuration. Please use tf.estimator.train_and_evaluate "
                             f"which calls proper API according to given configuration. Current configuration: "
                             f"{self._config}.")
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps.")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        if max_steps is not None and max_steps <= self._checkpoint_global_step():
            log.info("Skipping training since max_steps has already saved.")
            return self
        all_hooks = _checked_hooks(hooks)
        if steps is not None or max_steps is not None:
            all_hooks.append(hooks_lib.StopAtStepHook(steps, max_steps))
        listeners = list(saving_listeners or [])
        for listener in listeners:
            if not isinstance(listener, hooks_lib.CheckpointSaverListener):
                raise TypeError(f"saving_listeners must be a list of CheckpointSaverListener, given: {listener}")
        loss = self._train_model(input_fn, all_hooks, listeners)
        log.info("Loss for final step: %s.", loss)
        return self

    def _checkpoint_global_step(self) -> int:
        checkpoint = self.latest_checkpoint()
        if not checkpoint:
            return 0
        try:
            return int(checkpoint_management.load_variable(checkpoint, "global_step"))
        except (KeyError, ValueError, errors.NotFoundError):
            return 0

    def _train_model(self, input_fn: Callable[..., Any], hooks: list[Any], listeners: list[Any]) -> Any:
        with graph_lib.Graph().as_default() as graph, graph.device(self._device_fn):
            self._set_seed()
            global_step = training_util.get_or_create_global_step(graph)
            features, labels, worker_hooks = self._input(input_fn, ModeKeys.TRAIN)
            spec = self._call_model_fn(features, labels, ModeKeys.TRAIN)
            scaffold = spec.scaffold
            if self._warm_start_settings is not None:
                scaffold = warm_starting.warm_started_scaffold(scaffold, self._warm_start_settings, graph)
            if not any(summary.op.name == "loss" for summary in graph.get_collection(graph_lib.GraphKeys.SUMMARIES)):
                summary_ops.scalar("loss", spec.loss)
            graph.add_to_collection(graph_lib.GraphKeys.LOSSES, spec.loss)
            worker_hooks.extend(hooks)
            worker_hooks.append(hooks_lib.NanTensorHook(spec.loss))
            if self._config.log_step_count_steps is not None:
                worker_hooks.append(hooks_lib.LoggingTensorHook({"loss": spec.loss, "step": global_step},
                                                                every_n_iter=self._config.log_step_count_steps))
            worker_hooks.extend(spec.training_hooks)
            if scaffold.saver is None and not graph.get_collection(graph_lib.GraphKeys.SAVERS):
                graph.add_to_collection(graph_lib.GraphKeys.SAVERS, saver_lib.Saver(
                    sharded=True, max_to_keep=self._config.keep_checkpoint_max,
                    keep_checkpoint_every_n_hours=self._config.keep_checkpoint_every_n_hours,
                    defer_build=True, save_relative_paths=True))
            chief_hooks = self._checkpoint_saver_hooks(spec, scaffold, worker_hooks, listeners)
            with monitored_session.MonitoredTrainingSession(
                    master=self._config.master, is_chief=self._config.is_chief, checkpoint_dir=self._model_dir,
                    scaffold=scaffold, hooks=worker_hooks,
                    chief_only_hooks=tuple(chief_hooks) + tuple(spec.training_chief_hooks),
                    save_checkpoint_secs=0, save_summaries_steps=self._config.save_summary_steps,
                    config=self._session_config, max_wait_secs=self._config.session_creation_timeout_secs,
                    log_step_count_steps=self._config.log_step_count_steps) as session:
                loss = None
                steps_run = 0
                while not session.should_stop():
                    _, loss = session.run([spec.train_op, spec.loss])
                    steps_run += 1
            if steps_run == 0:
                log.warning("Training with estimator made no steps. Perhaps input is empty or misspecified.")
            return loss

    def _checkpoint_saver_hooks(self, spec: model_fn_lib.EstimatorSpec, scaffold: monitored_session.Scaffold,
                                worker_hooks: list[Any], listeners: list[Any]) -> list[Any]:
        """The chief's CheckpointSaverHook from RunConfig's save_checkpoints_*, unless the model_fn
        brought one; the saving listeners join whichever saves."""
        saver_hooks = [hook for hook in worker_hooks + list(spec.training_chief_hooks)
                       if isinstance(hook, hooks_lib.CheckpointSaverHook)]
        chief_hooks: list[Any] = []
        if (self._config.save_checkpoints_secs or self._config.save_checkpoints_steps) and not saver_hooks:
            chief_hooks = [hooks_lib.CheckpointSaverHook(
                self._model_dir, save_secs=self._config.save_checkpoints_secs,
                save_steps=self._config.save_checkpoints_steps, scaffold=scaffold)]
            saver_hooks = chief_hooks
        if listeners:
            if not saver_hooks:
                raise ValueError("There should be a CheckpointSaverHook to use saving_listeners. Please set one of "
                                 "the RunConfig.save_checkpoints_steps or RunConfig.save_checkpoints_secs.")
            for listener in listeners:
                if listener not in saver_hooks[0]._listeners:
                    saver_hooks[0]._listeners.append(listener)
        return chief_hooks

    # --- evaluation -------------------------------------------------------------------------

    def _checkpoint_to_read(self, checkpoint_path: Optional[str], action: str) -> Optional[str]:
        """``checkpoint_path``, else the latest checkpoint of model_dir; None (said in the log, as TF says
        it) when there is none, so that ``action`` runs on the initial values."""
        checkpoint_path = checkpoint_path or self.latest_checkpoint()
        if not checkpoint_path:
            log.info("Could not find trained model in model_dir: %s, running initialization to %s.",
                     self._model_dir, action)
        return checkpoint_path

    def evaluate(self, input_fn: Callable[..., Any], steps: Optional[int] = None,
                 hooks: Optional[Sequence[Any]] = None, checkpoint_path: Optional[str] = None,
                 name: Optional[str] = None) -> dict[str, Any]:
        """The metrics of the latest checkpoint (or ``checkpoint_path``) over ``input_fn``'s data,
        or its first ``steps`` batches: the model_fn's ``eval_metric_ops``, ``loss`` (the mean loss
        over the batches) and ``global_step``; also written as summaries in ``model_dir/eval[_name]``."""
        all_hooks = _checked_hooks(hooks)
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"`name` must be string, given: {name}")
        checkpoint_path = self._checkpoint_to_read(checkpoint_path, "evaluate")
        with graph_lib.Graph().as_default() as graph:
            self._set_seed()
            global_step = training_util.get_or_create_global_step(graph)
            features, labels, input_hooks = self._input(input_fn, ModeKeys.EVAL)
            spec = self._call_model_fn(features, labels, ModeKeys.EVAL)
            if model_fn_lib.LOSS_METRIC_KEY in spec.eval_metric_ops:
                raise ValueError(f'Metric with name "{model_fn_lib.LOSS_METRIC_KEY}" is not allowed, because '
                                 "Estimator already defines a default metric with the same name.")
            metrics = dict(spec.eval_metric_ops)
            metrics[model_fn_lib.LOSS_METRIC_KEY] = metrics_impl.mean(spec.loss)
            if graph_lib.GraphKeys.GLOBAL_STEP in metrics:
                raise ValueError("Metric with name `global_step` is not allowed, because Estimator already defines "
                                 "a default metric with the same name.")
            update_ops = [update for _, update in metrics.values()]
            final_values: dict[str, Any] = {key: value for key, (value, _) in metrics.items()}
            final_values[graph_lib.GraphKeys.GLOBAL_STEP] = global_step
            final_hook = hooks_lib.FinalOpsHook(final_values)
            session_hooks = (input_hooks + all_hooks + list(spec.evaluation_hooks)
                             + [evaluation.StopAfterNEvalsHook(steps), final_hook])
            creator = monitored_session.ChiefSessionCreator(
                scaffold=spec.scaffold, checkpoint_filename_with_path=checkpoint_path,
                master=self._config.evaluation_master, config=self._session_config)
            with monitored_session.MonitoredSession(session_creator=creator, hooks=session_hooks) as session:
                while not session.should_stop():
                    session.run(update_ops)
        results = {key: evaluation.as_python_value(value) for key, value in final_hook.final_ops_values.items()}
        current_step = int(results[graph_lib.GraphKeys.GLOBAL_STEP])
        # TensorFlow's line: "key = value" pairs sorted by key, bytes values left out.
        log.info("Saving dict for global step %d: %s", current_step, ", ".join(
            f"{key} = {value}" for key, value in sorted(results.items()) if not isinstance(value, bytes)))
        evaluation.write_eval_summary(evaluation.eval_dir(self._model_dir, name), results, current_step)
        return results

    # --- prediction -------------------------------------------------------------------------

    def predict(self, input_fn: Callable[..., Any], predict_keys: Optional[Sequence[str]] = None,
                hooks: Optional[Sequence[Any]] = None, checkpoint_path: Optional[str] = None,
                yield_single_examples: bool = True) -> Iterator[Any]:
        """Yields the predictions of the latest checkpoint (or ``checkpoint_path``) for each example
        of ``input_fn`` (each batch with ``yield_single_examples=False``): a dict of the
        ``predict_keys`` (every key when None) when the model_fn's predictions are a dict."""
        all_hooks = _checked_hooks(hooks)
        checkpoint_path = self._checkpoint_to_read(checkpoint_path, "predict")
        with graph_lib.Graph().as_default() as graph:
            self._set_seed()
            training_util.get_or_create_global_step(graph)
            features, _, input_hooks = self._input(input_fn, ModeKeys.PREDICT)
            spec = self._call_model_fn(features, None, ModeKeys.PREDICT)
            predictions = _selected_predictions(spec.predictions, predict_keys)
            creator = monitored_session.ChiefSessionCreator(
                scaffold=spec.scaffold, checkpoint_filename_with_path=checkpoint_path, master=self._config.master,
                config=self._session_config)
            session_hooks = input_hooks + all_hooks + list(spec.prediction_hooks)
            with monitored_session.MonitoredSession(session_creator=creator, hooks=session_hooks) as session:
                while not session.should_stop():
                    batch = session.run(predictions)
                    if not yield_single_examples:
                        yield batch
                    elif isinstance(predictions, dict):
                        for index in range(_batch_length(batch)):
                            yield {key: value[index] for key, value in batch.items()}
                    else:
                        yield from batch

    # --- export ---------------------------------------------------------------------------------

    def export_saved_model(self, export_dir_base: Any, serving_input_receiver_fn: Optional[Callable[[], Any]],
                           assets_extra: Optional[dict[str, str]] = None, as_text: bool = False,
                           checkpoint_path: Optional[str] = None,
                           experimental_mode: str = ModeKeys.PREDICT) -> bytes:
        """Writes the graph of ``experimental_mode`` (PREDICT, the serving graph, by default) over
        ``serving_input_receiver_fn``'s input, with the latest checkpoint's (or ``checkpoint_path``'s)
        variables and its signatures, to a new ``export_dir_base/<timestamp>`` in tensorgrid's
        saved-model format (``train/saved_model_io.py``, JSON whatever ``as_text``); ``assets_extra``
        maps paths under ``assets.extra`` to files to copy there. Returns that directory, as bytes
        (as TensorFlow does)."""
        if serving_input_receiver_fn is None:
            raise ValueError("An input_receiver_fn must be defined.")
        return self._export_all_saved_models(export_dir_base, {experimental_mode: serving_input_receiver_fn},
                                             assets_extra, checkpoint_path)

    def experimental_export_all_saved_models(self, export_dir_base: Any,
                                             input_receiver_fn_map: dict[str, Callable[[], Any]],
                                             assets_extra: Optional[dict[str, str]] = None, as_text: bool = False,
                                             checkpoint_path: Optional[str] = None) -> bytes:
        """One saved model with a meta graph per mode of ``input_receiver_fn_map`` (ModeKeys to receiver
        fns: a ``SupervisedInputReceiver``'s for TRAIN and EVAL, tagged ``train`` and ``eval``, a
        ``ServingInputReceiver``'s for PREDICT, tagged ``serve``); the variables are saved with the
        first of TRAIN, EVAL, PREDICT, as in TensorFlow."""
        return self._export_all_saved_models(export_dir_base, input_receiver_fn_map, assets_extra, checkpoint_path)

    def _export_all_saved_models(self, export_dir_base: Any, input_receiver_fn_map: dict[str, Callable[[], Any]],
                                 assets_extra: Optional[dict[str, str]], checkpoint_path: Optional[str]) -> bytes:
        unknown = sorted(str(mode) for mode in input_receiver_fn_map if mode not in _EXPORT_TAGS)
        if unknown:
            raise ValueError(f"No valid modes for exporting: {unknown} are not tf.estimator.ModeKeys; valid modes "
                             f"are {sorted(_EXPORT_TAGS)}")
        modes = [mode for mode in _EXPORT_TAGS if input_receiver_fn_map.get(mode)]
        if not modes:
            raise ValueError(f"No valid modes for exporting found. Got {list(input_receiver_fn_map)}; give a "
                             f"receiver fn for any of {list(_EXPORT_TAGS)}")
        checkpoint_path = checkpoint_path or self.latest_checkpoint()
        if not checkpoint_path and self._warm_start_settings is not None:
            checkpoint_path = os.fsdecode(self._warm_start_settings.ckpt_to_initialize_from)
            if os.path.isdir(checkpoint_path):
                checkpoint_path = checkpoint_management.latest_checkpoint(checkpoint_path)
        if not checkpoint_path:
            raise ValueError(f"Couldn't find trained model at {self._model_dir}.")
        export_dir = _timestamped_export_dir(os.fsdecode(export_dir_base))
        temp_dir = os.path.join(os.path.dirname(export_dir), "temp-" + os.path.basename(export_dir))
        writer = saved_model_io.SavedModelWriter(temp_dir)
        for mode in modes:
            self._add_meta_graph_for_mode(writer, input_receiver_fn_map[mode], checkpoint_path, mode)
        writer.save()
        for destination, source in (assets_extra or {}).items():
            target = os.path.join(temp_dir, saved_model_io.EXTRA_ASSETS_DIRECTORY, destination)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(source, target)
        os.rename(temp_dir, export_dir)
        log.info("SavedModel written to: %s", export_dir)
        return os.fsencode(export_dir)

    def _add_meta_graph_for_mode(self, writer: saved_model_io.SavedModelWriter, receiver_fn: Callable[[], Any],
                                 checkpoint_path: str, mode: str) -> None:
        """Builds the model_fn's graph of ``mode`` over the receiver's tensors, restores the checkpoint
        into it and adds it to ``writer`` under the mode's tags, with its signatures."""
        with graph_lib.Graph().as_default() as graph:
            self._set_seed()
            training_util.get_or_create_global_step(graph)
            receiver = receiver_fn()
            if not isinstance(receiver, (export_lib.ServingInputReceiver, export_lib.SupervisedInputReceiver)):
                raise TypeError(f"the receiver fn of mode {mode!r} must return a ServingInputReceiver or a "
                                f"SupervisedInputReceiver, got {receiver!r}")
            spec = self._call_model_fn(receiver.features, getattr(receiver, "labels", None), mode)
            if mode == ModeKeys.PREDICT:
                outputs = export_output.export_outputs_with_default(spec.export_outputs, spec.predictions)
            else:
                output_class = export_output.TrainOutput if mode == ModeKeys.TRAIN else export_output.EvalOutput
                outputs = {_SIGNATURE_KEYS[mode]: output_class(loss=spec.loss, predictions=spec.predictions,
                                                               metrics=spec.eval_metric_ops)}
            signatures = export_output.signature_defs(outputs, receiver.receiver_tensors,
                                                      getattr(receiver, "receiver_tensors_alternatives", None))
            saver = spec.scaffold.saver or saver_lib.Saver(allow_empty=True)
            main_op = spec.scaffold.local_init_op or control_flow_ops.group(
                variables.local_variables_initializer(), lookup_ops.tables_initializer(), name="legacy_init_op")
            with session_lib.Session(graph=graph) as session:
                try:
                    saver.restore(session, checkpoint_path)
                except errors.NotFoundError as error:
                    raise ValueError(f"Could not load all requested variables from checkpoint. Please make sure "
                                     f"your model_fn does not expect variables that were not saved in the "
                                     f"checkpoint. Encountered error with mode `{mode}` while restoring checkpoint "
                                     f"from: `{checkpoint_path}`: {error}") from error
                writer.add_meta_graph(session, _EXPORT_TAGS[mode], signatures, main_op, saver, train_op=spec.train_op)

    def export_savedmodel(self, export_dir_base: Any, serving_input_receiver_fn: Callable[[], Any],
                          assets_extra: Optional[dict[str, str]] = None, as_text: bool = False,
                          checkpoint_path: Optional[str] = None, strip_default_attrs: bool = False) -> bytes:
        """TF1's older name of ``export_saved_model`` (``strip_default_attrs`` has nothing to strip here)."""
        return self.export_saved_model(export_dir_base, serving_input_receiver_fn, assets_extra=assets_extra,
                                       as_text=as_text, checkpoint_path=checkpoint_path)

    # --- the input and the model ------------------------------------------------------------

    def _set_seed(self) -> None:
        if self._config.tf_random_seed is not None:
            graph_lib.get_default_graph().seed = self._config.tf_random_seed

    def _context_args(self, function: Callable[..., Any], mode: str) -> dict[str, Any]:
        """Those of ``mode``, ``params`` and ``config`` that ``function`` takes, by name, as TF passes them
        to ``input_fn`` and ``model_fn``."""
        accepted = _arg_names(function)
        args: dict[str, Any] = {}
        if "mode" in accepted:
            args["mode"] = mode
        if "params" in accepted:
            args["params"] = self.params  # each a deep copy, made only for a function that takes it
        if "config" in accepted:
            args["config"] = self.config
        return args

    def _input(self, input_fn: Callable[..., Any], mode: str) -> tuple[Any, Any, list[Any]]:
        """``input_fn``'s features and labels, from its Dataset's iterator when it returns one (with
        the hook that initializes it), and that hook list."""
        result = input_fn(**self._context_args(input_fn, mode))
        input_hooks: list[Any] = []
        if isinstance(result, dataset_ops.Dataset):
            iterator = dataset_ops.make_initializable_iterator(result)
            input_hooks.append(_DatasetInitializerHook(iterator))
            result = iterator.get_next()
        if isinstance(result, (list, tuple)):
            if len(result) != 2:
                raise ValueError("input_fn should return (features, labels) as a len 2 tuple.")
            return result[0], result[1], input_hooks
        return result, None, input_hooks

    def _call_model_fn(self, features: Any, labels: Any, mode: str) -> model_fn_lib.EstimatorSpec:
        kwargs = self._context_args(self._model_fn, mode)
        if "labels" in _arg_names(self._model_fn):
            kwargs["labels"] = labels
        elif labels is not None:
            raise ValueError("model_fn does not take labels, but input_fn returns labels.")
        spec = self._model_fn(features=features, **kwargs)
        if not isinstance(spec, model_fn_lib.EstimatorSpec):
            raise ValueError(f"model_fn should return an EstimatorSpec, got {type(spec).__name__}.")
        return spec


class _DatasetInitializerHook(session_run_hook.SessionRunHook):
    """Initializes the iterator of ``input_fn``'s Dataset when the session is created (and re-created)."""

    def __init__(self, iterator: Any) -> None:
        self._iterator = iterator

    def after_create_session(self, session: Any, coord: Any) -> None:
        session.run(self._iterator.initializer)


def _timestamped_export_dir(export_dir_base: str) -> str:
    """``export_dir_base/<seconds since the epoch>``, a name not taken yet (waiting up to 10 s for one, as TF)."""
    for _ in range(10):
        export_dir = os.path.join(export_dir_base, str(int(time.time())))
        if not os.path.exists(export_dir) and not os.path.exists(
                os.path.join(export_dir_base, "temp-" + os.path.basename(export_dir))):
            return export_dir
        time.sleep(1)
    raise RuntimeError(f"Failed to obtain a unique export directory name after 10 attempts in {export_dir_base}.")


def _arg_names(function: Callable[..., Any]) -> set[str]:
    """The argument names of a function, a bound method (without self), a partial or a callable object."""
    return set(inspect.signature(function).parameters)


def _verify_model_fn_args(model_fn: Callable[..., Any], params: Optional[dict[str, Any]]) -> None:
    """TensorFlow's checks of model_fn's argument names."""
    accepted = _arg_names(model_fn)
    if "features" not in accepted:
        raise ValueError(f"model_fn ({model_fn}) must include features argument.")
    if params is not None and "params" not in accepted:
        raise ValueError(f"model_fn ({model_fn}) does not include params argument, but params ({params}) is passed "
                         "to Estimator.")
    if params is None and "params" in accepted:
        log.warning("Estimator's model_fn (%s) includes params argument, but params are not passed to Estimator.",
                    model_fn)
    unexpected = sorted(accepted - _MODEL_FN_ARGS)
    if unexpected:
        raise ValueError(f"model_fn ({model_fn}) has following not expected args: {unexpected}")


def _replica_device_setter(config: run_config_lib.RunConfig) -> Optional[Callable[[Any], str]]:
    """Variables on the PS tasks, the rest on this task, when the cluster has PS tasks (TF's rule)."""
    if config.num_ps_replicas <= 0:
        return None
    worker_device = f"/job:{config.task_type}/task:{config.task_id}" if config.task_type else "/job:worker"
    return device_setter.replica_device_setter(ps_tasks=config.num_ps_replicas, worker_device=worker_device,
                                               merge_devices=True, cluster=config.cluster_spec)


def _checked_hooks(hooks: Optional[Sequence[Any]]) -> list[Any]:
    checked = list(hooks or [])
    for hook in checked:
        if not isinstance(hook, session_run_hook.SessionRunHook):
            raise TypeError(f"Hooks must be a SessionRunHook, given: {hook}")
    return checked


def _selected_predictions(predictions: Any, predict_keys: Optional[Sequence[str]]) -> Any:
    if predict_keys is None:
        return predictions
    if not isinstance(predictions, dict):
        raise ValueError("predict_keys argument is not valid in case of non-dict predictions.")
    selected = {key: value for key, value in predictions.items() if key in predict_keys}
    if not selected:
        raise ValueError(f"Expected to run at least one output from {list(predictions)}, provided {predict_keys}.")
    return selected


def _batch_length(batch: dict[str, Any]) -> int:
    """The common first dimension of a batch of predictions (a ValueError when they differ)."""
    length: Optional[int] = None
    for key, value in batch.items():
        value_length = np.shape(value)[0] if np.ndim(value) else None
        if value_length is None:
            raise ValueError(f"Batch length of predictions should be same. {key} has a scalar value; "
                             "use yield_single_examples=False for predictions that are not per example.")
        if length is None:
            length = value_length
        elif value_length != length:
            raise ValueError(f"Batch length of predictions should be same. {key} has different batch length "
                             "than others.")
    return length or 0
