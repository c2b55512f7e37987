"""Embedding variables in incremental checkpoints (``Saver(incremental=True)``): a delta holds only the
keys stored, updated and evicted since the previous save, and the chain restores to exactly the table
a full save of the same moment holds (keys, rows, frequencies, versions, slots, keys not yet admitted)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.train import checkpoint_chain
from tensorgrid.train import checkpoint_format

DIM = 3


def _model(parts: int, filter_option: Any) -> tuple[Any, Any, Any]:
    option = tf.EmbeddingVariableOption(filter_option=filter_option,
                                        evict_option=tf.GlobalStepEvict(steps_to_live=2))
    ev = tf.get_embedding_variable("emb", DIM, partitioner=tf.fixed_size_partitioner(parts) if parts else None,
                                   ev_option=option)
    ids = tf.placeholder(tf.int64, [None])
    rows = tf.nn.embedding_lookup(ev, ids)
    step = tf.train.get_or_create_global_step()
    train = tf.train.AdagradOptimizer(0.2).minimize(tf.reduce_sum(rows * rows), global_step=step)
    return ev, ids, train


def _batches() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    # A hot set seen every step, and rare ids that come once or twice (admission) then go (eviction).
    return [np.concatenate([np.array([5, 2**40 + 1, -3], np.int64), rng.integers(-2**62, 2**62, 4),
                            np.arange(100 + 2 * step, 104 + 2 * step, dtype=np.int64)]) for step in range(9)]


def _entries(prefix: str) -> dict[str, np.ndarray]:
    reader = tf.train.NewCheckpointReader(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.mark.parametrize("parts, filter_option", [(0, tf.CounterFilter(filter_freq=2)),
                                                   (2, tf.CounterFilter(filter_freq=2)),
                                                   (2, tf.CBFFilter(filter_freq=2, max_element_size=64,
                                                                    false_positive_probability=0.01))])
def test_a_chain_of_deltas_restores_the_table_a_full_save_holds(tmp_path: Any, parts: int, filter_option: Any):
    with tf.Graph().as_default():
        ev, ids, train = _model(parts, filter_option)
        incremental = tf.train.Saver(incremental=True, full_save_every=20)
        full = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for step, batch in enumerate(_batches()):
                sess.run(train, {ids: batch})
                delta = incremental.save(sess, str(tmp_path / "inc" / "model"), global_step=step)
                whole = full.save(sess, str(tmp_path / "full" / "model"), global_step=step)
                got, expected = _entries(delta), _entries(whole)
                assert sorted(got) == sorted(expected)
                for name in expected:
                    np.testing.assert_array_equal(got[name], expected[name], err_msg=f"{name} at step {step}")
                if step == 0:
                    continue
                index = checkpoint_format.read_index(delta)
                assert index.delta is not None
                changed = [n for n in index.tensors if n.endswith(checkpoint_chain.CHANGED_KEYS_SUFFIX)]
                assert changed, "the table is saved by its changed keys"
                removed = np.concatenate([checkpoint_format.read_tensors(index, [n])[n] for n in index.tensors
                                          if n.endswith(checkpoint_chain.REMOVED_KEYS_SUFFIX)])
                if step >= 3:  # the rare ids admitted at step s - 3 are evicted at step s's save
                    assert removed.size
                changed_count = sum(len(checkpoint_format.read_tensors(index, [n])[n]) for n in changed)
                stored_count = sum(len(v) for n, v in expected.items() if n.endswith("-keys"))
                assert step < 2 or changed_count < stored_count  # keys not touched since are not in it
            stored = sess.run(ev.total_count() if not parts else [p.total_count() for p in ev])
            assert np.sum(stored) == sum(len(v) for n, v in expected.items() if n.endswith("-keys"))


def test_restoring_a_delta_gives_the_table_back(tmp_path: Any):
    batches = _batches()
    with tf.Graph().as_default():
        _, ids, train = _model(2, tf.CounterFilter(filter_freq=2))
        saver = tf.train.Saver(incremental=True)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for step, batch in enumerate(batches[:6]):
                sess.run(train, {ids: batch})
                path = saver.save(sess, str(tmp_path / "model"), global_step=step)
            saved = _entries(path)
            for batch in batches[6:]:
                sess.run(train, {ids: batch})
            saver.restore(sess, path)
            again = saver.save(sess, str(tmp_path / "again"))  # a restore makes the next save full
            assert checkpoint_format.read_index(again).delta is None
            for name, value in _entries(again).items():
                np.testing.assert_array_equal(value, saved[name], err_msg=name)


def test_a_delta_restores_into_another_part_count_as_the_full_save_does(tmp_path: Any):
    with tf.Graph().as_default():
        _, ids, train = _model(2, tf.CounterFilter(filter_freq=2))
        incremental, full = tf.train.Saver(incremental=True), tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for step, batch in enumerate(_batches()[:5]):
                sess.run(train, {ids: batch})
                delta = incremental.save(sess, str(tmp_path / "inc" / "model"), global_step=step)
            whole = full.save(sess, str(tmp_path / "full" / "model"), global_step=4)
    assert checkpoint_format.read_index(delta).delta is not None
    restored = []
    for path in (delta, whole):
        with tf.Graph().as_default():
            _model(3, tf.CounterFilter(filter_freq=2))
            saver = tf.train.Saver()
            with tf.Session() as sess:
                saver.restore(sess, path)
                restored.append(_entries(saver.save(sess, str(tmp_path / "three" / "model"))))
    assert sorted(restored[0]) == sorted(restored[1]) and "emb/part_2-keys" in restored[0]
    for name, value in restored[1].items():
        np.testing.assert_array_equal(restored[0][name], value, err_msg=name)
