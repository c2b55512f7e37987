"""The heads of TF1's canned estimators: what turns a model's logits into an ``EstimatorSpec``.

A head owns everything past the logits: the predictions a user reads (``logits``, ``logistic``,
``probabilities``, ``class_ids``, ``classes``, ``all_class_ids``, ``all_classes`` for classifiers;
``predictions`` for regressors), the labels' checks and vocabulary, the per-example loss (logistic,
softmax cross entropy, squared error), its reduction over the batch (``tf.losses.Reduction.SUM``
by default, as TF1's ``tf.estimator`` classes have it), the ``weight_column``, the evaluation
metrics (``average_loss``, ``accuracy``, ``precision``, ``recall``, ``auc``, ``auc_precision_recall``,
``prediction/mean``, ``label/mean``, ``accuracy_baseline``) and the train op. They are written
after TensorFlow Estimator's v1 heads (``canned/head.py``), and keep its keys and shapes.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from tensorgrid.estimator import export_output
from tensorgrid.estimator import model_fn as model_fn_lib
from tensorgrid.feature_column import column_base
from tensorgrid.feature_column import dense as dense_columns
from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import sparse_tensor
from tensorgrid.ops import array_ops
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import logging_ops
from tensorgrid.ops import lookup_ops
from tensorgrid.ops import losses_impl
from tensorgrid.ops import math_ops
from tensorgrid.ops import metrics_impl
from tensorgrid.ops import nn_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import string_ops
from tensorgrid.ops import summary_ops
from tensorgrid.train import training_util

ModeKeys = model_fn_lib.ModeKeys
Reduction = losses_impl.Reduction
Tensor = graph_lib.Tensor


class MetricKeys:
    """The names of the heads' evaluation metrics (``tf.estimator``'s ``MetricKeys``)."""

    LOSS = model_fn_lib.LOSS_METRIC_KEY
    LOSS_MEAN = "average_loss"
    LOSS_REGULARIZATION = "regularization_loss"
    ACCURACY = "accuracy"
    PRECISION = "precision"
    RECALL = "recall"
    ACCURACY_BASELINE = "accuracy_baseline"
    AUC = "auc"
    AUC_PR = "auc_precision_recall"
    LABEL_MEAN = "label/mean"
    PREDICTION_MEAN = "prediction/mean"


class PredictionKeys:
    """The keys of the heads' predictions (``tf.estimator``'s ``PredictionKeys``)."""

    CLASSES = "classes"
    CLASS_IDS = "class_ids"
    ALL_CLASSES = "all_classes"
    ALL_CLASS_IDS = "all_class_ids"
    LOGISTIC = "logistic"
    LOGITS = "logits"
    PREDICTIONS = "predictions"
    PROBABILITIES = "probabilities"


CLASSIFY_SERVING_KEY = "classification"
REGRESS_SERVING_KEY = "regression"
PREDICT_SERVING_KEY = "predict"
"""The signature keys of the heads' exported models besides the default (TensorFlow's)."""


def _check_reduction(loss_reduction: str) -> None:
    if loss_reduction not in Reduction.all() or loss_reduction == Reduction.NONE:
        raise ValueError(f"Invalid loss_reduction: {loss_reduction}; valid are "
                         f"{[key for key in Reduction.all() if key != Reduction.NONE]}")


def _check_logits(logits: Any, dimension: int) -> Tensor:
    """``logits`` as float32 of shape ``[D0, ..., DN, dimension]`` (static checks, as TF's)."""
    logits_float: Tensor = math_ops.cast(op_util.to_tensor(logits), dtypes.float32)
    shape = logits_float.shape
    if shape.ndims is not None and shape.ndims < 2:
        raise ValueError(f"logits shape must be [D0, D1, ... DN, logits_dimension], got {shape}.")
    if shape.ndims is not None and shape.as_list()[-1] is not None and shape.as_list()[-1] != dimension:
        raise ValueError(f"logits shape must be [D0, D1, ... DN, logits_dimension={dimension}], got {shape}.")
    return logits_float


def _all(condition: Tensor) -> Tensor:
    """A scalar bool: every element of ``condition`` holds."""
    failures = math_ops.reduce_sum(math_ops.cast(math_ops.logical_not(condition), dtypes.int32))
    return math_ops.equal(failures, 0)


def _shape_assert(expected: Tensor, actual: Tensor, message: str) -> graph_lib.Operation:
    same = _all(math_ops.equal(expected, actual))
    return logging_ops.Assert(same, [message, "expected shape: ", expected, "shape: ", actual])


def _dense_labels(labels: Any, logits: Tensor, dimension: int) -> Tensor:
    """The labels as ``[D0, ..., DN, dimension]`` matching the logits (``[D0, ..., DN]`` gains a last axis)."""
    if labels is None:
        raise ValueError("You must provide a labels Tensor. Given: None. Suggested troubleshooting steps: Check that "
                         "your data contain your label feature. Check that your input_fn properly parses and returns "
                         "labels.")
    if isinstance(labels, (sparse_tensor.SparseTensor, sparse_tensor.SparseTensorValue)):
        raise ValueError(f"SparseTensor labels are not supported. labels must be a Tensor of shape "
                         f"[D0, D1, ..., DN, {dimension}], e.g. [batch_size, {dimension}].")
    labels = op_util.to_tensor(labels)
    graph = op_util.graph_of(labels)
    with graph.name_scope("labels"):
        if labels.shape.ndims is not None and logits.shape.ndims is not None \
                and labels.shape.ndims == logits.shape.ndims - 1:
            labels = array_ops.expand_dims(labels, -1)
        if labels.shape.ndims is not None:
            if labels.shape.ndims < 2:
                raise ValueError(f"labels shape must be [D0, D1, ... DN, {dimension}], got {labels.shape}.")
            last = labels.shape.as_list()[-1]
            if last is not None and last != dimension:
                raise ValueError(f"Mismatched label shape. Expected labels dimension={dimension}.  Received {last}. "
                                 "Suggested Fix: If your classifier expects one-hot encoding label, check your "
                                 "n_classes argument to the estimator and/or the shape of your label. Otherwise, "
                                 "check the shape of your label.")
        expected = array_ops.concat([indexing_ops.strided_slice_from_key(array_ops.shape(logits), slice(None, -1)),
                                     [dimension]], 0)
        check = _shape_assert(expected, array_ops.shape(labels),
                              f"labels shape must be [D0, D1, ... DN, {dimension}]. Suggested Fix: check your "
                              "n_classes argument to the estimator and/or the shape of your label.")
        with graph.control_dependencies([check]):
            return array_ops.identity(labels)


def _assert_range(labels: Tensor, n_classes: int) -> Tensor:
    """``labels`` after a check (at run time) that each lies in ``[0, n_classes - 1]``."""
    graph = op_util.graph_of(labels)
    with graph.name_scope("assert_range"):
        top = math_ops.cast(n_classes - 1, labels.dtype.base_dtype)
        zero = math_ops.cast(0, labels.dtype.base_dtype)
        checks = [logging_ops.Assert(_all(math_ops.less_equal(labels, top)),
                                     ["Labels must <= n_classes - 1", labels]),
                  logging_ops.Assert(_all(math_ops.greater_equal(labels, zero)),
                                     ["Labels must >= 0", labels])]
        with graph.control_dependencies(checks):
            return array_ops.identity(labels)


def _weights(features: Any, weight_column: Any, logits: Tensor) -> Any:
    """1.0 without ``weight_column``; else its float32 values shaped ``[D0, ..., DN, 1]``."""
    if weight_column is None:
        return 1.0
    if isinstance(weight_column, str):
        weight_column = dense_columns.numeric_column(key=weight_column, shape=(1,))
    if not isinstance(weight_column, column_base.DenseColumn):
        raise TypeError(f"Weight column must be either a string or _DenseColumn. Given type: {type(weight_column)}.")
    graph = op_util.graph_of(logits)
    with graph.name_scope("weights"):
        weights = weight_column.dense_tensor(column_base.FeatureBuilder(features), None, False)
        if not (weights.dtype.is_floating or weights.dtype.is_integer):
            raise ValueError(f"Weight column should be castable to float. Given dtype: {weights.dtype}")
        weights = math_ops.cast(weights, dtypes.float32)
        if weights.shape.ndims is not None and logits.shape.ndims is not None \
                and weights.shape.ndims == logits.shape.ndims - 1:
            weights = array_ops.expand_dims(weights, -1)
        expected = array_ops.concat([indexing_ops.strided_slice_from_key(array_ops.shape(logits), slice(None, -1)),
                                     [1]], 0)
        check = _shape_assert(expected, array_ops.shape(weights),
                              "weights shape must be [D0, D1, ... DN] or [D0, D1, ... DN, 1]")
        with graph.control_dependencies([check]):
            return array_ops.identity(weights)


def _metric_weights(weights: Any, values: Tensor) -> Any:
    return None if isinstance(weights, float) else metrics_impl.broadcast_weights(weights, values)


def _tiled_per_example(row: Any, logits: Tensor) -> Tensor:
    """``row`` (one value per class) repeated for each example: ``[batch, n_classes]``."""
    batch_size = indexing_ops.strided_slice_from_key(array_ops.shape(logits), 0)
    return array_ops.tile(array_ops.expand_dims(op_util.to_tensor(row), 0), array_ops.stack([batch_size, 1]))


def _class_names(n_classes: int, label_vocabulary: Optional[Sequence[str]]) -> Tensor:
    if label_vocabulary:
        return op_util.to_tensor(list(label_vocabulary), dtype=dtypes.string)
    return string_ops.as_string(math_ops.range(n_classes))


def _check_vocabulary(label_vocabulary: Any) -> None:
    if label_vocabulary is not None and not isinstance(label_vocabulary, (list, tuple)):
        raise ValueError(f"label_vocabulary should be a list or a tuple. Given type: {type(label_vocabulary)}")


def _vocabulary_ids(labels: Tensor, label_vocabulary: Sequence[str]) -> Tensor:
    if labels.dtype.base_dtype != dtypes.string:
        raise ValueError(f"Labels dtype should be string if there is a vocabulary. Instead got {labels.dtype}")
    table: Any = lookup_ops.index_table_from_tensor(vocabulary_list=tuple(label_vocabulary), name="class_id_lookup")
    ids: Tensor = table.lookup(labels)
    return ids


class Head:
    """What the heads share: the spec for each mode from the predictions, the loss and the metrics."""

    logits_dimension: int

    def __init__(self, weight_column: Any, loss_reduction: str) -> None:
        _check_reduction(loss_reduction)
        self._weight_column = weight_column
        self._loss_reduction = loss_reduction

    def predictions(self, logits: Tensor) -> dict[str, Tensor]:
        raise NotImplementedError

    def export_outputs(self, predictions: dict[str, Tensor]) -> dict[str, export_output.ExportOutput]:
        """The signatures of an exported model, by key (TF's heads' ``export_outputs``)."""
        raise NotImplementedError

    def unreduced_loss(self, logits: Tensor, labels: Any) -> tuple[Tensor, Tensor]:
        """The per-example loss ``[D0, ..., DN, 1]`` and the labels as the metrics read them."""
        raise NotImplementedError

    def eval_metric_ops(self, predictions: dict[str, Tensor], labels: Tensor, weights: Any,
                        unreduced_loss: Tensor) -> dict[str, Any]:
        raise NotImplementedError

    def create_estimator_spec(self, features: Any, mode: str, logits: Any, labels: Any = None,
                              optimizer: Any = None,
                              train_op_fn: Optional[Callable[[Tensor], Any]] = None) -> model_fn_lib.EstimatorSpec:
        """The spec of ``mode``: predictions only for PREDICT; with the loss and metrics for EVAL;
        with ``optimizer.minimize(loss)`` (or ``train_op_fn(loss)``) and UPDATE_OPS for TRAIN."""
        graph = graph_lib.get_default_graph()
        with graph.name_scope("head"):
            logits = _check_logits(logits, self.logits_dimension)
            with graph.name_scope("predictions"):
                predictions = self.predictions(logits)
            if mode == ModeKeys.PREDICT:
                return model_fn_lib.EstimatorSpec(mode, predictions=predictions,
                                                  export_outputs=self.export_outputs(predictions))
            unreduced_loss, processed_labels = self.unreduced_loss(logits, labels)
            weights = _weights(features, self._weight_column, logits)
            training_loss = losses_impl.compute_weighted_loss(unreduced_loss, weights=weights,
                                                              reduction=self._loss_reduction)
            if mode == ModeKeys.EVAL:
                with graph.name_scope("metrics"):
                    metrics = self.eval_metric_ops(predictions, processed_labels, weights, unreduced_loss)
                return model_fn_lib.EstimatorSpec(mode, predictions=predictions, loss=training_loss,
                                                  eval_metric_ops=metrics)
            if optimizer is not None:
                if train_op_fn is not None:
                    raise ValueError("train_op_fn and optimizer cannot both be set.")
                train_op = optimizer.minimize(training_loss, global_step=training_util.get_global_step())
            elif train_op_fn is not None:
                train_op = train_op_fn(training_loss)
            else:
                raise ValueError("train_op_fn and optimizer cannot both be None.")
            update_ops = graph.get_collection(graph_lib.GraphKeys.UPDATE_OPS)
            if update_ops:
                train_op = control_flow_ops.group(train_op, *update_ops)
            mean_loss = None
            if self._loss_reduction == Reduction.SUM:
                weight_sum = math_ops.reduce_sum(math_ops.multiply(weights, array_ops.ones_like(unreduced_loss)))
                mean_loss = math_ops.truediv(training_loss, weight_sum)
        with graph.name_scope(None):
            summary_ops.scalar(MetricKeys.LOSS, training_loss)
            if mean_loss is not None:
                summary_ops.scalar(MetricKeys.LOSS_MEAN, mean_loss)
        return model_fn_lib.EstimatorSpec(mode, predictions=predictions, loss=training_loss, train_op=train_op)


class BinaryLogisticHead(Head):
    """Two classes: one logit per example, the logistic loss (``sigmoid_cross_entropy_with_logits``)."""

    logits_dimension = 1

    def __init__(self, weight_column: Any = None, label_vocabulary: Optional[Sequence[str]] = None,
                 loss_reduction: str = Reduction.SUM) -> None:
        if label_vocabulary is not None and not isinstance(label_vocabulary, (list, tuple)):
            raise TypeError(f"label_vocabulary should be a list or tuple. Given type: {type(label_vocabulary)}")
        super().__init__(weight_column, loss_reduction)
        self._label_vocabulary = label_vocabulary

    def predictions(self, logits: Tensor) -> dict[str, Tensor]:
        logistic = math_ops.sigmoid(logits, name=PredictionKeys.LOGISTIC)
        two_class_logits = array_ops.concat([array_ops.zeros_like(logits), logits], -1, name="two_class_logits")
        class_ids = array_ops.expand_dims(math_ops.argmax(two_class_logits, axis=-1, name=PredictionKeys.CLASS_IDS),
                                          -1)
        return {
            PredictionKeys.LOGITS: logits,
            PredictionKeys.LOGISTIC: logistic,
            PredictionKeys.PROBABILITIES: nn_ops.softmax(two_class_logits, name=PredictionKeys.PROBABILITIES),
            PredictionKeys.CLASS_IDS: class_ids,
            PredictionKeys.CLASSES: _classes(class_ids, self._label_vocabulary),
            PredictionKeys.ALL_CLASS_IDS: _tiled_per_example(math_ops.range(2), logits),
            PredictionKeys.ALL_CLASSES: _tiled_per_example(_class_names(2, self._label_vocabulary), logits),
        }

    def export_outputs(self, predictions: dict[str, Tensor]) -> dict[str, export_output.ExportOutput]:
        classification = _classification_output(predictions)
        return {export_output.DEFAULT_SERVING_KEY: classification, CLASSIFY_SERVING_KEY: classification,
                REGRESS_SERVING_KEY: export_output.RegressionOutput(predictions[PredictionKeys.LOGISTIC]),
                PREDICT_SERVING_KEY: export_output.PredictOutput(predictions)}

    def unreduced_loss(self, logits: Tensor, labels: Any) -> tuple[Tensor, Tensor]:
        labels = _dense_labels(labels, logits, 1)
        if self._label_vocabulary is not None:
            labels = _vocabulary_ids(labels, self._label_vocabulary)
        labels = _assert_range(math_ops.cast(labels, dtypes.float32), 2)
        loss = losses_impl.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
        return loss, labels

    def eval_metric_ops(self, predictions: dict[str, Tensor], labels: Tensor, weights: Any,
                        unreduced_loss: Tensor) -> dict[str, Any]:
        keys = MetricKeys
        logistic = predictions[PredictionKeys.LOGISTIC]
        class_ids = predictions[PredictionKeys.CLASS_IDS]
        labels_mean = metrics_impl.mean(labels, weights=_metric_weights(weights, labels), name=keys.LABEL_MEAN)
        label_mean_value, label_mean_update = labels_mean
        return {
            keys.LOSS_MEAN: metrics_impl.mean(unreduced_loss, weights=_metric_weights(weights, unreduced_loss),
                                              name=keys.LOSS_MEAN),
            keys.ACCURACY: metrics_impl.accuracy(labels, class_ids, weights=_metric_weights(weights, labels),
                                                 name=keys.ACCURACY),
            keys.PRECISION: metrics_impl.precision(labels, class_ids, weights=_metric_weights(weights, labels),
                                                   name=keys.PRECISION),
            keys.RECALL: metrics_impl.recall(labels, class_ids, weights=_metric_weights(weights, labels),
                                             name=keys.RECALL),
            keys.PREDICTION_MEAN: metrics_impl.mean(logistic, weights=_metric_weights(weights, logistic),
                                                    name=keys.PREDICTION_MEAN),
            keys.LABEL_MEAN: labels_mean,
            keys.ACCURACY_BASELINE: (math_ops.maximum(label_mean_value, math_ops.subtract(1.0, label_mean_value)),
                                     math_ops.maximum(label_mean_update, math_ops.subtract(1.0, label_mean_update))),
            keys.AUC: metrics_impl.auc(labels, logistic, weights=_metric_weights(weights, logistic), name=keys.AUC),
            keys.AUC_PR: metrics_impl.auc(labels, logistic, weights=_metric_weights(weights, logistic), curve="PR",
                                          name=keys.AUC_PR),
        }


class MultiClassHead(Head):
    """``n_classes`` > 2: one logit per class, the softmax cross entropy of integer (or vocabulary) labels."""

    def __init__(self, n_classes: int, weight_column: Any = None, label_vocabulary: Optional[Sequence[str]] = None,
                 loss_reduction: str = Reduction.SUM) -> None:
        if n_classes is None:
            raise ValueError("n_classes cannot be None")
        if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes <= 2:
            raise ValueError(f"n_classes must be > 2: {n_classes}.")
        _check_vocabulary(label_vocabulary)
        super().__init__(weight_column, loss_reduction)
        self.logits_dimension = n_classes
        self._label_vocabulary = label_vocabulary

    def predictions(self, logits: Tensor) -> dict[str, Tensor]:
        class_ids = array_ops.expand_dims(math_ops.argmax(logits, axis=-1, name=PredictionKeys.CLASS_IDS), -1)
        n_classes = self.logits_dimension
        return {
            PredictionKeys.LOGITS: logits,
            PredictionKeys.PROBABILITIES: nn_ops.softmax(logits, name=PredictionKeys.PROBABILITIES),
            PredictionKeys.CLASS_IDS: class_ids,
            PredictionKeys.CLASSES: _classes(class_ids, self._label_vocabulary),
            PredictionKeys.ALL_CLASS_IDS: _tiled_per_example(math_ops.range(n_classes), logits),
            PredictionKeys.ALL_CLASSES: _tiled_per_example(_class_names(n_classes, self._label_vocabulary), logits),
        }

    def export_outputs(self, predictions: dict[str, Tensor]) -> dict[str, export_output.ExportOutput]:
        classification = _classification_output(predictions)
        return {export_output.DEFAULT_SERVING_KEY: classification, CLASSIFY_SERVING_KEY: classification,
                PREDICT_SERVING_KEY: export_output.PredictOutput(predictions)}

    def unreduced_loss(self, logits: Tensor, labels: Any) -> tuple[Tensor, Tensor]:
        labels = _dense_labels(labels, logits, 1)
        if self._label_vocabulary is None:
            if not labels.dtype.is_integer:
                raise ValueError(f"Labels dtype should be integer. Instead got {labels.dtype}.")
        else:
            labels = _vocabulary_ids(labels, self._label_vocabulary)
        label_ids = _assert_range(labels, self.logits_dimension)
        loss = nn_ops.sparse_softmax_cross_entropy_with_logits(labels=array_ops.squeeze(label_ids, axis=[-1]),
                                                               logits=logits)
        losses_impl.add_loss(loss)  # as tf.losses.sparse_softmax_cross_entropy, which TF's head calls, does
        return array_ops.expand_dims(loss, -1), label_ids

    def eval_metric_ops(self, predictions: dict[str, Tensor], labels: Tensor, weights: Any,
                        unreduced_loss: Tensor) -> dict[str, Any]:
        keys = MetricKeys
        return {
            keys.LOSS_MEAN: metrics_impl.mean(unreduced_loss, weights=_metric_weights(weights, unreduced_loss),
                                              name=keys.LOSS_MEAN),
            keys.ACCURACY: metrics_impl.accuracy(labels, predictions[PredictionKeys.CLASS_IDS],
                                                 weights=_metric_weights(weights, labels), name=keys.ACCURACY),
        }


class RegressionHead(Head):
    """``label_dimension`` real values per example, the squared error."""

    def __init__(self, label_dimension: int = 1, weight_column: Any = None,
                 loss_reduction: str = Reduction.SUM) -> None:
        if isinstance(label_dimension, bool) or not isinstance(label_dimension, int) or label_dimension < 1:
            raise ValueError(f"Invalid label_dimension {label_dimension}.")
        super().__init__(weight_column, loss_reduction)
        self.logits_dimension = label_dimension

    def predictions(self, logits: Tensor) -> dict[str, Tensor]:
        return {PredictionKeys.PREDICTIONS: logits}

    def export_outputs(self, predictions: dict[str, Tensor]) -> dict[str, export_output.ExportOutput]:
        regression = export_output.RegressionOutput(predictions[PredictionKeys.PREDICTIONS])
        return {export_output.DEFAULT_SERVING_KEY: regression, REGRESS_SERVING_KEY: regression,
                PREDICT_SERVING_KEY: export_output.PredictOutput(predictions)}

    def unreduced_loss(self, logits: Tensor, labels: Any) -> tuple[Tensor, Tensor]:
        labels = math_ops.cast(_dense_labels(labels, logits, self.logits_dimension), dtypes.float32)
        loss = math_ops.squared_difference(logits, labels)
        losses_impl.add_loss(loss)  # as tf.losses.mean_squared_error, which TF's head calls, does
        return loss, labels

    def eval_metric_ops(self, predictions: dict[str, Tensor], labels: Tensor, weights: Any,
                        unreduced_loss: Tensor) -> dict[str, Any]:
        keys = MetricKeys
        predicted = predictions[PredictionKeys.PREDICTIONS]
        return {
            keys.LOSS_MEAN: metrics_impl.mean(unreduced_loss, weights=_metric_weights(weights, unreduced_loss)),
            keys.PREDICTION_MEAN: metrics_impl.mean(predicted, weights=_metric_weights(weights, predicted),
                                                    name=keys.PREDICTION_MEAN),
            keys.LABEL_MEAN: metrics_impl.mean(labels, weights=_metric_weights(weights, labels)),
        }


def _classification_output(predictions: dict[str, Tensor]) -> export_output.ClassificationOutput:
    """Each class's probability and name, per example: what a classify signature answers."""
    return export_output.ClassificationOutput(scores=predictions[PredictionKeys.PROBABILITIES],
                                              classes=predictions[PredictionKeys.ALL_CLASSES])


def _classes(class_ids: Tensor, label_vocabulary: Optional[Sequence[str]]) -> Tensor:
    """The class names of ``class_ids``: the vocabulary's words, or the ids as strings."""
    if label_vocabulary:
        return indexing_ops.gather(op_util.to_tensor(list(label_vocabulary), dtype=dtypes.string), class_ids,
                                   name="class_string_lookup")
    return string_ops.as_string(class_ids, name="str_classes")


def binary_or_multi_class_head(n_classes: int, weight_column: Any, label_vocabulary: Optional[Sequence[str]],
                               loss_reduction: str) -> Head:
    """The binary logistic head for two classes, the softmax one for more (TF's classifiers' choice)."""
    if n_classes == 2:
        return BinaryLogisticHead(weight_column, label_vocabulary, loss_reduction)
    return MultiClassHead(n_classes, weight_column, label_vocabulary, loss_reduction)
