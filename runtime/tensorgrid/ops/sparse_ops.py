"""Ops on the sparse forms: densifying an IndexedSlices, ``tf.unique``, sparse segment reductions.

``convert_to_tensor(indexed_slices)`` is registered here: as in TF it scatter-adds the
values into a zero tensor of ``dense_shape`` (``unsorted_segment_sum``), so rows named
twice add up, and it warns when that tensor is very large. The sparse segment
reductions (what ``embedding_lookup_sparse`` combines with) are composed from gather
and ``unsorted_segment_sum``, so their gradient flows back as IndexedSlices.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import op_registry
from tensorgrid.framework import sparse_tensor
from tensorgrid.framework import tensor_conversion
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util

LARGE_SPARSE_NUM_ELEMENTS = 100_000_000
"""Densifying an IndexedSlices with at least this many elements warns, as in TF."""


# ---------------------------------------------------------------- IndexedSlices -> dense

def _indexed_slices_to_tensor(value: indexed_slices.IndexedSlices, dtype: Any = None, name: Optional[str] = None,
                              as_ref: bool = False) -> graph_lib.Tensor:
    if dtype is not None and dtypes.as_dtype(dtype).base_dtype != value.dtype.base_dtype:
        raise ValueError(
            f"Tensor conversion requested dtype {dtypes.as_dtype(dtype).name} for IndexedSlices {value.name} "
            f"with dtype {value.dtype.base_dtype.name}"
        )
    if value.dense_shape is None:
        raise ValueError(f"Tensor conversion requested for IndexedSlices without dense_shape: {value}")
    static = value.shape
    if static.is_fully_defined():
        if (static.num_elements() or 0) >= LARGE_SPARSE_NUM_ELEMENTS:
            warnings.warn(f"Converting sparse IndexedSlices to a dense Tensor with {static.num_elements()} "
                          "elements. This may consume a large amount of memory.", stacklevel=3)
    elif value.dense_shape.op.type != "Shape":
        warnings.warn(f"Converting sparse IndexedSlices({value}) to a dense Tensor of unknown shape. "
                      "This may consume a large amount of memory.", stacklevel=3)
    rows: Any = static[0].value if static.ndims else None
    if rows is None:
        rows = indexing_ops.strided_slice_from_key(value.dense_shape, 0)
    dense = indexing_ops.unsorted_segment_sum(value.values, value.indices, rows, name=name)
    dense.set_shape(static)
    return dense


tensor_conversion.register_tensor_conversion_function(indexed_slices.IndexedSlices, _indexed_slices_to_tensor)


def _sparse_tensor_conversion(value: Any, dtype: Any = None, name: Optional[str] = None,
                              as_ref: bool = False) -> graph_lib.Tensor:
    raise TypeError(
        f"A tf.SparseTensor cannot be used where a dense Tensor is expected ({value}); "
        "pass its .values, or use a sparse op such as tf.nn.embedding_lookup_sparse"
    )


tensor_conversion.register_tensor_conversion_function(sparse_tensor.SparseTensor, _sparse_tensor_conversion)


def concat_grad_of_indexed_slices(op: graph_lib.Operation,
                                  grad: indexed_slices.IndexedSlices) -> list[Any]:
    """A concat's gradient when its output's gradient is an IndexedSlices (a gather of a concatenation,
    such as a PartitionedVariable read whole): each input gets an IndexedSlices of its own rows (TF's rule)."""
    axis = op.get_attr("axis")
    inputs = op.inputs
    sizes = [array_ops.shape(x) for x in inputs]
    grads: list[Any] = []
    if axis == 0:
        index_dtype = grad.indices.dtype.base_dtype
        start: Any = array_ops.constant(0, dtype=index_dtype)
        for size in sizes:
            end = math_ops.add(start, math_ops.cast(indexing_ops.strided_slice_from_key(size, 0), index_dtype))
            inside = math_ops.logical_and(math_ops.greater_equal(grad.indices, start), math_ops.less(grad.indices, end))
            selected = array_ops.squeeze(indexing_ops.where(inside), axis=[1])
            grads.append(indexed_slices.IndexedSlices(
                indexing_ops.gather(grad.values, selected),
                math_ops.subtract(indexing_ops.gather(grad.indices, selected), start), size))
            start = end
        return grads
    rank = grad.values.shape.ndims
    widths = [x.shape[axis].value if x.shape.ndims is not None else None for x in inputs]
    known = [w for w in widths if w is not None]
    if rank is None or len(known) != len(widths):
        return array_ops.concat_grad(op, tensor_conversion.convert_to_tensor(grad))  # type: ignore[no-any-return]
    offset = 0
    for width, size in zip(known, sizes):
        begin, extent = [0] * rank, [-1] * rank
        begin[axis], extent[axis] = offset, width
        grads.append(indexed_slices.IndexedSlices(indexing_ops.slice(grad.values, begin, extent), grad.indices, size))
        offset += width
    return grads


# ---------------------------------------------------------------- unique

op_registry.register_op("Unique")
op_registry.NotDifferentiable("Unique")


def unique(x: Any, out_idx: Any = dtypes.int32, name: Optional[str] = None) -> tuple[graph_lib.Tensor, graph_lib.Tensor]:
    """``(y, idx)``: the distinct elements of the vector ``x`` in order of first appearance, and
    for each element of ``x`` its position in ``y`` (``x == gather(y, idx)``)."""
    t = op_util.to_tensor(x)
    if t.shape.ndims not in (None, 1):
        raise ValueError(f"unique: x {t.name} must be a vector, got shape {t.shape}")
    index_dtype = dtypes.as_dtype(out_idx).base_dtype
    if index_dtype not in op_util.INDICES:
        raise TypeError(f"unique: out_idx must be int32 or int64, got {index_dtype.name}")
    op = op_util.make_op("Unique", [t], [(t.dtype.base_dtype, [None]), (index_dtype, t.shape.with_rank(1))],
                         name or "Unique", {"out_idx": index_dtype.name})
    return op.outputs[0], op.outputs[1]


# ---------------------------------------------------------------- sparse segment reductions

def _segment_count(segment_ids: graph_lib.Tensor, num_segments: Any, dtype: dtypes.DType) -> graph_lib.Tensor:
    ones = array_ops.ones_like(segment_ids, dtype=dtype)
    return indexing_ops.unsorted_segment_sum(ones, segment_ids, num_segments)


def num_segments_of(segment_ids: graph_lib.Tensor, num_segments: Any) -> Any:
    """Sorted segment ids end at the last segment: TF's output has ``max(segment_ids) + 1`` rows."""
    if num_segments is not None:
        return num_segments
    return math_ops.add(math_ops.reduce_max(segment_ids), op_util.to_tensor(1, dtype=segment_ids.dtype.base_dtype))


def _sparse_segment_reduce(data: Any, indices: Any, segment_ids: Any, num_segments: Any, norm: Optional[str],
                           name: Optional[str], default_name: str) -> graph_lib.Tensor:
    d = op_util.to_tensor(data)
    ids = op_util.index_tensor(segment_ids, default_name)
    graph = op_util.graph_of(d)
    with graph.name_scope(name or default_name):
        rows = indexing_ops.gather(d, indices)
        count = num_segments_of(ids, num_segments)
        total = indexing_ops.unsorted_segment_sum(rows, ids, count)
        if norm is None:
            return total
        sizes = math_ops.maximum(_segment_count(ids, count, d.dtype.base_dtype), op_util.to_tensor(1, dtype=d.dtype))
        if norm == "sqrtn":
            sizes = math_ops.sqrt(sizes)
        inner = total.shape.ndims - 1 if total.shape.ndims is not None else None
        if inner is None:
            raise ValueError(f"{default_name}: the rank of data {d.name} must be known")
        return math_ops.truediv(total, array_ops.reshape(sizes, [-1] + [1] * inner))


def sparse_segment_sum(data: Any, indices: Any, segment_ids: Any, name: Optional[str] = None,
                       num_segments: Any = None) -> graph_lib.Tensor:
    """``output[s] = sum(data[indices[j]] for j with segment_ids[j] == s)`` (``tf.sparse.segment_sum``)."""
    return _sparse_segment_reduce(data, indices, segment_ids, num_segments, None, name, "SparseSegmentSum")


def sparse_segment_mean(data: Any, indices: Any, segment_ids: Any, name: Optional[str] = None,
                        num_segments: Any = None) -> graph_lib.Tensor:
    """The mean of each segment's rows (an empty segment gives zeros)."""
    return _sparse_segment_reduce(data, indices, segment_ids, num_segments, "mean", name, "SparseSegmentMean")


def sparse_segment_sqrt_n(data: Any, indices: Any, segment_ids: Any, name: Optional[str] = None,
                          num_segments: Any = None) -> graph_lib.Tensor:
    """Each segment's sum divided by the square root of its number of rows."""
    return _sparse_segment_reduce(data, indices, segment_ids, num_segments, "sqrtn", name, "SparseSegmentSqrtN")


# ---------------------------------------------------------------- SparseTensor inputs

def sparse_placeholder(dtype: Any, shape: Any = None, name: Optional[str] = None) -> sparse_tensor.SparseTensor:
    """A SparseTensor fed at run time with a ``tf.SparseTensorValue`` (``tf.sparse_placeholder``)."""
    static = tensor_shape.as_shape(shape)
    rank = static.ndims
    prefix = name or "Placeholder"
    values = array_ops.placeholder(dtype, [None], name=prefix + "/values")
    indices = array_ops.placeholder(dtypes.int64, [None, rank], name=prefix + "/indices")
    if static.is_fully_defined():
        known = array_ops.constant(np.array(static.as_list(), np.int64))
        dense_shape = array_ops.placeholder_with_default(known, [rank], name=prefix + "/shape")
    else:
        dense_shape = array_ops.placeholder(dtypes.int64, [rank], name=prefix + "/shape")
    return sparse_tensor.SparseTensor(indices, values, dense_shape)
