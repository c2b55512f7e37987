"""The change tracking of an embedding variable's table (what incremental checkpoints and live PS
replicas read): each reader's baseline gets exactly the keys changed and removed since, a key
evicted and stored again comes back with its new row, and a baseline too old to answer by key
gets the whole table."""

from __future__ import annotations

import numpy as np

from tensorgrid.kernels import embedding_variable_kernels
from tensorgrid.kernels import embedding_variable_writes

EVERYTHING = embedding_variable_writes.EVERYTHING
DIM = 2


def _table(max_entries: int = 0) -> embedding_variable_kernels.EmbeddingTable:
    table = embedding_variable_kernels.EmbeddingTable("emb", DIM, np.float32, 0, 0, -1.0, 0.0, max_entries)
    table.initialize(np.arange(8 * DIM, dtype=np.float32).reshape(8, DIM))
    return table


def _apply(state: tuple[np.ndarray, list[np.ndarray]], removed: np.ndarray,
           arrays: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    keys, values, freqs, versions = arrays[:4]
    return embedding_variable_writes.merge_keyed(state[0], state[1], removed, keys, [values, freqs, versions])


def test_two_readers_each_get_what_changed_since_their_own_baseline():
    table = _table()
    table.gather(np.array([1, 2, 3], np.int64), count=True)
    first, whole, _, _, arrays = table.changes_since(EVERYTHING, [])
    assert whole and arrays[0].tolist() == [1, 2, 3]
    second, *_ = table.changes_since(EVERYTHING, [])
    table.gather(np.array([2, 9], np.int64), count=True)
    rows, grads = table.rows_to_update(np.array([3], np.int64), np.ones((1, DIM), np.float32), 7)
    table.values()[rows] -= grads
    _, whole, removed, _, arrays = table.changes_since(first, [])
    assert not whole and not removed.size and arrays[0].tolist() == [2, 3, 9]
    assert arrays[3].tolist() == [-1, 7, -1]  # 3's version: the update's global step
    second, whole, _, _, arrays = table.changes_since(second, [])
    assert not whole and arrays[0].tolist() == [2, 3, 9]
    assert table.changes_since(second, [])[4][0].size == 0  # nothing since


def test_a_key_evicted_then_stored_again_is_removed_then_stored_with_its_new_row():
    table = _table(max_entries=2)
    table.gather(np.array([1], np.int64), count=True)
    table.gather(np.array([2], np.int64), count=True)
    baseline, _, _, _, arrays = table.changes_since(EVERYTHING, [])
    state = (arrays[0], list(arrays[1:4]))
    table.gather(np.array([3], np.int64), count=True)  # past max_entries: 1 (stored longest ago) goes
    table.gather(np.array([1], np.int64), count=True)  # 1 comes back (2 goes): a new key, at a reused row
    baseline, whole, removed, _, arrays = table.changes_since(baseline, [])
    assert not whole and sorted(removed.tolist()) == [1, 2]
    keys, columns = _apply(state, removed, arrays)
    exported = table.export([])
    np.testing.assert_array_equal(keys, exported[0])
    for merged, expected in zip(columns, exported[1:4]):
        np.testing.assert_array_equal(merged, expected)
    assert keys.tolist() == [1, 3] and columns[1].tolist() == [1, 1]  # 1's frequency starts again


def test_a_baseline_older_than_the_removal_log_or_of_another_table_gets_the_whole_table(monkeypatch):
    monkeypatch.setattr(embedding_variable_writes, "_MIN_REMOVALS_KEPT", 4)
    table = _table(max_entries=1)
    baseline, *_ = table.changes_since(EVERYTHING, [])
    for key in range(4):  # each new key evicts the previous: 3 removals are kept
        table.gather(np.array([key], np.int64), count=False)
    assert not table.changes_since(baseline, [])[1]
    for key in range(4, 8):  # the log forgets its oldest
        table.gather(np.array([key], np.int64), count=False)
    assert table.changes_since(baseline, [])[1]
    fresh, *_ = table.changes_since(EVERYTHING, [])
    assert not table.changes_since(fresh, [])[1]
    assert _table().changes_since(fresh, [])[1]  # another table object's baseline
    table.initialize(np.zeros((8, DIM), np.float32))
    assert table.changes_since(fresh, [])[1]  # initialized again: every key changed
