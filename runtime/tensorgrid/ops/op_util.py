"""Shared plumbing of op constructors: converting arguments and adding the op.

Keeps every constructor to its substance: which inputs, which attributes, what
output dtype and static shape.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import func_graph
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import tensor_conversion
from tensorgrid.framework import tensor_shape


def graph_of(*values: Any) -> graph_lib.Graph:
    """The graph of the first Tensor (or Variable) among ``values``, else the default graph.

    Inside a tf.cond branch or a tf.while_loop body (a FuncGraph) a tensor of an enclosing
    graph is captured, so the op is built in the function's graph."""
    default = graph_lib.get_default_graph()
    for value in values:
        if isinstance(value, (list, tuple)):
            for item in value:
                g = _graph_or_none(item)
                if g is not None:
                    return _innermost(g, default)
        g = _graph_or_none(value)
        if g is not None:
            return _innermost(g, default)
    return default


def _innermost(graph: graph_lib.Graph, default: graph_lib.Graph) -> graph_lib.Graph:
    if isinstance(default, func_graph.FuncGraph) and default.encloses(graph):
        return default
    return graph


def _graph_or_none(value: Any) -> Optional[graph_lib.Graph]:
    if isinstance(value, graph_lib.Tensor):
        return value.graph
    graph = getattr(value, "graph", None)
    return graph if isinstance(graph, graph_lib.Graph) else None


def make_op(
    op_type: str,
    inputs: Sequence[graph_lib.Tensor],
    output_specs: Sequence[tuple[dtypes.DType, Any]],
    name: Optional[str] = None,
    attrs: Optional[dict[str, Any]] = None,
    graph: Optional[graph_lib.Graph] = None,
) -> graph_lib.Operation:
    g = graph if graph is not None else graph_of(*inputs)
    return g.create_op(op_type, list(inputs), list(output_specs), name=name, attrs=attrs)


def make_tensor(
    op_type: str,
    inputs: Sequence[graph_lib.Tensor],
    dtype: dtypes.DType,
    shape: Any,
    name: Optional[str] = None,
    attrs: Optional[dict[str, Any]] = None,
) -> graph_lib.Tensor:
    """Adds a single-output op and returns its output."""
    return make_op(op_type, inputs, [(dtype, shape)], name, attrs).outputs[0]


def to_tensor(value: Any, dtype: Any = None, name: Optional[str] = None) -> graph_lib.Tensor:
    return tensor_conversion.convert_to_tensor(value, dtype=dtype, name=name)


def to_tensors_like(x: Any, y: Any) -> tuple[graph_lib.Tensor, graph_lib.Tensor]:
    """Converts two operands, giving a Python operand the dtype of the Tensor operand."""
    if isinstance(x, graph_lib.Tensor) or hasattr(x, "_as_graph_element"):
        x = to_tensor(x)
        y = to_tensor(y, dtype=None if is_tensor_like(y) else x.dtype.base_dtype)
    elif is_tensor_like(y):
        y = to_tensor(y)
        x = to_tensor(x, dtype=y.dtype.base_dtype)
    else:
        x = to_tensor(x)
        y = to_tensor(y, dtype=x.dtype.base_dtype)
    return x, y


def is_tensor_like(value: Any) -> bool:
    """A Tensor, or a value that stands for one in the graph (a Variable)."""
    return isinstance(value, graph_lib.Tensor) or hasattr(value, "_as_graph_element")


def check_same_dtype(op_type: str, *tensors: graph_lib.Tensor) -> dtypes.DType:
    base = tensors[0].dtype.base_dtype
    for t in tensors[1:]:
        if t.dtype.base_dtype != base:
            names = ", ".join(f"{x.name} ({x.dtype.base_dtype.name})" for x in tensors)
            raise TypeError(f"{op_type} requires inputs of the same dtype, got {names}")
    return base


def check_dtype_in(op_type: str, t: graph_lib.Tensor, allowed: Sequence[dtypes.DType]) -> None:
    if t.dtype.base_dtype not in allowed:
        valid = ", ".join(d.name for d in allowed)
        raise TypeError(f"{op_type} does not support dtype {t.dtype.base_dtype.name} of {t.name}; valid: {valid}")


FLOATS = (dtypes.float16, dtypes.float32, dtypes.float64)
NUMBERS = (dtypes.float16, dtypes.float32, dtypes.float64, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64,
           dtypes.uint8)
INDICES = (dtypes.int32, dtypes.int64)


def normalize_axes(axis: Any, rank: Optional[int], op_name: str) -> Optional[tuple[int, ...]]:
    """Turns an int / list / None axis into a sorted tuple of non-negative axes."""
    if axis is None:
        return None if rank is None else tuple(range(rank))
    axes = [axis] if isinstance(axis, int) else list(axis)
    result = []
    for a in axes:
        a = int(a)
        if rank is not None:
            if not -rank <= a < rank:
                raise ValueError(f"{op_name}: axis {a} is out of range for a tensor of rank {rank}")
            a %= rank
        result.append(a)
    return tuple(sorted(set(result)))


def static_value(t: graph_lib.Tensor) -> Any:
    """The value of ``t`` when it is a Const (for shape inference), else None."""
    if t.op.type == "Const":
        return t.op.get_attr("value")
    return None


def unknown_shape() -> tensor_shape.TensorShape:
    return tensor_shape.TensorShape(None)


# Arguments that fix an op's structure (axes, depths, sizes) and index arguments.

def static_ints(value: Any, op_name: str, arg_name: str) -> Optional[list[int]]:
    """A list/tuple/array/constant of ints as Python ints; None for a non-constant Tensor."""
    if isinstance(value, graph_lib.Tensor):
        known = static_value(value)
        if known is None:
            return None
        value = known
    array = np.asarray(value)
    if array.size and array.dtype.kind not in "iu":
        raise TypeError(f"{op_name}: {arg_name} must be integers, got {value!r}")
    return [int(v) for v in array.reshape(-1)]


def static_int(value: Any, op_name: str, arg_name: str) -> int:
    """An int argument that must be known when the graph is built (an axis, a depth)."""
    if isinstance(value, graph_lib.Tensor):
        known = static_value(value)
        if known is None:
            raise TypeError(f"{op_name}: {arg_name} must be known when the graph is built, got the tensor {value.name}")
        value = known
    array = np.asarray(value)
    if array.ndim != 0 or array.dtype.kind not in "iu":
        raise TypeError(f"{op_name}: {arg_name} must be a Python int (or a scalar int constant), got {value!r}")
    return int(array)


def index_tensor(value: Any, op_name: str) -> graph_lib.Tensor:
    """An indices argument as an int32 or int64 tensor; Python values become int32."""
    t = to_tensor(value, dtype=dtypes.int32) if not isinstance(value, graph_lib.Tensor) else value
    check_dtype_in(op_name, t, INDICES)
    return t


def convert_like_first_tensor(values: Any, op_name: str) -> list[graph_lib.Tensor]:
    """Converts a list of tensors and Python values, giving Python values the tensors' dtype."""
    if isinstance(values, graph_lib.Tensor) or not isinstance(values, (list, tuple)):
        raise TypeError(f"{op_name} expects a list of tensors, got {values!r}")
    if not values:
        raise ValueError(f"{op_name} needs at least one tensor, got an empty list")
    tensors = [to_tensor(v) if is_tensor_like(v) else None for v in values]
    dtype = next((t.dtype.base_dtype for t in tensors if t is not None), None)
    return [t if t is not None else to_tensor(v, dtype=dtype) for t, v in zip(tensors, values)]


def normalize_axis(axis: int, rank: Optional[int], op_name: str, extra: int = 0) -> int:
    """``axis`` in [-(rank+extra), rank+extra) as a non-negative int (``extra`` for new axes).

    With an unknown rank the axis is kept as given; the kernel resolves a negative one.
    """
    if rank is None:
        return axis
    bound = rank + extra
    if not -bound <= axis < bound:
        raise ValueError(f"{op_name}: axis {axis} is out of range [{-bound}, {bound}) for a tensor of rank {rank}")
    return axis % bound
