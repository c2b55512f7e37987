"""The sparse plumbing under TF1's categorical feature columns, composed from the ops layer.

A categorical column's ids are a 2-D ``SparseTensor`` ``[batch, ids per row]``. This module owns
turning a dense feature into one (dropping TF's ignore values: ``''`` for strings, ``-1`` for
integers), dropping ids a lookup could not place (``-1``), and TF's
``safe_embedding_lookup_sparse``: one combined row of a (possibly partitioned) table per example,
zeros for an example without ids, with the table's gradient an ``IndexedSlices`` over the ids used.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import sparse_tensor
from tensorgrid.ops import array_ops
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import embedding_ops
from tensorgrid.ops import embedding_variable_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import logging_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import sparse_ops

COMBINERS = ("mean", "sqrtn", "sum")


def default_ignore_value(dtype: dtypes.DType) -> Any:
    """The value TF1 reads as "no id here" in a dense categorical feature."""
    if dtype.base_dtype == dtypes.string:
        return ""
    if dtype.base_dtype.is_integer:
        return -1
    return np.zeros((), dtype.base_dtype.as_numpy_dtype).item()


def to_sparse_input(value: Any, ignore_value: Any = None) -> sparse_tensor.SparseTensor:
    """``value`` itself if sparse, else its entries other than ``ignore_value`` as a SparseTensor
    (TF's ``_to_sparse_input_and_drop_ignore_values``), in row-major order."""
    if isinstance(value, sparse_tensor.SparseTensor):
        return value
    dense: graph_lib.Tensor = value
    if ignore_value is None:
        ignore_value = default_ignore_value(dense.dtype)
    graph = dense.graph
    with graph.name_scope("to_sparse_input"):
        keep = math_ops.not_equal(dense, array_ops.constant(ignore_value, dtype=dense.dtype.base_dtype,
                                                            name="ignore_value"))
        indices = indexing_ops.where(keep, name="indices")
        flat_positions = array_ops.reshape(indexing_ops.where(array_ops.reshape(keep, [-1])), [-1])
        values = indexing_ops.gather(array_ops.reshape(dense, [-1]), flat_positions, name="values")
        dense_shape = array_ops.shape(dense, out_type=dtypes.int64, name="dense_shape")
        return sparse_tensor.SparseTensor(indices, values, dense_shape)


def as_rank_two(ids: sparse_tensor.SparseTensor, column_name: str) -> sparse_tensor.SparseTensor:
    """``ids`` known to be of rank 2 (``[batch, ids per row]``), the rank the columns here read: a
    static rank other than 2 is a ValueError; an unknown one is checked when the step runs."""
    rank = ids.shape.ndims
    if rank == 2:
        return ids
    if rank is not None:
        raise ValueError(f"feature column {column_name!r}: its ids must be a SparseTensor of rank 2 "
                         f"[batch, ids per row], got rank {rank}; feed rank-1 or rank-2 features")
    rank_now = array_ops.size(ids.dense_shape)
    check = logging_ops.Assert(math_ops.equal(rank_now, array_ops.constant(2, dtype=dtypes.int32)), [
        f"feature column {column_name!r}: its ids must be a SparseTensor of rank 2 [batch, ids per row], got rank",
        rank_now])
    dense_shape = array_ops.reshape(control_flow_ops.with_dependencies([check], ids.dense_shape), [2])
    indices = array_ops.reshape(control_flow_ops.with_dependencies([check], ids.indices), [-1, 2])
    return sparse_tensor.SparseTensor(indices, ids.values, dense_shape)


def retain(sparse: sparse_tensor.SparseTensor, keep: graph_lib.Tensor) -> sparse_tensor.SparseTensor:
    """The entries of ``sparse`` where the bool vector ``keep`` holds (TF's ``sparse_retain``)."""
    positions = array_ops.reshape(indexing_ops.where(keep), [-1])
    return sparse_tensor.SparseTensor(indexing_ops.gather(sparse.indices, positions),
                                      indexing_ops.gather(sparse.values, positions), sparse.dense_shape)


def prune(ids: sparse_tensor.SparseTensor, weights: Optional[sparse_tensor.SparseTensor],
          drop_nonpositive_weights: bool, drop_negative_ids: bool = True
          ) -> tuple[sparse_tensor.SparseTensor, Optional[sparse_tensor.SparseTensor]]:
    """Drops negative ids (a lookup's "not found") and, when asked, entries of weight <= 0, as
    TF's ``_prune_invalid_ids`` and ``_prune_invalid_weights`` do. An embedding variable's ids are
    keys, any int64 (half of the strings' fingerprints are negative): they are kept."""
    conditions = []
    if drop_negative_ids:
        conditions.append(math_ops.greater_equal(ids.values, array_ops.constant(0, dtype=ids.values.dtype.base_dtype)))
    if weights is not None and drop_nonpositive_weights:
        conditions.append(math_ops.greater(weights.values,
                                           array_ops.constant(0, dtype=weights.values.dtype.base_dtype)))
    if not conditions:
        return ids, weights
    keep = conditions[0] if len(conditions) == 1 else math_ops.logical_and(conditions[0], conditions[1])
    return retain(ids, keep), (retain(weights, keep) if weights is not None else None)


def batch_size_of(ids: sparse_tensor.SparseTensor) -> graph_lib.Tensor:
    """The number of rows of ``ids`` (its dense shape's first entry), as int32."""
    return math_ops.cast(indexing_ops.strided_slice_from_key(ids.dense_shape, 0), dtypes.int32)


def static_batch_size(ids: sparse_tensor.SparseTensor) -> Optional[int]:
    """The number of rows of ``ids`` when its dense shape is known when the graph is built."""
    known = indexed_slices.constant_value_as_shape(ids.dense_shape)
    if known.ndims is None or known.ndims < 1:
        return None
    value: Optional[int] = known[0].value
    return value


def row_of_each_id(ids: sparse_tensor.SparseTensor) -> graph_lib.Tensor:
    """The example (row) each id belongs to, as int32 segment ids."""
    return math_ops.cast(indexing_ops.strided_slice_from_key(ids.indices, (slice(None), 0)), dtypes.int32)


def _divide_no_nan(x: graph_lib.Tensor, y: graph_lib.Tensor) -> graph_lib.Tensor:
    is_zero = math_ops.equal(y, array_ops.zeros_like(y))
    quotient = math_ops.truediv(x, indexing_ops.where(is_zero, array_ops.ones_like(y), y))
    return indexing_ops.where(array_ops.broadcast_to(is_zero, array_ops.shape(quotient)),
                              array_ops.zeros_like(quotient), quotient)


def safe_embedding_lookup_sparse(params: Any, ids: sparse_tensor.SparseTensor,
                                 weights: Optional[sparse_tensor.SparseTensor], combiner: str,
                                 column_name: str, max_norm: Any = None) -> graph_lib.Tensor:
    """``[batch, dimension]``: per example, the ``combiner`` of the rows of ``params`` at its ids
    (weighted by ``weights`` when given); an example without valid ids gives a row of zeros.

    ``params`` is a variable, a list of shards or a PartitionedVariable: the rows are looked up
    where each shard lives, and the gradient to the shards is sparse.
    """
    if combiner not in COMBINERS:
        raise ValueError(f"combiner must be one of {COMBINERS}, got {combiner!r}")
    ids = as_rank_two(ids, column_name)
    combined = _combine_rows(params, ids, weights, combiner, max_norm)
    combined.set_shape([static_batch_size(ids), None])
    return combined


def _combine_rows(params: Any, ids: sparse_tensor.SparseTensor, weights: Optional[sparse_tensor.SparseTensor],
                  combiner: str, max_norm: Any) -> graph_lib.Tensor:
    if weights is not None and weights.values.dtype.base_dtype != dtypes.float32:
        weights = sparse_tensor.SparseTensor(weights.indices, math_ops.cast(weights.values, dtypes.float32),
                                             weights.dense_shape)
    ids = sparse_tensor.SparseTensor(ids.indices, math_ops.cast(ids.values, dtypes.int64), ids.dense_shape)
    is_embedding_variable = isinstance(params, (embedding_variable_ops.EmbeddingVariable,
                                                embedding_variable_ops.PartitionedEmbeddingVariable))
    ids, weights = prune(ids, weights, drop_nonpositive_weights=combiner != "sum",
                         drop_negative_ids=not is_embedding_variable)
    batch_size = batch_size_of(ids)
    segments = row_of_each_id(ids)
    unique_ids, position_in_unique = sparse_ops.unique(ids.values)
    # A partitioner's shards hold contiguous rows: TF's feature columns look them up with "div".
    rows = embedding_ops.embedding_lookup(params, unique_ids, partition_strategy="div", max_norm=max_norm)
    if weights is None:
        reduce = {"sum": sparse_ops.sparse_segment_sum, "mean": sparse_ops.sparse_segment_mean,
                  "sqrtn": sparse_ops.sparse_segment_sqrt_n}[combiner]
        return reduce(rows, position_in_unique, segments, num_segments=batch_size)
    weight_column = array_ops.reshape(weights.values, [-1, 1])
    weighted = math_ops.multiply(indexing_ops.gather(rows, position_in_unique), weight_column)
    total = indexing_ops.unsorted_segment_sum(weighted, segments, batch_size)
    if combiner == "sum":
        return total
    if combiner == "mean":
        return _divide_no_nan(total, indexing_ops.unsorted_segment_sum(weight_column, segments, batch_size))
    squares = indexing_ops.unsorted_segment_sum(math_ops.square(weight_column), segments, batch_size)
    return _divide_no_nan(total, math_ops.sqrt(squares))


def indicator_counts(ids: sparse_tensor.SparseTensor, weights: Optional[sparse_tensor.SparseTensor],
                     num_buckets: int, column_name: str) -> graph_lib.Tensor:
    """``[batch, num_buckets]`` float32: how often each id occurs in each example (or the sum of its
    weights), what TF1's ``indicator_column`` gives; ids outside ``[0, num_buckets)`` count nowhere."""
    ids = as_rank_two(ids, column_name)
    one_hot = indexing_ops.one_hot(math_ops.cast(ids.values, dtypes.int64), num_buckets, on_value=1.0,
                                   off_value=0.0, dtype=dtypes.float32)
    if weights is not None:
        one_hot = math_ops.multiply(one_hot, array_ops.reshape(math_ops.cast(weights.values, dtypes.float32), [-1, 1]))
    counts = indexing_ops.unsorted_segment_sum(one_hot, row_of_each_id(ids), batch_size_of(ids))
    counts.set_shape([static_batch_size(ids), num_buckets])
    return counts
