"""``tf.metrics``: TF1's streaming evaluation metrics (accuracy, AUC, mean, precision, recall, ...).

Each metric returns ``(value, update_op)``. Its state lives in local variables (collections
``LOCAL_VARIABLES`` and ``METRIC_VARIABLES``, named as TensorFlow names them: ``accuracy/total``,
``auc/true_positives``, ``precision/true_positives/count``); ``update_op`` adds one batch and
returns the metric over every batch so far, ``value`` reads it without changing it, and
``tf.local_variables_initializer()`` starts it over. The arithmetic is that of TensorFlow's
``python/ops/metrics_impl.py`` op for op (AUC is TensorFlow's approximation over
``num_thresholds`` thresholds, not the exact area), so evaluations agree with TensorFlow's.

The module is not called ``metrics``: ``tensorgrid.monitoring`` holds the task's Prometheus
counters. The package exports this one as ``tf.metrics``.
"""

from __future__ import annotations

import logging
from typing import Any, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import array_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import logging_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import state_ops
from tensorgrid.ops import variable_scope
from tensorgrid.ops import variables

GraphKeys = graph_lib.GraphKeys
Tensor = graph_lib.Tensor
MetricPair = tuple[Tensor, Tensor]

_log = logging.getLogger(__name__)

_CONFUSION_KEYS = ("tp", "fn", "tn", "fp")
_CONFUSION_VARIABLES = {"tp": "true_positives", "fn": "false_negatives", "tn": "true_negatives",
                        "fp": "false_positives"}
AUC_CURVES = ("ROC", "PR")
AUC_SUMMATION_METHODS = ("trapezoidal", "careful_interpolation", "minoring", "majoring")
_BROADCAST_ERROR = "weights can not be broadcast to values."


def metric_variable(shape: Any, dtype: Any, validate_shape: bool = True, name: Optional[str] = None) -> variables.Variable:
    """A zero-initialized, non-trainable variable in the LOCAL_VARIABLES and METRIC_VARIABLES
    collections: what every metric keeps its running sums in."""
    return variables.Variable(
        lambda: array_ops.zeros(shape, dtype), trainable=False,
        collections=[GraphKeys.LOCAL_VARIABLES, GraphKeys.METRIC_VARIABLES],
        validate_shape=validate_shape, name=name)


def _add_to_collections(names: Any, value: Tensor) -> None:
    if names:
        value.graph.add_to_collections(names, value)


def _div_no_nan(numerator: Any, denominator: Any, name: str) -> Tensor:
    """``numerator / denominator``, 0 where the denominator is 0 (TensorFlow's DivNoNan)."""
    den = op_util.to_tensor(denominator)
    is_zero = math_ops.equal(den, array_ops.zeros_like(den))
    quotient = math_ops.truediv(numerator, indexing_ops.where(is_zero, array_ops.ones_like(den), den))
    return indexing_ops.where(is_zero, array_ops.zeros_like(quotient), quotient, name=name)


def _read(variable: variables.Variable) -> Tensor:
    """The variable's value as an Identity of its reference, as TensorFlow reads a metric's count:
    a fetch of it is a copy that later updates leave alone."""
    return array_ops.identity(variable._ref())


def _all(condition: Tensor) -> Tensor:
    """A scalar bool: every element of ``condition`` holds (true for no elements)."""
    failures = math_ops.reduce_sum(math_ops.cast(math_ops.logical_not(condition), dtypes.int32))
    return math_ops.equal(failures, 0)


def _known_rank(t: Tensor, what: str) -> int:
    rank = t.shape.ndims
    if rank is None:
        raise ValueError(f"tf.metrics needs the rank of {what} {t.name} when the graph is built, and its "
                         "shape is unknown: give it a shape (a placeholder's shape=[None] is enough)")
    return rank


def _remove_squeezable_labels(labels: Tensor, predictions: Tensor) -> tuple[Tensor, Tensor]:
    """Squeezes a last dimension of size 1 from whichever of labels and predictions has one more
    dimension than the other (TensorFlow's ``confusion_matrix.remove_squeezable_dimensions``)."""
    labels_rank = _known_rank(labels, "labels")
    predictions_rank = _known_rank(predictions, "predictions")
    if predictions_rank - labels_rank == 1 and predictions.shape[-1].is_compatible_with(1):
        predictions = array_ops.squeeze(predictions, [-1])
    elif labels_rank - predictions_rank == 1 and labels.shape[-1].is_compatible_with(1):
        labels = array_ops.squeeze(labels, [-1])
    return labels, predictions


def _remove_squeezable_dimensions(predictions: Any, labels: Any, weights: Any) -> tuple[Tensor, Any, Any]:
    """Predictions and labels of the same rank, and weights scalar or of that rank too."""
    predictions = op_util.to_tensor(predictions)
    if labels is not None:
        labels, predictions = _remove_squeezable_labels(op_util.to_tensor(labels), predictions)
        predictions.shape.assert_is_compatible_with(labels.shape)
    if weights is None:
        return predictions, labels, None
    weights = op_util.to_tensor(weights)
    weights_rank = _known_rank(weights, "weights")
    if weights_rank == 0:
        return predictions, labels, weights
    predictions_rank = _known_rank(predictions, "predictions")
    if weights_rank - predictions_rank == 1:
        weights = array_ops.squeeze(weights, [-1])
    elif predictions_rank - weights_rank == 1:
        weights = array_ops.expand_dims(weights, -1)
    return predictions, labels, weights


def _assert_broadcastable(weights: Tensor, values: Tensor) -> Optional[graph_lib.Operation]:
    """None when the shapes show now that ``weights`` broadcast to ``values`` (a scalar, or the same
    rank with each dimension 1 or the values' size); a ValueError when they show it cannot; else an
    Assert that checks it when the step runs."""
    weights_rank = _known_rank(weights, "weights")
    values_rank = _known_rank(values, "values")
    if weights_rank == 0:
        return None
    if weights_rank != values_rank:
        raise ValueError(f"{_BROADCAST_ERROR} values.rank={values_rank}. weights.rank={weights_rank}. "
                         f"values.shape={values.shape}. weights.shape={weights.shape}. "
                         f"Received weights={weights}, values={values}")
    if weights.shape.is_fully_defined() and values.shape.is_fully_defined():
        for i, (w, v) in enumerate(zip(weights.shape.as_list(), values.shape.as_list())):
            if w not in (1, v):
                raise ValueError(f"{_BROADCAST_ERROR} Mismatch at dim {i}. values.shape={values.shape.as_list()}, "
                                 f"weights.shape={weights.shape.as_list()}. Received weights={weights}, values={values}")
        return None
    with weights.graph.name_scope("assert_broadcastable"):
        weights_shape = array_ops.shape(weights)
        values_shape = array_ops.shape(values)
        valid = _all(math_ops.logical_or(math_ops.equal(weights_shape, 1), math_ops.equal(weights_shape, values_shape)))
        return logging_ops.Assert(valid, [_BROADCAST_ERROR, "weights.shape=", weights.name, weights_shape,
                                          "values.shape=", values.name, values_shape, "is_scalar=", False])


def broadcast_weights(weights: Any, values: Tensor) -> Tensor:
    """``weights`` broadcast to the shape of ``values`` under the limited rules of tf.losses and
    tf.metrics (``assert_broadcastable``)."""
    graph = values.graph
    with graph.name_scope("broadcast_weights"):
        weights_tensor = op_util.to_tensor(weights, dtype=values.dtype.base_dtype)
        if (weights_tensor.shape.is_fully_defined() and values.shape.is_fully_defined()
                and weights_tensor.shape.is_compatible_with(values.shape)):
            return weights_tensor
        check = _assert_broadcastable(weights_tensor, values)
        with graph.control_dependencies([check] if check is not None else []):
            broadcast = math_ops.multiply(weights_tensor, array_ops.ones_like(values))
        return broadcast


# ---------------------------------------------------------------- mean and what is built on it

def mean(values: Any, weights: Any = None, metrics_collections: Any = None, updates_collections: Any = None,
         name: Optional[str] = None) -> MetricPair:
    """The (weighted) mean of ``values`` over every batch: ``total / count``."""
    with variable_scope.variable_scope(name, "mean", [v for v in (values, weights) if v is not None]):
        values = math_ops.cast(values, dtypes.float32)
        total = metric_variable([], dtypes.float32, name="total")
        count = metric_variable([], dtypes.float32, name="count")
        if weights is None:
            num_values = math_ops.cast(array_ops.size(values), dtypes.float32)
        else:
            values, _, weights = _remove_squeezable_dimensions(values, None, weights)
            weights = broadcast_weights(math_ops.cast(weights, dtypes.float32), values)
            values = math_ops.multiply(values, weights)
            num_values = math_ops.reduce_sum(weights)
        update_total = state_ops.assign_add(total, math_ops.reduce_sum(values))
        with values.graph.control_dependencies([values]):
            update_count = state_ops.assign_add(count, num_values)
        value = _div_no_nan(total, math_ops.maximum(count, 0.0), name="value")
        update_op = _div_no_nan(update_total, math_ops.maximum(update_count, 0.0), name="update_op")
        _add_to_collections(metrics_collections, value)
        _add_to_collections(updates_collections, update_op)
        return value, update_op


def accuracy(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Any = None,
             updates_collections: Any = None, name: Optional[str] = None) -> MetricPair:
    """How often ``predictions`` equals ``labels`` (weighted): the mean of the matches."""
    predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
    if labels.dtype.base_dtype != predictions.dtype.base_dtype:
        predictions = math_ops.cast(predictions, labels.dtype.base_dtype)
    is_correct = math_ops.cast(math_ops.equal(predictions, labels), dtypes.float32)
    return mean(is_correct, weights, metrics_collections, updates_collections, name or "accuracy")


def mean_absolute_error(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Any = None,
                        updates_collections: Any = None, name: Optional[str] = None) -> MetricPair:
    predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
    errors = math_ops.abs(math_ops.subtract(predictions, labels))
    return mean(errors, weights, metrics_collections, updates_collections, name or "mean_absolute_error")


def mean_squared_error(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Any = None,
                       updates_collections: Any = None, name: Optional[str] = None) -> MetricPair:
    predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
    squared_error = math_ops.squared_difference(labels, predictions)
    return mean(squared_error, weights, metrics_collections, updates_collections, name or "mean_squared_error")


def root_mean_squared_error(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Any = None,
                            updates_collections: Any = None, name: Optional[str] = None) -> MetricPair:
    predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
    mse, update_mse = mean_squared_error(labels, predictions, weights, None, None, name or "root_mean_squared_error")
    value = math_ops.sqrt(mse)
    update_op = math_ops.sqrt(update_mse)
    _add_to_collections(metrics_collections, value)
    _add_to_collections(updates_collections, update_op)
    return value, update_op


# ---------------------------------------------------------------- counts of a condition

def _count_condition(values: Tensor, weights: Any, metrics_collections: Any, updates_collections: Any) -> MetricPair:
    """The (weighted) number of true elements of the bool ``values`` over every batch, kept in ``count``."""
    count = metric_variable([], dtypes.float32, name="count")
    values = math_ops.cast(values, dtypes.float32)
    if weights is not None:
        weights = op_util.to_tensor(weights)
        allowed = (0, _known_rank(values, "values"))
        if _known_rank(weights, "weights") not in allowed:
            raise ValueError(f"weights {weights.name} must have rank in {allowed} (a scalar or one weight per "
                             f"value), got shape {weights.shape}")
        values = math_ops.multiply(values, math_ops.cast(weights, dtypes.float32))
    value = _read(count)
    update_op = state_ops.assign_add(count, math_ops.reduce_sum(values))
    _add_to_collections(metrics_collections, value)
    _add_to_collections(updates_collections, update_op)
    return value, update_op


def _count_outcome(label_value: bool, prediction_value: bool, default_name: str, labels: Any, predictions: Any,
                   weights: Any, metrics_collections: Any, updates_collections: Any, name: Optional[str]) -> MetricPair:
    scope_values = [v for v in (predictions, labels, weights) if v is not None]
    with variable_scope.variable_scope(name, default_name, scope_values):
        predictions, labels, weights = _remove_squeezable_dimensions(
            math_ops.cast(predictions, dtypes.bool_), math_ops.cast(labels, dtypes.bool_), weights)
        outcome = math_ops.logical_and(math_ops.equal(labels, label_value), math_ops.equal(predictions, prediction_value))
        return _count_condition(outcome, weights, metrics_collections, updates_collections)


def true_positives(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Any = None,
                   updates_collections: Any = None, name: Optional[str] = None) -> MetricPair:
    return _count_outcome(True, True, "true_positives", labels, predictions, weights, metrics_collections,
                          updates_collections, name)


def false_positives(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Any = None,
                    updates_collections: Any = None, name: Optional[str] = None) -> MetricPair:
    return _count_outcome(False, True, "false_positives", labels, predictions, weights, metrics_collections,
                          updates_collections, name)


def true_negatives(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Any = None,
                   updates_collections: Any = None, name: Optional[str] = None) -> MetricPair:
    return _count_outcome(False, False, "true_negatives", labels, predictions, weights, metrics_collections,
                          updates_collections, name)


def false_negatives(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Any = None,
                    updates_collections: Any = None, name: Optional[str] = None) -> MetricPair:
    return _count_outcome(True, False, "false_negatives", labels, predictions, weights, metrics_collections,
                          updates_collections, name)


def _ratio_of_counts(counted: Any, other: Any, default_name: str, labels: Any, predictions: Any, weights: Any,
                     metrics_collections: Any, updates_collections: Any, name: Optional[str]) -> MetricPair:
    """``a / (a + b)`` of two counts (0 while both are 0): precision and recall."""
    scope_values = [v for v in (predictions, labels, weights) if v is not None]
    with variable_scope.variable_scope(name, default_name, scope_values):
        predictions, labels, weights = _remove_squeezable_dimensions(
            math_ops.cast(predictions, dtypes.bool_), math_ops.cast(labels, dtypes.bool_), weights)
        a, update_a = counted(labels, predictions, weights)
        b, update_b = other(labels, predictions, weights)

        def ratio(x: Tensor, y: Tensor, op_name: str) -> Tensor:
            both = math_ops.add(x, y)
            counted = math_ops.greater(both, 0.0)
            safe = indexing_ops.where(counted, both, array_ops.ones_like(both))  # no 0/0 computed and dropped
            return indexing_ops.where(counted, math_ops.truediv(x, safe), array_ops.zeros_like(both), name=op_name)

        value = ratio(a, b, "value")
        update_op = ratio(update_a, update_b, "update_op")
        _add_to_collections(metrics_collections, value)
        _add_to_collections(updates_collections, update_op)
        return value, update_op


def precision(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Any = None,
              updates_collections: Any = None, name: Optional[str] = None) -> MetricPair:
    """``true_positives / (true_positives + false_positives)`` of bool predictions (0 with none)."""
    return _ratio_of_counts(true_positives, false_positives, "precision", labels, predictions, weights,
                            metrics_collections, updates_collections, name)


def recall(labels: Any, predictions: Any, weights: Any = None, metrics_collections: Any = None,
           updates_collections: Any = None, name: Optional[str] = None) -> MetricPair:
    """``true_positives / (true_positives + false_negatives)`` of bool predictions (0 with none)."""
    return _ratio_of_counts(true_positives, false_negatives, "recall", labels, predictions, weights,
                            metrics_collections, updates_collections, name)


# ---------------------------------------------------------------- counts at thresholds, AUC

def _check_probabilities(predictions: Tensor) -> list[graph_lib.Operation]:
    """Asserts that fail the step when a prediction lies outside [0, 1]."""
    zero = math_ops.cast(0.0, predictions.dtype.base_dtype)
    one = math_ops.cast(1.0, predictions.dtype.base_dtype)
    return [
        logging_ops.Assert(_all(math_ops.greater_equal(predictions, zero)),
                           ["predictions must be in [0, 1]", "Condition x >= 0 did not hold element-wise:",
                            f"x (predictions {predictions.name}) = ", predictions], name="assert_greater_equal"),
        logging_ops.Assert(_all(math_ops.less_equal(predictions, one)),
                           ["predictions must be in [0, 1]", "Condition x <= 1 did not hold element-wise:",
                            f"x (predictions {predictions.name}) = ", predictions], name="assert_less_equal"),
    ]


def _confusion_matrix_at_thresholds(labels: Any, predictions: Any, thresholds: Sequence[float], weights: Any = None,
                                    includes: Sequence[str] = _CONFUSION_KEYS
                                    ) -> tuple[dict[str, variables.Variable], dict[str, Tensor]]:
    """For each threshold, the (weighted) true/false positives/negatives of ``predictions >
    threshold``, kept in one variable each (named as ``_CONFUSION_VARIABLES`` says)."""
    for key in includes:
        if key not in _CONFUSION_KEYS:
            raise ValueError(f"Invalid key: {key!r}; valid are {', '.join(_CONFUSION_KEYS)}")
    predictions = op_util.to_tensor(predictions)
    with predictions.graph.control_dependencies(_check_probabilities(predictions)):
        predictions = array_ops.identity(math_ops.cast(predictions, dtypes.float32))
    predictions, labels, weights = _remove_squeezable_dimensions(
        predictions, math_ops.cast(labels, dtypes.bool_), weights)
    num_thresholds = len(thresholds)
    predictions_row = array_ops.reshape(predictions, [1, -1])
    label_is_pos = array_ops.reshape(labels, [1, -1])
    threshold_column = array_ops.reshape(op_util.to_tensor(list(thresholds), dtype=dtypes.float32), [num_thresholds, 1])
    pred_is_pos = math_ops.greater(predictions_row, threshold_column)
    outcomes = {"tp": (label_is_pos, pred_is_pos)}
    if any(key in includes for key in ("fn", "tn", "fp")):
        pred_is_neg = math_ops.logical_not(pred_is_pos)
        label_is_neg = math_ops.logical_not(label_is_pos)
        outcomes.update({"fn": (label_is_pos, pred_is_neg), "tn": (label_is_neg, pred_is_neg),
                         "fp": (label_is_neg, pred_is_pos)})
    weights_row = None
    if weights is not None:
        weights = broadcast_weights(math_ops.cast(weights, dtypes.float32), predictions)
        weights_row = array_ops.reshape(weights, [1, -1])
    values: dict[str, variables.Variable] = {}
    update_ops: dict[str, Tensor] = {}
    for key in _CONFUSION_KEYS:
        if key not in includes:
            continue
        variable = metric_variable([num_thresholds], dtypes.float32, name=_CONFUSION_VARIABLES[key])
        label_side, prediction_side = outcomes[key]
        hits = math_ops.cast(math_ops.logical_and(label_side, prediction_side), dtypes.float32)
        if weights_row is not None:
            hits = math_ops.multiply(hits, weights_row)
        update_ops[key] = state_ops.assign_add(variable, math_ops.reduce_sum(hits, 1))
        values[key] = variable
    return values, update_ops


def _leading(x: Tensor, n: int) -> Tensor:
    """``x[:n - 1]``: the values at every threshold but the last."""
    return indexing_ops.slice(x, [0], [n - 1])


def _trailing(x: Tensor, n: int) -> Tensor:
    """``x[1:]``: the values at every threshold but the first."""
    return indexing_ops.slice(x, [1], [n - 1])


def _interpolate_pr_auc(tp: Tensor, fp: Tensor, fn: Tensor, n: int) -> Tensor:
    """The area under the precision-recall curve interpolated between thresholds (Davis & Goadrich
    2006), as TensorFlow's ``careful_interpolation`` computes it."""
    dtp = math_ops.subtract(_leading(tp, n), _trailing(tp, n))
    p = math_ops.add(tp, fp)
    p_head, p_tail = _leading(p, n), _trailing(p, n)
    prec_slope = _div_no_nan(dtp, math_ops.maximum(math_ops.subtract(p_head, p_tail), 0.0), name="prec_slope")
    intercept = math_ops.subtract(_trailing(tp, n), math_ops.multiply(prec_slope, p_tail))
    safe_p_ratio = indexing_ops.where(
        math_ops.logical_and(math_ops.greater(p_head, 0.0), math_ops.greater(p_tail, 0.0)),
        _div_no_nan(p_head, math_ops.maximum(p_tail, 0.0), name="recall_relative_ratio"),
        array_ops.ones_like(p_tail))
    area = math_ops.multiply(prec_slope, math_ops.add(dtp, math_ops.multiply(intercept, math_ops.log(safe_p_ratio))))
    positives = math_ops.maximum(math_ops.add(_trailing(tp, n), _trailing(fn, n)), 0.0)
    return math_ops.reduce_sum(_div_no_nan(area, positives, name="pr_auc_increment"), name="interpolate_pr_auc")


def _smoothed_ratio(a: Tensor, b: Tensor, epsilon: float) -> Tensor:
    """``(a + epsilon) / (a + b + epsilon)``."""
    return math_ops.divide(math_ops.add(a, epsilon), math_ops.add(math_ops.add(a, b), epsilon))


def _compute_auc(tp: Tensor, fn: Tensor, tn: Tensor, fp: Tensor, n: int, curve: str, summation_method: str,
                 name: str) -> Tensor:
    if curve == "PR" and summation_method == "careful_interpolation":
        return _interpolate_pr_auc(tp, fp, fn, n)
    epsilon = 1.0e-6
    rec = _smoothed_ratio(tp, fn, epsilon)
    if curve == "ROC":
        x, y = math_ops.divide(fp, math_ops.add(math_ops.add(fp, tn), epsilon)), rec
    else:
        x, y = rec, _smoothed_ratio(tp, fp, epsilon)
    widths = math_ops.subtract(_leading(x, n), _trailing(x, n))
    if summation_method == "minoring":
        heights = math_ops.minimum(_leading(y, n), _trailing(y, n))
    elif summation_method == "majoring":
        heights = math_ops.maximum(_leading(y, n), _trailing(y, n))
    else:
        heights = math_ops.truediv(math_ops.add(_leading(y, n), _trailing(y, n)), 2.0)
    return math_ops.reduce_sum(math_ops.multiply(widths, heights), name=name)


def auc(labels: Any, predictions: Any, weights: Any = None, num_thresholds: int = 200, metrics_collections: Any = None,
        updates_collections: Any = None, curve: str = "ROC", name: Optional[str] = None,
        summation_method: str = "trapezoidal", thresholds: Optional[Sequence[float]] = None) -> MetricPair:
    """The area under the ROC or precision-recall curve, summed over ``num_thresholds`` thresholds
    spread evenly over [0, 1] (or the given ``thresholds``), as TensorFlow approximates it.
    ``predictions`` are probabilities: one outside [0, 1] fails the step."""
    scope_values = [v for v in (labels, predictions, weights) if v is not None]
    with variable_scope.variable_scope(name, "auc", scope_values):
        if curve not in AUC_CURVES:
            raise ValueError(f"Curve must be either ROC or PR. Curve {curve} is unknown.")
        if summation_method not in AUC_SUMMATION_METHODS:
            raise ValueError(f"Invalid summation_method: {summation_method} summation_method should be "
                             "'trapezoidal', 'careful_interpolation', 'minoring', or 'majoring'.")
        if curve == "PR" and summation_method == "trapezoidal":
            _log.warning('Trapezoidal rule is known to produce incorrect PR-AUCs; please switch to '
                         '"careful_interpolation" instead.')
        kepsilon = 1e-7  # keeps predictions of exactly 0 and 1 inside the outer thresholds
        if thresholds is not None:
            inner = sorted(float(t) for t in thresholds)
            num_thresholds = len(inner) + 2
        else:
            if int(num_thresholds) < 2:
                raise ValueError(f"num_thresholds must be at least 2, got {num_thresholds}")
            inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        all_thresholds = [0.0 - kepsilon] + inner + [1.0 + kepsilon]
        values, update_ops = _confusion_matrix_at_thresholds(labels, predictions, all_thresholds, weights)
        n = num_thresholds
        value = _compute_auc(values["tp"].value(), values["fn"].value(), values["tn"].value(),
                             values["fp"].value(), n, curve, summation_method, "value")
        update_op = _compute_auc(update_ops["tp"], update_ops["fn"], update_ops["tn"], update_ops["fp"], n, curve,
                                 summation_method, "update_op")
        _add_to_collections(metrics_collections, value)
        _add_to_collections(updates_collections, update_op)
        return value, update_op


def _at_thresholds(key: str, default_name: str, labels: Any, predictions: Any, thresholds: Sequence[float],
                   weights: Any, metrics_collections: Any, updates_collections: Any,
                   name: Optional[str]) -> MetricPair:
    scope_values = [v for v in (predictions, labels, weights) if v is not None]
    with variable_scope.variable_scope(name, default_name, scope_values):
        values, update_ops = _confusion_matrix_at_thresholds(labels, predictions, thresholds, weights, includes=(key,))
        value = _read(values[key])
        _add_to_collections(metrics_collections, value)
        _add_to_collections(updates_collections, update_ops[key])
        return value, update_ops[key]


def true_positives_at_thresholds(labels: Any, predictions: Any, thresholds: Sequence[float], weights: Any = None,
                                 metrics_collections: Any = None, updates_collections: Any = None,
                                 name: Optional[str] = None) -> MetricPair:
    return _at_thresholds("tp", "true_positives", labels, predictions, thresholds, weights, metrics_collections,
                          updates_collections, name)


def false_positives_at_thresholds(labels: Any, predictions: Any, thresholds: Sequence[float], weights: Any = None,
                                  metrics_collections: Any = None, updates_collections: Any = None,
                                  name: Optional[str] = None) -> MetricPair:
    return _at_thresholds("fp", "false_positives", labels, predictions, thresholds, weights, metrics_collections,
                          updates_collections, name)


def true_negatives_at_thresholds(labels: Any, predictions: Any, thresholds: Sequence[float], weights: Any = None,
                                 metrics_collections: Any = None, updates_collections: Any = None,
                                 name: Optional[str] = None) -> MetricPair:
    return _at_thresholds("tn", "true_negatives", labels, predictions, thresholds, weights, metrics_collections,
                          updates_collections, name)


def false_negatives_at_thresholds(labels: Any, predictions: Any, thresholds: Sequence[float], weights: Any = None,
                                  metrics_collections: Any = None, updates_collections: Any = None,
                                  name: Optional[str] = None) -> MetricPair:
    return _at_thresholds("fn", "false_negatives", labels, predictions, thresholds, weights, metrics_collections,
                          updates_collections, name)


def _ratio_at_thresholds(key: str, other: str, default_name: str, labels: Any, predictions: Any,
                         thresholds: Sequence[float], weights: Any, metrics_collections: Any,
                         updates_collections: Any, name: Optional[str]) -> MetricPair:
    """``key / (1e-7 + key + other)`` at each threshold: precision (tp, fp) or recall (tp, fn)."""
    scope_values = [v for v in (predictions, labels, weights) if v is not None]
    with variable_scope.variable_scope(name, default_name, scope_values):
        values, update_ops = _confusion_matrix_at_thresholds(labels, predictions, thresholds, weights,
                                                             includes=(key, other))
        epsilon = 1e-7
        prefix = default_name.split("_at_")[0]

        def ratio(a: Tensor, b: Tensor, suffix: str) -> Tensor:
            return math_ops.divide(a, math_ops.add(math_ops.add(epsilon, a), b), name=f"{prefix}_{suffix}")

        value = ratio(values[key].value(), values[other].value(), "value")
        update_op = ratio(update_ops[key], update_ops[other], "update_op")
        _add_to_collections(metrics_collections, value)
        _add_to_collections(updates_collections, update_op)
        return value, update_op


def precision_at_thresholds(labels: Any, predictions: Any, thresholds: Sequence[float], weights: Any = None,
                            metrics_collections: Any = None, updates_collections: Any = None,
                            name: Optional[str] = None) -> MetricPair:
    return _ratio_at_thresholds("tp", "fp", "precision_at_thresholds", labels, predictions, thresholds, weights,
                                metrics_collections, updates_collections, name)


def recall_at_thresholds(labels: Any, predictions: Any, thresholds: Sequence[float], weights: Any = None,
                         metrics_collections: Any = None, updates_collections: Any = None,
                         name: Optional[str] = None) -> MetricPair:
    return _ratio_at_thresholds("tp", "fn", "recall_at_thresholds", labels, predictions, thresholds, weights,
                                metrics_collections, updates_collections, name)
