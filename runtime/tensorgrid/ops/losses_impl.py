"""``tf.losses``: TF1's loss functions, weighted and reduced as TensorFlow does, and the
``losses`` collection they add to (``get_losses``, ``get_total_loss``).

Every loss is computed in float32 and cast back to its input's dtype, as TF1's
``compute_weighted_loss`` does, so the numbers match TensorFlow's.
"""

from __future__ import annotations

from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import array_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import nn_ops
from tensorgrid.ops import op_util

LOSSES = graph_lib.GraphKeys.LOSSES


class Reduction:
    """How a weighted loss becomes a number (``tf.losses.Reduction``)."""

    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls) -> tuple[str, ...]:
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE, cls.SUM_OVER_NONZERO_WEIGHTS,
                cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key: Any) -> None:
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key!r}; valid are {', '.join(cls.all())}")


def _div_no_nan(numerator: graph_lib.Tensor, denominator: graph_lib.Tensor) -> graph_lib.Tensor:
    zero = array_ops.zeros_like(denominator)
    safe = indexing_ops.where(math_ops.equal(denominator, zero), array_ops.ones_like(denominator), denominator)
    return indexing_ops.where(math_ops.equal(denominator, zero), zero, math_ops.truediv(numerator, safe))


def _num_present(losses: graph_lib.Tensor, weights: Any) -> graph_lib.Tensor:
    if isinstance(weights, float) and weights != 0.0:
        return math_ops.cast(array_ops.size(losses), dtypes.float32)
    w = math_ops.cast(op_util.to_tensor(weights), dtypes.float32)
    present = indexing_ops.where(math_ops.equal(w, 0.0), array_ops.zeros_like(w), array_ops.ones_like(w))
    return math_ops.reduce_sum(math_ops.multiply(present, array_ops.ones_like(losses)))


def compute_weighted_loss(losses: Any, weights: Any = 1.0, scope: Optional[str] = None,
                          loss_collection: Optional[str] = LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> graph_lib.Tensor:
    """``losses * weights`` reduced by ``reduction``, added to ``loss_collection``."""
    Reduction.validate(reduction)
    per_example = op_util.to_tensor(losses)
    graph = op_util.graph_of(per_example)
    with graph.name_scope(scope or "weighted_loss"):
        input_dtype = per_example.dtype.base_dtype
        per_example = math_ops.cast(per_example, dtypes.float32)
        w = math_ops.cast(op_util.to_tensor(weights), dtypes.float32)
        if not w.shape.is_compatible_with(per_example.shape) and w.shape.ndims not in (None, 0):
            array_ops.broadcast_to(w, array_ops.shape(per_example))  # fails now for shapes that cannot broadcast
        weighted = math_ops.multiply(per_example, w)
        if reduction == Reduction.NONE:
            loss = weighted
        else:
            loss = math_ops.reduce_sum(weighted)
            if reduction == Reduction.MEAN:
                loss = _div_no_nan(loss, math_ops.reduce_sum(math_ops.multiply(array_ops.ones_like(per_example), w)))
            elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                loss = _div_no_nan(loss, _num_present(per_example, weights))
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = _div_no_nan(loss, math_ops.cast(array_ops.size(per_example), dtypes.float32))
        loss = math_ops.cast(loss, input_dtype)
    add_loss(loss, loss_collection)
    return loss


def _pair(labels: Any, predictions: Any, what: str = "predictions") -> tuple[graph_lib.Tensor, graph_lib.Tensor]:
    if labels is None:
        raise ValueError("Argument `labels` must not be None.")
    if predictions is None:
        raise ValueError(f"Argument `{what}` must not be None.")
    p = math_ops.cast(op_util.to_tensor(predictions), dtypes.float32)
    y = math_ops.cast(op_util.to_tensor(labels), dtypes.float32)
    if not p.shape.is_compatible_with(y.shape):
        raise ValueError(f"Shapes {p.shape} and {y.shape} are incompatible: labels and {what} must match")
    return y, p


def mean_squared_error(labels: Any, predictions: Any, weights: Any = 1.0, scope: Optional[str] = None,
                       loss_collection: Optional[str] = LOSSES,
                       reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> graph_lib.Tensor:
    y, p = _pair(labels, predictions)
    return compute_weighted_loss(math_ops.squared_difference(p, y), weights, scope or "mean_squared_error",
                                 loss_collection, reduction)


def absolute_difference(labels: Any, predictions: Any, weights: Any = 1.0, scope: Optional[str] = None,
                        loss_collection: Optional[str] = LOSSES,
                        reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> graph_lib.Tensor:
    y, p = _pair(labels, predictions)
    return compute_weighted_loss(math_ops.abs(math_ops.subtract(p, y)), weights, scope or "absolute_difference", loss_collection,
                                 reduction)


def huber_loss(labels: Any, predictions: Any, weights: Any = 1.0, delta: float = 1.0, scope: Optional[str] = None,
               loss_collection: Optional[str] = LOSSES,
               reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> graph_lib.Tensor:
    y, p = _pair(labels, predictions)
    error = math_ops.abs(math_ops.subtract(p, y))
    quadratic = math_ops.minimum(error, delta)
    losses = math_ops.add(math_ops.multiply(0.5, math_ops.multiply(quadratic, quadratic)),
                          math_ops.multiply(delta, math_ops.subtract(error, quadratic)))
    return compute_weighted_loss(losses, weights, scope or "huber_loss", loss_collection, reduction)


def log_loss(labels: Any, predictions: Any, weights: Any = 1.0, epsilon: float = 1e-7, scope: Optional[str] = None,
             loss_collection: Optional[str] = LOSSES,
             reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> graph_lib.Tensor:
    y, p = _pair(labels, predictions)
    losses = math_ops.subtract(
        math_ops.multiply(math_ops.negative(y), math_ops.log(math_ops.add(p, epsilon))),
        math_ops.multiply(math_ops.subtract(1.0, y), math_ops.log(math_ops.add(math_ops.subtract(1.0, p), epsilon))))
    return compute_weighted_loss(losses, weights, scope or "log_loss", loss_collection, reduction)


def hinge_loss(labels: Any, logits: Any, weights: Any = 1.0, scope: Optional[str] = None,
               loss_collection: Optional[str] = LOSSES,
               reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> graph_lib.Tensor:
    """``max(0, 1 - logits * (2 * labels - 1))``: labels in {0, 1}, as TF1's hinge loss."""
    y, p = _pair(labels, logits, "logits")
    signs = math_ops.subtract(math_ops.multiply(2.0, y), 1.0)
    losses = nn_ops.relu(math_ops.subtract(1.0, math_ops.multiply(p, signs)))
    return compute_weighted_loss(losses, weights, scope or "hinge_loss", loss_collection, reduction)


def cosine_distance(labels: Any, predictions: Any, axis: Optional[int] = None, weights: Any = 1.0,
                    scope: Optional[str] = None, loss_collection: Optional[str] = LOSSES,
                    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS, dim: Optional[int] = None) -> graph_lib.Tensor:
    """``1 - sum(labels * predictions, axis)`` of unit-normalized inputs, as TF1's."""
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    if axis is None:
        raise ValueError("You must specify 'axis'.")
    y, p = _pair(labels, predictions)
    products = math_ops.reduce_sum(math_ops.multiply(p, y), axis=axis, keepdims=True)
    return compute_weighted_loss(math_ops.subtract(1.0, products), weights, scope or "cosine_distance_loss",
                                 loss_collection, reduction)


def mean_pairwise_squared_error(labels: Any, predictions: Any, weights: Any = 1.0, scope: Optional[str] = None,
                                loss_collection: Optional[str] = LOSSES) -> graph_lib.Tensor:
    """Over the pairs of elements of each example, the mean squared difference of their
    differences (elements with weight 0 not counted), weighted and summed, as TF1's."""
    y, p = _pair(labels, predictions)
    diffs = math_ops.subtract(p, y)
    if diffs.shape.ndims is None or diffs.shape.ndims < 1:
        raise ValueError(f"mean_pairwise_squared_error needs predictions of known rank >= 1, got shape {diffs.shape}")
    graph = op_util.graph_of(diffs)
    with graph.name_scope(scope or "mean_pairwise_squared_error"):
        axis = list(range(1, diffs.shape.ndims))
        w = math_ops.cast(op_util.to_tensor(weights), dtypes.float32)
        mask = indexing_ops.where(math_ops.equal(w, 0.0), array_ops.zeros_like(w), array_ops.ones_like(w))
        present = math_ops.reduce_sum(math_ops.multiply(mask, array_ops.ones_like(diffs)), axis=axis, keepdims=True)
        sum_squares = math_ops.reduce_sum(math_ops.square(diffs), axis=axis, keepdims=True)
        term1 = math_ops.multiply(2.0, _div_no_nan(sum_squares, math_ops.maximum(math_ops.subtract(present, 1.0), 0.0)))
        sum_diff = math_ops.reduce_sum(diffs, axis=axis, keepdims=True)
        term2 = math_ops.multiply(2.0, _div_no_nan(math_ops.square(sum_diff),
                                                   math_ops.multiply(present, math_ops.subtract(present, 1.0))))
        loss = math_ops.reduce_sum(math_ops.multiply(math_ops.subtract(term1, term2), w))
        any_present = math_ops.greater(math_ops.reduce_sum(present), 0.0)
        loss = indexing_ops.where(any_present, loss, array_ops.zeros_like(loss))
    add_loss(loss, loss_collection)
    return loss


def sigmoid_cross_entropy_with_logits(_sentinel: Any = None, labels: Any = None, logits: Any = None,
                                      name: Optional[str] = None) -> graph_lib.Tensor:
    """``max(x, 0) - x * z + log(1 + exp(-|x|))``: TensorFlow's stable form (``tf.nn``)."""
    if _sentinel is not None:
        raise ValueError("Only call sigmoid_cross_entropy_with_logits with named arguments (labels=..., logits=...)")
    x = op_util.to_tensor(logits)
    z = op_util.to_tensor(labels, dtype=x.dtype.base_dtype)
    if not x.shape.is_compatible_with(z.shape):
        raise ValueError(f"logits and labels must have the same shape ({x.shape} vs {z.shape})")
    positive = math_ops.greater_equal(x, array_ops.zeros_like(x))
    relu_logits = indexing_ops.where(positive, x, array_ops.zeros_like(x))
    neg_abs_logits = indexing_ops.where(positive, math_ops.negative(x), x)
    return math_ops.add(math_ops.subtract(relu_logits, math_ops.multiply(x, z)),
                        math_ops.log(math_ops.add(1.0, math_ops.exp(neg_abs_logits))), name=name)


def sigmoid_cross_entropy(multi_class_labels: Any, logits: Any, weights: Any = 1.0, label_smoothing: float = 0,
                          scope: Optional[str] = None, loss_collection: Optional[str] = LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> graph_lib.Tensor:
    if multi_class_labels is None:
        raise ValueError("Argument `multi_class_labels` must not be None.")
    x = op_util.to_tensor(logits)
    z = math_ops.cast(op_util.to_tensor(multi_class_labels), x.dtype.base_dtype)
    if label_smoothing > 0:
        z = math_ops.add(math_ops.multiply(z, 1.0 - label_smoothing), 0.5 * label_smoothing)
    losses = sigmoid_cross_entropy_with_logits(labels=z, logits=x)
    return compute_weighted_loss(losses, weights, scope or "sigmoid_cross_entropy_loss", loss_collection, reduction)


def softmax_cross_entropy(onehot_labels: Any, logits: Any, weights: Any = 1.0, label_smoothing: float = 0,
                          scope: Optional[str] = None, loss_collection: Optional[str] = LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> graph_lib.Tensor:
    if onehot_labels is None:
        raise ValueError("Argument `onehot_labels` must not be None.")
    x = op_util.to_tensor(logits)
    z = math_ops.cast(op_util.to_tensor(onehot_labels), x.dtype.base_dtype)
    if label_smoothing > 0:
        if z.shape.ndims is None:
            raise ValueError("softmax_cross_entropy with label_smoothing needs labels of known rank")
        classes = math_ops.cast(indexing_ops.gather(array_ops.shape(z), z.shape.ndims - 1), x.dtype.base_dtype)
        z = math_ops.add(math_ops.multiply(z, 1.0 - label_smoothing), math_ops.truediv(float(label_smoothing), classes))
    losses = nn_ops.softmax_cross_entropy_with_logits_v2(labels=array_ops.stop_gradient(z), logits=x)
    return compute_weighted_loss(losses, weights, scope or "softmax_cross_entropy_loss", loss_collection, reduction)


def sparse_softmax_cross_entropy(labels: Any, logits: Any, weights: Any = 1.0, scope: Optional[str] = None,
                                 loss_collection: Optional[str] = LOSSES,
                                 reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> graph_lib.Tensor:
    if labels is None:
        raise ValueError("Argument `labels` must not be None.")
    losses = nn_ops.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return compute_weighted_loss(losses, weights, scope or "sparse_softmax_cross_entropy_loss", loss_collection,
                                 reduction)


def add_loss(loss: Any, loss_collection: Optional[str] = LOSSES) -> None:
    if loss_collection:
        graph_lib.get_default_graph().add_to_collection(loss_collection, loss)


def get_losses(scope: Optional[str] = None, loss_collection: str = LOSSES) -> list[Any]:
    return graph_lib.get_default_graph().get_collection(loss_collection, scope)


def get_regularization_losses(scope: Optional[str] = None) -> list[Any]:
    return graph_lib.get_default_graph().get_collection(graph_lib.GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope: Optional[str] = None, name: str = "total_regularization_loss") -> graph_lib.Tensor:
    losses = get_regularization_losses(scope)
    return math_ops.add_n(losses, name=name) if losses else array_ops.constant(0.0, name=name)


def get_total_loss(add_regularization_losses: bool = True, name: str = "total_loss",
                   scope: Optional[str] = None) -> graph_lib.Tensor:
    """The sum of the ``losses`` collection (and of the regularization losses)."""
    losses = get_losses(scope)
    if add_regularization_losses:
        losses = losses + get_regularization_losses(scope)
    if not losses:
        raise ValueError("No losses found in the losses collection (nor regularization losses): add losses with "
                         "tf.losses.* or tf.losses.add_loss first")
    return math_ops.add_n(losses, name=name)
