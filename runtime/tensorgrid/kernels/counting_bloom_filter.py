"""The counting Bloom filter that admits keys into an embedding table (DeepRec's ``CBFFilter``).

A counter filter (``CounterFilter``) keeps every key it has seen with its count until the key is
admitted, so when most ids are rare (seen once or twice, never admitted) its memory grows with
every distinct id. A counting Bloom filter keeps a fixed array of counters instead: a key adds its
lookups to ``k`` counters picked by ``k`` hashes, and its estimated count is the smallest of them.
The estimate is never below the true count; it is above only when every one of its ``k`` counters
is shared with other keys, which happens with about the false-positive probability the filter was
sized for while it holds at most ``max_element_size`` distinct keys. The memory is fixed at
creation, whatever the number of ids.

Sizing follows DeepRec: ``ceil(|ln p| / ln(2)**2 * max_element_size)`` counters and
``ceil(|log2 p|)`` hash functions, the standard optimum for ``n`` keys at false-positive rate
``p``. The ``k`` counter positions of a key come from two 64-bit mixes of it (Kirsch and
Mitzenmacher's double hashing ``h1 + i * h2``), computed for a whole batch of keys at once.
Counters saturate at their type's largest value instead of wrapping around.
"""

from __future__ import annotations

import math

import numpy as np

COUNTER_TYPES = ("uint8", "uint16", "uint32", "uint64", "int32", "int64")
"""The numpy types a filter's counters may have (DeepRec's ``counter_type``)."""

_SEED_FIRST, _SEED_SECOND = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xD1B54A32D192ED03)


def counter_count(max_element_size: int, false_positive_probability: float) -> int:
    """How many counters hold ``max_element_size`` keys at ``false_positive_probability`` (DeepRec's sizing)."""
    return int(math.ceil(abs(math.log(false_positive_probability)) / math.log(2) ** 2 * max_element_size))


def hash_function_count(false_positive_probability: float) -> int:
    """How many hash functions the filter uses at ``false_positive_probability`` (at least one)."""
    return max(1, int(math.ceil(abs(math.log2(false_positive_probability)))))


def _mix(keys: np.ndarray, seed: np.uint64) -> np.ndarray:
    """splitmix64's finalizer of ``keys ^ seed`` (uint64)."""
    mixed = keys.astype(np.int64).view(np.uint64) ^ seed
    with np.errstate(over="ignore"):
        mixed = (mixed ^ (mixed >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        mixed = (mixed ^ (mixed >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    result: np.ndarray = mixed ^ (mixed >> np.uint64(31))
    return result


class CountingBloomFilter:
    """``num_counters`` counters of ``counter_type`` and ``num_hash_functions`` hashes per key."""

    def __init__(self, num_counters: int, num_hash_functions: int, counter_type: str) -> None:
        if num_counters < 1 or num_hash_functions < 1:
            raise ValueError(f"A counting Bloom filter needs num_counters >= 1 and num_hash_functions >= 1, got "
                             f"{num_counters} and {num_hash_functions}")
        if counter_type not in COUNTER_TYPES:
            raise ValueError(f"counter_type must be one of {', '.join(COUNTER_TYPES)}, got {counter_type!r}")
        self.num_hash_functions = num_hash_functions
        # np.zeros maps untouched pages lazily: a filter sized for 2**30 keys costs memory only where keys land.
        self.counters = np.zeros(num_counters, np.dtype(counter_type))
        self._largest = np.iinfo(self.counters.dtype).max

    def _positions(self, keys: np.ndarray) -> np.ndarray:
        """The ``[len(keys), k]`` counter positions of ``keys``."""
        first, second = _mix(keys, _SEED_FIRST), _mix(keys, _SEED_SECOND) | np.uint64(1)
        steps = np.arange(self.num_hash_functions, dtype=np.uint64)
        with np.errstate(over="ignore"):
            hashes = first[:, None] + second[:, None] * steps
        positions: np.ndarray = (hashes % np.uint64(len(self.counters))).astype(np.int64)
        return positions

    def estimate(self, keys: np.ndarray) -> np.ndarray:
        """Each key's estimated count (int64): the smallest of its counters, never below its true count."""
        if not len(keys):
            return np.zeros(0, np.int64)
        smallest = self.counters[self._positions(keys)].min(axis=1)
        estimates: np.ndarray = np.minimum(smallest.astype(np.uint64), np.uint64(np.iinfo(np.int64).max))
        return estimates.astype(np.int64)

    def add(self, keys: np.ndarray, occurrences: np.ndarray) -> None:
        """Adds ``occurrences`` lookups of each of ``keys`` (unique) to their counters, saturating."""
        if not len(keys):
            return
        positions = self._positions(keys).reshape(-1)
        added = np.repeat(np.asarray(occurrences, np.uint64), self.num_hash_functions)
        touched, slot_of = np.unique(positions, return_inverse=True)
        sums = np.zeros(len(touched), np.uint64)
        np.add.at(sums, slot_of, added)  # two keys (or two hashes of one key) may share a counter
        current = self.counters[touched].astype(np.uint64)
        headroom = np.uint64(self._largest) - current
        self.counters[touched] = (current + np.minimum(sums, headroom)).astype(self.counters.dtype)

    def exported(self) -> np.ndarray:
        """The counters as int64 (what a checkpoint holds), counts above int64's range clipped to it."""
        return np.minimum(self.counters.astype(np.uint64), np.uint64(np.iinfo(np.int64).max)).astype(np.int64)

    def load(self, counters: np.ndarray) -> None:
        """Sets the counters from ``exported``'s array (of this filter's length), clipped to the counter type."""
        if counters.shape != self.counters.shape:
            raise ValueError(f"The filter has {len(self.counters)} counters, the array to load has shape "
                             f"{list(counters.shape)}")
        clipped = np.clip(np.asarray(counters, np.int64), 0, min(int(self._largest), np.iinfo(np.int64).max))
        self.counters = clipped.astype(self.counters.dtype)

    def nbytes(self) -> int:
        return int(self.counters.nbytes)
