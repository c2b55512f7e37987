"""An embedding table adds its lookups to the keys' frequencies later, in bulk (``EmbeddingTable._count_lookups``),
from the probed positions of a batch and how many ids each answers (``KeyIndex.find_grouped``): exports
give the frequencies of counting each lookup at once, through repeats, keys probed at several positions,
admission, and rows freed by eviction and taken by other keys."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from tensorgrid.kernels import embedding_key_index
from tensorgrid.kernels import embedding_variable_kernels

BATCH = 4096
"""Above ``_SHARED_PROBE_MIN``: the batches take the shared-probe path."""


def _colliding_keys(count: int) -> np.ndarray:
    """Distinct keys sharing one scratch entry of ``find_grouped`` for a batch of ``BATCH`` ids: each is probed
    at every position it holds but the last writer's."""
    bits = min(embedding_key_index._SHARED_PROBE_MAX_BITS, (4 * BATCH - 1).bit_length())
    candidates = np.arange(1, 400_000, dtype=np.int64)
    entries = embedding_key_index._top_bits(embedding_key_index._mixed(candidates), bits)
    return candidates[entries == entries[0]][:count]


def _batches(rng: np.random.Generator, count: int) -> list[np.ndarray]:
    pool = np.concatenate([rng.integers(-2**63, 2**63 - 1, 2000, dtype=np.int64), _colliding_keys(4)])
    return [pool[(rng.zipf(1.3, BATCH) - 1) % len(pool)] for _ in range(count)]


def test_find_grouped_repeats_count_every_id_once_per_key() -> None:
    rng = np.random.default_rng(5)
    batch = _batches(rng, 1)[0]
    index = embedding_key_index.KeyIndex(np.unique(batch)[::2], np.arange(len(np.unique(batch)[::2])))
    for _ in range(2):  # the first big batch of a fresh index measures its share of distinct keys
        values, probed, repeats = index.find_grouped(batch)
    assert np.array_equal(values, index._probe(batch)[1])
    assert repeats.sum() == len(batch) and len(probed) < len(batch)
    counted: collections.Counter[int] = collections.Counter()
    for key, times in zip(batch[probed].tolist(), repeats.tolist()):
        counted[key] += times
    assert counted == collections.Counter(batch.tolist())


@pytest.mark.parametrize("min_uncounted", [embedding_variable_kernels._MIN_UNCOUNTED, 1],
                         ids=["added-at-export", "added-every-lookup"])
def test_exported_frequencies_are_the_lookups_counted_since_each_key_was_stored(
        monkeypatch: pytest.MonkeyPatch, min_uncounted: int) -> None:
    monkeypatch.setattr(embedding_variable_kernels, "_MIN_UNCOUNTED", min_uncounted)
    table = embedding_variable_kernels.EmbeddingTable("t", 4, np.float32, 3, 1, -1.0, 0.0)
    table.initialize(np.ones((8, 4), np.float32))
    rng = np.random.default_rng(11)
    lookups: collections.Counter[int] = collections.Counter()
    for step, batch in enumerate(_batches(rng, 6)):
        table.gather(batch, count=True)
        table.gather(batch[:100], count=False)  # not counted
        lookups.update(batch.tolist())
        if step == 2:
            # Never updated: every stored key is evicted, its row freed for the keys stored next; their
            # counts start again (keys not admitted keep theirs).
            table.evict(global_step=10)
            lookups = collections.Counter({key: n for key, n in lookups.items() if n < 3})
    keys, _, freqs, _, pending, counts = table.export([])
    assert {int(k): int(f) for k, f in zip(keys, freqs)} == {k: n for k, n in lookups.items() if n >= 3}
    assert {int(k): int(c) for k, c in zip(pending, counts)} == {k: n for k, n in lookups.items() if n < 3}
