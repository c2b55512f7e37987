"""Array ops: placeholders, identity, shapes, reshaping, zeros/ones/fill, and
the ops that rearrange whole arrays: transpose, concat/split, stack/unstack,
expand_dims/squeeze, tile; a list holding tensors packed as ``convert_to_tensor`` packs it
(constants are in ``constant_op``). Picking elements by index or condition (gather, one_hot,
where, slicing) is in ``indexing_ops``.

Forward construction (with static shapes) and gradient rules sit side by side.
Arguments that fix the output's structure (axes, perm, depth) must be known when the
graph is built; sizes and indices may be tensors.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_conversion
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import constant_op
from tensorgrid.ops import op_util

constant = constant_op.constant
as_string_array = constant_op.as_string_array

for _op_type in ("Placeholder", "PlaceholderWithDefault", "Identity", "StopGradient",
                 "Shape", "Size", "Rank", "Reshape", "Fill", "ZerosLike", "OnesLike",
                 "UnbroadcastTo", "BroadcastTo"):
    op_registry.register_op(_op_type)


# ---------------------------------------------------------------- lists holding tensors

def _first_tensor_dtype(value: Any) -> dtypes.DType:
    """The dtype of the first tensor in a nested list, depth first (what TF1 packs to)."""
    if isinstance(value, (list, tuple)):
        for v in value:
            if constant_op.holds_tensors(v):
                return _first_tensor_dtype(v)
    known = getattr(value, "dtype", None)  # a Tensor's, a Variable's: no conversion op just to read it
    if isinstance(known, dtypes.DType):
        return known.base_dtype
    return tensor_conversion.convert_to_tensor(value).dtype.base_dtype


def _pack_nested(value: Any, dtype: dtypes.DType, name: Optional[str], requested: bool) -> graph_lib.Tensor:
    if isinstance(value, (list, tuple)) and constant_op.holds_tensors(value):
        return stack([_pack_nested(v, dtype, None, requested) for v in value], name=name or "packed")
    if not constant_op.holds_tensors(value):
        return constant(value, dtype=dtype)
    tensor = tensor_conversion.convert_to_tensor(value)
    if tensor.dtype.base_dtype == dtype:
        return tensor
    if requested:
        # A dtype the caller asked for casts the tensors to it, as TensorFlow's autopacking does.
        from tensorgrid.ops import math_ops  # math_ops builds on array_ops

        return math_ops.cast(tensor, dtype)
    raise TypeError(
        f"Cannot convert a list containing a tensor of dtype {tensor.dtype.base_dtype.name} to "
        f"{dtype.name} (Tensor is: {tensor.name})"
    )


def _autopacking_conversion(value: Any, dtype: Any = None, name: Optional[str] = None,
                            as_ref: bool = False) -> graph_lib.Tensor:
    """A (nested) list of tensors is packed into one tensor, as TF1's convert_to_tensor packs it."""
    if not constant_op.holds_tensors(value):
        return constant_op.constant_conversion(value, dtype=dtype, name=name)
    if dtype is not None:
        return _pack_nested(value, dtypes.as_dtype(dtype), name, requested=True)
    return _pack_nested(value, _first_tensor_dtype(value), name, requested=False)


for _base in (list, tuple):
    tensor_conversion.register_tensor_conversion_function(_base, _autopacking_conversion)


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


def shape_from_tensor_value(shape_tensor: graph_lib.Tensor) -> tensor_shape.TensorShape:
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
    target = shape_from_tensor_value(s)
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
    return op_util.make_tensor("Fill", [d, v], v.dtype.base_dtype, shape_from_tensor_value(d), name or "Fill")


@op_registry.RegisterGradient("Fill")
def _fill_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    from tensorgrid.ops import math_ops

    return [None, math_ops.reduce_sum(grad)]


SMALL_CONSTANT_ELEMENTS = 1000
"""Above this many elements, zeros/ones become a Fill op instead of a constant in the graph
(as in TensorFlow), so a graph holding a 1 GiB variable's initializer stays small."""


def _filled(value: int, shape: Any, dtype: Any, name: str) -> graph_lib.Tensor:
    dt = dtypes.as_dtype(dtype)
    if not isinstance(shape, graph_lib.Tensor):
        static = tensor_shape.as_shape(shape)
        if static.is_fully_defined() and (static.num_elements() or 0) <= SMALL_CONSTANT_ELEMENTS:
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
    static = tensor_shape.broadcast_shapes(x.shape, shape_from_tensor_value(s), "broadcast_to")
    return op_util.make_tensor("BroadcastTo", [x, s], x.dtype.base_dtype, static, name or "BroadcastTo")


@op_registry.RegisterGradient("UnbroadcastTo")
def _unbroadcast_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [broadcast_to(grad, shape(op.inputs[0])), None]


@op_registry.RegisterGradient("BroadcastTo")
def _broadcast_to_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    return [unbroadcast_to(grad, op.inputs[0]), None]


# ---------------------------------------------------------------- transpose

op_registry.register_op("Transpose")


def transpose(a: Any, perm: Any = None, name: str = "transpose", conjugate: bool = False) -> graph_lib.Tensor:
    """Permutes the dimensions of ``a``; ``perm=None`` reverses them (``tf.transpose``)."""
    x = op_util.to_tensor(a)
    rank = x.shape.ndims
    if perm is None:
        order = None if rank is None else list(reversed(range(rank)))
    else:
        order = op_util.static_ints(perm, "transpose", "perm")
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
    tensors = op_util.convert_like_first_tensor(values, "concat")
    axis_int = op_util.static_int(axis, "concat", "axis")
    dtype = op_util.check_same_dtype("ConcatV2", *tensors)
    ranks = {t.shape.ndims for t in tensors if t.shape.ndims is not None}
    if len(ranks) > 1:
        shapes = ", ".join(f"{t.name} {t.shape}" for t in tensors)
        raise ValueError(f"concat: all tensors must have the same rank, got {shapes}")
    rank = ranks.pop() if ranks else None
    if rank == 0:
        raise ValueError(f"concat: cannot concatenate scalars ({', '.join(t.name for t in tensors)}); use tf.stack")
    axis_int = op_util.normalize_axis(axis_int, rank, "concat")
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
def concat_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    if isinstance(grad, indexed_slices.IndexedSlices):
        from tensorgrid.ops import sparse_ops

        return sparse_ops.concat_grad_of_indexed_slices(op, grad)
    axis = op.get_attr("axis")
    sizes = [t.shape[axis].value if t.shape.ndims is not None else None for t in op.inputs]
    if all(s is not None for s in sizes):
        size_splits: Any = sizes
    else:
        from tensorgrid.ops import indexing_ops

        size_splits = stack([indexing_ops.dynamic_dim(t, axis) for t in op.inputs])
    return split(grad, size_splits, axis=axis)


def split(value: Any, num_or_size_splits: Any, axis: Any = 0, num: Optional[int] = None,
          name: str = "split") -> list[graph_lib.Tensor]:
    """Splits ``value`` along ``axis`` into equal parts (an int) or parts of the given sizes."""
    x = op_util.to_tensor(value)
    axis_int = op_util.normalize_axis(op_util.static_int(axis, "split", "axis"), x.shape.ndims, "split")
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
    sizes_tensor = op_util.index_tensor(num_or_size_splits, "split")
    sizes = op_util.static_ints(num_or_size_splits, "split", "num_or_size_splits")
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
    tensors = op_util.convert_like_first_tensor(values, "stack")
    dtype = op_util.check_same_dtype("Pack", *tensors)
    merged = tensor_shape.unknown_shape()
    for t in tensors:
        if not merged.is_compatible_with(t.shape):
            shapes = ", ".join(f"{u.name} {u.shape}" for u in tensors)
            raise ValueError(f"stack: all tensors must have the same shape, got {shapes}")
        merged = merged.merge_with(t.shape)
    axis_int = op_util.normalize_axis(int(axis), merged.ndims, "stack", extra=1)
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
    axis_int = op_util.normalize_axis(int(axis), rank, "unstack")
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
    axis_int = op_util.normalize_axis(op_util.static_int(axis, "expand_dims", "axis"), x.shape.ndims, "expand_dims", extra=1)
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
        axes_list = sorted({op_util.normalize_axis(int(a), rank, "squeeze") for a in raw})
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


# ---------------------------------------------------------------- tile

op_registry.register_op("Tile")


def tile(input: Any, multiples: Any, name: Optional[str] = None) -> graph_lib.Tensor:  # noqa: A002
    """Repeats ``input`` ``multiples[i]`` times along dimension ``i``."""
    x = op_util.to_tensor(input)
    m = op_util.index_tensor(multiples, "Tile")
    reps = op_util.static_ints(multiples, "tile", "multiples")
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
