"""The first update of an embedding variable makes its optimizer's slots for every key, but the next
incremental checkpoint (and live replica push) holds only the keys it updated: a key not updated holds
the slot's initial value, which the save before it already gave every key (as TF1's slot of a fixed
table, the oracle, holds it for rows never updated). The chain still reads as a full save does."""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.distributed import replica_tables
from tensorgrid.distributed import replication
from tensorgrid.distributed.rpc import replication_service
from tensorgrid.kernels import embedding_variable_kernels
from tensorgrid.kernels import embedding_variable_writes
from tensorgrid.train import checkpoint_chain
from tensorgrid.train import checkpoint_format

VOCAB, DIM = 300, 4
INITIAL = np.random.default_rng(5).uniform(-0.5, 0.5, (VOCAB, DIM)).astype(np.float32)
UPDATED = np.array([3, 5, 7], np.int64)
OPTIMIZERS: dict[str, Callable[[Any], Any]] = {
    "adagrad": lambda lib: lib.train.AdagradOptimizer(0.2, initial_accumulator_value=0.3),
    "ftrl": lambda lib: lib.train.FtrlOptimizer(0.2, initial_accumulator_value=0.4, l1_regularization_strength=0.01),
}


def _model(parts: int, optimizer: str) -> tuple[Any, Any, Any, Any]:
    option = tf.EmbeddingVariableOption(init_option=tf.InitializerOption(
        tf.constant_initializer(INITIAL), default_value_dim=VOCAB))
    ev = tf.get_embedding_variable("emb", DIM, ev_option=option,
                                   partitioner=tf.fixed_size_partitioner(parts) if parts else None)
    ids = tf.placeholder(tf.int64, [None])
    rows = tf.nn.embedding_lookup(ev, ids)
    train = OPTIMIZERS[optimizer](tf).minimize(tf.reduce_sum(rows * rows))
    return ev, ids, rows, train


def _entries(prefix: str) -> dict[str, np.ndarray]:
    reader = tf.train.NewCheckpointReader(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _data_bytes(prefix: str) -> int:
    """The bytes of a save's tensors (its data files; the index and meta graph are about the same each save)."""
    directory, base = os.path.split(prefix)
    return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory)
               if n.startswith(base + ".data"))


def _saved_by_key(entries: dict[str, np.ndarray], column: str) -> dict[int, np.ndarray]:
    """``column`` (``values`` or a slot's ``SLOT-values``) of every saved key, over the parts."""
    by_key = {}
    for name, keys in entries.items():
        if name.endswith("-keys"):
            prefix = name[:-len("-keys")]
            values = entries[f"{prefix}-{column}" if column == "values" else f"{prefix}/{column}"]
            by_key.update(zip(keys.tolist(), values))
    return by_key


def _slot_columns(entries: dict[str, np.ndarray]) -> list[str]:
    """The slots' columns (``SLOT-values``) of a saved table, ``_saved_by_key``'s names, by slot name."""
    prefixes = [name[:-len("-keys")] for name in entries if name.endswith("-keys")]
    return sorted({name[len(prefix) + 1:] for prefix in prefixes for name in entries
                   if name.startswith(prefix + "/") and name.endswith("-values")})


def _save_before_and_after_the_first_update(tmp_path: Any, parts: int, optimizer: str
                                            ) -> tuple[str, str, dict[str, np.ndarray]]:
    """(the delta after the first update, the full save of that moment, the full save before it)."""
    with tf.Graph().as_default():
        _, ids, rows, train = _model(parts, optimizer)
        incremental, full = tf.train.Saver(incremental=True), tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(rows, {ids: np.arange(VOCAB)})  # stores every key; no update, so no slot yet
            incremental.save(sess, str(tmp_path / "inc" / "model"), global_step=0)
            before = _entries(full.save(sess, str(tmp_path / "before" / "model")))
            sess.run(train, {ids: UPDATED})
            delta = incremental.save(sess, str(tmp_path / "inc" / "model"), global_step=1)
            return delta, full.save(sess, str(tmp_path / "full" / "model")), before


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("parts", [0, 2])
def test_the_delta_after_the_first_update_holds_only_the_keys_it_updated(tmp_path: Any, parts: int, optimizer: str):
    delta, whole, before = _save_before_and_after_the_first_update(tmp_path, parts, optimizer)
    index = checkpoint_format.read_index(delta)
    assert index.delta is not None
    changed = [n for n in index.tensors if n.endswith(checkpoint_chain.CHANGED_KEYS_SUFFIX)]
    assert len(changed) == max(parts, 1)
    saved_keys = np.concatenate([checkpoint_format.read_tensors(index, [n])[n] for n in changed])
    assert sorted(saved_keys.tolist()) == UPDATED.tolist()
    assert _data_bytes(delta) * 20 < _data_bytes(whole)  # 3 keys of 300
    got, expected = _entries(delta), _entries(whole)
    assert sorted(got) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    slots = _slot_columns(expected)
    assert len(slots) == (1 if optimizer == "adagrad" else 2)
    untouched = [k for k in range(VOCAB) if k not in UPDATED]
    for slot in slots:  # the save before the first update already gave every key the slot's initial value
        saved_before, saved_after = _saved_by_key(before, slot), _saved_by_key(expected, slot)
        assert len(saved_before) == VOCAB
        np.testing.assert_array_equal(np.stack([saved_before[k] for k in untouched]),
                                      np.stack([saved_after[k] for k in untouched]), err_msg=slot)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_the_chain_holds_the_slots_tf1_keeps_for_a_fixed_table(tf1: Any, tmp_path: Any, optimizer: str):
    with tf1.Graph().as_default():
        table = tf1.get_variable("emb", initializer=INITIAL)
        ids = tf1.placeholder(tf1.int64, [None])
        rows = tf1.nn.embedding_lookup(table, ids)
        opt = OPTIMIZERS[optimizer](tf1)
        train = opt.minimize(tf1.reduce_sum(rows * rows))
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run(train, {ids: UPDATED})
            expected = sess.run([table] + [opt.get_slot(table, name) for name in sorted(opt.get_slot_names())])
    delta, _, _ = _save_before_and_after_the_first_update(tmp_path, 2, optimizer)
    chain = _entries(delta)
    slot_columns = _slot_columns(chain)
    assert len(slot_columns) == len(expected) - 1
    for column, oracle in zip(["values", *slot_columns], expected):
        by_key = _saved_by_key(chain, column)
        np.testing.assert_allclose(np.stack([by_key[k] for k in range(VOCAB)]), oracle, rtol=1e-6, err_msg=column)


def test_a_replica_push_after_the_first_update_carries_only_the_keys_it_updated():
    table = embedding_variable_kernels.EmbeddingTable("emb", DIM, np.float32, 0, 0, -1.0, 0.0)
    table.initialize(INITIAL)
    table.gather(np.arange(VOCAB, dtype=np.int64), count=True)
    key = ("localhost", "emb")
    tables: dict[Any, replica_tables.HeldTable] = {}

    def push(since: Any) -> tuple[Any, list[Any]]:
        baseline, pieces = replica_tables.table_changes(key, table, since)
        wired = [replication_service._table_from_proto(replication_service._table_to_proto(p)) for p in pieces]
        assert all(replication._apply_piece({}, tables, piece) for piece in wired)
        return baseline, wired

    baseline, pieces = push(embedding_variable_writes.EVERYTHING)
    assert pieces[0].whole and len(tables[key].arrays["keys"]) == VOCAB
    with table.lock:  # what KvResourceSparseApplyAdagrad does
        rows, summed = table.rows_to_update(UPDATED, np.ones((len(UPDATED), DIM), np.float32), 1)
        accumulator = table.ensure_slot("Adagrad", 0.3)
        accumulator[rows] += summed * summed
        table.values()[rows] -= 0.2 * summed / np.sqrt(accumulator[rows])
    _, pieces = push(baseline)
    assert not pieces[0].whole and pieces[0].arrays["keys"].tolist() == UPDATED.tolist()
    held = tables[key].arrays
    exported = table.export(["Adagrad"])
    for name, expected in zip(("keys", "values", "freqs", "versions"), exported):
        np.testing.assert_array_equal(held[name], expected, err_msg=name)
    np.testing.assert_array_equal(held["slot:Adagrad"], exported[-1])
    assert tables[key].definition["slot_initial"] == {"Adagrad": 0.3}
