"""A partitioned embedding variable on two PS processes: each part lives on its own PS task, lookups
and updates reach each part with its ids only, and a checkpoint saved from two parts restores into
three (on the same tasks) with every key's row intact."""

from __future__ import annotations

from typing import Any

import numpy as np

import tensorgrid as tf
from cluster_processes import LocalCluster

KEYS = [2**62, 3, -5, 17, 2**40 + 9, 100, 101, 102]


def _model(spec: Any, parts: int) -> tuple[Any, Any, Any, Any]:
    with tf.device(tf.train.replica_device_setter(cluster=spec)):
        ev = tf.get_embedding_variable("emb", 2, initializer=tf.constant_initializer(0.5),
                                       partitioner=tf.fixed_size_partitioner(parts))
        ids = tf.placeholder(tf.int64, [None])
        rows = tf.nn.embedding_lookup(ev, ids)
        step = tf.train.get_or_create_global_step()
        train = tf.train.AdagradOptimizer(0.1).minimize(tf.reduce_sum(rows * rows), global_step=step)
    return ev, ids, rows, train


def test_parts_live_on_their_ps_tasks_and_restore_into_another_part_count(tmp_path: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 2, "worker": 1}) as cluster:
        spec = tf.train.ClusterSpec(cluster.cluster)
        with tf.Graph().as_default() as graph:
            ev, ids, rows, train = _model(spec, 2)
            saver = tf.train.Saver()
            assert sorted(part.device for part in ev) == ["/job:ps/task:0", "/job:ps/task:1"]
            with tf.Session(cluster.target("worker"), graph=graph) as sess:
                sess.run(tf.global_variables_initializer())
                sess.run(train, {ids: KEYS})
                sess.run(train, {ids: KEYS[:4]})
                trained = sess.run(rows, {ids: KEYS})
                counts = sess.run([part.total_count() for part in ev])
                path = saver.save(sess, str(tmp_path / "ckpt"))
        assert sum(counts) == len(KEYS) and min(counts) > 0
        with tf.Graph().as_default() as graph:
            ev, ids, rows, train = _model(spec, 3)
            saver = tf.train.Saver()
            with tf.Session(cluster.target("worker"), graph=graph) as sess:
                saver.restore(sess, path)
                np.testing.assert_array_equal(sess.run(rows, {ids: KEYS}), trained)
                assert sess.run(ev.total_count()) == len(KEYS)
    # Keys seen twice moved twice, the others once (Adagrad from 0.5 with the gradient 2 * row).
    once = 0.5 - 0.1 * 1.0 / np.sqrt(0.1 + 1.0)
    np.testing.assert_allclose(trained[4:], once, rtol=1e-6)
    assert np.all(trained[:4] < once)
