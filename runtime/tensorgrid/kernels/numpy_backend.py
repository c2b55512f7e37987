"""The CPU backend: numpy arrays in host memory, the size of its BLAS thread pool, and
how the C allocator keeps freed memory for the next step."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from typing import Any, Optional, Sequence

import numpy as np

from tensorgrid.kernels import backend


class NumpyBackend(backend.Backend):
    name = "numpy"
    device_type = "CPU"
    xp = np

    def asarray(self, value: Any, dtype: Any = None) -> Any:
        return np.asarray(value, dtype=dtype)

    def to_numpy(self, array: Any) -> np.ndarray:
        return np.asarray(array)

    def is_native(self, value: Any) -> bool:
        return isinstance(value, (np.ndarray, np.generic))

    def scatter_add(self, target: Any, indices: Any, updates: Any) -> None:
        indices = np.asarray(indices)
        updates = np.asarray(updates)
        by_rows = (indices.ndim == 1 and indices.size > 1 and updates.shape == indices.shape + target.shape[1:]
                   and updates.size >= indices.size * SORTED_SUMS_FROM_ROW_SIZE and int(indices.min()) >= 0)
        if not by_rows:
            np.add.at(target, indices, updates)
            return
        unique, sums = sorted_segment_sums(indices, updates)
        target[unique] += sums

    def take_rows(self, table: Any, rows: Any) -> Any:
        return table.take(rows, axis=0)  # 2-4x faster than table[rows] for a few hundred rows

    def put_rows(self, table: Any, rows: Any, values: Any) -> None:
        row_bytes = table.itemsize * (table.size // table.shape[0]) if table.shape[0] else 0
        if (row_bytes >= WHOLE_ROW_WRITES_FROM_BYTES and table.flags.c_contiguous
                and values.flags.c_contiguous and values.dtype == table.dtype):
            whole_row = np.dtype((np.void, row_bytes))
            by_row = table.reshape(table.shape[0], -1).view(whole_row).reshape(-1)
            by_row[rows] = values.reshape(values.shape[0], -1).view(whole_row).reshape(-1)
        else:
            table[rows] = values

    def unique_sums(self, indices: Any, rows: Any) -> tuple[Any, Any]:
        return sorted_segment_sums(np.asarray(indices).reshape(-1), np.asarray(rows))

    def random_generator(self, seed: Optional[Sequence[int]]) -> Any:
        return np.random.default_rng(seed)


_blas_threads: Optional[int] = None
"""The limit ``limit_threads`` last set: the BLAS pool is one per process, as TF's default
intra-op pool is one per process (sized by whoever creates it first)."""


WHOLE_ROW_WRITES_FROM_BYTES = 128
"""Rows of at least this many bytes are written as one opaque element each (a 1-D view of
the table with one np.void element per row), 15-25% faster than numpy's fancy assignment of
2-D rows at 64 floats; narrower rows gain nothing."""


SORTED_SUMS_FROM_ROW_SIZE = 8
"""Rows of at least this many elements are summed by sorting; narrower ones (a wide model's
1-wide weights) by ``np.add.at``, whose one-element loop is as fast there."""


def sorted_segment_sums(indices: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values of the 1-D ``indices``, sorted; the sum of the ``rows`` of each).

    ``np.add.at`` adds one row at a time through a slow general loop (0.7 ms for the 1024 x 64
    gradient rows of a wide-and-deep step). Here the rows are sorted by index (stably, so each
    sum adds its rows in their order), a row whose index occurs once is copied, and only the
    runs of repeated indices are summed, by one ``np.add.reduceat`` (4-5x faster there).
    Sums may differ from ``np.add.at``'s in the last bits: reduceat adds pairwise.
    """
    if indices.size == 0:
        return indices.copy(), rows[:0].copy()
    # take() rather than fancy indexing: the same rows, several times faster for these sizes.
    order = np.argsort(indices, kind="stable")
    ordered_indices = indices.take(order)
    starts_run = np.empty(ordered_indices.shape, dtype=bool)
    starts_run[0] = True
    np.not_equal(ordered_indices[1:], ordered_indices[:-1], out=starts_run[1:])
    starts = np.flatnonzero(starts_run)
    ordered_rows = rows.take(order, axis=0)
    if starts.size == indices.size:
        return ordered_indices, ordered_rows
    lengths = np.empty_like(starts)
    np.subtract(starts[1:], starts[:-1], out=lengths[:-1])
    lengths[-1] = indices.size - starts[-1]
    sums = ordered_rows.take(starts, axis=0)
    repeated = lengths > 1
    repeated_runs = np.flatnonzero(repeated)
    run_starts = np.zeros(repeated_runs.size, dtype=np.intp)
    np.cumsum(lengths.take(repeated_runs[:-1]), out=run_starts[1:])
    # reduceat costs per run, so only the runs of repeated indices go through it.
    repeated_rows = ordered_rows.compress(np.repeat(repeated, lengths), axis=0)
    sums[repeated_runs] = np.add.reduceat(repeated_rows, run_starts, axis=0)
    return ordered_indices.take(starts), sums


def limit_threads(count: int) -> None:
    """Runs numpy's BLAS (matmul) on at most ``count`` threads in this process.

    TF's ``intra_op_parallelism_threads``: a ``tf.train.Server`` sets it for its task, an
    in-process ``tf.Session`` for its process.
    """
    global _blas_threads
    if count < 1:
        raise ValueError(f"the thread count must be >= 1, got {count}")
    if count == _blas_threads:
        return
    import threadpoolctl

    threadpoolctl.threadpool_limits(limits=count, user_api="blas")
    _blas_threads = count


def blas_threads() -> Optional[int]:
    """The BLAS thread limit set in this process by ``limit_threads``, None while none was."""
    return _blas_threads


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
KEEP_FREED_BYTES = 256 << 20
"""Freed heap memory a task keeps for reuse instead of returning it to the kernel."""
LARGEST_HEAP_ALLOCATION = 32 << 20
"""Allocations up to this size come from the heap, not from a fresh mmap (glibc's maximum)."""


@functools.lru_cache(maxsize=None)  # once per process: finding the C library may run ldconfig
def keep_freed_memory() -> bool:
    """Lets the C allocator reuse a step's freed arrays for the next step.

    A training step allocates the same large arrays every step (activations, gradients:
    1-2 MB each for a 512-wide layer). glibc serves blocks above 128 KiB with a fresh
    mmap and unmaps them on free, so every step page-faults its arrays in again and the
    kernel zeroes each page: about a tenth of a training task's CPU. Serving them from the
    heap and keeping up to ``KEEP_FREED_BYTES`` of freed memory makes a step reuse the
    previous step's pages, as TensorFlow's own allocator does. Returns False where the C
    library has no ``mallopt`` (not glibc); nothing changes there.
    """
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    applied = bool(mallopt(_M_MMAP_THRESHOLD, LARGEST_HEAP_ALLOCATION)) and bool(
        mallopt(_M_TRIM_THRESHOLD, KEEP_FREED_BYTES))
    if not applied:
        logging.getLogger(__name__).debug("mallopt refused the allocator settings; keeping the defaults")
    return applied
