"""TF1's learning-rate schedules: a learning rate that is a tensor of the global step.

``exponential_decay``, ``inverse_time_decay``, ``natural_exp_decay``, ``polynomial_decay``
and ``piecewise_constant`` build the formula TensorFlow's ``tf.train`` functions build,
in the learning rate's dtype, from existing ops: pass the result to an optimizer.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import array_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util


def _rate_and_progress(learning_rate: Any, global_step: Any, decay_steps: Any, what: str,
                       staircase: bool = False) -> tuple[graph_lib.Tensor, graph_lib.Tensor]:
    if global_step is None:
        raise ValueError(f"global_step is required for {what}.")
    rate = op_util.to_tensor(learning_rate, name="learning_rate")
    if not rate.dtype.base_dtype.is_floating:
        rate = math_ops.cast(rate, dtypes.float32)
    dtype = rate.dtype.base_dtype
    step = math_ops.cast(op_util.to_tensor(global_step), dtype)
    progress = math_ops.truediv(step, math_ops.cast(op_util.to_tensor(decay_steps), dtype))
    return rate, math_ops.floor(progress) if staircase else progress


def exponential_decay(learning_rate: Any, global_step: Any, decay_steps: Any, decay_rate: Any,
                      staircase: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """``learning_rate * decay_rate ^ (global_step / decay_steps)`` (an integer power with ``staircase``)."""
    rate, progress = _rate_and_progress(learning_rate, global_step, decay_steps, "exponential decay", staircase)
    decay = math_ops.cast(op_util.to_tensor(decay_rate), rate.dtype.base_dtype)
    return math_ops.multiply(rate, math_ops.pow(decay, progress), name=name or "ExponentialDecay")


def natural_exp_decay(learning_rate: Any, global_step: Any, decay_steps: Any, decay_rate: Any,
                      staircase: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """``learning_rate * exp(-decay_rate * global_step / decay_steps)``."""
    rate, progress = _rate_and_progress(learning_rate, global_step, decay_steps, "natural exp decay", staircase)
    decay = math_ops.cast(op_util.to_tensor(decay_rate), rate.dtype.base_dtype)
    return math_ops.multiply(rate, math_ops.exp(math_ops.negative(math_ops.multiply(decay, progress))), name=name or "NaturalExpDecay")


def inverse_time_decay(learning_rate: Any, global_step: Any, decay_steps: Any, decay_rate: Any,
                       staircase: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """``learning_rate / (1 + decay_rate * global_step / decay_steps)``."""
    rate, progress = _rate_and_progress(learning_rate, global_step, decay_steps, "inverse time decay", staircase)
    decay = math_ops.cast(op_util.to_tensor(decay_rate), rate.dtype.base_dtype)
    return math_ops.truediv(rate, math_ops.add(1.0, math_ops.multiply(decay, progress)),
                           name=name or "InverseTimeDecay")


def polynomial_decay(learning_rate: Any, global_step: Any, decay_steps: Any, end_learning_rate: Any = 0.0001,
                     power: Any = 1.0, cycle: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """From ``learning_rate`` to ``end_learning_rate`` over ``decay_steps`` along ``(1 - p) ^ power``;
    ``cycle`` starts again with a longer period instead of staying at the end."""
    if global_step is None:
        raise ValueError("global_step is required for polynomial decay.")
    rate = op_util.to_tensor(learning_rate, name="learning_rate")
    dtype = rate.dtype.base_dtype
    end = math_ops.cast(op_util.to_tensor(end_learning_rate), dtype)
    exponent = math_ops.cast(op_util.to_tensor(power), dtype)
    step = math_ops.cast(op_util.to_tensor(global_step), dtype)
    steps = math_ops.cast(op_util.to_tensor(decay_steps), dtype)
    if cycle:
        periods = math_ops.negative(math_ops.floor(math_ops.negative(math_ops.truediv(step, steps))))  # ceil
        steps = math_ops.multiply(steps, indexing_ops.where(math_ops.equal(step, 0.0), math_ops.cast(1.0, dtype), periods))
    else:
        step = math_ops.minimum(step, steps)
    remaining = math_ops.subtract(1.0, math_ops.truediv(step, steps))
    return math_ops.add(math_ops.multiply(math_ops.subtract(rate, end), math_ops.pow(remaining, exponent)), end,
                        name=name or "PolynomialDecay")


def piecewise_constant(x: Any, boundaries: Sequence[Any], values: Sequence[Any],
                       name: Optional[str] = None) -> graph_lib.Tensor:
    """``values[0]`` while ``x <= boundaries[0]``, ``values[i]`` while ``boundaries[i-1] < x <= boundaries[i]``,
    ``values[-1]`` after the last boundary."""
    if len(values) != len(boundaries) + 1:
        raise ValueError(f"The length of boundaries should be 1 less than the length of values: got "
                         f"{len(boundaries)} boundaries and {len(values)} values")
    step = op_util.to_tensor(x)
    limits = [op_util.to_tensor(b, dtype=step.dtype.base_dtype) for b in boundaries]
    rates = op_util.convert_like_first_tensor(list(values), "piecewise_constant")
    for r in rates[1:]:
        if r.dtype.base_dtype != rates[0].dtype.base_dtype:
            raise ValueError(f"Values must have elements all with the same dtype ({rates[0].dtype.name} vs "
                             f"{r.dtype.name}).")
    result = rates[-1]
    for limit, rate in reversed(list(zip(limits, rates))):
        result = indexing_ops.where(math_ops.less_equal(step, limit), rate, result)
    return array_ops.identity(result, name=name or "PiecewiseConstant")
