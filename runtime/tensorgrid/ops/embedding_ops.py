"""Embedding lookups in tables that may be split into shards, and the routing ops they use.

``tf.nn.embedding_lookup(params, ids)`` with ``params`` a list of shards (or a
PartitionedVariable) maps each id to a shard and a row in it exactly as TF does:
``"mod"``: shard ``id % n``, row ``id // n``; ``"div"``: contiguous blocks, the first
``total % n`` shards one row longer. ``dynamic_partition`` splits the ids by shard,
each shard gathers its rows next to the shard (on its parameter server), and
``dynamic_stitch`` puts the rows back in the ids' order. So only the looked-up rows
travel, and the gradient reaches each shard as an IndexedSlices of its rows.

``embedding_lookup_sparse`` combines the rows of each example's ids (a SparseTensor)
by "sum", "mean" or "sqrtn", optionally weighted.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import sparse_tensor
from tensorgrid.framework import tensor_conversion
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import embedding_variable_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import partitioned_variables
from tensorgrid.ops import sparse_ops

for _op_type in ("DynamicPartition", "DynamicStitch", "ParallelDynamicStitch"):
    op_registry.register_op(_op_type)


# ---------------------------------------------------------------- dynamic_partition, dynamic_stitch

def dynamic_partition(data: Any, partitions: Any, num_partitions: int,
                      name: Optional[str] = None) -> list[graph_lib.Tensor]:
    """``num_partitions`` tensors: output ``p`` holds the slices ``data[j]`` with ``partitions[j] == p``, in order."""
    d = op_util.to_tensor(data)
    p = op_util.index_tensor(partitions, "DynamicPartition")
    if p.dtype.base_dtype != dtypes.int32:
        raise TypeError(f"dynamic_partition: partitions {p.name} must be int32, got {p.dtype.base_dtype.name}")
    count = int(num_partitions)
    if count < 1:
        raise ValueError(f"dynamic_partition: num_partitions must be >= 1, got {count}")
    if d.shape.ndims is not None and p.shape.ndims is not None:
        if not d.shape[:p.shape.ndims].is_compatible_with(p.shape):
            raise ValueError(f"dynamic_partition: the shape {p.shape} of partitions {p.name} must be a prefix of "
                             f"the shape {d.shape} of data {d.name}")
        part = tensor_shape.TensorShape([None]).concatenate(d.shape[p.shape.ndims:])
    else:
        part = tensor_shape.unknown_shape()
    op = op_util.make_op("DynamicPartition", [d, p], [(d.dtype.base_dtype, part)] * count,
                         name or "DynamicPartition", {"num_partitions": count})
    return op.outputs


@op_registry.RegisterGradient("DynamicPartition")
def _dynamic_partition_grad(op: graph_lib.Operation, *grads: Any) -> list[Any]:
    data, partitions = op.inputs
    prefix = array_ops.shape(partitions)
    positions = array_ops.reshape(math_ops.range(math_ops.reduce_prod(prefix)), prefix)
    routed = dynamic_partition(positions, partitions, op.get_attr("num_partitions"))
    return [array_ops.reshape(parallel_dynamic_stitch(routed, list(grads)), array_ops.shape(data)), None]


def _stitch(op_type: str, indices: Any, data: Any, name: Optional[str]) -> graph_lib.Tensor:
    if len(indices) != len(data) or not indices:
        raise ValueError(f"dynamic_stitch: needs as many indices as data tensors (at least one), "
                         f"got {len(indices)} and {len(data)}")
    index_tensors = [op_util.index_tensor(i, op_type) for i in indices]
    for i in index_tensors:
        if i.dtype.base_dtype != dtypes.int32:
            raise TypeError(f"dynamic_stitch: indices {i.name} must be int32, got {i.dtype.base_dtype.name}")
    data_tensors = op_util.convert_like_first_tensor(list(data), "dynamic_stitch")
    dtype = op_util.check_same_dtype(op_type, *data_tensors)
    inner = tensor_shape.unknown_shape()
    for i, d in zip(index_tensors, data_tensors):
        if d.shape.ndims is not None and i.shape.ndims is not None:
            if not d.shape[:i.shape.ndims].is_compatible_with(i.shape):
                raise ValueError(f"dynamic_stitch: the shape {i.shape} of indices {i.name} must be a prefix of "
                                 f"the shape {d.shape} of data {d.name}")
            tail = d.shape[i.shape.ndims:]
            if not inner.is_compatible_with(tail):
                raise ValueError(f"dynamic_stitch: data {d.name} has element shape {tail}, others {inner}")
            inner = inner.merge_with(tail)
    shape = tensor_shape.TensorShape([None]).concatenate(inner) if inner.ndims is not None else inner
    return op_util.make_tensor(op_type, index_tensors + data_tensors, dtype, shape, name or op_type)


def dynamic_stitch(indices: Any, data: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """``merged[indices[m][i]] = data[m][i]``: interleaves the data tensors back into one (``tf.dynamic_stitch``)."""
    return _stitch("DynamicStitch", indices, data, name)


def parallel_dynamic_stitch(indices: Any, data: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    """``dynamic_stitch`` for indices that do not repeat (what ``embedding_lookup`` uses)."""
    return _stitch("ParallelDynamicStitch", indices, data, name)


def _dynamic_stitch_grad(op: graph_lib.Operation, grad: Any) -> list[Any]:
    half = len(op.inputs) // 2
    positions = [math_ops.cast(i, dtypes.int32) for i in op.inputs[:half]]
    return [None] * half + [indexing_ops.gather(grad, p) for p in positions]


op_registry.RegisterGradient("DynamicStitch")(_dynamic_stitch_grad)
op_registry.RegisterGradient("ParallelDynamicStitch")(_dynamic_stitch_grad)


# ---------------------------------------------------------------- embedding_lookup

@contextlib.contextmanager
def _colocate_with(graph: graph_lib.Graph, param: Any) -> Iterator[None]:
    """The ops inside run where ``param`` lives (its parameter server)."""
    with graph.colocate_with(tensor_conversion.convert_to_tensor(param).op):
        yield


def _clip(params: graph_lib.Tensor, ids: graph_lib.Tensor, max_norm: Any) -> graph_lib.Tensor:
    """Rows whose L2 norm exceeds ``max_norm`` are scaled down to it (TF's ``_clip``)."""
    if max_norm is None:
        return params
    if ids.shape.ndims is None or params.shape.ndims is None:
        raise ValueError("embedding_lookup: max_norm needs ids and params of known rank")
    return math_ops.clip_by_norm(params, max_norm, axes=list(range(ids.shape.ndims, params.shape.ndims)))


def _as_shards(params: Any) -> list[Any]:
    if params is None:
        raise ValueError("params must be specified")
    if isinstance(params, (list, tuple)) and not params:
        raise ValueError("Length of params is currently 0. Need at least one param.")
    if isinstance(params, partitioned_variables.PartitionedVariable):
        return list(params)
    return list(params) if isinstance(params, (list, tuple)) else [params]


def embedding_lookup(params: Any, ids: Any, partition_strategy: str = "mod", name: Optional[str] = None,
                     validate_indices: bool = True, max_norm: Any = None) -> graph_lib.Tensor:
    """The rows of the (possibly sharded) table ``params`` at ``ids``; shape ``ids.shape + row shape``."""
    if isinstance(params, (list, tuple)) and len(params) == 1:
        params = params[0]
    if isinstance(params, embedding_variable_ops.EmbeddingVariable):
        with params.graph.as_default(), params.graph.name_scope(name or "embedding_lookup") as scope:
            id_tensor = tensor_conversion.convert_to_tensor(ids, name="ids")
            return _clip(params.sparse_read(id_tensor, name=scope), id_tensor, max_norm)
    table_parts = _embedding_variable_parts(params)
    if table_parts is not None:
        return _lookup_in_parts(table_parts, ids, name, max_norm)
    shards = _as_shards(params)
    graph = op_util.graph_of(shards, ids)
    with graph.as_default(), graph.name_scope(name or "embedding_lookup") as scope:
        shards = [tensor_conversion.convert_to_tensor(p, name="params") for p in shards]
        id_tensor = tensor_conversion.convert_to_tensor(ids, name="ids")
        if len(shards) == 1:
            with _colocate_with(graph, shards[0]):
                result = _clip(indexing_ops.gather(shards[0], id_tensor, name=scope), id_tensor, max_norm)
            return array_ops.identity(result)
        flat_ids = array_ops.reshape(id_tensor, [-1])
        original_indices = math_ops.range(array_ops.size(flat_ids))
        shard_of, row_in_shard = _assign_to_shards(shards, flat_ids, partition_strategy)
        shard_of = math_ops.cast(shard_of, dtypes.int32)
        gather_ids = dynamic_partition(row_in_shard, shard_of, len(shards))
        positions = dynamic_partition(original_indices, shard_of, len(shards))
        rows = []
        for shard, shard_ids in zip(shards, gather_ids):
            with graph.device(None), _colocate_with(graph, shard):
                rows.append(indexing_ops.gather(shard, shard_ids))
        stitched = parallel_dynamic_stitch(positions, rows, name=scope)
        element_shape = shards[0].shape[1:]
        for shard in shards[1:]:
            element_shape = element_shape.merge_with(shard.shape[1:])
        if element_shape.is_fully_defined():
            dynamic_element_shape: Any = array_ops.constant(element_shape.as_list(), dtype=dtypes.int32)
        else:
            with _colocate_with(graph, shards[0]):
                dynamic_element_shape = indexing_ops.strided_slice_from_key(array_ops.shape(shards[0]), slice(1, None))
        result = array_ops.reshape(stitched, array_ops.concat([array_ops.shape(id_tensor), dynamic_element_shape], 0))
        result.set_shape(id_tensor.shape.concatenate(element_shape))
        return _clip(result, id_tensor, max_norm)


def _embedding_variable_parts(params: Any) -> Optional[list[embedding_variable_ops.EmbeddingVariable]]:
    """The parts of a partitioned embedding variable (or a list of embedding variables), else None."""
    if isinstance(params, embedding_variable_ops.PartitionedEmbeddingVariable):
        return list(params.parts)
    if isinstance(params, (list, tuple)) and params and \
            all(isinstance(p, embedding_variable_ops.EmbeddingVariable) for p in params):
        return list(params)
    return None


def _lookup_in_parts(parts: list[embedding_variable_ops.EmbeddingVariable], ids: Any, name: Optional[str],
                     max_norm: Any) -> graph_lib.Tensor:
    """Each id's row from the part its hash names: the ids split by part, one gather next to each part
    (on its PS), the rows stitched back in the ids' order."""
    graph = parts[0].graph
    with graph.as_default(), graph.name_scope(name or "embedding_lookup") as scope:
        id_tensor = tensor_conversion.convert_to_tensor(ids, name="ids")
        keys = parts[0].keys_of(id_tensor)
        if len(parts) == 1:
            return _clip(parts[0].gather_keys(keys, name=scope), id_tensor, max_norm)
        flat_ids = array_ops.reshape(keys, [-1])
        part_of = embedding_variable_ops.partition_of_ids(flat_ids, len(parts))
        ids_by_part = dynamic_partition(flat_ids, part_of, len(parts))
        positions = dynamic_partition(math_ops.range(array_ops.size(flat_ids)), part_of, len(parts))
        rows = []
        for part, part_ids in zip(parts, ids_by_part):
            with graph.device(None):
                rows.append(part.gather_keys(part_ids))
        stitched = parallel_dynamic_stitch(positions, rows)
        dim = parts[0].embedding_dim
        result = array_ops.reshape(stitched, array_ops.concat(
            [array_ops.shape(id_tensor), array_ops.constant([dim], dtype=dtypes.int32)], 0), name=scope)
        result.set_shape(id_tensor.shape.concatenate([dim]))
        return _clip(result, id_tensor, max_norm)


def _assign_to_shards(shards: list[graph_lib.Tensor], flat_ids: graph_lib.Tensor,
                      partition_strategy: str) -> tuple[graph_lib.Tensor, graph_lib.Tensor]:
    """(shard of each id, row of each id in its shard) for TF's "mod" and "div" strategies."""
    count = len(shards)
    mod, div = math_ops.floormod, math_ops.floordiv
    if partition_strategy == "mod":
        return mod(flat_ids, count), div(flat_ids, count)
    if partition_strategy != "div":
        raise ValueError(f"Unrecognized partition strategy: {partition_strategy}. Must be one of either `mod` or `div`.")
    sizes = [shard.shape[0].value if shard.shape.ndims else None for shard in shards]
    id_dtype = flat_ids.dtype.base_dtype
    known = [size for size in sizes if size is not None]
    if len(known) == count:
        total: Any = array_ops.constant(sum(known), dtype=id_dtype)
    else:
        dynamic = []
        for shard, size in zip(shards, sizes):
            if size is not None:
                dynamic.append(array_ops.constant(size, dtype=dtypes.int32))
            else:
                with _colocate_with(shard.graph, shard):
                    dynamic.append(indexing_ops.strided_slice_from_key(array_ops.shape(shard), 0))
        total = math_ops.reduce_sum(math_ops.cast(array_ops.stack(dynamic), id_dtype))
    ids_per_shard = div(total, count)
    extras = mod(total, count)
    longer = math_ops.add(ids_per_shard, 1)
    # The first `extras` shards hold `ids_per_shard + 1` ids each, the others `ids_per_shard`.
    shifted = math_ops.subtract(flat_ids, extras)
    shard_of = math_ops.maximum(div(flat_ids, longer), div(shifted, ids_per_shard))
    row = indexing_ops.where(math_ops.less(shard_of, extras), mod(flat_ids, longer), mod(shifted, ids_per_shard))
    return shard_of, row


# ---------------------------------------------------------------- embedding_lookup_sparse

def _segment_sum(data: graph_lib.Tensor, segment_ids: graph_lib.Tensor) -> graph_lib.Tensor:
    """Sums rows by sorted segment id; ``max(segment_ids) + 1`` rows, as TF's ``segment_sum``."""
    return indexing_ops.unsorted_segment_sum(data, segment_ids, sparse_ops.num_segments_of(segment_ids, None))


def _divide_no_nan(x: graph_lib.Tensor, y: graph_lib.Tensor) -> graph_lib.Tensor:
    """``x / y``, 0 where ``y == 0`` (and no NaN in the gradient there either)."""
    zero = array_ops.zeros_like(y)
    is_zero = math_ops.equal(y, zero)
    safe = indexing_ops.where(is_zero, array_ops.ones_like(y), y)
    quotient = math_ops.truediv(x, safe)
    return indexing_ops.where(array_ops.broadcast_to(is_zero, array_ops.shape(quotient)), array_ops.zeros_like(quotient),
                           quotient)


def embedding_lookup_sparse(params: Any, sp_ids: sparse_tensor.SparseTensor, sp_weights: Any,
                            partition_strategy: str = "mod", name: Optional[str] = None,
                            combiner: Optional[str] = None, max_norm: Any = None) -> graph_lib.Tensor:
    """One combined embedding per row of ``sp_ids``: the sum, mean or sqrtn-scaled sum of its ids' rows,
    weighted by ``sp_weights`` (a SparseTensor like ``sp_ids``) unless it is None.

    The result has ``max(row with an id) + 1`` rows, as in TF.
    """
    combiner = "mean" if combiner is None else combiner
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError(f"combiner must be one of 'mean', 'sqrtn' or 'sum', got {combiner}")
    shards = _as_shards(params)
    if not isinstance(sp_ids, sparse_tensor.SparseTensor):
        raise TypeError(f"sp_ids must be SparseTensor, got {type(sp_ids)}")
    ignore_weights = sp_weights is None
    if not ignore_weights and not isinstance(sp_weights, sparse_tensor.SparseTensor):
        raise TypeError(f"sp_weights must be either None or SparseTensor, got {type(sp_weights)}")
    graph = sp_ids.graph
    with graph.as_default(), graph.name_scope(name or "embedding_lookup_sparse"):
        segment_ids = indexing_ops.strided_slice_from_key(sp_ids.indices, (slice(None), 0))
        ids = sp_ids.values
        is_table = _embedding_variable_parts(shards) is not None or \
            isinstance(shards[0], embedding_variable_ops.PartitionedEmbeddingVariable)
        single = tensor_conversion.convert_to_tensor(shards[0]) if len(shards) == 1 and not is_table else None
        if single is not None and single.device == segment_ids.device and max_norm is None and ignore_weights:
            idx, embeddings = ids, single
        else:
            ids, idx = sparse_ops.unique(ids)
            embeddings = embedding_lookup(shards[0] if is_table and len(shards) == 1 else shards, ids,
                                          partition_strategy=partition_strategy, max_norm=max_norm)
        if ignore_weights:
            reduce = {"sum": sparse_ops.sparse_segment_sum, "mean": sparse_ops.sparse_segment_mean,
                      "sqrtn": sparse_ops.sparse_segment_sqrt_n}[combiner]
            return reduce(embeddings, idx, segment_ids)
        weights = sp_weights.values
        rows = indexing_ops.gather(embeddings, idx)
        if weights.dtype.base_dtype != rows.dtype.base_dtype:
            weights = math_ops.cast(weights, rows.dtype.base_dtype)
        inner = (rows.shape.ndims or 2) - 1
        column = array_ops.reshape(weights, [-1] + [1] * inner)
        total = _segment_sum(math_ops.multiply(rows, column), segment_ids)
        if combiner == "sum":
            return total
        squared = column if combiner == "mean" else math_ops.square(column)
        norm = _segment_sum(squared, segment_ids)
        return _divide_no_nan(total, norm if combiner == "mean" else math_ops.sqrt(norm))
