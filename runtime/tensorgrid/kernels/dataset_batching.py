"""Batching kernels beyond stacking: ``padded_batch``, and the SparseTensor components of ``batch``.

Each component is padded to its padded shape, a dimension given as -1 taking the
largest size in the batch, with that component's padding value. An element larger
than a fixed padded dimension is an InvalidArgumentError naming both sizes. A batch
of SparseTensors (each its indices, values and dense shape) is one SparseTensor of one
more dimension: its indices prefixed by the element's position, its dense shape the
batch's largest in each dimension, as TensorFlow batches them.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator, Sequence

import numpy as np

from tensorgrid.framework import errors


def _padded(values: list[Any], shape: Sequence[int], pad: Any, component: int) -> Any:
    arrays = [np.asarray(v) for v in values]
    for i, array in enumerate(arrays):
        if array.ndim != len(shape):
            raise errors.InvalidArgumentError(
                None, None, f"padded_batch: element {i} of component {component} has rank {array.ndim}, "
                f"the padded shape {list(shape)} has rank {len(shape)}")
    target = [max((a.shape[d] for a in arrays), default=0) if size < 0 else size for d, size in enumerate(shape)]
    for i, array in enumerate(arrays):
        for d, (have, want) in enumerate(zip(array.shape, target)):
            if have > want:
                raise errors.InvalidArgumentError(
                    None, None, "Attempted to pad to a smaller size than the input element: component "
                    f"{component} of element {i} has size {have} in dimension {d}, the padded shape {want}")
    batch = np.full([len(arrays), *target], pad, dtype=arrays[0].dtype if pad.dtype != object else object)
    for i, array in enumerate(arrays):
        region: tuple[Any, ...] = (i, *[slice(0, n) for n in array.shape])
        batch[region] = array
    return batch


def padded_batches(elements: Iterator[list[Any]], size: int, drop_remainder: bool, shapes: Sequence[Sequence[int]],
                   pads: Sequence[Any]) -> Iterator[list[Any]]:
    while True:
        batch = list(itertools.islice(elements, size))
        if not batch or (drop_remainder and len(batch) < size):
            return
        yield [_padded([element[c] for element in batch], shapes[c], pads[c], c) for c in range(len(shapes))]


def sparse_batch(elements: list[Sequence[Any]]) -> list[np.ndarray]:
    """(indices, values, dense_shape) of a batch of SparseTensor elements, each (indices, values, dense_shape)."""
    ranks = {int(np.asarray(shape).shape[0]) for _, _, shape in elements}
    if len(ranks) != 1:
        raise errors.InvalidArgumentError(None, None, f"Cannot batch SparseTensors of different ranks: {sorted(ranks)}")
    rank = ranks.pop()
    indices = [np.asarray(i, dtype=np.int64).reshape(-1, rank) for i, _, _ in elements]
    positions = np.repeat(np.arange(len(elements), dtype=np.int64), [len(i) for i in indices])
    batched = np.concatenate([positions[:, None], np.concatenate(indices)], axis=1)
    values = np.concatenate([np.asarray(v).reshape(-1) for _, v, _ in elements])
    largest = np.max(np.stack([np.asarray(shape, dtype=np.int64) for _, _, shape in elements]), axis=0)
    return [batched, values, np.concatenate([[len(elements)], largest]).astype(np.int64)]
