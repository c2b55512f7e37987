"""Array ops: constants, placeholders, identity, shapes, reshaping, zeros/ones/fill, and
the ops that rearrange elements: transpose, concat/split, stack/unstack, gather,
one_hot, expand_dims/squeeze, where, tile, and slicing (``tensor[key]``).

Forward construction (with static shapes) and gradient rules sit side by side.
Arguments that fix the output's structure (axes, perm, depth) must be known when the
graph is built; sizes and indices may be tensors.
"""

from __future__ import annotations

import builtins
from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import tensor_conversion
from tensorgrid.framework import indexed_slices
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
        dims = tensor_shape.as_shape(shape).as_list()
        if None in dims:
            raise ValueError(f"A constant's shape must be fully defined, got {shape!r}")
        shape = tuple(int(d) for d in dims if d is not None)
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
    tensor_conversion.register_tensor_conversion_function(_base, _constant_conversion)


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


_SMALL_CONSTANT_ELEMENTS = 1000
"""Above this many elements, zeros/ones become a Fill op instead of a constant in the graph
(as in TensorFlow), so a graph holding a 1 GiB variable's initializer stays small."""


def _filled(value: int, shape: Any, dtype: Any, name: str) -> graph_lib.Tensor:
    dt = dtypes.as_dtype(dtype)
    if not isinstance(shape, graph_lib.Tensor):
        static = tensor_shape.as_shape(shape)
        if static.is_fully_defined() and (static.num_elements() or 0) <= _SMALL_CONSTANT_ELEMENTS:
            return constant(value, dtype=dt, shape=shape, name=name)
        shape = constant(static.as_list(), dtype=dtypes.int32)
    return fill(shape, constant(value, dtype=dt), name=name)


def zeros(shape: Any, dtype: Any = dtypes.float32, name: Optional[str] = None) -> graph_lib.Tensor:
    return _filled(0, shape, dtype, name or "zeros")


def ones(shape: Any, dtype: Any = dtypes.float32, name: Optional[str] = None) -> graph_lib.Tensor:
    return _filled(1, shape, dtype, name or "ones")


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


# ---------------------------------------------------------------- static arguments

def _static_ints(value: Any, op_name: str, arg_name: str) -> Optional[list[int]]:
    """A list/tuple/array/constant of ints as Python ints; None for a non-constant Tensor."""
    if isinstance(value, graph_lib.Tensor):
        known = op_util.static_value(value)
        if known is None:
            return None
        value = known
    array = np.asarray(value)
    if array.size and array.dtype.kind not in "iu":
        raise TypeError(f"{op_name}: {arg_name} must be integers, got {value!r}")
    return [int(v) for v in array.reshape(-1)]


def _static_int(value: Any, op_name: str, arg_name: str) -> int:
    """An int argument that must be known when the graph is built (an axis, a depth)."""
    if isinstance(value, graph_lib.Tensor):
        known = op_util.static_value(value)
        if known is None:
            raise TypeError(f"{op_name}: {arg_name} must be known when the graph is built, got the tensor {value.name}")
        value = known
    array = np.asarray(value)
    if array.ndim != 0 or array.dtype.kind not in "iu":
        raise TypeError(f"{op_name}: {arg_name} must be a Python int (or a scalar int constant), got {value!r}")
    return int(array)


def _index_tensor(value: Any, op_name: str) -> graph_lib.Tensor:
    t = op_util.to_tensor(value, dtype=dtypes.int32) if not isinstance(value, graph_lib.Tensor) else value
    op_util.check_dtype_in(op_name, t, op_util.INDICES)
    return t


def _convert_like_first_tensor(values: Any, op_name: str) -> list[graph_lib.Tensor]:
    """Converts a list of tensors and Python values, giving Python values the tensors' dtype."""
    if isinstance(values, graph_lib.Tensor) or not isinstance(values, (list, tuple)):
        raise TypeError(f"{op_name} expects a list of tensors, got {values!r}")
    if not values:
        raise ValueError(f"{op_name} needs at least one tensor, got an empty list")
    tensors = [op_util.to_tensor(v) if op_util._is_tensor_like(v) else None for v in values]
    dtype = next((t.dtype.base_dtype for t in tensors if t is not None), None)
    return [t if t is not None else op_util.to_tensor(v, dtype=dtype) for t, v in zip(tensors, values)]


def _normalize_axis(axis: int, rank: Optional[int], op_name: str, extra: int = 0) -> int:
    """``axis`` in [-(rank+extra), rank+extra) as a non-negative int (``extra`` for new axes).

    With an unknown rank the axis is kept as given; the kernel resolves a negative one.
    """
    if rank is None:
        return axis
    bound = rank + extra
    if not -bound <= axis < bound:
        raise ValueError(f"{op_name}: axis {axis} is out of range [{-bound}, {bound}) for a tensor of rank {rank}")
    return axis % bound


# ---------------------------------------------------------------- transpose

op_registry.register_op("Transpose")


def transpose(a: Any, perm: Any = None, name: str = "transpose", conjugate: bool = False) -> graph_lib.Tensor:
    """Permutes the dimensions of ``a``; ``perm=None`` reverses them (``tf.transpose``)."""
    x = op_util.to_tensor(a)
    rank = x.shape.ndims
    if perm is None:
        order = None if rank is None else list(reversed(range(rank)))
    else:
        order = _static_ints(perm, "transpose", "perm")
        if order is None:
            raise TypeError(f"transpose: perm must be known when the graph is built, got the tensor {perm.name}")
        expected = rank if rank is not None else len(order)
        if sorted(order) != list(range(expected)):
            raise ValueError(
                f"transpose: perm {order} is not a permutation of the {expected} dimensions of {x.name} "
                f"with shape {x.shape}"
            )
    if order is None:
        shape = tensor_shape.unknown_shape()
    elif rank is None:
        shape = tensor_shape.unknown_shape(len(order))
    else:
        shape = tensor_shape.TensorShape([x.shape[p] for p in order])
    attrs = {"perm": None if order is None else tuple(order)}
    return op_util.make_tensor("Transpose", [x], x.dtype.base_dtype, shape, name or "transpose", attrs)


@op_registry.RegisterGradient("Transpose")
def _transpose_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    perm = op.get_attr("perm")
    inverse = None if perm is None else [int(i) for i in np.argsort(perm)]
    return [transpose(grad, inverse)]


# ---------------------------------------------------------------- concat, split

op_registry.register_op("ConcatV2")
op_registry.register_op("Split")
op_registry.register_op("SplitV")


def concat(values: Any, axis: Any, name: str = "concat") -> graph_lib.Tensor:
    """Joins tensors along ``axis``; all other dimensions must match."""
    tensors = _convert_like_first_tensor(values, "concat")
    axis_int = _static_int(axis, "concat", "axis")
    dtype = op_util.check_same_dtype("ConcatV2", *tensors)
    ranks = {t.shape.ndims for t in tensors if t.shape.ndims is not None}
    if len(ranks) > 1:
        shapes = ", ".join(f"{t.name} {t.shape}" for t in tensors)
        raise ValueError(f"concat: all tensors must have the same rank, got {shapes}")
    rank = ranks.pop() if ranks else None
    if rank == 0:
        raise ValueError(f"concat: cannot concatenate scalars ({', '.join(t.name for t in tensors)}); use tf.stack")
    axis_int = _normalize_axis(axis_int, rank, "concat")
    if len(tensors) == 1:
        return identity(tensors[0], name=name)
    if rank is None:
        shape = tensor_shape.unknown_shape()
    else:
        dims = list(tensors[0].shape.with_rank(rank).dims or [])
        total = tensor_shape.Dimension(0)
        for t in tensors:
            t_dims = t.shape.with_rank(rank).dims or []
            for i, d in enumerate(t_dims):
                if i == axis_int:
                    continue
                if not dims[i].is_compatible_with(d):
                    shapes = ", ".join(f"{u.name} {u.shape}" for u in tensors)
                    raise ValueError(
                        f"concat along axis {axis_int}: dimension {i} differs between inputs: {shapes}"
                    )
                dims[i] = dims[i].merge_with(d)
            total = total + t_dims[axis_int]
        dims[axis_int] = total
        shape = tensor_shape.TensorShape(dims)
    return op_util.make_tensor("ConcatV2", tensors, dtype, shape, name or "concat", {"axis": axis_int})


@op_registry.RegisterGradient("ConcatV2")
def _concat_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    if isinstance(grad, indexed_slices.IndexedSlices):
        from tensorgrid.ops import sparse_ops

        return sparse_ops.concat_grad_of_indexed_slices(op, grad)
    axis = op.get_attr("axis")
    sizes = [t.shape[axis].value if t.shape.ndims is not None else None for t in op.inputs]
    if all(s is not None for s in sizes):
        size_splits: Any = sizes
    else:
        size_splits = stack([_dynamic_dim(t, axis) for t in op.inputs])
    return split(grad, size_splits, axis=axis)


def _dynamic_dim(t: graph_lib.Tensor, axis: int) -> graph_lib.Tensor:
    """The size of dimension ``axis`` of ``t`` as a scalar tensor (known at run time)."""
    return strided_slice_from_key(shape(t), axis)


def split(value: Any, num_or_size_splits: Any, axis: Any = 0, num: Optional[int] = None,
          name: str = "split") -> list[graph_lib.Tensor]:
    """Splits ``value`` along ``axis`` into equal parts (an int) or parts of the given sizes."""
    x = op_util.to_tensor(value)
    axis_int = _normalize_axis(_static_int(axis, "split", "axis"), x.shape.ndims, "split")
    dims = x.shape.as_list() if x.shape.ndims is not None else None
    if dims is not None and x.shape.ndims == 0:
        raise ValueError(f"split: cannot split the scalar {x.name}")
    dim = dims[axis_int] if dims is not None else None

    def part_shape(size: Optional[int]) -> tensor_shape.TensorShape:
        if dims is None:
            return tensor_shape.unknown_shape()
        return tensor_shape.TensorShape(dims[:axis_int] + [size] + dims[axis_int + 1:])

    dtype = x.dtype.base_dtype
    if isinstance(num_or_size_splits, (int, np.integer)) and not isinstance(num_or_size_splits, bool):
        count = int(num_or_size_splits)
        if count <= 0:
            raise ValueError(f"split: the number of splits must be positive, got {count}")
        if dim is not None and dim % count:
            raise ValueError(f"split: dimension {axis_int} of {x.name} with shape {x.shape} "
                             f"is not divisible into {count} equal parts")
        specs = [(dtype, part_shape(None if dim is None else dim // count))] * count
        op = op_util.make_op("Split", [x], specs, name or "split", {"axis": axis_int, "num_split": count})
        return op.outputs
    sizes_tensor = _index_tensor(num_or_size_splits, "split")
    sizes = _static_ints(num_or_size_splits, "split", "num_or_size_splits")
    if sizes is None:
        parts = num if num is not None else sizes_tensor.shape.num_elements()
        if parts is None:
            raise ValueError(f"split: cannot infer the number of parts from {sizes_tensor.name}; pass num=")
        specs = [(dtype, part_shape(None))] * parts
    else:
        if sum(s == -1 for s in sizes) > 1 or any(s < -1 for s in sizes):
            raise ValueError(f"split: sizes {sizes} may hold at most one -1 and no other negative value")
        if -1 in sizes and dim is not None:
            rest = dim - sum(s for s in sizes if s != -1)
            if rest < 0:
                raise ValueError(f"split: sizes {sizes} exceed dimension {axis_int} of {x.name} with shape {x.shape}")
            sizes = [rest if s == -1 else s for s in sizes]
        elif dim is not None and sum(sizes) != dim:
            raise ValueError(
                f"split: sizes {sizes} sum to {sum(sizes)}, but dimension {axis_int} of {x.name} "
                f"with shape {x.shape} is {dim}"
            )
        specs = [(dtype, part_shape(None if s == -1 else s)) for s in sizes]
    op = op_util.make_op("SplitV", [x, sizes_tensor], specs, name or "split",
                         {"axis": axis_int, "num_split": len(specs)})
    return op.outputs


@op_registry.RegisterGradient("Split")
def _split_grad(op: graph_lib.Operation, *grads: Any) -> list[Any]:
    return [concat(list(grads), op.get_attr("axis"))]


@op_registry.RegisterGradient("SplitV")
def _split_v_grad(op: graph_lib.Operation, *grads: Any) -> list[Any]:
    return [concat(list(grads), op.get_attr("axis")), None]


# ---------------------------------------------------------------- stack, unstack

op_registry.register_op("Pack")
op_registry.register_op("Unpack")


def stack(values: Any, axis: int = 0, name: str = "stack") -> graph_lib.Tensor:
    """Stacks same-shaped tensors along a new ``axis`` (``tf.stack``)."""
    tensors = _convert_like_first_tensor(values, "stack")
    dtype = op_util.check_same_dtype("Pack", *tensors)
    merged = tensor_shape.unknown_shape()
    for t in tensors:
        if not merged.is_compatible_with(t.shape):
            shapes = ", ".join(f"{u.name} {u.shape}" for u in tensors)
            raise ValueError(f"stack: all tensors must have the same shape, got {shapes}")
        merged = merged.merge_with(t.shape)
    axis_int = _normalize_axis(int(axis), merged.ndims, "stack", extra=1)
    if merged.ndims is None:
        shape = tensor_shape.unknown_shape()
    else:
        dims = merged.as_list()
        shape = tensor_shape.TensorShape(dims[:axis_int] + [len(tensors)] + dims[axis_int:])
    return op_util.make_tensor("Pack", tensors, dtype, shape, name or "stack", {"axis": axis_int})


def unstack(value: Any, num: Optional[int] = None, axis: int = 0, name: str = "unstack") -> list[graph_lib.Tensor]:
    """Splits ``value`` along ``axis`` into a list of tensors of one rank less."""
    x = op_util.to_tensor(value)
    rank = x.shape.ndims
    if rank == 0:
        raise ValueError(f"unstack: cannot unstack the scalar {x.name}")
    axis_int = _normalize_axis(int(axis), rank, "unstack")
    dims = x.shape.as_list() if rank is not None else None
    known = dims[axis_int] if dims is not None else None
    if num is None:
        if known is None:
            raise ValueError(f"unstack: cannot infer num from {x.name} with shape {x.shape}; pass num=")
        num = known
    elif known is not None and num != known:
        raise ValueError(f"unstack: num={num} differs from dimension {axis_int} of {x.name} with shape {x.shape}")
    part = tensor_shape.unknown_shape() if dims is None else tensor_shape.TensorShape(dims[:axis_int] + dims[axis_int + 1:])
    op = op_util.make_op("Unpack", [x], [(x.dtype.base_dtype, part)] * num, name or "unstack",
                         {"axis": axis_int, "num": num})
    return op.outputs


@op_registry.RegisterGradient("Pack")
def _pack_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return unstack(grad, num=len(op.inputs), axis=op.get_attr("axis"))


@op_registry.RegisterGradient("Unpack")
def _unpack_grad(op: graph_lib.Operation, *grads: Any) -> list[Any]:
    return [stack(list(grads), axis=op.get_attr("axis"))]


# ---------------------------------------------------------------- expand_dims, squeeze

op_registry.register_op("ExpandDims")
op_registry.register_op("Squeeze")


def expand_dims(input: Any, axis: Any = None, name: Optional[str] = None, dim: Any = None) -> graph_lib.Tensor:  # noqa: A002
    """Inserts a dimension of size 1 at ``axis`` (negative counts from the new end)."""
    if axis is None:
        axis = dim
    elif dim is not None:
        raise ValueError("expand_dims: pass either axis or dim, not both")
    if axis is None:
        raise ValueError("expand_dims: axis is required")
    x = op_util.to_tensor(input)
    axis_int = _normalize_axis(_static_int(axis, "expand_dims", "axis"), x.shape.ndims, "expand_dims", extra=1)
    if x.shape.ndims is None:
        shape = tensor_shape.unknown_shape()
    else:
        dims = x.shape.as_list()
        shape = tensor_shape.TensorShape(dims[:axis_int] + [1] + dims[axis_int:])
    return op_util.make_tensor("ExpandDims", [x], x.dtype.base_dtype, shape, name or "ExpandDims", {"axis": axis_int})


def squeeze(input: Any, axis: Any = None, name: Optional[str] = None, squeeze_dims: Any = None) -> graph_lib.Tensor:  # noqa: A002
    """Removes dimensions of size 1: those listed in ``axis``, or all of them."""
    if axis is None:
        axis = squeeze_dims
    x = op_util.to_tensor(input)
    rank = x.shape.ndims
    if axis is None or (isinstance(axis, (list, tuple)) and not axis):
        if rank is None or None in x.shape.as_list():
            shape = tensor_shape.unknown_shape()
        else:
            shape = tensor_shape.TensorShape([d for d in x.shape.as_list() if d != 1])
        axes = None
    else:
        raw = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
        axes_list = sorted({_normalize_axis(int(a), rank, "squeeze") for a in raw})
        if rank is None:
            shape = tensor_shape.unknown_shape()
        else:
            dims = x.shape.as_list()
            for a in axes_list:
                if dims[a] not in (None, 1):
                    raise ValueError(
                        f"squeeze: cannot squeeze dimension {a} of {x.name} with shape {x.shape}: its size is {dims[a]}, not 1"
                    )
            shape = tensor_shape.TensorShape([d for i, d in enumerate(dims) if i not in axes_list])
        axes = tuple(axes_list)
    return op_util.make_tensor("Squeeze", [x], x.dtype.base_dtype, shape, name or "Squeeze", {"squeeze_dims": axes})


@op_registry.RegisterGradient("ExpandDims")
def _expand_dims_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [reshape(grad, shape(op.inputs[0]))]


@op_registry.RegisterGradient("Squeeze")
def _squeeze_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [reshape(grad, shape(op.inputs[0]))]


# ---------------------------------------------------------------- gather, segment sums, one_hot

op_registry.register_op("GatherV2")
op_registry.register_op("UnsortedSegmentSum")
op_registry.register_op("OneHot")


def gather(params: Any, indices: Any, validate_indices: Any = None, name: Optional[str] = None,
           axis: Any = 0, batch_dims: int = 0) -> graph_lib.Tensor:
    """Picks slices of ``params`` along ``axis`` at ``indices``; out-of-range indices are an error."""
    if batch_dims != 0:
        raise ValueError(f"gather: only batch_dims=0 is supported, got {batch_dims}")
    p = op_util.to_tensor(params)
    i = _index_tensor(indices, "GatherV2")
    axis_int = _normalize_axis(_static_int(axis, "gather", "axis"), p.shape.ndims, "gather")
    if p.shape.ndims == 0:
        raise ValueError(f"gather: params {p.name} must have rank >= 1, got a scalar")
    if p.shape.ndims is None or i.shape.ndims is None:
        shape = tensor_shape.unknown_shape()
    else:
        dims = p.shape.as_list()
        shape = tensor_shape.TensorShape(dims[:axis_int] + i.shape.as_list() + dims[axis_int + 1:])
    return op_util.make_tensor("GatherV2", [p, i], p.dtype.base_dtype, shape, name or "GatherV2", {"axis": axis_int})


@op_registry.RegisterGradient("GatherV2")
def _gather_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    params, indices = op.inputs
    axis = op.get_attr("axis")
    if axis == 0:  # as in TF, the rows gathered and their gradients: an IndexedSlices
        with op.graph.colocate_with(params.op):
            params_shape = shape(params)
        tail = params.shape[1:] if params.shape.ndims is not None else tensor_shape.unknown_shape()
        rows = [-1] + tail.as_list() if tail.is_fully_defined() else concat([[-1], strided_slice_from_key(params_shape, builtins.slice(1, None))], 0)
        values = reshape(grad, rows)
        return [indexed_slices.IndexedSlices(values, reshape(indices, [-1]), params_shape), None]
    size = params.shape[axis].value if params.shape.ndims is not None else None
    num_segments: Any = size if size is not None else _dynamic_dim(params, axis)
    if params.shape.ndims is None or indices.shape.ndims is None:
        raise ValueError(f"Cannot compute the gradient of {op.name}: gather along axis {axis} needs known ranks")
    # Bring the index dimensions to the front, sum into segments, then move that axis back.
    index_rank, rank = indices.shape.ndims, params.shape.ndims
    index_axes = list(range(axis, axis + index_rank))
    outer = list(range(axis))
    inner = list(range(axis + index_rank, rank - 1 + index_rank))
    summed = unsorted_segment_sum(transpose(grad, index_axes + outer + inner), indices, num_segments)
    back = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank))
    return [transpose(summed, back), None]


def unsorted_segment_sum(data: Any, segment_ids: Any, num_segments: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """Sums slices of ``data`` into ``num_segments`` rows by id; negative ids are dropped."""
    d = op_util.to_tensor(data)
    ids = _index_tensor(segment_ids, "UnsortedSegmentSum")
    n = _index_tensor(num_segments, "UnsortedSegmentSum")
    if d.shape.ndims is not None and ids.shape.ndims is not None:
        if not d.shape[:ids.shape.ndims].is_compatible_with(ids.shape):
            raise ValueError(
                f"unsorted_segment_sum: segment_ids {ids.name} with shape {ids.shape} must be a prefix of "
                f"the shape {d.shape} of data {d.name}"
            )
        count = op_util.static_value(n)
        rows = None if count is None else int(count)
        shape = tensor_shape.TensorShape([rows] + d.shape.as_list()[ids.shape.ndims:])
    else:
        shape = tensor_shape.unknown_shape()
    return op_util.make_tensor("UnsortedSegmentSum", [d, ids, n], d.dtype.base_dtype, shape,
                               name or "UnsortedSegmentSum")


@op_registry.RegisterGradient("UnsortedSegmentSum")
def _unsorted_segment_sum_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    from tensorgrid.ops import math_ops

    ids = op.inputs[1]
    # Dropped (negative) ids get no gradient: gather at a clamped id, then zero those rows.
    clamped = math_ops.maximum(ids, _zero_of(ids))
    gathered = gather(grad, clamped)
    kept = math_ops.cast(math_ops.greater_equal(ids, _zero_of(ids)), grad.dtype.base_dtype)
    rank_extra = (gathered.shape.ndims or 0) - (ids.shape.ndims or 0)
    mask = reshape(kept, concat([shape(ids), constant([1] * rank_extra, dtype=dtypes.int32)], 0)) if rank_extra else kept
    return [math_ops.multiply(gathered, mask), None, None]


def _zero_of(like: graph_lib.Tensor) -> graph_lib.Tensor:
    return constant(0, dtype=like.dtype.base_dtype)


def one_hot(indices: Any, depth: Any, on_value: Any = None, off_value: Any = None, axis: Any = None,
            dtype: Any = None, name: Optional[str] = None) -> graph_lib.Tensor:
    """A one-hot encoding of ``indices`` along a new ``axis``; indices outside [0, depth) give all off_value."""
    i = _index_tensor(indices, "OneHot")
    depth_int = _static_int(depth, "one_hot", "depth")
    if depth_int < 0:
        raise ValueError(f"one_hot: depth must be >= 0, got {depth_int}")
    given = [v for v in (on_value, off_value) if v is not None]
    if dtype is not None:
        dt = dtypes.as_dtype(dtype).base_dtype
    elif given and op_util._is_tensor_like(given[0]):
        dt = op_util.to_tensor(given[0]).dtype.base_dtype
    elif given:
        dt = dtypes.as_dtype(np.asarray(given[0]).dtype) if not isinstance(given[0], float) else dtypes.float32
        if dt == dtypes.int64 and not isinstance(given[0], np.generic):
            dt = dtypes.int32
    else:
        dt = dtypes.float32
    on = op_util.to_tensor(1 if on_value is None else on_value, dtype=dt)
    off = op_util.to_tensor(0 if off_value is None else off_value, dtype=dt)
    for v, what in ((on, "on_value"), (off, "off_value")):
        if v.shape.ndims not in (None, 0):
            raise ValueError(f"one_hot: {what} must be a scalar, got {v.name} with shape {v.shape}")
    rank = i.shape.ndims
    axis_int = -1 if axis is None else int(axis)
    if axis_int < -1:
        raise ValueError(f"one_hot: axis must be -1 or a position in the output, got {axis_int}")
    if axis_int != -1:
        axis_int = _normalize_axis(axis_int, rank, "one_hot", extra=1)
    if rank is None:
        shape = tensor_shape.unknown_shape()
    else:
        dims = i.shape.as_list()
        where = rank if axis_int == -1 else axis_int
        shape = tensor_shape.TensorShape(dims[:where] + [depth_int] + dims[where:])
    return op_util.make_tensor("OneHot", [i, on, off], dt, shape, name or "one_hot",
                               {"depth": depth_int, "axis": axis_int})


op_registry.NotDifferentiable("OneHot")


# ---------------------------------------------------------------- where (Select), tile

op_registry.register_op("Select")
op_registry.register_op("Where")
op_registry.register_op("Tile")


def where(condition: Any, x: Any = None, y: Any = None, name: Optional[str] = None) -> graph_lib.Tensor:
    """Elements of ``x`` where ``condition`` holds, else of ``y``; with neither, the true coordinates.

    As in TF1, ``condition`` has the shape of ``x`` or is a vector over its first dimension.
    """
    c = op_util.to_tensor(condition)
    if c.dtype.base_dtype != dtypes.bool_:
        raise TypeError(f"where: condition {c.name} must be bool, got {c.dtype.base_dtype.name}")
    if x is None and y is None:
        rank = c.shape.ndims
        return op_util.make_tensor("Where", [c], dtypes.int64, [None, rank], name or "Where")
    if x is None or y is None:
        raise ValueError("where: x and y must both be given, or neither")
    xt, yt = op_util.to_tensors_like(x, y)
    dtype = op_util.check_same_dtype("Select", xt, yt)
    if not xt.shape.is_compatible_with(yt.shape):
        raise ValueError(f"where: x {xt.name} with shape {xt.shape} and y {yt.name} with shape {yt.shape} must have the same shape")
    shape = xt.shape.merge_with(yt.shape)
    if not c.shape.is_compatible_with(shape):
        vector_ok = c.shape.ndims == 1 and shape.ndims is not None and shape.ndims >= 1 and c.shape[0].is_compatible_with(shape[0])
        if not vector_ok:
            raise ValueError(
                f"where: condition {c.name} with shape {c.shape} must have the shape {shape} of x and y, "
                "or be a vector over their first dimension"
            )
    return op_util.make_tensor("Select", [c, xt, yt], dtype, shape, name or "Select")


@op_registry.RegisterGradient("Select")
def _select_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    c = op.inputs[0]
    zeros = zeros_like(grad)
    return [None, where(c, grad, zeros), where(c, zeros, grad)]


op_registry.NotDifferentiable("Where")


def tile(input: Any, multiples: Any, name: Optional[str] = None) -> graph_lib.Tensor:  # noqa: A002
    """Repeats ``input`` ``multiples[i]`` times along dimension ``i``."""
    x = op_util.to_tensor(input)
    m = _index_tensor(multiples, "Tile")
    reps = _static_ints(multiples, "tile", "multiples")
    rank = x.shape.ndims
    if reps is not None:
        if rank is not None and len(reps) != rank:
            raise ValueError(f"tile: multiples {reps} must have one entry per dimension of {x.name} with shape {x.shape}")
        if any(r < 0 for r in reps):
            raise ValueError(f"tile: multiples must be >= 0, got {reps}")
    if rank is None:
        shape = tensor_shape.unknown_shape(None if reps is None else len(reps))
    else:
        dims = x.shape.as_list()
        shape = tensor_shape.TensorShape(
            [None if reps is None or d is None else d * reps[i] for i, d in enumerate(dims)]
        )
    return op_util.make_tensor("Tile", [x, m], x.dtype.base_dtype, shape, name or "Tile")


@op_registry.RegisterGradient("Tile")
def _tile_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    from tensorgrid.ops import math_ops

    x, multiples = op.inputs
    rank = x.shape.ndims
    if rank is None:
        raise ValueError(f"Cannot compute the gradient of {op.name}: the rank of {x.name} is unknown")
    if rank == 0:
        return [grad, None]
    # grad viewed as [m0, d0, m1, d1, ...] and summed over the multiples' axes.
    split_shape = reshape(transpose(stack([math_ops.cast(multiples, dtypes.int32), shape(x)])), [-1])
    summed = math_ops.reduce_sum(reshape(grad, split_shape), axis=list(range(0, 2 * rank, 2)))
    summed.set_shape(x.shape)
    return [summed, None]


# ---------------------------------------------------------------- slicing

op_registry.register_op("StridedSlice")
op_registry.register_op("StridedSliceGrad")
newaxis = None


def strided_slice(input_: Any, begin: Any, end: Any, strides: Any = None, begin_mask: int = 0, end_mask: int = 0,
                  ellipsis_mask: int = 0, new_axis_mask: int = 0, shrink_axis_mask: int = 0,
                  var: Any = None, name: Optional[str] = None) -> graph_lib.Tensor:
    """Python-style slicing encoded as TF does: begin/end/strides plus bit masks per entry."""
    x = op_util.to_tensor(input_)
    b = _index_tensor(begin, "StridedSlice")
    e = _index_tensor(end, "StridedSlice")
    s = _index_tensor(strides if strides is not None else [1] * (b.shape.num_elements() or 0), "StridedSlice")
    masks = {"begin_mask": int(begin_mask), "end_mask": int(end_mask), "ellipsis_mask": int(ellipsis_mask),
             "new_axis_mask": int(new_axis_mask), "shrink_axis_mask": int(shrink_axis_mask)}
    lengths = {t.shape.num_elements() for t in (b, e, s)}
    if len(lengths) != 1 or None in lengths:
        raise ValueError(
            f"strided_slice: begin, end and strides must be vectors of the same known length, got shapes "
            f"{b.shape}, {e.shape}, {s.shape}"
        )
    if bin(masks["ellipsis_mask"]).count("1") > 1:
        raise ValueError("strided_slice: only one ellipsis ('...') is allowed in a slice")
    steps = _static_ints(s, "strided_slice", "strides")
    if steps is not None and 0 in steps:
        raise ValueError(f"strided_slice: strides must be non-zero, got {steps}")
    shape = _strided_slice_shape(x.shape, _static_ints(b, "strided_slice", "begin"),
                                 _static_ints(e, "strided_slice", "end"), steps, masks, lengths.pop() or 0)
    return op_util.make_tensor("StridedSlice", [x, b, e, s], x.dtype.base_dtype, shape, name or "strided_slice", masks)


def slice(input_: Any, begin: Any, size: Any, name: Optional[str] = None) -> graph_lib.Tensor:  # noqa: A001 - TF's name
    """``input_[begin[i] : begin[i] + size[i]]`` per dimension; a size of -1 takes the rest."""
    sizes = _static_ints(size, "slice", "size")
    if sizes is None:
        raise TypeError(f"slice: size must be known when the graph is built, got the tensor {size.name}")
    if any(v < -1 for v in sizes):
        raise ValueError(f"slice: sizes must be >= -1, got {sizes}")
    end_mask = sum(1 << i for i, v in enumerate(sizes) if v == -1)
    starts = _static_ints(begin, "slice", "begin")
    if starts is not None:
        end: Any = [b + v if v != -1 else 0 for b, v in zip(starts, sizes)]
    else:
        from tensorgrid.ops import math_ops

        b = _index_tensor(begin, "Slice")
        end = math_ops.add(b, constant([v if v != -1 else 0 for v in sizes], dtype=b.dtype.base_dtype))
    return strided_slice(input_, begin, end, [1] * len(sizes), end_mask=end_mask, name=name or "Slice")


def _strided_slice_shape(in_shape: tensor_shape.TensorShape, begin: Optional[list[int]], end: Optional[list[int]],
                         strides: Optional[list[int]], masks: dict[str, int], n: int) -> tensor_shape.TensorShape:
    if in_shape.ndims is None:
        return tensor_shape.unknown_shape()
    dims = in_shape.as_list()
    explicit = sum(1 for i in range(n) if not (masks["new_axis_mask"] >> i) & 1 and not (masks["ellipsis_mask"] >> i) & 1)
    has_ellipsis = masks["ellipsis_mask"] != 0
    if explicit > len(dims):
        raise ValueError(f"strided_slice: {explicit} indices for a tensor of shape {in_shape}")
    out: list[Optional[int]] = []
    d = 0
    for i in range(n):
        bit = 1 << i
        if masks["ellipsis_mask"] & bit:
            covered = len(dims) - explicit
            out.extend(dims[d:d + covered])
            d += covered
            continue
        if masks["new_axis_mask"] & bit:
            out.append(1)
            continue
        size = dims[d]
        if masks["shrink_axis_mask"] & bit:
            if begin is not None and size is not None and not -size <= begin[i] < size:
                raise ValueError(f"strided_slice: index {begin[i]} is out of bounds for dimension {d} of size {size} "
                                 f"(shape {in_shape})")
            d += 1
            continue
        if size is None or strides is None or (begin is None and not masks["begin_mask"] & bit) or (
                end is None and not masks["end_mask"] & bit):
            out.append(None)
        else:
            start = None if masks["begin_mask"] & bit else begin[i]  # type: ignore[index]
            stop = None if masks["end_mask"] & bit else end[i]  # type: ignore[index]
            out.append(len(range(*builtins.slice(start, stop, strides[i]).indices(size))))
        d += 1
    if not has_ellipsis:
        out.extend(dims[d:])
    return tensor_shape.TensorShape(out)


def strided_slice_from_key(tensor: Any, key: Any) -> graph_lib.Tensor:
    """``tensor[key]``: ints, slices with steps, negative indices, ``tf.newaxis``, ``...``, scalar int tensors."""
    x = op_util.to_tensor(tensor)
    entries = key if isinstance(key, tuple) else (key,)
    begin: list[Any] = []
    end: list[Any] = []
    strides: list[Any] = []
    masks = {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0}
    for i, entry in enumerate(entries):
        bit = 1 << i
        if entry is Ellipsis:
            if masks["ellipsis_mask"]:
                raise ValueError(f"Indexing {x.name}: an index can only have a single ellipsis ('...'), got {key!r}")
            masks["ellipsis_mask"] |= bit
            _append_bounds(begin, end, strides, 0, 0, 1)
        elif entry is None:
            masks["new_axis_mask"] |= bit
            _append_bounds(begin, end, strides, 0, 0, 1)
        elif isinstance(entry, builtins.slice):
            step = 1 if entry.step is None else _slice_bound(entry.step, x, key)
            if isinstance(step, int) and step == 0:
                raise ValueError(f"Indexing {x.name}: slice step cannot be zero in {key!r}")
            if entry.start is None:
                masks["begin_mask"] |= bit
                begin.append(0)
            else:
                begin.append(_slice_bound(entry.start, x, key))
            if entry.stop is None:
                masks["end_mask"] |= bit
                end.append(0)
            else:
                end.append(_slice_bound(entry.stop, x, key))
            strides.append(step)
        else:
            index = _slice_bound(entry, x, key)
            masks["shrink_axis_mask"] |= bit
            begin.append(index)
            end.append(index + 1 if isinstance(index, int) else 0)
            strides.append(1)
    return strided_slice(x, _pack_bounds(begin), _pack_bounds(end), _pack_bounds(strides), name="strided_slice", **masks)


def _append_bounds(begin: list[Any], end: list[Any], strides: list[Any], b: Any, e: Any, s: Any) -> None:
    begin.append(b)
    end.append(e)
    strides.append(s)


def _slice_bound(value: Any, x: graph_lib.Tensor, key: Any) -> Any:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"Indexing {x.name}: booleans are not valid indices, got {key!r}")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if op_util._is_tensor_like(value):
        t = op_util.to_tensor(value)
        if t.dtype.base_dtype in op_util.INDICES and t.shape.ndims in (None, 0):
            return t
    raise TypeError(
        f"Indexing {x.name} with {key!r}: only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) "
        "and scalar int32/int64 tensors are valid indices"
    )


def _pack_bounds(values: list[Any]) -> Any:
    if not any(isinstance(v, graph_lib.Tensor) for v in values):
        return constant(values, dtype=dtypes.int32, shape=[len(values)])
    from tensorgrid.ops import math_ops

    return stack([math_ops.cast(v, dtypes.int32) if isinstance(v, graph_lib.Tensor) else constant(v, dtype=dtypes.int32)
                  for v in values])


@op_registry.RegisterGradient("StridedSlice")
def _strided_slice_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x, b, e, s = op.inputs
    masks = {m: op.get_attr(m) for m in _SLICE_MASKS}
    dx = op_util.make_tensor("StridedSliceGrad", [shape(x), b, e, s, grad], grad.dtype.base_dtype, x.shape,
                             "StridedSliceGrad", masks)
    return [dx, None, None, None]


@op_registry.RegisterGradient("StridedSliceGrad")
def _strided_slice_grad_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    _, b, e, s, _ = op.inputs
    masks = {m: op.get_attr(m) for m in _SLICE_MASKS}
    return [None, None, None, None, strided_slice(grad, b, e, s, **masks)]


_SLICE_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
