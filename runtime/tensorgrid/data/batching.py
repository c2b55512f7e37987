"""Mini-batches of a fixed size from numpy arrays, reshuffled every epoch with a seed.

This is the ``next_batch`` of TF1's MNIST tutorials (``mnist.train.next_batch(100)``),
not ``tf.data``: a step always gets exactly ``batch_size`` examples, the end of one
epoch is topped up from the start of the next, and within an epoch every example is
seen once. The same seed gives the same batches, so training runs are reproducible.
"""

from __future__ import annotations

from typing import Iterator, Optional

import numpy as np


class Batches:
    """Endless fixed-size batches over aligned arrays (images, labels, ...), epoch by epoch."""

    def __init__(self, *arrays: np.ndarray, batch_size: int, seed: Optional[int] = 0, shuffle: bool = True) -> None:
        if not arrays:
            raise ValueError("Batches needs at least one array")
        lengths = {len(a) for a in arrays}
        if len(lengths) != 1:
            raise ValueError(f"all arrays must have the same first dimension, got {[len(a) for a in arrays]}")
        self._size = lengths.pop()
        if self._size == 0:
            raise ValueError("cannot make batches from arrays with no examples")
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        self._arrays = arrays
        self.batch_size = batch_size
        self._shuffle = shuffle
        self._rng = np.random.default_rng(seed)
        self._order = np.empty(0, dtype=np.int64)
        self._position = 0
        self.epochs_completed = 0
        """Full passes over the data finished so far (counting the one a batch just ended)."""
        self._epochs_started = 0

    def _start_epoch(self) -> None:
        if self._epochs_started:
            self.epochs_completed += 1
        self._epochs_started += 1
        self._order = self._rng.permutation(self._size) if self._shuffle else np.arange(self._size)
        self._position = 0

    def next_batch(self) -> tuple[np.ndarray, ...]:
        """The next ``batch_size`` examples of every array (a tuple in the order given)."""
        picked: list[np.ndarray] = []
        needed = self.batch_size
        while needed:
            if self._position == len(self._order):
                self._start_epoch()
            take = self._order[self._position:self._position + needed]
            picked.append(take)
            self._position += len(take)
            needed -= len(take)
        if self._position == len(self._order):
            self._start_epoch()
        index = np.concatenate(picked) if len(picked) > 1 else picked[0]
        return tuple(a[index] for a in self._arrays)

    def __iter__(self) -> Iterator[tuple[np.ndarray, ...]]:
        while True:
            yield self.next_batch()


def batches(*arrays: np.ndarray, batch_size: int, seed: Optional[int] = 0,
            shuffle: bool = True) -> Iterator[tuple[np.ndarray, ...]]:
    """An endless iterator of fixed-size batches: ``for x, y in batches(images, labels, batch_size=32)``."""
    return iter(Batches(*arrays, batch_size=batch_size, seed=seed, shuffle=shuffle))


def epoch_batches(*arrays: np.ndarray, batch_size: int) -> Iterator[tuple[np.ndarray, ...]]:
    """One ordered pass in batches of at most ``batch_size`` (the last may be smaller): for evaluation."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
    size = len(arrays[0])
    for start in range(0, size, batch_size):
        yield tuple(a[start:start + batch_size] for a in arrays)
