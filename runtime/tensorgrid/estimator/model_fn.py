"""``tf.estimator.EstimatorSpec`` and ``ModeKeys``: what a ``model_fn`` returns, checked as TensorFlow checks it.

A model_fn builds the graph of one mode (train, eval or predict) and hands the Estimator the
tensors it runs: the loss, the train op, the predictions, the eval metrics as ``(value, update_op)``
pairs, hooks and a Scaffold. The checks here make a wrong model_fn fail when it returns, with
TensorFlow's error classes and messages, rather than later inside a session.
"""

from __future__ import annotations

import collections
from typing import Any, Iterable, Optional

from tensorgrid.estimator import export_output
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import array_ops
from tensorgrid.train import monitored_session
from tensorgrid.train import session_run_hook

LOSS_METRIC_KEY = "loss"
"""The metric ``evaluate`` always reports: the mean of the loss over the evaluated batches."""
AVERAGE_LOSS_METRIC_KEY = "average_loss"


class ModeKeys:
    """The modes a ``model_fn`` is called in (``tf.estimator.ModeKeys``)."""

    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


_NOT_FROM_DEFAULT_GRAPH = (
    '{0} with "{1}" must be from the default graph. Possible causes of this error include: \n\n'
    "1) {0} was created outside the context of the default graph.\n\n"
    '2) The object passed through to EstimatorSpec was not created in the most recent call to "model_fn".')


class EstimatorSpec(collections.namedtuple("EstimatorSpec", [
        "mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs", "training_chief_hooks",
        "training_hooks", "scaffold", "evaluation_hooks", "prediction_hooks"])):
    """The ops and objects a ``model_fn`` returns (``tf.estimator.EstimatorSpec``).

    TRAIN needs ``loss`` and ``train_op``, EVAL needs ``loss``, PREDICT needs ``predictions``
    (a tensor or a dict of tensors); every tensor must be of the default graph, the one the
    Estimator built for this call of model_fn. ``eval_metric_ops`` maps names to the
    ``(value, update_op)`` pairs of ``tf.metrics``. ``export_outputs`` maps signature keys to
    ``tf.estimator.export`` outputs; in PREDICT it defaults to a ``PredictOutput`` of the predictions
    under ``serving_default`` (what ``export_saved_model`` writes).
    """

    def __new__(cls, mode: str, predictions: Any = None, loss: Any = None, train_op: Any = None,
                eval_metric_ops: Optional[dict[str, Any]] = None, export_outputs: Any = None,
                training_chief_hooks: Optional[Iterable[Any]] = None, training_hooks: Optional[Iterable[Any]] = None,
                scaffold: Optional[monitored_session.Scaffold] = None,
                evaluation_hooks: Optional[Iterable[Any]] = None,
                prediction_hooks: Optional[Iterable[Any]] = None) -> "EstimatorSpec":
        if mode not in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT):
            raise ValueError(f"mode must be one of tf.estimator.ModeKeys' TRAIN, EVAL, PREDICT, got {mode!r}")
        graph = graph_lib.get_default_graph()
        train_op = _checked_train_op(train_op, mode, graph)
        loss = _checked_loss(loss, mode, graph)
        predictions = _checked_predictions(predictions, mode, graph)
        if export_outputs is not None and not isinstance(export_outputs, dict):
            raise TypeError(f"export_outputs must be dict, given: {export_outputs}")
        if mode == ModeKeys.PREDICT:
            export_outputs = export_output.export_outputs_with_default(export_outputs, predictions)
        return super().__new__(
            cls, mode=mode, predictions=predictions, loss=loss, train_op=train_op,
            eval_metric_ops=_checked_eval_metric_ops(eval_metric_ops, graph), export_outputs=export_outputs,
            training_chief_hooks=_checked_hooks(training_chief_hooks), training_hooks=_checked_hooks(training_hooks),
            scaffold=_checked_scaffold(scaffold), evaluation_hooks=_checked_hooks(evaluation_hooks),
            prediction_hooks=_checked_hooks(prediction_hooks))

    def _replace(self, **changes: Any) -> "EstimatorSpec":
        """A copy with fields changed, checked again; the mode cannot change."""
        if "mode" in changes and changes["mode"] != self.mode:
            raise ValueError("mode of EstimatorSpec cannot be changed.")
        fields = self._asdict()
        fields.update(changes)
        return EstimatorSpec(**fields)


def _check_graph(value: Any, graph: graph_lib.Graph, what: str, name: str) -> None:
    if value.graph is not graph:
        raise ValueError(_NOT_FROM_DEFAULT_GRAPH.format(what, name))


def _checked_train_op(train_op: Any, mode: str, graph: graph_lib.Graph) -> Any:
    if train_op is None:
        if mode == ModeKeys.TRAIN:
            raise ValueError("Missing train_op.")
        return None
    if not isinstance(train_op, (graph_lib.Operation, graph_lib.Tensor)):
        raise TypeError(f"train_op must be Operation or Tensor, given: {train_op}")
    _check_graph(train_op, graph, "train_op", train_op.name)
    return train_op


def _checked_loss(loss: Any, mode: str, graph: graph_lib.Graph) -> Any:
    if loss is None:
        if mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            raise ValueError("Missing loss.")
        return None
    loss = _checked_tensor(loss, "loss")
    shape = loss.get_shape()
    if shape.num_elements() not in (None, 1):
        raise ValueError(f"Loss must be scalar, given: {loss}")
    _check_graph(loss, graph, "loss", loss.name)
    if shape.ndims != 0:
        loss = array_ops.reshape(loss, [])
    return loss


def _checked_predictions(predictions: Any, mode: str, graph: graph_lib.Graph) -> Any:
    if predictions is None:
        if mode == ModeKeys.PREDICT:
            raise ValueError("Missing predictions.")
        return {}
    if isinstance(predictions, dict):
        checked = {key: _checked_tensor(value, f"predictions[{key}]") for key, value in predictions.items()}
        for key, value in checked.items():
            _check_graph(value, graph, "prediction values", f"{key}: {value.name}")
        return checked
    predictions = _checked_tensor(predictions, "predictions")
    _check_graph(predictions, graph, "prediction values", predictions.name)
    return predictions


def _checked_tensor(value: Any, name: str) -> graph_lib.Tensor:
    if not isinstance(value, graph_lib.Tensor):
        raise TypeError(f"{name} must be Tensor, given: {value}")
    return value


def _checked_hooks(hooks: Optional[Iterable[Any]]) -> tuple[Any, ...]:
    checked = tuple(hooks or [])
    for hook in checked:
        if not isinstance(hook, session_run_hook.SessionRunHook):
            raise TypeError(f"All hooks must be SessionRunHook instances, given: {hook}")
    return checked


def _checked_eval_metric_ops(eval_metric_ops: Optional[dict[str, Any]], graph: graph_lib.Graph) -> dict[str, Any]:
    if eval_metric_ops is None:
        return {}
    if not isinstance(eval_metric_ops, dict):
        raise TypeError(f"eval_metric_ops must be a dict, given: {eval_metric_ops}")
    for key, value in eval_metric_ops.items():
        if not isinstance(value, tuple) or len(value) != 2:
            raise TypeError(f"Values of eval_metric_ops must be (metric_value, update_op) tuples, given: {value} "
                            f"for key: {key}")
        for part in value:
            if not isinstance(part, (graph_lib.Operation, graph_lib.Tensor)):
                raise TypeError(f"Values of eval_metric_ops must be (metric_value, update_op) tuples of tensors "
                                f"or ops, given: {value} for key: {key}")
            _check_graph(part, graph, "eval_metric_ops", f"{key}: {part.name}")
    return dict(eval_metric_ops)


def _checked_scaffold(scaffold: Optional[monitored_session.Scaffold]) -> monitored_session.Scaffold:
    if scaffold is None:
        return monitored_session.Scaffold()
    if not isinstance(scaffold, monitored_session.Scaffold):
        raise TypeError(f"scaffold must be tf.train.Scaffold. Given: {scaffold}")
    return scaffold
