"""DeepRec's embedding variables in one process: lookups, admission, eviction, sparse training, checkpoints.

DeepRec is not on PyPI, so there is no oracle: the semantics (DeepRec's docs) are checked directly,
the arithmetic of the updates against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tensorgrid as tf

BIG = 2**62 + 12345  # a raw 64-bit id: no modulo, no vocabulary size


def _table(name: str = "emb", dim: int = 2, ev_option: object = None, initializer: object = None) -> tf.EmbeddingVariable:
    return tf.get_embedding_variable(name, dim, initializer=initializer or tf.constant_initializer(0.5),
                                     ev_option=ev_option or tf.EmbeddingVariableOption())


def test_unseen_ids_look_up_the_initializer_rows_and_are_stored():
    with tf.Graph().as_default():
        ev = _table()
        ids = tf.placeholder(tf.int64, [None])
        rows = tf.nn.embedding_lookup(ev, ids)
        assert rows.shape.as_list() == [None, 2]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            assert sess.run(ev.total_count()) == 0
            np.testing.assert_array_equal(sess.run(rows, {ids: [BIG, -7, BIG]}), np.full((3, 2), 0.5))
            assert sess.run(ev.total_count()) == 2


def test_default_initializer_is_deeprecs_truncated_normal_and_rows_depend_on_the_key_only():
    with tf.Graph().as_default():
        ev = tf.get_embedding_variable("emb", 4)
        ids = tf.placeholder(tf.int64, [None])
        rows = tf.nn.embedding_lookup(ev, ids)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            first = sess.run(rows, {ids: [3, 4099, BIG]})
            again = sess.run(rows, {ids: [BIG, 3]})
    assert np.all(np.abs(first) <= 2.0) and np.std(first) > 0.1
    np.testing.assert_array_equal(again, first[[2, 0]])
    np.testing.assert_array_equal(first[0], first[1])  # row key % default_value_dim (4096): 4099 starts as 3


def test_names_and_reuse_follow_get_variable():
    with tf.Graph().as_default():
        with tf.variable_scope("model"):
            ev = tf.get_embedding_variable("user", 3)
        assert ev.op.name == "model/user" and ev in tf.global_variables() and ev in tf.trainable_variables()
        with tf.variable_scope("model", reuse=True):
            assert tf.get_embedding_variable("user", 3) is ev
            with pytest.raises(ValueError, match="model/item does not exist"):
                tf.get_embedding_variable("item", 3)
        with tf.variable_scope("model"):
            with pytest.raises(ValueError, match="model/user already exists"):
                tf.get_embedding_variable("user", 3)
        with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
            assert tf.get_embedding_variable("user", 3) is ev


@pytest.mark.parametrize("call, message", [
    (lambda: tf.get_embedding_variable("e", 0), "embedding_dim must be an int > 0, got 0"),
    (lambda: tf.get_embedding_variable("e", 2, key_dtype=tf.bool), "key_dtype must be tf.int64, tf.int32 or tf.string, "
     "got bool"),
    (lambda: tf.CounterFilter(filter_freq=-1), "filter_freq must be an int >= 0, got -1"),
    (lambda: tf.EmbeddingVariableOption(filter_option=3), "filter_option must be a tf.CounterFilter"),
    (lambda: tf.GlobalStepEvict(steps_to_live=-2), "steps_to_live must be None or an int >= 0, got -2"),
])
def test_bad_arguments_name_the_value_and_what_is_valid(call, message):
    with tf.Graph().as_default(), pytest.raises(ValueError, match=message):
        call()


def test_lookup_before_initialization_fails_as_a_variable_does():
    with tf.Graph().as_default():
        rows = tf.nn.embedding_lookup(_table(), tf.constant([1], tf.int64))
        with tf.Session() as sess, pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized embedding"):
            sess.run(rows)


def test_counter_filter_admits_a_key_on_its_nth_lookup_and_keeps_counts(tmp_path):
    option = tf.EmbeddingVariableOption(filter_option=tf.CounterFilter(filter_freq=3))
    with tf.Graph().as_default():
        ev = _table(ev_option=option)
        ids = tf.placeholder(tf.int64, [None])
        rows = tf.nn.embedding_lookup(ev, ids)
        train = tf.train.GradientDescentOptimizer(1.0).minimize(tf.reduce_sum(rows))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            # Not admitted: DeepRec's default_value_no_permission (0.0), not stored, not updated.
            np.testing.assert_array_equal(sess.run(rows, {ids: [BIG]}), [[0.0, 0.0]])
            sess.run(train, {ids: [BIG]})
            assert sess.run(ev.total_count()) == 0
            # The third lookup admits it, at the initializer's row; seen twice in one batch counts twice.
            np.testing.assert_array_equal(sess.run(rows, {ids: [BIG, 5, 5]}), [[0.5, 0.5], [0, 0], [0, 0]])
            assert sess.run(ev.total_count()) == 1
            sess.run(train, {ids: [BIG, 5]})  # 5 is admitted by this lookup (its third) and updated
            np.testing.assert_array_equal(sess.run(rows, {ids: [BIG, 5]}), [[-0.5, -0.5], [-0.5, -0.5]])
            reader = tf.train.load_checkpoint(tf.train.Saver().save(sess, str(tmp_path / "ckpt")))
            np.testing.assert_array_equal(reader.get_tensor("emb-keys"), [5, BIG])
            np.testing.assert_array_equal(reader.get_tensor("emb-freqs"), [4, 5])
            assert reader.get_tensor("emb-keys_filtered").size == 0


def test_gradient_descent_updates_only_touched_keys_summing_repeats():
    with tf.Graph().as_default():
        ev = _table(dim=2)
        ids = tf.placeholder(tf.int64, [None])
        weights = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        loss = tf.reduce_sum(tf.nn.embedding_lookup(ev, ids) * weights)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        rows = tf.nn.embedding_lookup(ev, ids)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(rows, {ids: [99, 99, 99]})  # stored, never updated
            sess.run(train, {ids: [7, BIG, 7]})
            got = sess.run(rows, {ids: [7, BIG, 99]})
    np.testing.assert_allclose(got, [[0.5 - 0.6, 0.5 - 0.8], [0.5 - 0.3, 0.5 - 0.4], [0.5, 0.5]], rtol=1e-6)


def test_adagrad_keeps_its_accumulator_per_key():
    with tf.Graph().as_default():
        ev = _table(dim=1)
        ids = tf.placeholder(tf.int64, [None])
        rows = tf.nn.embedding_lookup(ev, ids)
        train = tf.train.AdagradOptimizer(0.5, initial_accumulator_value=0.1).minimize(tf.reduce_sum(rows * 2.0))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for batch in ([1, 2], [1], [1, 3]):
                sess.run(train, {ids: batch})
            got = sess.run(rows, {ids: [1, 2, 3]})[:, 0]
    expected = {}
    for key, updates in ((1, 3), (2, 1), (3, 1)):
        value, accumulator = 0.5, 0.1
        for _ in range(updates):
            accumulator += 4.0
            value -= 0.5 * 2.0 / np.sqrt(accumulator)
        expected[key] = value
    np.testing.assert_allclose(got, [expected[1], expected[2], expected[3]], rtol=1e-5, atol=1e-6)


def test_optimizers_without_embedding_variable_support_say_which_do():
    with tf.Graph().as_default():
        ev = _table()
        loss = tf.reduce_sum(tf.nn.embedding_lookup(ev, tf.constant([1], tf.int64)))
        with pytest.raises(NotImplementedError, match="RMSPropOptimizer does not update embedding variables"):
            tf.train.RMSPropOptimizer(0.1).minimize(loss)
