"""Indexing ops: picking elements by index or condition, and slicing.

``gather``, ``unsorted_segment_sum``, ``one_hot``, ``where`` (Select), ``strided_slice``,
``slice`` and ``tensor[key]``, each with its gradient alongside. The ops that build
and rearrange whole arrays (constants, shapes, reshape, concat, stack, tile) are in
``array_ops``, which these gradients use.
"""

from __future__ import annotations

import builtins
from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import op_util

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
    i = op_util.index_tensor(indices, "GatherV2")
    axis_int = op_util.normalize_axis(op_util.static_int(axis, "gather", "axis"), p.shape.ndims, "gather")
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
            params_shape = array_ops.shape(params)
        tail = params.shape[1:] if params.shape.ndims is not None else tensor_shape.unknown_shape()
        rows = [-1] + tail.as_list() if tail.is_fully_defined() else array_ops.concat([[-1], strided_slice_from_key(params_shape, builtins.slice(1, None))], 0)
        values = array_ops.reshape(grad, rows)
        return [indexed_slices.IndexedSlices(values, array_ops.reshape(indices, [-1]), params_shape), None]
    size = params.shape[axis].value if params.shape.ndims is not None else None
    num_segments: Any = size if size is not None else dynamic_dim(params, axis)
    if params.shape.ndims is None or indices.shape.ndims is None:
        raise ValueError(f"Cannot compute the gradient of {op.name}: gather along axis {axis} needs known ranks")
    # Bring the index dimensions to the front, sum into segments, then move that axis back.
    index_rank, rank = indices.shape.ndims, params.shape.ndims
    index_axes = list(range(axis, axis + index_rank))
    outer = list(range(axis))
    inner = list(range(axis + index_rank, rank - 1 + index_rank))
    summed = unsorted_segment_sum(array_ops.transpose(grad, index_axes + outer + inner), indices, num_segments)
    back = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank))
    return [array_ops.transpose(summed, back), None]


def unsorted_segment_sum(data: Any, segment_ids: Any, num_segments: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """Sums slices of ``data`` into ``num_segments`` rows by id; negative ids are dropped."""
    d = op_util.to_tensor(data)
    ids = op_util.index_tensor(segment_ids, "UnsortedSegmentSum")
    n = op_util.index_tensor(num_segments, "UnsortedSegmentSum")
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
    if rank_extra:
        ones = array_ops.constant([1] * rank_extra, dtype=dtypes.int32)
        mask = array_ops.reshape(kept, array_ops.concat([array_ops.shape(ids), ones], 0))
    else:
        mask = kept
    return [math_ops.multiply(gathered, mask), None, None]


def _zero_of(like: graph_lib.Tensor) -> graph_lib.Tensor:
    return array_ops.constant(0, dtype=like.dtype.base_dtype)


def one_hot(indices: Any, depth: Any, on_value: Any = None, off_value: Any = None, axis: Any = None,
            dtype: Any = None, name: Optional[str] = None) -> graph_lib.Tensor:
    """A one-hot encoding of ``indices`` along a new ``axis``; indices outside [0, depth) give all off_value."""
    i = op_util.index_tensor(indices, "OneHot")
    depth_int = op_util.static_int(depth, "one_hot", "depth")
    if depth_int < 0:
        raise ValueError(f"one_hot: depth must be >= 0, got {depth_int}")
    given = [v for v in (on_value, off_value) if v is not None]
    if dtype is not None:
        dt = dtypes.as_dtype(dtype).base_dtype
    elif given and op_util.is_tensor_like(given[0]):
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
        axis_int = op_util.normalize_axis(axis_int, rank, "one_hot", extra=1)
    if rank is None:
        shape = tensor_shape.unknown_shape()
    else:
        dims = i.shape.as_list()
        where = rank if axis_int == -1 else axis_int
        shape = tensor_shape.TensorShape(dims[:where] + [depth_int] + dims[where:])
    return op_util.make_tensor("OneHot", [i, on, off], dt, shape, name or "one_hot",
                               {"depth": depth_int, "axis": axis_int})


op_registry.NotDifferentiable("OneHot")


# ---------------------------------------------------------------- where (Select)

op_registry.register_op("Select")
op_registry.register_op("Where")


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
    zeros = array_ops.zeros_like(grad)
    return [None, where(c, grad, zeros), where(c, zeros, grad)]


op_registry.NotDifferentiable("Where")


# ---------------------------------------------------------------- slicing

op_registry.register_op("StridedSlice")
op_registry.register_op("StridedSliceGrad")
newaxis = None


def strided_slice(input_: Any, begin: Any, end: Any, strides: Any = None, begin_mask: int = 0, end_mask: int = 0,
                  ellipsis_mask: int = 0, new_axis_mask: int = 0, shrink_axis_mask: int = 0,
                  var: Any = None, name: Optional[str] = None) -> graph_lib.Tensor:
    """Python-style slicing encoded as TF does: begin/end/strides plus bit masks per entry."""
    x = op_util.to_tensor(input_)
    b = op_util.index_tensor(begin, "StridedSlice")
    e = op_util.index_tensor(end, "StridedSlice")
    s = op_util.index_tensor(strides if strides is not None else [1] * (b.shape.num_elements() or 0), "StridedSlice")
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
    steps = op_util.static_ints(s, "strided_slice", "strides")
    if steps is not None and 0 in steps:
        raise ValueError(f"strided_slice: strides must be non-zero, got {steps}")
    shape = _strided_slice_shape(x.shape, op_util.static_ints(b, "strided_slice", "begin"),
                                 op_util.static_ints(e, "strided_slice", "end"), steps, masks, lengths.pop() or 0)
    return op_util.make_tensor("StridedSlice", [x, b, e, s], x.dtype.base_dtype, shape, name or "strided_slice", masks)


def slice(input_: Any, begin: Any, size: Any, name: Optional[str] = None) -> graph_lib.Tensor:  # noqa: A001 - TF's name
    """``input_[begin[i] : begin[i] + size[i]]`` per dimension; a size of -1 takes the rest."""
    sizes = op_util.static_ints(size, "slice", "size")
    if sizes is None:
        raise TypeError(f"slice: size must be known when the graph is built, got the tensor {size.name}")
    if any(v < -1 for v in sizes):
        raise ValueError(f"slice: sizes must be >= -1, got {sizes}")
    end_mask = sum(1 << i for i, v in enumerate(sizes) if v == -1)
    starts = op_util.static_ints(begin, "slice", "begin")
    if starts is not None:
        end: Any = [b + v if v != -1 else 0 for b, v in zip(starts, sizes)]
    else:
        from tensorgrid.ops import math_ops

        b = op_util.index_tensor(begin, "Slice")
        end = math_ops.add(b, array_ops.constant([v if v != -1 else 0 for v in sizes], dtype=b.dtype.base_dtype))
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
    if op_util.is_tensor_like(value):
        t = op_util.to_tensor(value)
        if t.dtype.base_dtype in op_util.INDICES and t.shape.ndims in (None, 0):
            return t
    raise TypeError(
        f"Indexing {x.name} with {key!r}: only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) "
        "and scalar int32/int64 tensors are valid indices"
    )


def _pack_bounds(values: list[Any]) -> Any:
    if not any(isinstance(v, graph_lib.Tensor) for v in values):
        return array_ops.constant(values, dtype=dtypes.int32, shape=[len(values)])
    from tensorgrid.ops import math_ops

    return array_ops.stack([
        math_ops.cast(v, dtypes.int32) if isinstance(v, graph_lib.Tensor) else array_ops.constant(v, dtype=dtypes.int32)
        for v in values
    ])


@op_registry.RegisterGradient("StridedSlice")
def _strided_slice_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    x, b, e, s = op.inputs
    masks = {m: op.get_attr(m) for m in _SLICE_MASKS}
    dx = op_util.make_tensor("StridedSliceGrad", [array_ops.shape(x), b, e, s, grad], grad.dtype.base_dtype, x.shape,
                             "StridedSliceGrad", masks)
    return [dx, None, None, None]


@op_registry.RegisterGradient("StridedSliceGrad")
def _strided_slice_grad_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    _, b, e, s, _ = op.inputs
    masks = {m: op.get_attr(m) for m in _SLICE_MASKS}
    return [None, None, None, None, strided_slice(grad, b, e, s, **masks)]


_SLICE_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def dynamic_dim(t: graph_lib.Tensor, axis: int) -> graph_lib.Tensor:
    """The size of dimension ``axis`` of ``t`` as a scalar tensor (known at run time)."""
    return strided_slice_from_key(array_ops.shape(t), axis)
