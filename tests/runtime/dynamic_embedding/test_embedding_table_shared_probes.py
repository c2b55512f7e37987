"""A big batch of ids probes the embedding table's index once per distinct key (``KeyIndex.find``'s
scratch array): its answers, and everything a table does with them (counts, admission, updates,
``max_entries`` eviction, export and restore), are those of probing every id."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tensorgrid.kernels import embedding_key_index
from tensorgrid.kernels import embedding_variable_kernels

BATCH = 4096
"""Above ``_SHARED_PROBE_MIN``: these batches take the shared-probe path."""


def _keys_sharing_a_scratch_entry(count: int, batch: int) -> np.ndarray:
    """``count`` distinct keys whose scratch entry (for a batch of ``batch`` ids) is the same."""
    bits = min(embedding_key_index._SHARED_PROBE_MAX_BITS, (4 * batch - 1).bit_length())
    candidates = np.arange(1, 400_000, dtype=np.int64)
    entries = embedding_key_index._top_bits(embedding_key_index._mixed(candidates), bits)
    sharing = candidates[entries == entries[0]][:count]
    assert len(sharing) == count
    return sharing


def test_a_big_batch_of_repeated_absent_and_colliding_keys_finds_what_a_dict_holds() -> None:
    assert BATCH >= embedding_key_index._SHARED_PROBE_MIN
    rng = np.random.default_rng(3)
    stored = rng.integers(-2**63, 2**63 - 1, 3000, dtype=np.int64)
    colliding = _keys_sharing_a_scratch_entry(6, BATCH)
    index = embedding_key_index.KeyIndex()
    reference = {int(k): i for i, k in enumerate(stored.tolist())}
    index.insert(stored, np.arange(len(stored), dtype=np.int64))
    index.insert(colliding[:3], np.array([7000, 7001, 7002], np.int64))  # colliding[3:] stay absent
    reference.update({int(k): 7000 + i for i, k in enumerate(colliding[:3].tolist())})
    absent = rng.integers(-2**63, 2**63 - 1, 500, dtype=np.int64)
    pool = np.concatenate([stored, colliding, absent])
    for round_ in range(6):
        # Zipf draws: a few keys repeated hundreds of times, most once; the colliding keys interleaved.
        batch = np.concatenate([pool[(rng.zipf(1.3, BATCH) - 1) % len(pool)], np.repeat(colliding, 20)])
        rng.shuffle(batch)
        np.testing.assert_array_equal(index.find(batch), [reference.get(int(k), -1) for k in batch])
        gone = rng.choice(np.array(sorted(reference), np.int64), 200, replace=False)
        index.remove(gone)
        for k in gone.tolist():
            del reference[k]
        np.testing.assert_array_equal(index.find(pool), [reference.get(int(k), -1) for k in pool])


def _table(max_entries: int) -> embedding_variable_kernels.EmbeddingTable:
    table = embedding_variable_kernels.EmbeddingTable("emb", 4, np.float32, filter_freq=3, steps_to_live=0,
                                                      l2_weight_threshold=-1.0, default_value_no_permission=-1.5,
                                                      max_entries=max_entries)
    table.initialize(np.arange(40, dtype=np.float32).reshape(10, 4))
    return table


def _run(table: embedding_variable_kernels.EmbeddingTable, batches: list[np.ndarray]) -> list[Any]:
    """Lookups, an Adagrad-like update of each batch's rows, and the export after each batch."""
    outputs: list[Any] = []
    for step, batch in enumerate(batches):
        outputs.append(table.gather(batch, count=True))
        with table.lock:
            rows, summed = table.rows_to_update(batch, np.ones((len(batch), 4), np.float32), step)
            accumulator = table.ensure_slot("Adagrad", 0.1)
            accumulator[rows] += summed * summed
            table.values()[rows] -= 0.01 * summed / np.sqrt(accumulator[rows])
        outputs.extend(table.export(["Adagrad"]))
    return outputs


@pytest.mark.parametrize("max_entries", [0, 700])
def test_a_table_fed_big_batches_ends_as_one_that_probes_every_id(monkeypatch: pytest.MonkeyPatch,
                                                                  max_entries: int) -> None:
    rng = np.random.default_rng(11)
    # New keys arrive in every batch, hot ones repeat (admitted within a batch on their third lookup).
    batches = [((rng.zipf(1.2, BATCH) - 1) % 5000 + 1000 * step).astype(np.int64) * 7919 for step in range(5)]
    shared = _run(_table(max_entries), batches)
    monkeypatch.setattr(embedding_key_index, "_SHARED_PROBE_MIN", 10**9)
    every_id = _run(_table(max_entries), batches)
    assert len(shared) == len(every_id)
    for got, expected in zip(shared, every_id):
        np.testing.assert_array_equal(got, expected)
    table_size = len(shared[-7])  # the last export's keys (after its batch's rows)
    assert table_size == (max_entries or table_size) and table_size > 500


def test_a_restored_table_answers_a_big_batch_as_the_saved_one_did() -> None:
    rng = np.random.default_rng(5)
    batches = [((rng.zipf(1.2, BATCH) - 1) % 3000).astype(np.int64) - 1500 for _ in range(3)]
    saved = _table(0)
    _run(saved, batches[:2])
    restored = _table(0)
    restored.restore(np.arange(40, dtype=np.float32).reshape(10, 4), saved.export(["Adagrad"]), ["Adagrad"], [0.1])
    np.testing.assert_array_equal(restored.gather(batches[2], count=True), saved.gather(batches[2], count=True))
    for got, expected in zip(restored.export(["Adagrad"]), saved.export(["Adagrad"])):
        np.testing.assert_array_equal(got, expected)


def test_batches_of_distinct_keys_are_probed_key_by_key_until_repeated_keys_come_back() -> None:
    rng = np.random.default_rng(17)
    stored = rng.integers(-2**63, 2**63 - 1, 40_000, dtype=np.int64)
    index = embedding_key_index.KeyIndex(stored, np.arange(len(stored), dtype=np.int64))
    recheck = embedding_key_index._SHARED_PROBE_RECHECK
    for round_ in range(recheck + 2):  # distinct keys: one shared batch, then key by key, then a recheck
        batch = rng.permutation(len(stored))[:BATCH]
        np.testing.assert_array_equal(index.find(stored[batch]), batch)
        assert index._plain_batches == (round_ % (recheck + 1))
    repeated = (rng.zipf(1.2, BATCH) - 1) % len(stored)
    for _ in range(recheck + 2):  # repeated keys: shared again from the next recheck on
        np.testing.assert_array_equal(index.find(stored[repeated]), repeated)
    assert index._distinct_share < embedding_key_index._SHARED_PROBE_MAX_SHARE
    assert index._plain_batches == 0
