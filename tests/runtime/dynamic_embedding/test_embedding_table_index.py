"""The embedding table's vectorised hash index against a Python dict: batches of inserts, finds,
assignments and removals (with the growth and the deleted slots they cause) agree."""

from __future__ import annotations

import numpy as np
import pytest

from tensorgrid.kernels import embedding_key_index


def test_the_key_index_agrees_with_a_dict_through_inserts_removals_and_growth() -> None:
    rng = np.random.default_rng(7)
    index = embedding_key_index.KeyIndex()
    reference: dict[int, int] = {}
    # Keys that collide on purpose (multiples of a large power of two), and extreme values.
    pool = np.concatenate([np.arange(300, dtype=np.int64) << 40, rng.integers(-2**63, 2**63 - 1, 300, dtype=np.int64),
                           np.array([-2**63, 2**63 - 1, 0, -1], np.int64)])
    for round_ in range(40):
        batch = np.unique(rng.choice(pool, 40))
        present = np.array([int(k) in reference for k in batch])
        new, old = batch[~present], batch[present]
        values = np.arange(len(new), dtype=np.int64) + 100 * round_
        index.insert(new, values)
        reference.update(zip(new.tolist(), values.tolist()))
        if len(old):
            index.assign(old, np.full(len(old), round_))
            reference.update({int(k): round_ for k in old})
        gone = rng.choice(np.array(sorted(reference), np.int64), min(15, len(reference)), replace=False)
        index.remove(gone)
        for k in gone.tolist():
            del reference[k]
        expected = np.array([reference.get(int(k), -1) for k in pool], np.int64)
        np.testing.assert_array_equal(index.find(pool), expected)
        assert len(index) == len(reference)
    keys, values = index.items()
    np.testing.assert_array_equal(keys, sorted(reference))
    np.testing.assert_array_equal(values, [reference[k] for k in sorted(reference)])


def test_a_chain_of_colliding_keys_wraps_past_the_last_slot_and_is_found_after_removals() -> None:
    index = embedding_key_index.KeyIndex()  # 16 slots: 7 keys keep it under half full
    candidates = np.arange(1, 5000, dtype=np.int64)
    last_slot = candidates[index._home(candidates) == 15]
    chained, absent = last_slot[:7], last_slot[7:10]  # all start at the last slot: slots 15, 0, 1, ..., 5
    index.insert(chained, np.arange(7, dtype=np.int64) * 10)
    np.testing.assert_array_equal(index.find(np.concatenate([chained, absent])), [0, 10, 20, 30, 40, 50, 60, -1, -1, -1])
    index.remove(chained[[0, 3]])  # deleted slots inside the chain: the keys after them are still found
    np.testing.assert_array_equal(index.find(chained), [-1, 10, 20, -1, 40, 50, 60])
    index.insert(absent[:1], np.array([7], np.int64))
    np.testing.assert_array_equal(index.find(np.concatenate([chained, absent])), [-1, 10, 20, -1, 40, 50, 60, 7, -1, -1])
    with pytest.raises(ValueError, match="values must be >= 0"):
        index.insert(absent[1:2], np.array([-1], np.int64))
