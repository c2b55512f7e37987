"""Incremental checkpoints of a table on parameter servers: the chief's saver reads, on each PS,
only the rows written since its previous save, and the chain restores into another partition count.

Two PS tasks and a worker are real server processes on loopback; this process is the chief of a
between-graph job (MonitoredTrainingSession with a CheckpointSaverHook saving every step).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster
from tensorgrid.train import checkpoint_format

pytestmark = [pytest.mark.timeout(180)]

ROWS, DIM = 1000, 8
BATCHES = [[1, 2, 3], [500, 501], [999, 3], [10, 20, 30, 40]]


def _table(parts: int) -> Any:
    return tf.get_variable("emb", [ROWS, DIM], partitioner=tf.fixed_size_partitioner(parts),
                           initializer=tf.random_uniform_initializer(seed=1))


def test_the_chief_saves_deltas_of_a_table_on_two_parameter_servers(tmp_path: Any) -> None:
    directory = str(tmp_path / "ckpt")
    with LocalCluster(str(tmp_path), {"ps": 2, "worker": 1}) as cluster:
        spec = tf.train.ClusterSpec(cluster.cluster)
        with tf.Graph().as_default():
            with tf.device(tf.train.replica_device_setter(cluster=spec, worker_device="/job:worker/task:0")):
                emb = _table(4)
                ids = tf.placeholder(tf.int64, [None])
                step = tf.train.get_or_create_global_step()
                loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(emb, ids)))
                train = tf.train.AdagradOptimizer(0.5).minimize(loss, global_step=step)
            saver = tf.train.Saver(incremental=True, full_save_every=10)
            reads = [op for op in tf.get_default_graph().get_operations() if op.type == "VariableChangedRows"]
            assert reads and all(op.device.startswith("/job:ps") for op in reads)
            with tf.train.MonitoredTrainingSession(
                    master=cluster.target("worker"), is_chief=True, checkpoint_dir=directory,
                    scaffold=tf.train.Scaffold(saver=saver), save_checkpoint_steps=1, save_checkpoint_secs=None,
                    save_summaries_steps=None, log_step_count_steps=None) as sess:
                for batch in BATCHES:
                    sess.run(train, {ids: batch})
                live = np.concatenate(sess.run(list(emb)))
                live_step = sess.run(step)
    latest = tf.train.latest_checkpoint(directory)
    saved = sorted((checkpoint_format.read_index(os.path.join(directory, n[:-len(".index")])) for n in
                    os.listdir(directory) if n.endswith(".index")), key=lambda index: index.prefix)
    full = [index for index in saved if index.delta is None]
    deltas = [index for index in saved if index.delta is not None]
    assert full and deltas, [index.prefix for index in saved]
    # A delta holds a few rows of the table and of its slot, not the table.
    assert max(index.data_size for index in deltas) < min(index.data_size for index in full) / 20
    with tf.Graph().as_default():
        restored = _table(3)
        restored_step = tf.train.get_or_create_global_step()
        with tf.Session() as local:
            tf.train.Saver().restore(local, latest)
            np.testing.assert_array_equal(np.concatenate(local.run(list(restored))), live)
            assert local.run(restored_step) == live_step
