"""``VariableChangedRows``: the rows of a variable written since a baseline, read on its task.

An incremental checkpoint (``Saver(incremental=True)``) runs one per variable, colocated with it,
so only the written rows travel from a parameter server to the saving client. Its kernel is in
``kernels/state_kernels.py``; which rows were written is tracked by ``execution/written_rows.py``.
"""

from __future__ import annotations

from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import op_util

op_registry.register_op("VariableChangedRows", stateful=True, ref_inputs=(0,))
op_registry.NotDifferentiable("VariableChangedRows")

EVERYTHING = (0, 0)
"""The baseline that asks for the whole value (it matches no variable)."""


def variable_changed_rows(ref: graph_lib.Tensor, since: Any, name: Optional[str] = None
                          ) -> tuple[graph_lib.Tensor, graph_lib.Tensor, graph_lib.Tensor, graph_lib.Tensor]:
    """``(baseline, whole, rows, values)`` of the variable ``ref`` since baseline ``since`` (int64
    ``[incarnation, version]``, a ``baseline`` this op returned before, or ``EVERYTHING``).

    ``baseline`` is the variable's ``[incarnation, version]`` now; when ``whole`` is true,
    ``values`` is the whole value (the variable was written whole, or ``since`` is of no use),
    else ``values`` holds the rows ``rows`` of the first dimension written after ``since``.
    """
    if not isinstance(ref, graph_lib.Tensor) or not ref.dtype.is_ref_dtype:
        raise TypeError(f"variable_changed_rows needs a variable reference tensor, got {ref!r}")
    since_t = op_util.to_tensor(since, dtype=dtypes.int64)
    shape = ref.shape
    row_shape = (tensor_shape.TensorShape([None]).concatenate(shape[1:]) if shape.ndims
                 else tensor_shape.TensorShape(None))
    with ref.graph.colocate_with(ref.op):
        op = ref.graph.create_op(
            "VariableChangedRows", [ref, since_t],
            [(dtypes.int64, tensor_shape.TensorShape([2])), (dtypes.bool_, tensor_shape.TensorShape([])),
             (dtypes.int64, tensor_shape.TensorShape([None])), (ref.dtype.base_dtype, row_shape)],
            name=name or "VariableChangedRows", attrs={})
    baseline, whole, rows, values = op.outputs
    return baseline, whole, rows, values
