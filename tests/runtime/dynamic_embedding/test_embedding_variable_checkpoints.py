"""Embedding variables across checkpoints: eviction at save time, and a save/restore round trip.

DeepRec evicts when a checkpoint is saved: with ``GlobalStepEvict(steps_to_live=M)`` the keys not
updated in more than M global steps, with ``L2WeightEvict(T)`` the rows of L2 norm below T. The
keys, values, slots, frequencies and versions are saved and restored exactly."""

from __future__ import annotations

import numpy as np

import tensorgrid as tf


def _model(ev_option: object = None) -> tuple:
    ev = tf.get_embedding_variable("emb", 2, initializer=tf.constant_initializer(0.5),
                                   ev_option=ev_option or tf.EmbeddingVariableOption())
    ids = tf.placeholder(tf.int64, [None])
    rows = tf.nn.embedding_lookup(ev, ids)
    step = tf.train.get_or_create_global_step()
    train = tf.train.AdagradOptimizer(0.1).minimize(tf.reduce_sum(rows * rows), global_step=step)
    return ev, ids, rows, train


def test_global_step_evict_drops_keys_not_updated_in_steps_to_live_at_save(tmp_path):
    option = tf.EmbeddingVariableOption(evict_option=tf.GlobalStepEvict(steps_to_live=2))
    with tf.Graph().as_default():
        ev, ids, rows, train = _model(option)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train, {ids: [1, 2]})  # step 0: both
            for _ in range(4):  # steps 1..4: only 2
                sess.run(train, {ids: [2]})
            assert sess.run(ev.total_count()) == 2
            path = saver.save(sess, str(tmp_path / "ckpt"))  # global step 5: 1 is 5 steps old, 2 is 1
            assert sess.run(ev.total_count()) == 1
            reader = tf.train.load_checkpoint(path)
            np.testing.assert_array_equal(reader.get_tensor("emb-keys"), [2])
            np.testing.assert_array_equal(reader.get_tensor("emb-versions"), [4])
            # An evicted key comes back as a new key, at the initializer's row.
            np.testing.assert_array_equal(sess.run(rows, {ids: [1]}), [[0.5, 0.5]])


def test_l2_weight_evict_drops_small_rows_at_save(tmp_path):
    option = tf.EmbeddingVariableOption(evict_option=tf.L2WeightEvict(l2_weight_threshold=0.6))
    with tf.Graph().as_default():
        ev = tf.get_embedding_variable("emb", 2, initializer=tf.constant_initializer(0.5), ev_option=option)
        ids = tf.placeholder(tf.int64, [None])
        rows = tf.nn.embedding_lookup(ev, ids)
        train = tf.train.GradientDescentOptimizer(1.0).minimize(-tf.reduce_sum(rows))
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train, {ids: [7]})  # 7 grows to [1.5, 1.5]; 8 stays at norm 0.707..., 9 is not looked up
            sess.run(rows, {ids: [8]})
            assert sess.run(ev.total_count()) == 2
            saver.save(sess, str(tmp_path / "ckpt"))
            assert sess.run(ev.total_count()) == 2
    option = tf.EmbeddingVariableOption(evict_option=tf.L2WeightEvict(l2_weight_threshold=1.0))
    with tf.Graph().as_default():
        ev = tf.get_embedding_variable("emb", 2, initializer=tf.constant_initializer(0.5), ev_option=option)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            saver.restore(sess, str(tmp_path / "ckpt"))
            saver.save(sess, str(tmp_path / "again"))
            assert sess.run(ev.total_count()) == 1
            np.testing.assert_array_equal(tf.train.load_checkpoint(str(tmp_path / "again")).get_tensor("emb-keys"), [7])


def test_save_restore_round_trip_keeps_keys_values_slots_freqs_versions(tmp_path):
    option = tf.EmbeddingVariableOption(filter_option=tf.CounterFilter(filter_freq=2))
    batches = [[1, 2**40, 3], [1, 2**40], [3, 1, 77], [2**40, 5]]

    def run(batch_list, restore_from=None, save_to=None):
        with tf.Graph().as_default():
            ev, ids, rows, train = _model(option)
            saver = tf.train.Saver()
            with tf.Session() as sess:
                if restore_from:
                    saver.restore(sess, restore_from)
                else:
                    sess.run(tf.global_variables_initializer())
                for batch in batch_list:
                    sess.run(train, {ids: batch})
                path = saver.save(sess, save_to) if save_to else None
                return sess.run(rows, {ids: [1, 2**40, 3, 77, 5]}), path

    whole, _ = run(batches)
    _, path = run(batches[:2], save_to=str(tmp_path / "half"))
    reader = tf.train.load_checkpoint(path)
    assert {"emb-keys", "emb-values", "emb-freqs", "emb-versions", "emb-keys_filtered", "emb-freqs_filtered",
            "emb/Adagrad-values", "global_step"} <= set(reader.get_variable_to_shape_map())
    np.testing.assert_array_equal(reader.get_tensor("emb-keys"), [1, 2**40])
    np.testing.assert_array_equal(reader.get_tensor("emb-keys_filtered"), [3])
    np.testing.assert_array_equal(reader.get_tensor("emb-freqs_filtered"), [1])
    resumed, _ = run(batches[2:], restore_from=path)
    np.testing.assert_allclose(resumed, whole, rtol=1e-6)


def test_a_click_model_on_raw_64_bit_ids_learns():
    rng = np.random.default_rng(0)
    users = rng.integers(2**40, 2**63 - 1, size=50, dtype=np.int64)
    clicks = rng.integers(0, 2, size=50).astype(np.float32)  # each user clicks always or never
    with tf.Graph().as_default():
        ev = tf.get_embedding_variable("user", 4, ev_option=tf.EmbeddingVariableOption(
            filter_option=tf.CounterFilter(filter_freq=2), evict_option=tf.GlobalStepEvict(steps_to_live=100)))
        ids = tf.placeholder(tf.int64, [None])
        labels = tf.placeholder(tf.float32, [None])
        logits = tf.reduce_sum(tf.nn.embedding_lookup(ev, ids), axis=1)
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
        train = tf.train.AdagradOptimizer(1.0).minimize(loss, global_step=tf.train.get_or_create_global_step())
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            losses = []
            for _ in range(60):
                pick = rng.integers(0, 50, size=32)
                losses.append(sess.run([train, loss], {ids: users[pick], labels: clicks[pick]})[1])
            assert sess.run(ev.total_count()) == len(set(users.tolist()))
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
