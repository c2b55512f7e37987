"""Kernels of array ops: constants, placeholders, shapes, reshape, fills, and the ops that
move, join, split, pick or repeat elements (transpose, concat, gather, one_hot, slicing...).

Index arguments are checked here, since numpy would otherwise wrap a negative index or
a cupy kernel read out of bounds: a bad index is an InvalidArgumentError naming it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels import index_ranges
from tensorgrid.kernels.registry import register_kernel


@register_kernel("Const")
def _const(k: context.KernelContext, step: context.StepContext) -> Any:
    cached = k.state.get("device_value")
    if cached is None or cached[0] is not k.backend:
        cached = (k.backend, k.backend.asarray(k.attrs["value"]))
        k.state["device_value"] = cached
    return cached[1]


@register_kernel("Placeholder")
def _placeholder(k: context.KernelContext, step: context.StepContext) -> Any:
    shape = k.attrs.get("shape")
    shown = "<unknown>" if shape is None else "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"
    raise errors.InvalidArgumentError(
        None, None,
        f"You must feed a value for placeholder tensor '{k.name}' with dtype {k.attrs['dtype']} and shape {shown}",
    )


@register_kernel("PlaceholderWithDefault", "Identity", "StopGradient", forwards_input=True)
def _identity(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    return x


# A tensor's shape, size and rank are host values wherever the tensor is (TensorFlow's
# HostMemory outputs): made from its metadata, never copied to a device and back.
@register_kernel("Shape", host_only=True, any_input_device=True)
def _shape(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    return np.asarray(x.shape, dtype=k.output_dtypes[0])


@register_kernel("Size", host_only=True, any_input_device=True)
def _size(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    return np.asarray(x.size, dtype=k.output_dtypes[0])


@register_kernel("Rank", host_only=True, any_input_device=True)
def _rank(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    return np.asarray(x.ndim, dtype=np.int32)


def host_ints(value: Any) -> list[int]:
    """A small shape/axis tensor as Python ints (it may live on the GPU)."""
    getter = getattr(value, "get", None)
    array = getter() if callable(getter) and not isinstance(value, np.ndarray) else np.asarray(value)
    flat = array.reshape(-1).tolist()  # one C loop to Python scalars, not one numpy scalar per element
    return flat if array.dtype.kind in "iu" else [int(v) for v in flat]


@register_kernel("Reshape", forwards_input=True, host_inputs=(1,))
def _reshape(k: context.KernelContext, step: context.StepContext, x: Any, shape: Any) -> Any:
    dims = host_ints(shape)
    try:
        return x.reshape(dims)
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, f"Input to reshape is a tensor with {x.size} values, but the requested shape is {dims}"
        ) from None


@register_kernel("Fill", host_inputs=(0,))
def _fill(k: context.KernelContext, step: context.StepContext, dims: Any, value: Any) -> Any:
    shape = host_ints(dims)
    if any(d < 0 for d in shape):
        raise errors.InvalidArgumentError(None, None, f"Fill dimensions must be >= 0, got {shape}")
    return k.xp.full(shape, value, dtype=k.output_dtypes[0])


@register_kernel("ZerosLike")
def _zeros_like(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    return k.xp.zeros(x.shape, dtype=k.output_dtypes[0])


@register_kernel("OnesLike")
def _ones_like(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    return k.xp.ones(x.shape, dtype=k.output_dtypes[0])


@register_kernel("BroadcastTo", forwards_input=True, host_inputs=(1,))
def _broadcast_to(k: context.KernelContext, step: context.StepContext, x: Any, shape: Any) -> Any:
    return k.xp.broadcast_to(x, host_ints(shape))


@register_kernel("UnbroadcastTo", forwards_input=True, host_inputs=(1,))
def _unbroadcast_to(k: context.KernelContext, step: context.StepContext, grad: Any, shape: Any) -> Any:
    target = host_ints(shape)
    extra = grad.ndim - len(target)
    if extra < 0:
        raise errors.InvalidArgumentError(None, None, f"Cannot reduce shape {grad.shape} to {target}")
    axes = tuple(range(extra)) + tuple(
        extra + i for i, d in enumerate(target) if d == 1 and grad.shape[extra + i] != 1
    )
    result = grad.sum(axis=axes, keepdims=True) if axes else grad
    return result.reshape(target)


@register_kernel("NoOp")
def _no_op(k: context.KernelContext, step: context.StepContext) -> None:
    return None


@register_kernel("Transpose", forwards_input=True)
def _transpose(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    return k.xp.transpose(x, k.attrs["perm"])


@register_kernel("ConcatV2")
def _concat(k: context.KernelContext, step: context.StepContext, *xs: Any) -> Any:
    axis = k.attrs["axis"] % max(xs[0].ndim, 1)
    others = [x.shape[:axis] + x.shape[axis + 1:] for x in xs]
    if any(o != others[0] or x.ndim != xs[0].ndim for o, x in zip(others, xs)):
        shapes = ", ".join(str(list(x.shape)) for x in xs)
        raise errors.InvalidArgumentError(
            None, None, f"ConcatOp: dimensions of inputs should match except along axis {axis}: shapes are {shapes}"
        )
    return k.xp.concatenate(xs, axis=axis)


@register_kernel("Split", forwards_input=True)
def _split(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    axis, count = k.attrs["axis"], k.attrs["num_split"]
    if x.shape[axis] % count:
        raise errors.InvalidArgumentError(
            None, None, f"Number of ways to split should evenly divide the split dimension, but got "
            f"split_dim {axis} (size = {x.shape[axis]}) and num_split {count}"
        )
    return tuple(k.xp.split(x, count, axis=axis))


@register_kernel("SplitV", forwards_input=True, host_inputs=(1,))
def _split_v(k: context.KernelContext, step: context.StepContext, x: Any, size_splits: Any) -> Any:
    axis = k.attrs["axis"]
    sizes = host_ints(size_splits)
    dim = x.shape[axis]
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = dim - sum(s for s in sizes if s != -1)
    if len(sizes) != k.attrs["num_split"] or any(s < 0 for s in sizes) or sum(sizes) != dim:
        raise errors.InvalidArgumentError(
            None, None, f"Determined shape must either match input shape along split_dim exactly if fully "
            f"specified, or be less than the size of the input along split_dim if not fully specified: "
            f"sizes {host_ints(size_splits)} for dimension {axis} of shape {list(x.shape)}"
        )
    offsets = [sum(sizes[:i + 1]) for i in range(len(sizes) - 1)]
    return tuple(k.xp.split(x, offsets, axis=axis))


@register_kernel("Pack")
def _pack(k: context.KernelContext, step: context.StepContext, *xs: Any) -> Any:
    if any(x.shape != xs[0].shape for x in xs):
        shapes = ", ".join(str(list(x.shape)) for x in xs)
        raise errors.InvalidArgumentError(None, None, f"Shapes of all inputs must match: {shapes}")
    return k.xp.stack(xs, axis=k.attrs["axis"])


@register_kernel("Unpack", forwards_input=True)
def _unpack(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    axis, num = k.attrs["axis"], k.attrs["num"]
    if x.shape[axis] != num:
        raise errors.InvalidArgumentError(
            None, None, f"Input shape axis {axis} must equal {num}, got shape {list(x.shape)}"
        )
    return tuple(k.xp.moveaxis(x, axis, 0))


@register_kernel("ExpandDims", forwards_input=True)
def _expand_dims(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    return k.xp.expand_dims(x, k.attrs["axis"])


@register_kernel("Squeeze", forwards_input=True)
def _squeeze(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    axes = k.attrs["squeeze_dims"]
    if axes is None:
        return k.xp.squeeze(x)
    bad = [a for a in axes if a >= x.ndim or x.shape[a] != 1]
    if bad:
        raise errors.InvalidArgumentError(
            None, None, f"Can not squeeze dim[{bad[0]}], expected a dimension of 1, got shape {list(x.shape)}"
        )
    return k.xp.squeeze(x, axis=tuple(axes))


def _check_indices(indices: Any, limit: int, what: str) -> None:
    bad = index_ranges.first_bad_index(indices, limit)
    if bad is not None:
        raise errors.InvalidArgumentError(None, None, f"{what} index {bad} is not in [0, {limit})")


@register_kernel("GatherV2")
def _gather(k: context.KernelContext, step: context.StepContext, params: Any, indices: Any) -> Any:
    axis = k.attrs["axis"]
    _check_indices(indices, params.shape[axis], f"gather along axis {axis} of shape {list(params.shape)}:")
    return k.xp.take(params, indices, axis=axis)


@register_kernel("UnsortedSegmentSum", host_inputs=(2,))
def _unsorted_segment_sum(k: context.KernelContext, step: context.StepContext, data: Any, segment_ids: Any,
                          num_segments: Any) -> Any:
    count = host_ints(num_segments)[0]
    if data.shape[:segment_ids.ndim] != segment_ids.shape:
        raise errors.InvalidArgumentError(
            None, None, f"segment_ids shape {list(segment_ids.shape)} is not a prefix of data shape {list(data.shape)}"
        )
    inner = data.shape[segment_ids.ndim:]
    result = k.xp.zeros((count,) + inner, dtype=data.dtype)
    ids = segment_ids.reshape(-1)
    rows = data.reshape((-1,) + inner)
    if ids.size and int(ids.min()) < 0:
        kept = ids >= 0
        ids, rows = ids[kept], rows[kept]
    _check_indices(ids, count, "segment_ids:")
    k.backend.scatter_add(result, ids, rows)
    return result


@register_kernel("OneHot")
def _one_hot(k: context.KernelContext, step: context.StepContext, indices: Any, on_value: Any, off_value: Any) -> Any:
    depth, axis = k.attrs["depth"], k.attrs["axis"]
    hot = k.xp.expand_dims(indices, -1) == k.xp.arange(depth, dtype=indices.dtype)
    if axis != -1:
        hot = k.xp.moveaxis(hot, -1, axis)
    return k.xp.where(hot, on_value, off_value).astype(k.output_dtypes[0], copy=False)


@register_kernel("Select")
def _select(k: context.KernelContext, step: context.StepContext, condition: Any, x: Any, y: Any) -> Any:
    if x.shape != y.shape:
        raise errors.InvalidArgumentError(
            None, None, f"'then' and 'else' must have the same size, but received: {list(x.shape)} vs. {list(y.shape)}"
        )
    if condition.shape != x.shape:
        if condition.ndim != 1 or x.ndim < 1 or condition.shape[0] != x.shape[0]:
            raise errors.InvalidArgumentError(
                None, None, f"'condition' must be a vector of size {x.shape[0] if x.ndim else 1} or have the shape "
                f"{list(x.shape)} of 'then' and 'else', got shape {list(condition.shape)}"
            )
        condition = condition.reshape((-1,) + (1,) * (x.ndim - 1))
    return k.xp.where(condition, x, y)


@register_kernel("Where")
def _where(k: context.KernelContext, step: context.StepContext, condition: Any) -> Any:
    return k.xp.argwhere(condition).astype(np.int64, copy=False)


@register_kernel("Tile", host_inputs=(1,))
def _tile(k: context.KernelContext, step: context.StepContext, x: Any, multiples: Any) -> Any:
    reps = host_ints(multiples)
    if len(reps) != x.ndim or any(r < 0 for r in reps):
        raise errors.InvalidArgumentError(
            None, None, f"Expected multiples to be non-negative with one entry per dimension of shape "
            f"{list(x.shape)}, got {reps}"
        )
    return k.xp.tile(x, reps)


def _slice_key(k: context.KernelContext, begin: Any, end: Any, strides: Any) -> tuple[Any, ...]:
    """Turns StridedSlice's begin/end/strides and masks back into a Python index."""
    b, e, s = host_ints(begin), host_ints(end), host_ints(strides)
    attrs = k.attrs
    key: list[Any] = []
    for i, (start, stop, step) in enumerate(zip(b, e, s)):
        bit = 1 << i
        if attrs["ellipsis_mask"] & bit:
            key.append(Ellipsis)
        elif attrs["new_axis_mask"] & bit:
            key.append(None)
        elif attrs["shrink_axis_mask"] & bit:
            key.append(start)
        else:
            if step == 0:
                raise errors.InvalidArgumentError(None, None, f"strided_slice: strides[{i}] must be non-zero")
            key.append(slice(None if attrs["begin_mask"] & bit else start,
                             None if attrs["end_mask"] & bit else stop, step))
    return tuple(key)


def _check_shrink_indices(key: tuple[Any, ...], shape: tuple[int, ...]) -> None:
    explicit = [entry for entry in key if entry is not None and entry is not Ellipsis]
    if len(explicit) > len(shape):
        raise errors.InvalidArgumentError(None, None, f"Index {key} has too many entries for shape {list(shape)}")
    dim = 0
    for entry in key:
        if entry is Ellipsis:
            dim += len(shape) - len(explicit)
        elif entry is None:
            continue
        else:
            if isinstance(entry, int) and not -shape[dim] <= entry < shape[dim]:
                raise errors.InvalidArgumentError(
                    None, None, f"slice index {entry} of dimension {dim} out of bounds for shape {list(shape)}"
                )
            dim += 1


@register_kernel("StridedSlice", forwards_input=True, host_inputs=(1, 2, 3))
def _strided_slice(k: context.KernelContext, step: context.StepContext, x: Any, begin: Any, end: Any,
                   strides: Any) -> Any:
    key = _slice_key(k, begin, end, strides)
    _check_shrink_indices(key, x.shape)
    return x[key]


@register_kernel("StridedSliceGrad", host_inputs=(0, 1, 2, 3))
def _strided_slice_grad(k: context.KernelContext, step: context.StepContext, shape: Any, begin: Any, end: Any,
                        strides: Any, grad: Any) -> Any:
    key = _slice_key(k, begin, end, strides)
    result = k.xp.zeros(host_ints(shape), dtype=grad.dtype)
    result[key] = grad
    return result
