"""Array ops: constants, placeholders, identity, shapes, reshaping, zeros/ones/fill.

Forward construction (with static shapes) and gradient rules sit side by side.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import op_util

for _op_type in ("Const", "Placeholder", "PlaceholderWithDefault", "Identity", "StopGradient",
                 "Shape", "Size", "Rank", "Reshape", "Fill", "ZerosLike", "OnesLike",
                 "UnbroadcastTo", "BroadcastTo"):
    op_registry.register_op(_op_type)


# ---------------------------------------------------------------- constants

def _as_numpy(value: Any, dtype: Optional[dtypes.DType]) -> np.ndarray:
    if dtype is not None:
        wanted = dtype.base_dtype.as_numpy_dtype
        array = np.asarray(value)
        if array.dtype.kind in "fc" and np.dtype(wanted).kind in "iub" and array.size and not np.all(
            np.isfinite(array) & (array == np.round(array))
        ):
            raise TypeError(
                f"Expected {dtype.base_dtype.name}, got {value!r} of type {array.dtype.name} instead: "
                "the values are not integers"
            )
        if array.dtype == object:
            raise TypeError(f"Cannot convert {value!r} to a constant of dtype {dtype.base_dtype.name}")
        return np.array(array, dtype=wanted)
    array = np.asarray(value)
    if array.dtype == np.float64 and not isinstance(value, np.ndarray) and not isinstance(value, np.generic):
        array = array.astype(np.float32)  # Python floats become float32, as in TF
    elif array.dtype == np.int64 and not isinstance(value, (np.ndarray, np.generic)):
        array = array.astype(np.int32)  # Python ints become int32, as in TF
    dtypes.as_dtype(array.dtype)  # raises a clear TypeError for unsupported element types
    return np.array(array)


def constant(value: Any, dtype: Any = None, shape: Any = None, name: str = "Const",
             verify_shape: bool = False) -> graph_lib.Tensor:
    """A tensor with a fixed value (``tf.constant``); ``shape`` broadcasts a scalar or list."""
    wanted = dtypes.as_dtype(dtype) if dtype is not None else None
    array = _as_numpy(value, wanted)
    if shape is not None:
        shape = tuple(int(d) for d in tensor_shape.as_shape(shape).as_list())
        if array.shape != shape:
            if verify_shape:
                raise TypeError(f"Expected Tensor's shape: {shape}, got {array.shape}.")
            if array.size == 1:
                array = np.full(shape, array.reshape(()), dtype=array.dtype)
            elif array.size == int(np.prod(shape)):
                array = array.reshape(shape)
            else:
                raise ValueError(
                    f"Cannot make a constant of shape {shape} from {array.size} values {value!r}"
                )
    dt = dtypes.as_dtype(array.dtype)
    return op_util.make_tensor("Const", [], dt, array.shape, name, {"value": array, "dtype": dt.name})


def _constant_conversion(value: Any, dtype: Any = None, name: Optional[str] = None, as_ref: bool = False) -> graph_lib.Tensor:
    return constant(value, dtype=dtype, name=name or "Const")


for _base in (np.ndarray, np.generic, list, tuple, float, int, bool):
    graph_lib.register_tensor_conversion_function(_base, _constant_conversion)


def placeholder(dtype: Any, shape: Any = None, name: Optional[str] = None) -> graph_lib.Tensor:
    """A value fed at ``Session.run`` time; running without a feed is an error naming it."""
    dt = dtypes.as_dtype(dtype)
    static = tensor_shape.as_shape(shape)
    return op_util.make_tensor("Placeholder", [], dt, static, name or "Placeholder",
                               {"dtype": dt.name, "shape": static.as_tuple_or_none()})


def placeholder_with_default(input: Any, shape: Any, name: Optional[str] = None) -> graph_lib.Tensor:  # noqa: A002
    x = op_util.to_tensor(input)
    static = tensor_shape.as_shape(shape)
    if not static.is_compatible_with(x.shape):
        raise ValueError(f"Default value of shape {x.shape} is incompatible with placeholder shape {static}")
    return op_util.make_tensor("PlaceholderWithDefault", [x], x.dtype.base_dtype, static,
                               name or "PlaceholderWithDefault", {"shape": static.as_tuple_or_none()})


# ---------------------------------------------------------------- identity

def identity(input: Any, name: Optional[str] = None) -> graph_lib.Tensor:  # noqa: A002
    """The same value; on a variable, a snapshot of its current value."""
    x = op_util.to_tensor(input)
    return op_util.make_tensor("Identity", [x], x.dtype.base_dtype, x.shape, name or "Identity")


def stop_gradient(input: Any, name: Optional[str] = None) -> graph_lib.Tensor:  # noqa: A002
    x = op_util.to_tensor(input)
    return op_util.make_tensor("StopGradient", [x], x.dtype.base_dtype, x.shape, name or "StopGradient")


@op_registry.RegisterGradient("Identity")
def _identity_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [grad]


@op_registry.RegisterGradient("PlaceholderWithDefault")
def _placeholder_with_default_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [grad]


op_registry.NotDifferentiable("StopGradient")
op_registry.NotDifferentiable("Const")
op_registry.NotDifferentiable("Placeholder")
op_registry.NotDifferentiable("Shape")
op_registry.NotDifferentiable("Size")
op_registry.NotDifferentiable("Rank")
op_registry.NotDifferentiable("ZerosLike")
op_registry.NotDifferentiable("OnesLike")


# ---------------------------------------------------------------- shapes

def shape(input: Any, name: Optional[str] = None, out_type: Any = dtypes.int32) -> graph_lib.Tensor:  # noqa: A002
    """The dynamic shape of ``input``; a constant when the static shape is fully known."""
    x = op_util.to_tensor(input)
    out = dtypes.as_dtype(out_type)
    if x.shape.is_fully_defined():
        return constant(x.shape.as_list(), dtype=out, name=name or "Shape")
    rank = x.shape.ndims
    return op_util.make_tensor("Shape", [x], out, [rank], name or "Shape", {"out_type": out.name})


def size(input: Any, name: Optional[str] = None, out_type: Any = dtypes.int32) -> graph_lib.Tensor:  # noqa: A002
    x = op_util.to_tensor(input)
    out = dtypes.as_dtype(out_type)
    return op_util.make_tensor("Size", [x], out, [], name or "Size", {"out_type": out.name})


def rank(input: Any, name: Optional[str] = None) -> graph_lib.Tensor:  # noqa: A002
    x = op_util.to_tensor(input)
    return op_util.make_tensor("Rank", [x], dtypes.int32, [], name or "Rank")


def _shape_from_tensor_value(shape_tensor: graph_lib.Tensor) -> tensor_shape.TensorShape:
    value = op_util.static_value(shape_tensor)
    if value is None:
        n = shape_tensor.shape[0].value if shape_tensor.shape.ndims == 1 else None
        return tensor_shape.unknown_shape(n)
    return tensor_shape.TensorShape([None if int(d) < 0 else int(d) for d in np.asarray(value).reshape(-1)])


def reshape(tensor: Any, shape: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """``tensor`` with a new shape of the same size; one dimension may be -1."""
    x = op_util.to_tensor(tensor)
    s = op_util.to_tensor(shape, dtype=dtypes.int32) if not isinstance(shape, graph_lib.Tensor) else shape
    op_util.check_dtype_in("Reshape", s, op_util.INDICES)
    target = _shape_from_tensor_value(s)
    value = op_util.static_value(s)
    if value is not None:
        dims = [int(d) for d in np.asarray(value).reshape(-1)]
        if sum(d == -1 for d in dims) > 1:
            raise ValueError(f"Reshape: only one dimension can be -1, got shape {dims}")
        if any(d < -1 for d in dims):
            raise ValueError(f"Reshape: dimensions must be >= -1, got shape {dims}")
        total = x.shape.num_elements()
        if total is not None:
            known = int(np.prod([d for d in dims if d != -1])) if dims else 1
            if -1 in dims:
                if known == 0 or total % known:
                    raise ValueError(f"Cannot reshape a tensor with {total} elements to shape {dims}")
                target = tensor_shape.TensorShape([total // known if d == -1 else d for d in dims])
            elif known != total:
                raise ValueError(
                    f"Cannot reshape a tensor with {total} elements to shape {dims} ({known} elements)"
                )
    return op_util.make_tensor("Reshape", [x, s], x.dtype.base_dtype, target, name or "Reshape")


@op_registry.RegisterGradient("Reshape")
def _reshape_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [reshape(grad, shape(op.inputs[0])), None]


# ---------------------------------------------------------------- fills

def fill(dims: Any, value: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    d = op_util.to_tensor(dims, dtype=dtypes.int32) if not isinstance(dims, graph_lib.Tensor) else dims
    v = op_util.to_tensor(value)
    if v.shape.ndims not in (None, 0):
        raise ValueError(f"fill: value must be a scalar, got shape {v.shape}")
    return op_util.make_tensor("Fill", [d, v], v.dtype.base_dtype, _shape_from_tensor_value(d), name or "Fill")


@op_registry.RegisterGradient("Fill")
def _fill_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    from tensorgrid.ops import math_ops

    return [None, math_ops.reduce_sum(grad)]


def zeros(shape: Any, dtype: Any = dtypes.float32, name: Optional[str] = None) -> graph_lib.Tensor:
    dt = dtypes.as_dtype(dtype)
    if isinstance(shape, graph_lib.Tensor):
        return fill(shape, constant(0, dtype=dt), name=name or "zeros")
    return constant(0, dtype=dt, shape=shape, name=name or "zeros")


def ones(shape: Any, dtype: Any = dtypes.float32, name: Optional[str] = None) -> graph_lib.Tensor:
    dt = dtypes.as_dtype(dtype)
    if isinstance(shape, graph_lib.Tensor):
        return fill(shape, constant(1, dtype=dt), name=name or "ones")
    return constant(1, dtype=dt, shape=shape, name=name or "ones")


def zeros_like(tensor: Any, dtype: Any = None, name: Optional[str] = None) -> graph_lib.Tensor:
    x = op_util.to_tensor(tensor)
    dt = dtypes.as_dtype(dtype) if dtype is not None else x.dtype.base_dtype
    return op_util.make_tensor("ZerosLike", [x], dt, x.shape, name or "zeros_like", {"dtype": dt.name})


def ones_like(tensor: Any, dtype: Any = None, name: Optional[str] = None) -> graph_lib.Tensor:
    x = op_util.to_tensor(tensor)
    dt = dtypes.as_dtype(dtype) if dtype is not None else x.dtype.base_dtype
    return op_util.make_tensor("OnesLike", [x], dt, x.shape, name or "ones_like", {"dtype": dt.name})


# ---------------------------------------------------------------- broadcasting support for gradients

def unbroadcast_to(grad: graph_lib.Tensor, like: graph_lib.Tensor) -> graph_lib.Tensor:
    """Sums ``grad`` over the axes along which ``like`` was broadcast (gradient plumbing)."""
    if grad.shape.is_fully_defined() and like.shape.is_fully_defined() and grad.shape == like.shape:
        return grad
    target = shape(like)
    return op_util.make_tensor("UnbroadcastTo", [grad, target], grad.dtype.base_dtype, like.shape,
                               "UnbroadcastTo")


def broadcast_to(input: Any, shape_: Any, name: Optional[str] = None) -> graph_lib.Tensor:  # noqa: A002
    x = op_util.to_tensor(input)
    s = op_util.to_tensor(shape_, dtype=dtypes.int32) if not isinstance(shape_, graph_lib.Tensor) else shape_
    static = tensor_shape.broadcast_shapes(x.shape, _shape_from_tensor_value(s), "broadcast_to")
    return op_util.make_tensor("BroadcastTo", [x, s], x.dtype.base_dtype, static, name or "BroadcastTo")


@op_registry.RegisterGradient("UnbroadcastTo")
def _unbroadcast_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [broadcast_to(grad, shape(op.inputs[0])), None]


@op_registry.RegisterGradient("BroadcastTo")
def _broadcast_to_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [unbroadcast_to(grad, op.inputs[0]), None]
