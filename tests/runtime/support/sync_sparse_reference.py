"""What synchronous sparse training should leave in a table: the reference two tests compare with.

``SyncReplicasOptimizer`` over IndexedSlices gradients (fixed tables and embedding variables
alike) applies, per step and row, the mean over the replicas that touched the row of each
replica's summed row gradient, times the learning rate of plain gradient descent.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np


def mean_gradients(feeds: Iterable[Any]) -> dict[int, np.ndarray]:
    """Per row (or key) of one step's ``feeds`` (one (row ids, row gradients) pair per replica): the
    mean over the replicas that touched it of each one's summed gradient of it."""
    sums: dict[int, np.ndarray] = {}
    counts: dict[int, int] = {}
    for ids, grads in feeds:
        touched: dict[int, np.ndarray] = {}
        for row, grad in zip(ids, np.asarray(grads, np.float32)):
            touched[row] = touched.get(row, 0) + grad
        for row, grad in touched.items():
            sums[row] = sums.get(row, 0) + grad
            counts[row] = counts.get(row, 0) + 1
    return {row: total / counts[row] for row, total in sums.items()}


def expected_table(initial: np.ndarray, learning_rate: float, feeds_per_step: Iterable[Any]) -> np.ndarray:
    """``initial`` after one step per entry of ``feeds_per_step``: each a list of (row ids,
    row gradients) pairs, one per replica."""
    table = initial.copy()
    for feeds in feeds_per_step:
        for row, mean in mean_gradients(feeds).items():
            table[row] -= learning_rate * mean
    return table
