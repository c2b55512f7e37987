"""A table admitting by a counting Bloom filter (``tf.CBFFilter``) keeps the filter on the PS process
holding it: lookups count there, and a checkpoint saves the counters from there and restores them there."""

from __future__ import annotations

from typing import Any

import numpy as np

import tensorgrid as tf
from cluster_processes import LocalCluster


def test_the_filter_lives_counts_saves_and_restores_on_the_ps(tmp_path: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}) as cluster:
        spec = tf.train.ClusterSpec(cluster.cluster)
        with tf.Graph().as_default() as graph:
            with tf.device(tf.train.replica_device_setter(cluster=spec)):
                option = tf.EmbeddingVariableOption(filter_option=tf.CBFFilter(
                    filter_freq=3, max_element_size=1000, false_positive_probability=0.01, counter_type=tf.uint16))
                ev = tf.get_embedding_variable("emb", 2, initializer=tf.constant_initializer(0.5), ev_option=option)
                ids = tf.placeholder(tf.int64, [None])
                rows = tf.nn.embedding_lookup(ev, ids)
                count = ev.total_count()
            saver = tf.train.Saver()
            assert ev.device == rows.device == "/job:ps/task:0"
            with tf.Session(cluster.target("worker"), graph=graph) as sess:
                sess.run(tf.global_variables_initializer())
                sess.run(rows, {ids: [2**62, 2**62, 7, 7, 7]})
                path = saver.save(sess, str(tmp_path / "ckpt"))
                sess.run(tf.global_variables_initializer())  # empties the table and its filter on the PS
                saver.restore(sess, path)
                assert sess.run(count) == 1
                np.testing.assert_array_equal(sess.run(rows, {ids: [2**62, 5]})[:, 0], [0.5, 0.0])
                assert sess.run(count) == 2
