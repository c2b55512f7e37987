"""Math ops: element-wise arithmetic with numpy broadcasting, matmul, reductions, clipping.

Gradients of broadcasting ops sum back over the broadcast axes (``unbroadcast_to``).
Tensor operators (``+``, ``*``, ``@``, ``[]``...) are installed here.
"""

from __future__ import annotations

import builtins
from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import op_util

_BINARY = ("AddV2", "Sub", "Mul", "RealDiv", "FloorDiv", "FloorMod", "Pow", "Maximum", "Minimum")
_UNARY = ("Neg", "Square", "Sqrt", "Rsqrt", "Exp", "Log", "Abs", "Sign", "Reciprocal", "Sigmoid", "Tanh", "Floor")
for _op_type in (*_BINARY, *_UNARY, "MatMul", "Sum", "Mean", "Max", "Min", "Prod", "ArgMax", "ArgMin",
                 "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual",
                 "LogicalAnd", "LogicalOr", "LogicalNot", "Cast", "AddN", "Range"):
    op_registry.register_op(_op_type)
op_registry.NotDifferentiable("Range")


def _binary(op_type: str, x: Any, y: Any, name: Optional[str], allowed: tuple[dtypes.DType, ...] = op_util.NUMBERS,
            out_dtype: Optional[dtypes.DType] = None) -> graph_lib.Tensor:
    x, y = op_util.to_tensors_like(x, y)
    dt = op_util.check_same_dtype(op_type, x, y)
    op_util.check_dtype_in(op_type, x, allowed)
    shape = tensor_shape.broadcast_shapes(x.shape, y.shape, f"{op_type} of {x.name} and {y.name}")
    return op_util.make_tensor(op_type, [x, y], out_dtype or dt, shape, name or op_type)


def _unary(op_type: str, x: Any, name: Optional[str], allowed: tuple[dtypes.DType, ...] = op_util.NUMBERS) -> graph_lib.Tensor:
    t = op_util.to_tensor(x)
    op_util.check_dtype_in(op_type, t, allowed)
    return op_util.make_tensor(op_type, [t], t.dtype.base_dtype, t.shape, name or op_type)


# ---------------------------------------------------------------- element-wise

def add(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _binary("AddV2", x, y, name or "Add")


def subtract(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _binary("Sub", x, y, name or "Sub")


def multiply(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _binary("Mul", x, y, name or "Mul")


def truediv(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """Division; integer operands are first cast to float64 (int32) as in TF's truediv."""
    x, y = op_util.to_tensors_like(x, y)
    if x.dtype.base_dtype.is_integer:
        target = dtypes.float64
        x, y = cast(x, target), cast(y, target)
    return _binary("RealDiv", x, y, name or "truediv")


def divide(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return truediv(x, y, name or "truediv")


def div(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """TF1's ``tf.div``: Python 2 division, so integers floor (7 / -2 is -4) and floats divide."""
    x, y = op_util.to_tensors_like(x, y)
    if x.dtype.base_dtype.is_integer:
        return floordiv(x, y, name or "div")
    return _binary("RealDiv", x, y, name or "div")


def floordiv(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _binary("FloorDiv", x, y, name or "floordiv")


def floormod(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _binary("FloorMod", x, y, name or "FloorMod")


mod = floormod


def pow(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:  # noqa: A001 - TF's name
    return _binary("Pow", x, y, name or "Pow")


def maximum(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _binary("Maximum", x, y, name or "Maximum")


def minimum(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _binary("Minimum", x, y, name or "Minimum")


def negative(x: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _unary("Neg", x, name or "Neg")


neg = negative


def square(x: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _unary("Square", x, name or "Square")


def sqrt(x: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _unary("Sqrt", x, name or "Sqrt", op_util.FLOATS)


def rsqrt(x: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _unary("Rsqrt", x, name or "Rsqrt", op_util.FLOATS)


def exp(x: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _unary("Exp", x, name or "Exp", op_util.FLOATS)


def log(x: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _unary("Log", x, name or "Log", op_util.FLOATS)


def abs(x: Any, name: Optional[str] = None) -> graph_lib.Tensor:  # noqa: A001 - TF's name
    return _unary("Abs", x, name or "Abs")


def sign(x: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _unary("Sign", x, name or "Sign")


def reciprocal(x: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _unary("Reciprocal", x, name or "Reciprocal", op_util.FLOATS)


def sigmoid(x: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """1 / (1 + exp(-x)), computed without overflow for large |x|."""
    return _unary("Sigmoid", x, name or "Sigmoid", op_util.FLOATS)


def tanh(x: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _unary("Tanh", x, name or "Tanh", op_util.FLOATS)


def floor(x: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _unary("Floor", x, name or "Floor", op_util.FLOATS)


def squared_difference(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """(x - y)**2, element-wise with broadcasting."""
    graph = op_util.graph_of(x, y)
    with graph.name_scope(name or "SquaredDifference"):
        return square(subtract(x, y))


def add_n(inputs: list[Any], name: Optional[str] = None) -> graph_lib.Tensor:
    tensors = [op_util.to_tensor(x) for x in inputs]
    if not tensors:
        raise ValueError("add_n requires at least one input")
    if len(tensors) == 1:
        return tensors[0]
    dt = op_util.check_same_dtype("AddN", *tensors)
    shape = tensors[0].shape
    for t in tensors[1:]:
        if not shape.is_compatible_with(t.shape):
            raise ValueError(f"add_n: shapes {shape} and {t.shape} of {t.name} must be equal")
        shape = shape.merge_with(t.shape)
    return op_util.make_tensor("AddN", tensors, dt, shape, name or "AddN")


def range(start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None,  # noqa: A001 - TF's name
          name: str = "range") -> graph_lib.Tensor:
    """``[start, start + delta, ...)`` up to ``limit`` (exclusive); ``range(n)`` is ``0 .. n-1``."""
    if limit is None:
        start, limit = 0, start
    values = [start, limit, delta]
    tensors = [op_util.to_tensor(v) for v in values if op_util.is_tensor_like(v)]
    if dtype is not None:
        dt = dtypes.as_dtype(dtype).base_dtype
    elif tensors:
        dt = tensors[0].dtype.base_dtype
    else:
        dt = dtypes.float32 if any(isinstance(v, float) for v in values) else dtypes.int32
    start_t, limit_t, delta_t = (cast(v, dt) if op_util.is_tensor_like(v) else op_util.to_tensor(v, dtype=dt)
                                 for v in values)
    known = [op_util.static_value(t) for t in (start_t, limit_t, delta_t)]
    length = None
    if all(v is not None for v in known):
        if float(known[2]) == 0:
            raise ValueError("range: delta must not be zero")
        length = max(0, int(-(-(float(known[1]) - float(known[0])) // float(known[2]))))
    return op_util.make_tensor("Range", [start_t, limit_t, delta_t], dt, [length], name or "range")


def cast(x: Any, dtype: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    t = op_util.to_tensor(x)
    dt = dtypes.as_dtype(dtype).base_dtype
    if t.dtype.base_dtype == dt:
        return t
    return op_util.make_tensor("Cast", [t], dt, t.shape, name or "Cast", {"DstT": dt.name})


def to_float(x: Any, name: str = "ToFloat") -> graph_lib.Tensor:
    return cast(x, dtypes.float32, name)


def to_double(x: Any, name: str = "ToDouble") -> graph_lib.Tensor:
    return cast(x, dtypes.float64, name)


def to_int32(x: Any, name: str = "ToInt32") -> graph_lib.Tensor:
    return cast(x, dtypes.int32, name)


def to_int64(x: Any, name: str = "ToInt64") -> graph_lib.Tensor:
    return cast(x, dtypes.int64, name)


# ---------------------------------------------------------------- matmul

def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False,
           adjoint_a: bool = False, adjoint_b: bool = False, name: Optional[str] = None) -> graph_lib.Tensor:
    """Matrix product of two rank-2 tensors, optionally transposing either."""
    x, y = op_util.to_tensors_like(a, b)
    dt = op_util.check_same_dtype("MatMul", x, y)
    transpose_a = bool(transpose_a or adjoint_a)
    transpose_b = bool(transpose_b or adjoint_b)
    for t in (x, y):
        if t.shape.ndims not in (None, 2):
            raise ValueError(f"MatMul requires rank-2 inputs, but {t.name} has shape {t.shape}")
    xs = x.shape.with_rank(2)
    ys = y.shape.with_rank(2)
    rows, inner_a = (xs[1], xs[0]) if transpose_a else (xs[0], xs[1])
    inner_b, cols = (ys[1], ys[0]) if transpose_b else (ys[0], ys[1])
    if not inner_a.is_compatible_with(inner_b):
        raise ValueError(
            f"Dimensions must be equal, but are {inner_a} and {inner_b} for MatMul of "
            f"{x.name} with shape {x.shape} and {y.name} with shape {y.shape} "
            f"(transpose_a={transpose_a}, transpose_b={transpose_b})"
        )
    return op_util.make_tensor("MatMul", [x, y], dt, [rows, cols], name or "MatMul",
                               {"transpose_a": transpose_a, "transpose_b": transpose_b})


# ---------------------------------------------------------------- reductions

def _reduce(op_type: str, input_tensor: Any, axis: Any, keepdims: Optional[bool], name: Optional[str],
            keep_dims: Optional[bool] = None) -> graph_lib.Tensor:
    x = op_util.to_tensor(input_tensor)
    keep = bool(keepdims if keepdims is not None else keep_dims)
    rank = x.shape.ndims
    axes = op_util.normalize_axes(axis, rank, op_type)
    if axes is None or rank is None:
        shape = tensor_shape.TensorShape(None)
    else:
        dims = x.shape.as_list()
        shape = tensor_shape.TensorShape(
            [1 if i in axes else d for i, d in enumerate(dims)] if keep
            else [d for i, d in enumerate(dims) if i not in axes]
        )
    attrs = {"axis": None if axis is None else axes if rank is not None else
             ([int(axis)] if isinstance(axis, int) else [int(a) for a in axis]),
             "keep_dims": keep}
    return op_util.make_tensor(op_type, [x], x.dtype.base_dtype, shape, name or op_type, attrs)


def reduce_sum(input_tensor: Any, axis: Any = None, keepdims: Optional[bool] = None, name: Optional[str] = None,
               reduction_indices: Any = None, keep_dims: Optional[bool] = None) -> graph_lib.Tensor:
    return _reduce("Sum", input_tensor, axis if axis is not None else reduction_indices, keepdims, name, keep_dims)


def reduce_mean(input_tensor: Any, axis: Any = None, keepdims: Optional[bool] = None, name: Optional[str] = None,
                reduction_indices: Any = None, keep_dims: Optional[bool] = None) -> graph_lib.Tensor:
    return _reduce("Mean", input_tensor, axis if axis is not None else reduction_indices, keepdims, name, keep_dims)


def reduce_max(input_tensor: Any, axis: Any = None, keepdims: Optional[bool] = None, name: Optional[str] = None,
               reduction_indices: Any = None, keep_dims: Optional[bool] = None) -> graph_lib.Tensor:
    return _reduce("Max", input_tensor, axis if axis is not None else reduction_indices, keepdims, name, keep_dims)


def reduce_min(input_tensor: Any, axis: Any = None, keepdims: Optional[bool] = None, name: Optional[str] = None,
               reduction_indices: Any = None, keep_dims: Optional[bool] = None) -> graph_lib.Tensor:
    return _reduce("Min", input_tensor, axis if axis is not None else reduction_indices, keepdims, name, keep_dims)


def reduce_prod(input_tensor: Any, axis: Any = None, keepdims: Optional[bool] = None, name: Optional[str] = None,
                reduction_indices: Any = None, keep_dims: Optional[bool] = None) -> graph_lib.Tensor:
    return _reduce("Prod", input_tensor, axis if axis is not None else reduction_indices, keepdims, name, keep_dims)


# ---------------------------------------------------------------- comparisons and logic

def equal(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """``x == y`` elementwise; numbers, bools and (as in TF) strings."""
    return _binary("Equal", x, y, name or "Equal", (*op_util.NUMBERS, dtypes.bool_, dtypes.string), dtypes.bool_)


def not_equal(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """``x != y`` elementwise; numbers, bools and (as in TF) strings."""
    return _binary("NotEqual", x, y, name or "NotEqual", (*op_util.NUMBERS, dtypes.bool_, dtypes.string), dtypes.bool_)


def less(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _binary("Less", x, y, name or "Less", op_util.NUMBERS, dtypes.bool_)


def less_equal(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _binary("LessEqual", x, y, name or "LessEqual", op_util.NUMBERS, dtypes.bool_)


def greater(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _binary("Greater", x, y, name or "Greater", op_util.NUMBERS, dtypes.bool_)


def greater_equal(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _binary("GreaterEqual", x, y, name or "GreaterEqual", op_util.NUMBERS, dtypes.bool_)


def logical_and(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _binary("LogicalAnd", x, y, name or "LogicalAnd", (dtypes.bool_,))


def logical_or(x: Any, y: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _binary("LogicalOr", x, y, name or "LogicalOr", (dtypes.bool_,))


def logical_not(x: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    return _unary("LogicalNot", x, name or "LogicalNot", (dtypes.bool_,))


def argmax(input: Any, axis: Any = None, name: Optional[str] = None, dimension: Any = None,  # noqa: A002
           output_type: Any = dtypes.int64) -> graph_lib.Tensor:
    return _arg_reduce("ArgMax", input, axis if axis is not None else dimension, name, output_type)


def argmin(input: Any, axis: Any = None, name: Optional[str] = None, dimension: Any = None,  # noqa: A002
           output_type: Any = dtypes.int64) -> graph_lib.Tensor:
    return _arg_reduce("ArgMin", input, axis if axis is not None else dimension, name, output_type)


def arg_max(input: Any, dimension: Any, output_type: Any = dtypes.int64,  # noqa: A002
            name: Optional[str] = None) -> graph_lib.Tensor:
    """TF1's raw ``ArgMax`` op (``tf.arg_max``): ``argmax`` with the op's own argument order."""
    return _arg_reduce("ArgMax", input, dimension, name, output_type)


def arg_min(input: Any, dimension: Any, output_type: Any = dtypes.int64,  # noqa: A002
            name: Optional[str] = None) -> graph_lib.Tensor:
    """TF1's raw ``ArgMin`` op (``tf.arg_min``): ``argmin`` with the op's own argument order."""
    return _arg_reduce("ArgMin", input, dimension, name, output_type)


def _arg_reduce(op_type: str, input_tensor: Any, axis: Any, name: Optional[str], output_type: Any) -> graph_lib.Tensor:
    x = op_util.to_tensor(input_tensor)
    out = dtypes.as_dtype(output_type)
    op_util.check_dtype_in(op_type, x, op_util.NUMBERS)
    axis = 0 if axis is None else int(axis)
    rank = x.shape.ndims
    if rank is not None:
        if not -rank <= axis < max(rank, 1):
            raise ValueError(f"{op_type}: axis {axis} is out of range for a tensor of rank {rank}")
        axis %= max(rank, 1)
        shape = tensor_shape.TensorShape([d for i, d in enumerate(x.shape.as_list()) if i != axis])
    else:
        shape = tensor_shape.TensorShape(None)
    return op_util.make_tensor(op_type, [x], out, shape, name or op_type, {"axis": axis, "output_type": out.name})


for _op_type in ("Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd",
                 "LogicalOr", "LogicalNot", "ArgMax", "ArgMin", "Sign", "FloorDiv", "FloorMod", "Floor"):
    op_registry.NotDifferentiable(_op_type)


# ---------------------------------------------------------------- gradients

def _both(op: graph_lib.Operation, gx: Any, gy: Any) -> list[Any]:
    x, y = op.inputs
    return [array_ops.unbroadcast_to(gx, x), array_ops.unbroadcast_to(gy, y)]


@op_registry.RegisterGradient("AddV2")
def _add_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return _both(op, grad, grad)


@op_registry.RegisterGradient("Sub")
def _sub_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return _both(op, grad, negative(grad))


@op_registry.RegisterGradient("Mul")
def _mul_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x, y = op.inputs
    return _both(op, multiply(grad, y), multiply(x, grad))


@op_registry.RegisterGradient("RealDiv")
def _div_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x, y = op.inputs
    return _both(op, _binary("RealDiv", grad, y, None), negative(multiply(grad, _binary("RealDiv", op.outputs[0], y, None))))


@op_registry.RegisterGradient("Pow")
def _pow_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x, y = op.inputs
    z = op.outputs[0]
    gx = multiply(grad, multiply(y, pow(x, subtract(y, array_ops.ones_like(y)))))
    # d/dy x^y = x^y log(x), taken as 0 where x <= 0 (as TensorFlow does).
    positive = cast(greater(x, array_ops.zeros_like(x)), x.dtype.base_dtype)
    log_x = log(add(multiply(x, positive), subtract(array_ops.ones_like(positive), positive)))
    gy = multiply(grad, multiply(z, log_x))
    return _both(op, gx, gy)


def _select_grad(op: graph_lib.Operation, grad: Any, pick_x: graph_lib.Tensor) -> list[Any]:
    mask_x = cast(pick_x, grad.dtype.base_dtype)
    mask_y = subtract(array_ops.ones_like(mask_x), mask_x)
    return _both(op, multiply(grad, mask_x), multiply(grad, mask_y))


@op_registry.RegisterGradient("Maximum")
def _maximum_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x, y = op.inputs
    return _select_grad(op, grad, greater_equal(x, y))


@op_registry.RegisterGradient("Minimum")
def _minimum_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x, y = op.inputs
    return _select_grad(op, grad, less_equal(x, y))


@op_registry.RegisterGradient("Neg")
def _neg_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [negative(grad)]


@op_registry.RegisterGradient("Square")
def _square_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x = op.inputs[0]
    return [multiply(grad, multiply(x, 2))]


@op_registry.RegisterGradient("Sqrt")
def _sqrt_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [truediv(multiply(grad, 0.5), op.outputs[0])]


@op_registry.RegisterGradient("Rsqrt")
def _rsqrt_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    y = op.outputs[0]
    return [multiply(grad, multiply(-0.5, multiply(y, multiply(y, y))))]


@op_registry.RegisterGradient("Exp")
def _exp_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [multiply(grad, op.outputs[0])]


@op_registry.RegisterGradient("Log")
def _log_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [truediv(grad, op.inputs[0])]


@op_registry.RegisterGradient("Sigmoid")
def _sigmoid_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    y = op.outputs[0]
    return [multiply(grad, multiply(y, subtract(1, y)))]


@op_registry.RegisterGradient("Tanh")
def _tanh_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    y = op.outputs[0]
    return [multiply(grad, subtract(1, square(y)))]


@op_registry.RegisterGradient("Abs")
def _abs_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [multiply(grad, sign(op.inputs[0]))]


@op_registry.RegisterGradient("Reciprocal")
def _reciprocal_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    y = op.outputs[0]
    return [negative(multiply(grad, multiply(y, y)))]


@op_registry.RegisterGradient("AddN")
def _add_n_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [grad] * len(op.inputs)


@op_registry.RegisterGradient("Cast")
def _cast_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    source = op.inputs[0].dtype.base_dtype
    if source.is_floating and grad.dtype.base_dtype.is_floating:
        return [cast(grad, source)]
    return [None]


@op_registry.RegisterGradient("MatMul")
def _matmul_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    a, b = op.inputs
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    if not ta and not tb:
        return [matmul(grad, b, transpose_b=True), matmul(a, grad, transpose_a=True)]
    if not ta and tb:
        return [matmul(grad, b), matmul(grad, a, transpose_a=True)]
    if ta and not tb:
        return [matmul(b, grad, transpose_b=True), matmul(a, grad)]
    return [matmul(b, grad, transpose_a=True, transpose_b=True), matmul(grad, a, transpose_a=True, transpose_b=True)]


def _restore_reduced_dims(op: graph_lib.Operation, grad: graph_lib.Tensor) -> graph_lib.Tensor:
    """Reshapes a reduction's gradient so that it broadcasts against the op's input."""
    if op.get_attr("keep_dims"):
        return grad
    x = op.inputs[0]
    axes = op.get_attr("axis")
    if x.shape.ndims is None:
        if axes is None:
            return grad  # a scalar, which broadcasts against any shape
        return array_ops.reshape(grad, _kept_dims_at_run_time(x, axes))
    rank = x.shape.ndims
    axes = builtins.range(rank) if axes is None else axes
    dims = x.shape.as_list()
    if None not in dims:
        return array_ops.reshape(grad, [1 if i in axes else d for i, d in enumerate(dims)])
    reduced = array_ops.constant([1 if i in axes else 0 for i in builtins.range(rank)], dtype=dtypes.int32)
    dynamic = array_ops.shape(x)
    return array_ops.reshape(grad, add(subtract(dynamic, multiply(dynamic, reduced)), reduced))


def _kept_dims_at_run_time(x: graph_lib.Tensor, axes: Any) -> graph_lib.Tensor:
    """shape(x) with the reduced axes set to 1, for an ``x`` whose rank is only known at run time."""
    dims = array_ops.shape(x)
    rank = array_ops.size(dims)
    positions = floormod(array_ops.constant(list(axes), dtype=dtypes.int32), rank)
    reduced = minimum(indexing_ops.unsorted_segment_sum(array_ops.ones_like(positions), positions, rank), 1)
    return add(subtract(dims, multiply(dims, reduced)), reduced)


@op_registry.RegisterGradient("Sum")
def _sum_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x = op.inputs[0]
    g = _restore_reduced_dims(op, grad)
    return [array_ops.broadcast_to(g, array_ops.shape(x))]


@op_registry.RegisterGradient("Mean")
def _mean_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x, y = op.inputs[0], op.outputs[0]
    dt = x.dtype.base_dtype
    g = array_ops.broadcast_to(_restore_reduced_dims(op, grad), array_ops.shape(x))
    if x.shape.is_fully_defined() and y.shape.is_fully_defined():
        count = array_ops.constant(max((x.shape.num_elements() or 1) / max(y.shape.num_elements() or 1, 1), 1e-30), dtype=dt)
    else:
        count = truediv(cast(array_ops.size(x), dt), cast(maximum(array_ops.size(y), 1), dt))
    return [truediv(g, count)]


def _extremum_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x = op.inputs[0]
    y = _restore_reduced_dims(op, op.outputs[0])
    g = _restore_reduced_dims(op, grad)
    mask = cast(equal(x, y), grad.dtype.base_dtype)
    counts = _reduce("Sum", mask, op.get_attr("axis"), True, None)
    return [truediv(multiply(mask, g), counts)]


op_registry.RegisterGradient("Max")(_extremum_grad)
op_registry.RegisterGradient("Min")(_extremum_grad)


@op_registry.RegisterGradient("Prod")
def _prod_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    # Exact for inputs without zeros; products with zeros are rare in training graphs.
    x = op.inputs[0]
    y = _restore_reduced_dims(op, op.outputs[0])
    g = _restore_reduced_dims(op, grad)
    return [multiply(g, truediv(y, x))]


# ---------------------------------------------------------------- clipping

def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """``t`` with values below ``clip_value_min`` / above ``clip_value_max`` replaced by the bound."""
    x = op_util.to_tensor(t)
    with x.graph.name_scope(name or "clip_by_value"):
        clipped = minimum(maximum(x, clip_value_min), clip_value_max)
    if not clipped.shape.is_compatible_with(x.shape):
        raise ValueError(
            f"clip_by_value: the bounds would broadcast {x.name} with shape {x.shape} to shape {clipped.shape}"
        )
    return clipped


def global_norm(t_list: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """sqrt(sum of squares of every element of every tensor in ``t_list``); None entries are skipped,
    and an IndexedSlices counts its values (as in TF)."""
    if isinstance(t_list, graph_lib.Tensor) or not isinstance(t_list, (list, tuple)):
        raise TypeError(f"global_norm: t_list must be a list of tensors, got {t_list!r}")
    tensors = [op_util.to_tensor(t.values if isinstance(t, indexed_slices.IndexedSlices) else t)
               for t in t_list if t is not None]
    if not tensors:
        raise ValueError("global_norm: t_list holds no tensors")
    with tensors[0].graph.name_scope(name or "global_norm"):
        squares = [reduce_sum(square(t)) for t in tensors]
        return sqrt(add_n(squares), name="global_norm")


def clip_by_norm(t: Any, clip_norm: Any, axes: Any = None, name: Optional[str] = None) -> graph_lib.Tensor:
    """``t * clip_norm / max(l2norm(t), clip_norm)`` over ``axes`` (all axes by default)."""
    x = op_util.to_tensor(t)
    with x.graph.name_scope(name or "clip_by_norm"):
        norm = sqrt(reduce_sum(square(x), axis=axes, keepdims=True))
        bound = op_util.to_tensor(clip_norm, dtype=x.dtype.base_dtype)
        return truediv(multiply(x, bound), maximum(norm, bound))


def clip_by_global_norm(t_list: Any, clip_norm: Any, use_norm: Any = None,
                        name: Optional[str] = None) -> tuple[list[Any], graph_lib.Tensor]:
    """Scales every tensor by ``clip_norm / max(global_norm, clip_norm)``; returns (clipped, global_norm).

    An IndexedSlices stays one, its values scaled (so a clipped gradient still updates sparsely)."""
    if isinstance(t_list, graph_lib.Tensor) or not isinstance(t_list, (list, tuple)):
        raise TypeError(f"clip_by_global_norm: t_list must be a list of tensors, got {t_list!r}")
    norm = global_norm(t_list) if use_norm is None else op_util.to_tensor(use_norm)
    with norm.graph.name_scope(name or "clip_by_global_norm"):
        dt = norm.dtype.base_dtype
        bound = op_util.to_tensor(clip_norm, dtype=dt)
        # As in TF: min(1/norm, 1/bound) * bound, which is 1 when the norm is within bounds.
        scale = multiply(bound, minimum(reciprocal(norm), reciprocal(bound)))
        clipped: list[Any] = []
        for t in t_list:
            if t is None:
                clipped.append(None)
                continue
            if isinstance(t, indexed_slices.IndexedSlices):
                values = multiply(t.values, cast(scale, t.dtype.base_dtype))
                clipped.append(indexed_slices.IndexedSlices(values, t.indices, t.dense_shape))
                continue
            x = op_util.to_tensor(t)
            clipped.append(multiply(x, cast(scale, x.dtype.base_dtype)))
    return clipped, norm


# ---------------------------------------------------------------- operators on Tensor

def _operator(fn: Any, name: str) -> Any:
    """``fn`` as a Tensor operator: its op named as TensorFlow names an operator's (``a + b`` is
    'add', while ``tf.add`` is 'Add')."""
    return lambda self, other: fn(self, other, name=name)


def _r(fn: Any, name: str) -> Any:
    """The reflected operator (``2 - t``), named as the operator."""
    return lambda self, other: fn(other, self, name=name)


def _getitem(self: graph_lib.Tensor, key: Any) -> graph_lib.Tensor:
    return indexing_ops.strided_slice_from_key(self, key)


for _name, _fn in {
    "__add__": _operator(add, "add"), "__radd__": _r(add, "add"),
    "__sub__": _operator(subtract, "sub"), "__rsub__": _r(subtract, "sub"),
    "__mul__": _operator(multiply, "mul"), "__rmul__": _r(multiply, "mul"),
    "__truediv__": _operator(truediv, "truediv"), "__rtruediv__": _r(truediv, "truediv"),
    "__floordiv__": _operator(floordiv, "floordiv"), "__rfloordiv__": _r(floordiv, "floordiv"),
    "__mod__": _operator(floormod, "mod"), "__rmod__": _r(floormod, "mod"),
    "__pow__": _operator(pow, "pow"), "__rpow__": _r(pow, "pow"),
    "__matmul__": _operator(matmul, "matmul"), "__rmatmul__": _r(matmul, "matmul"),
    "__lt__": less, "__le__": less_equal, "__gt__": greater, "__ge__": greater_equal,
    "__and__": _operator(logical_and, "and"), "__rand__": _r(logical_and, "and"),
    "__or__": _operator(logical_or, "or"), "__ror__": _r(logical_or, "or"),
}.items():
    graph_lib.Tensor._override_operator(_name, _fn)
graph_lib.Tensor._override_operator("__neg__", lambda self: negative(self))
graph_lib.Tensor._override_operator("__abs__", lambda self: abs(self))
graph_lib.Tensor._override_operator("__invert__", lambda self: logical_not(self))
graph_lib.Tensor._override_operator("__getitem__", _getitem)
