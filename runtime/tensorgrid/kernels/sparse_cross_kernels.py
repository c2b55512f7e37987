"""The kernel of ``SparseCross``: each row's combinations of one feature per input.

Inputs are ``N`` sparse inputs (their indices, values and dense shapes) then the dense
matrices. A row's combinations are ordered as TensorFlow's product iterator orders them (the
last input varies fastest), and a row where any input has no feature has no cross. The hashed
cross folds each feature's hash into ``hash_key`` with ``FingerprintCat64``, vectorised over
all combinations of the batch at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels import hash_functions
from tensorgrid.kernels.registry import register_kernel

_INT64_MAX = np.uint64(2 ** 63 - 1)


class _Column:
    """One input's features, grouped by row: ``values[starts[r]:starts[r] + counts[r]]``."""

    def __init__(self, values: Any, rows: Any, batch_size: int) -> None:
        order = np.argsort(rows, kind="stable")
        self.values = np.asarray(values)[order]
        self.counts = np.bincount(rows, minlength=batch_size)[:batch_size].astype(np.int64)
        self.starts = np.cumsum(self.counts) - self.counts

    def hashes(self) -> np.ndarray:
        if self.values.dtype == object:
            return hash_functions.fingerprint64(self.values.tolist())
        return self.values.astype(np.int64).astype(np.uint64)

    def texts(self) -> list[bytes]:
        if self.values.dtype == object:
            return list(self.values.tolist())
        return [str(v).encode() for v in self.values.tolist()]


def _columns(k: context.KernelContext, inputs: tuple[Any, ...]) -> tuple[list[_Column], int]:
    n_sparse, n_dense = int(k.attrs["N"]), int(k.attrs["num_dense"])
    indices, values, shapes = inputs[:n_sparse], inputs[n_sparse:2 * n_sparse], inputs[2 * n_sparse:3 * n_sparse]
    dense = inputs[3 * n_sparse:3 * n_sparse + n_dense]
    sizes = [int(np.asarray(s)[0]) for s in shapes] + [int(np.asarray(d).shape[0]) for d in dense]
    for index, shape in zip(indices, shapes):
        if np.asarray(index).ndim != 2 or np.asarray(index).shape[1] != 2 or np.asarray(shape).shape != (2,):
            raise errors.InvalidArgumentError(
                None, None, f"Sparse inputs of a sparse cross must be matrices: indices {np.asarray(index).shape}, "
                f"dense shape {np.asarray(shape).tolist()}")
    for matrix in dense:
        if np.asarray(matrix).ndim != 2:
            raise errors.InvalidArgumentError(
                None, None, f"Dense inputs should be a matrix but received shape {list(np.asarray(matrix).shape)}")
    if len(set(sizes)) != 1:
        raise errors.InvalidArgumentError(None, None, f"Inputs of a sparse cross have batch sizes {sizes}: they "
                                          "must all be the same")
    batch_size = sizes[0]
    for index in indices:
        rows = np.asarray(index)[:, 0]
        if rows.size and (rows.min() < 0 or rows.max() >= batch_size):
            raise errors.InvalidArgumentError(
                None, None, f"Sparse input of a sparse cross has a row index {int(rows.max())} or {int(rows.min())} "
                f"outside its batch of {batch_size} rows")
    columns = [_Column(v, np.asarray(i)[:, 0], batch_size) for i, v in zip(indices, values)]
    for matrix in dense:
        array = np.asarray(matrix)
        columns.append(_Column(array.reshape(-1), np.repeat(np.arange(batch_size), array.shape[1]), batch_size))
    return columns, batch_size


@register_kernel("SparseCross", host_only=True)
def _sparse_cross(k: context.KernelContext, step: context.StepContext, *inputs: Any) -> Any:
    columns, batch_size = _columns(k, inputs)
    counts = np.stack([c.counts for c in columns])
    crosses_per_row = np.prod(counts, axis=0)
    picks: list[list[Any]] = [[] for _ in columns]
    out_rows, out_positions = [], []
    for row in np.nonzero(crosses_per_row)[0].tolist():
        combination = np.unravel_index(np.arange(crosses_per_row[row]), tuple(counts[:, row]))
        for column, chosen, pick in zip(columns, combination, picks):
            pick.append(column.starts[row] + chosen)
        out_rows.append(np.full(crosses_per_row[row], row, dtype=np.int64))
        out_positions.append(np.arange(crosses_per_row[row], dtype=np.int64))
    chosen_per_column = [np.concatenate(p) if p else np.zeros(0, np.int64) for p in picks]
    indices = np.stack([np.concatenate(out_rows) if out_rows else np.zeros(0, np.int64),
                        np.concatenate(out_positions) if out_positions else np.zeros(0, np.int64)], axis=1)
    dense_shape = np.asarray([batch_size, int(crosses_per_row.max()) if batch_size else 0], dtype=np.int64)
    if k.attrs["hashed_output"]:
        hashed = np.full(len(indices), np.uint64(int(k.attrs["hash_key"]) & 0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
        for column, chosen in zip(columns, chosen_per_column):
            hashed = hash_functions.fingerprint_cat64(hashed, column.hashes()[chosen])
        buckets = np.uint64(k.attrs["num_buckets"]) if k.attrs["num_buckets"] > 0 else _INT64_MAX
        return indices, (hashed % buckets).astype(np.int64), dense_shape
    separator = k.attrs["separator"].encode()
    texts = [column.texts() for column in columns]
    joined = np.empty(len(indices), dtype=object)
    joined[:] = [separator.join(t[i] for t, i in zip(texts, at))
                 for at in zip(*(c.tolist() for c in chosen_per_column))]
    return indices, joined, dense_shape
