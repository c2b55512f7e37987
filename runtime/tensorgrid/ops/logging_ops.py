"""``tf.Print``: an identity that prints tensors on standard error each time it runs."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.ops import op_util

op_registry.register_op("Print", stateful=True)


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
