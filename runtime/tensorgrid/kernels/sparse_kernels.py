"""Kernels of the ops that route rows by index: unique, dynamic_partition, dynamic_stitch.

They are what a lookup in a sharded embedding table runs: the ids are split by shard
(``DynamicPartition``), each shard gathers its rows, and the rows are put back in the
ids' order (``DynamicStitch``). Indices are checked, so a bad one is an
InvalidArgumentError naming it rather than a wrapped read.
"""

from __future__ import annotations

from typing import Any

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels.registry import register_kernel


@register_kernel("Unique")
def _unique(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    xp = k.xp
    values, first, inverse = xp.unique(x, return_index=True, return_inverse=True)
    # numpy sorts the distinct values; TF lists them in order of first appearance.
    order = xp.argsort(first)
    position = xp.empty_like(order)
    position[order] = xp.arange(order.shape[0])
    index_dtype = k.output_dtypes[1]
    return values[order], position[inverse.reshape(-1)].astype(index_dtype, copy=False)


@register_kernel("DynamicPartition")
def _dynamic_partition(k: context.KernelContext, step: context.StepContext, data: Any, partitions: Any) -> Any:
    count = k.attrs["num_partitions"]
    if data.shape[:partitions.ndim] != partitions.shape:
        raise errors.InvalidArgumentError(
            None, None,
            f"data.shape must start with partitions.shape, got data.shape = {list(data.shape)}, "
            f"partitions.shape = {list(partitions.shape)} (op {k.name})",
        )
    flat = partitions.reshape(-1)
    rows = data.reshape((flat.shape[0],) + data.shape[partitions.ndim:])
    if flat.size:
        low, high = int(flat.min()), int(flat.max())
        if low < 0 or high >= count:
            bad = low if low < 0 else high
            raise errors.InvalidArgumentError(
                None, None, f"partitions has the value {bad}, which is not in [0, {count}) (op {k.name})")
    return tuple(rows[flat == p] for p in range(count))


@register_kernel("DynamicStitch", "ParallelDynamicStitch")
def _dynamic_stitch(k: context.KernelContext, step: context.StepContext, *inputs: Any) -> Any:
    half = len(inputs) // 2
    indices, data = inputs[:half], inputs[half:]
    inner = None
    for i, (index, rows) in enumerate(zip(indices, data)):
        if rows.shape[:index.ndim] != index.shape:
            raise errors.InvalidArgumentError(
                None, None,
                f"data[{i}].shape = {list(rows.shape)} does not start with indices[{i}].shape = "
                f"{list(index.shape)} (op {k.name})",
            )
        tail = rows.shape[index.ndim:]
        if inner is not None and tail != inner:
            raise errors.InvalidArgumentError(
                None, None, f"data[{i}] has element shape {list(tail)}, data[0] has {list(inner)} (op {k.name})")
        inner = tail
    flat_indices = [index.reshape(-1) for index in indices]
    size = max((int(index.max()) + 1 for index in flat_indices if index.size), default=0)
    if any(index.size and int(index.min()) < 0 for index in flat_indices):
        raise errors.InvalidArgumentError(None, None, f"indices must be >= 0 (op {k.name})")
    result = k.xp.zeros((size,) + tuple(inner or ()), dtype=k.output_dtypes[0])
    for index, rows in zip(flat_indices, data):
        # Later inputs win where indices repeat, as in TF.
        result[index] = rows.reshape((index.shape[0],) + tuple(inner or ()))
    return result
