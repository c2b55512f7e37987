"""Embedding variables split by ``partitioner=`` (DeepRec's): ids routed to parts by hash, training, and
checkpoints restored into another part count, in one process.

A partitioned table must behave as the unpartitioned one: the same rows, updates, counts and slots,
whatever the part count it was saved or restored with."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.kernels import embedding_variable_kernels

DIM = 2
KEYS = np.array([3, 2**62 + 1, -9, 40, 41, 42, 2**40, 7, 1000, 12], np.int64)


def _initializer() -> Any:
    # Distinct starting rows (row key % 8), so a key in the wrong part or row would show.
    rows = np.arange(8 * DIM, dtype=np.float32).reshape(8, DIM) / 10
    return tf.InitializerOption(tf.constant_initializer(rows), default_value_dim=8)


def _model(parts: int, optimizer: Any = None, filter_freq: int = 0) -> tuple[Any, Any, Any, Any]:
    option = tf.EmbeddingVariableOption(init_option=_initializer(),
                                        filter_option=tf.CounterFilter(filter_freq) if filter_freq else None)
    partitioner = tf.fixed_size_partitioner(parts) if parts else None
    ev = tf.get_embedding_variable("emb", DIM, partitioner=partitioner, ev_option=option)
    ids = tf.placeholder(tf.int64, [None])
    rows = tf.nn.embedding_lookup(ev, ids)
    weights = tf.constant(np.linspace(0.5, 2.0, DIM, dtype=np.float32))
    step = tf.train.get_or_create_global_step()
    train = (optimizer or tf.train.AdagradOptimizer(0.1)).minimize(tf.reduce_sum(rows * rows * weights),
                                                                  global_step=step)
    return ev, ids, rows, train


def _train(parts: int, batches: list[list[int]], filter_freq: int = 0) -> np.ndarray:
    with tf.Graph().as_default():
        _, ids, rows, train = _model(parts, filter_freq=filter_freq)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for batch in batches:
                sess.run(train, {ids: batch})
            return sess.run(rows, {ids: KEYS})


BATCHES = [KEYS[:6].tolist(), KEYS[3:].tolist() + [3, 3], KEYS.tolist()]


def test_parts_are_named_placed_in_collections_and_hold_the_keys_their_hash_names():
    with tf.Graph().as_default():
        ev, ids, rows, _ = _model(3)
        assert [part.op.name for part in ev] == ["emb/part_0", "emb/part_1", "emb/part_2"]
        assert all(part in tf.global_variables() and part in tf.trainable_variables() for part in ev)
        assert rows.shape.as_list() == [None, DIM]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(rows, {ids: KEYS})
            counts = sess.run([part.total_count() for part in ev] + [ev.total_count()])
    owner = embedding_variable_kernels.partition_of_keys(KEYS, 3)
    assert counts == [int(np.sum(owner == p)) for p in range(3)] + [len(KEYS)]
    assert min(counts[:3]) > 0


def test_a_partitioned_table_trains_as_the_unpartitioned_one():
    expected = _train(0, BATCHES)
    for parts in (1, 2, 3):
        np.testing.assert_allclose(_train(parts, BATCHES), expected, rtol=1e-6)


def test_keys_with_a_common_stride_spread_over_all_parts():
    owner = embedding_variable_kernels.partition_of_keys(np.arange(0, 4000 * 8, 8, dtype=np.int64), 4)
    assert np.bincount(owner, minlength=4).min() > 800


def test_embedding_lookup_sparse_combines_rows_from_every_part():
    with tf.Graph().as_default():
        results = []
        for name, partitioner in (("whole", None), ("split", tf.fixed_size_partitioner(3))):
            ev = tf.get_embedding_variable(name, DIM, partitioner=partitioner,
                                           ev_option=tf.EmbeddingVariableOption(init_option=_initializer()))
            sp_ids = tf.SparseTensor([[0, 0], [0, 1], [1, 0], [2, 0], [2, 1]], KEYS[:5], [3, 2])
            results.append(tf.nn.embedding_lookup_sparse(ev, sp_ids, None, combiner="mean"))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            whole, split = sess.run(results)
    np.testing.assert_allclose(split, whole, rtol=1e-6)


@pytest.mark.parametrize("saved_parts, restored_parts", [(3, 2), (2, 0), (0, 4), (2, 2)])
def test_a_checkpoint_restores_into_another_part_count(tmp_path, saved_parts, restored_parts):
    # Keys 50 and 51 stay below the filter (seen once): their counts travel to their new parts too.
    first, rest = BATCHES[:2], BATCHES[2:]
    with tf.Graph().as_default():
        _, ids, rows, train = _model(saved_parts, filter_freq=2)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for batch in first + [[50, 51]]:
                sess.run(train, {ids: batch})
            path = tf.train.Saver().save(sess, str(tmp_path / "ckpt"))
    with tf.Graph().as_default():
        ev, ids, rows, train = _model(restored_parts, filter_freq=2)
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, path)
            assert sess.run(ev.total_count()) == len(set(KEYS[:6].tolist()) & set(KEYS[3:].tolist()) | {3})
            for batch in rest + [[50, 51]]:
                sess.run(train, {ids: batch})
            after_restore = sess.run(rows, {ids: KEYS.tolist() + [50, 51]})
            stored = sess.run(ev.total_count())
    # The same training without a checkpoint in between, unpartitioned.
    with tf.Graph().as_default():
        whole, ids, rows, train = _model(0, filter_freq=2)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for batch in first + [[50, 51]] + rest + [[50, 51]]:
                sess.run(train, {ids: batch})
            np.testing.assert_allclose(after_restore, sess.run(rows, {ids: KEYS.tolist() + [50, 51]}), rtol=1e-6)
            assert stored == sess.run(whole.total_count()) == len(KEYS) + 2


def test_a_partitioner_that_splits_the_rows_is_refused():
    with tf.Graph().as_default(), pytest.raises(ValueError, match=r"must split the ids \(axis 0\).*gave \[1, 2\]"):
        tf.get_embedding_variable("emb", 4, partitioner=tf.fixed_size_partitioner(2, axis=1))
