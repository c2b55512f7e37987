"""An embedding variable under ``replica_device_setter`` lives on the PS process: lookups, Adagrad
updates and a checkpoint's save and restore all run there, and only ids, rows and gradients travel."""

from __future__ import annotations

from typing import Any

import numpy as np

import tensorgrid as tf
from cluster_processes import LocalCluster


def test_a_table_on_a_ps_process_trains_saves_and_restores(tmp_path: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}) as cluster:
        spec = tf.train.ClusterSpec(cluster.cluster)
        with tf.Graph().as_default() as graph:
            with tf.device(tf.train.replica_device_setter(cluster=spec)):
                ev = tf.get_embedding_variable("emb", 2, initializer=tf.constant_initializer(0.5))
                ids = tf.placeholder(tf.int64, [None])
                rows = tf.nn.embedding_lookup(ev, ids)
                step = tf.train.get_or_create_global_step()
                train = tf.train.AdagradOptimizer(0.1).minimize(tf.reduce_sum(rows), global_step=step)
                count = ev.total_count()
            saver = tf.train.Saver()
            assert ev.device == rows.device == "/job:ps/task:0"
            with tf.Session(cluster.target("worker"), graph=graph) as sess:
                sess.run(tf.global_variables_initializer())
                sess.run(train, {ids: [2**62, 3]})
                trained = sess.run(rows, {ids: [2**62, 3, 4]})
                path = saver.save(sess, str(tmp_path / "ckpt"))
                sess.run(tf.global_variables_initializer())  # empties the table on the PS
                assert sess.run(count) == 0
                saver.restore(sess, path)
                assert sess.run(count) == 3
                np.testing.assert_array_equal(sess.run(rows, {ids: [2**62, 3, 4]}), trained)
    np.testing.assert_allclose(trained[:2], 0.5 - 0.1 / np.sqrt(1.1), rtol=1e-6)
    np.testing.assert_array_equal(trained[2], [0.5, 0.5])
