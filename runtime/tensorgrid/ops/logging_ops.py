"""``tf.Print``, an identity that prints tensors on standard error each time it runs, and
``tf.Assert``, an op that fails its step with InvalidArgumentError when its condition is false
(TensorFlow keeps both kernels in ``logging_ops.cc``)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.ops import op_util

op_registry.register_op("Print", stateful=True)
op_registry.register_op("Assert", stateful=True)
op_registry.NotDifferentiable("Assert")


def Print(input_: Any, data: Sequence[Any], message: Optional[str] = None, first_n: Optional[int] = None,  # noqa: N802
          summarize: Optional[int] = None, name: Optional[str] = None) -> graph_lib.Tensor:
    """``input_`` unchanged; running it prints ``message`` and each tensor of ``data`` (at most
    ``summarize`` elements each, default 3), only the first ``first_n`` times when given."""
    x = op_util.to_tensor(input_)
    if isinstance(data, (graph_lib.Tensor, str)) or not isinstance(data, (list, tuple)):
        raise TypeError(f"tf.Print's data must be a list of tensors, got {data!r}")
    tensors = [op_util.to_tensor(d) for d in data]
    attrs = {"message": message or "", "first_n": -1 if first_n is None else int(first_n),
             "summarize": 3 if summarize is None else int(summarize)}
    return op_util.make_tensor("Print", [x, *tensors], x.dtype.base_dtype, x.shape, name or "Print", attrs)


@op_registry.RegisterGradient("Print")
def _print_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [grad] + [None] * (len(op.inputs) - 1)


def Assert(condition: Any, data: Sequence[Any], summarize: Optional[int] = None,  # noqa: N802
           name: Optional[str] = None) -> graph_lib.Operation:
    """An op that raises InvalidArgumentError ``assertion failed: [d0] [d1] ...`` when the scalar
    bool ``condition`` is false, showing at most ``summarize`` elements (default 3) of each of
    ``data``; ops that must not run unchecked take it as a control dependency."""
    c = op_util.to_tensor(condition)
    if c.dtype.base_dtype != dtypes.bool_ or c.shape.ndims not in (None, 0):
        raise ValueError(f"tf.Assert's condition must be a scalar bool, got {c.name} of dtype "
                         f"{c.dtype.base_dtype.name} and shape {c.shape}")
    if isinstance(data, (graph_lib.Tensor, str)) or not isinstance(data, (list, tuple)):
        raise TypeError(f"tf.Assert's data must be a list of tensors, got {data!r}")
    tensors = [op_util.to_tensor(d) for d in data]
    attrs = {"summarize": 3 if summarize is None else int(summarize)}
    return op_util.make_op("Assert", [c, *tensors], [], name or "Assert", attrs)
