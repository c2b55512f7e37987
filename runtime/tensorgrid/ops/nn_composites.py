"""``tf.nn`` functions that are formulas over existing ops: ``elu``, ``softplus``,
``l2_normalize`` and ``batch_normalization``, written as TensorFlow computes them, so their
gradients come from the ops they are made of.
"""

from __future__ import annotations

from typing import Any, Optional

from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import array_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util


def elu(features: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """``x`` where ``x > 0``, else ``exp(x) - 1``."""
    x = op_util.to_tensor(features)
    op_util.check_dtype_in("Elu", x, op_util.FLOATS)
    negative_part = math_ops.subtract(math_ops.exp(math_ops.minimum(x, array_ops.zeros_like(x))), 1.0)
    return indexing_ops.where(math_ops.greater(x, array_ops.zeros_like(x)), x, negative_part, name=name or "Elu")


def softplus(features: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """``log(1 + exp(x))`` in the stable form ``max(x, 0) + log(1 + exp(-|x|))``."""
    x = op_util.to_tensor(features)
    op_util.check_dtype_in("Softplus", x, op_util.FLOATS)
    tail = math_ops.log(math_ops.add(1.0, math_ops.exp(math_ops.negative(math_ops.abs(x)))))
    return math_ops.add(math_ops.maximum(x, array_ops.zeros_like(x)), tail, name=name or "Softplus")


def l2_normalize(x: Any, axis: Any = None, epsilon: float = 1e-12, name: Optional[str] = None,
                 dim: Any = None) -> graph_lib.Tensor:
    """``x / sqrt(max(sum(x ** 2, axis), epsilon))``."""
    if axis is not None and dim is not None:
        raise ValueError("l2_normalize takes axis or its old name dim, not both")
    t = op_util.to_tensor(x)
    op_util.check_dtype_in("l2_normalize", t, op_util.FLOATS)
    squares = math_ops.reduce_sum(math_ops.square(t), dim if axis is None else axis, keepdims=True)
    inverse_norm = math_ops.rsqrt(math_ops.maximum(squares, math_ops.cast(epsilon, t.dtype.base_dtype)))
    return math_ops.multiply(t, inverse_norm, name=name or "l2_normalize")


def batch_normalization(x: Any, mean: Any, variance: Any, offset: Any, scale: Any, variance_epsilon: float,
                        name: Optional[str] = None) -> graph_lib.Tensor:
    """``scale * (x - mean) / sqrt(variance + epsilon) + offset`` (``offset`` and ``scale`` may be None),
    computed as TensorFlow does: ``x * inv + (offset - mean * inv)``."""
    t = op_util.to_tensor(x)
    inverse = math_ops.rsqrt(math_ops.add(op_util.to_tensor(variance), variance_epsilon))
    if scale is not None:
        inverse = math_ops.multiply(inverse, op_util.to_tensor(scale))
    shift = math_ops.negative(math_ops.multiply(op_util.to_tensor(mean), inverse))
    if offset is not None:
        shift = math_ops.add(op_util.to_tensor(offset), shift)
    return math_ops.add(math_ops.multiply(t, math_ops.cast(inverse, t.dtype.base_dtype)),
                        math_ops.cast(shift, t.dtype.base_dtype), name=name or "batchnorm")
