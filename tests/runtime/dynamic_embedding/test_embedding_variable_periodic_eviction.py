"""Eviction every K steps (``tf.EmbeddingVariableOption(evict_every_n_steps=K)``, tensorgrid's option:
DeepRec evicts only when a checkpoint is saved): the table evicts by its ``evict_option`` on the first
update K or more global steps after its previous eviction, with no checkpoint saved."""

from __future__ import annotations

import numpy as np
import pytest

import tensorgrid as tf


def test_global_step_eviction_runs_every_k_steps_without_a_checkpoint():
    option = tf.EmbeddingVariableOption(evict_option=tf.GlobalStepEvict(steps_to_live=1), evict_every_n_steps=3)
    with tf.Graph().as_default():
        ev = tf.get_embedding_variable("emb", 2, initializer=tf.constant_initializer(0.5), ev_option=option)
        ids = tf.placeholder(tf.int64, [None])
        step = tf.train.get_or_create_global_step()
        train = tf.train.AdagradOptimizer(0.1).minimize(tf.reduce_sum(tf.nn.embedding_lookup(ev, ids)),
                                                        global_step=step)
        counts = []
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train, {ids: [1, 2, 3]})  # step 0: keys 1, 2, 3 (version 0)
            for _ in range(5):  # steps 1..5: key 2 only
                sess.run(train, {ids: [2]})
                counts.append(int(sess.run(ev.total_count())))
    # Step 3's update evicts 1 and 3 (version 0, 3 steps old > steps_to_live 1); 2 stays, updated each step.
    assert counts == [3, 3, 1, 1, 1]


def test_l2_eviction_without_a_global_step_runs_every_k_updates():
    option = tf.EmbeddingVariableOption(evict_option=tf.L2WeightEvict(l2_weight_threshold=0.25), evict_every_n_steps=2)
    with tf.Graph().as_default():
        ev = tf.get_embedding_variable("emb", 1, initializer=tf.constant_initializer(0.5), ev_option=option)
        ids = tf.placeholder(tf.int64, [None])
        rows = tf.nn.embedding_lookup(ev, ids)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(rows))
        counts = []
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(4):  # key 7's row: 0.4, 0.3, 0.2, 0.1; key 8's stays 0.5
                sess.run(train, {ids: [7]})
                sess.run(rows, {ids: [8]})
                counts.append(int(sess.run(ev.total_count())))
            np.testing.assert_allclose(sess.run(rows, {ids: [8]}), [[0.5]])
    # Evictions after updates 2 and 4: after 2 key 7's row is 0.3 (kept), after 4 it is 0.1 (< 0.25, evicted).
    assert counts == [2, 2, 2, 1]


@pytest.mark.parametrize("arguments, message", [
    ({"evict_every_n_steps": 0}, "evict_every_n_steps must be None or an int > 0, got 0"),
    ({"evict_every_n_steps": 2.5, "evict_option": tf.GlobalStepEvict(5)}, "got 2.5"),
    ({"evict_every_n_steps": 10}, "evict_every_n_steps=10 needs an evict_option"),
])
def test_bad_eviction_periods_are_refused(arguments, message):
    with pytest.raises(ValueError, match=message):
        tf.EmbeddingVariableOption(**arguments)
