"""tf.data on a real cluster: the iterator runs on the worker task that
``replica_device_setter`` places it on (a separate process), the variables on a PS, and
MonitoredTrainingSession, connected to the worker, stops when the data ends. A
``from_generator`` pipeline placed on another process fails with an error that says why.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster

pytestmark = pytest.mark.timeout(180)

FEATURES = np.arange(24, dtype=np.float32).reshape(12, 2) / 10.0
TARGETS = FEATURES @ np.array([1.5, -0.5], dtype=np.float32)


def train(target: str, cluster: Any) -> tuple[int, np.ndarray, str]:
    graph = tf.Graph()
    with graph.as_default():
        with tf.device(tf.train.replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0")):
            dataset = tf.data.Dataset.from_tensor_slices((FEATURES, TARGETS)).shuffle(5, seed=2)
            x, y = tf.data.make_one_shot_iterator(dataset.map(lambda x, y: (x, y * 2.0)).batch(4).repeat(2)).get_next()
            w = tf.get_variable("w", [2], initializer=tf.zeros_initializer())
            loss = tf.reduce_mean(tf.square(tf.reduce_sum(x * w, 1) - y))
            step = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_or_create_global_step())
    steps = 0
    with graph.as_default(), tf.train.MonitoredTrainingSession(master=target) as sess:
        while not sess.should_stop():
            weights = sess.run([step, w])[1]
            steps += 1
    return steps, weights, x.device


def test_the_iterator_runs_on_the_worker_until_the_data_ends(tmp_path: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}) as cluster:
        steps, weights, device = train(cluster.target("worker"), cluster.cluster)
    assert device == "/job:worker/task:0"
    local_steps, local_weights, _ = train("", {"ps": ["unused:1"], "worker": ["unused:2"]})
    assert steps == local_steps == 6  # 12 examples, batches of 4, 2 epochs
    np.testing.assert_array_equal(weights, local_weights)


def test_a_generator_pipeline_on_another_process_fails_clearly(tmp_path: Any) -> None:
    with LocalCluster(tmp_path, {"worker": 1}) as cluster, tf.Graph().as_default():
        with tf.device("/job:worker/task:0"):
            element = tf.data.make_one_shot_iterator(
                tf.data.Dataset.from_generator(lambda: iter([1, 2]), tf.int64)).get_next()
        with tf.Session(cluster.target("worker")) as sess:
            with pytest.raises(tf.errors.OpError, match="runs only in the process that built its graph"):
                sess.run(element)
            assert sess.run(tf.constant(3) * 2) == 6  # the worker keeps serving


def test_a_tfrecord_pipeline_reads_its_files_on_the_task_it_is_placed_on(tmp_path: Any) -> None:
    """The worker process opens the files (named by a fed placeholder) and interleaves them;
    the records (strings) reach the client across the process boundary."""
    paths = []
    for f in range(2):
        paths.append(str(tmp_path / f"shard{f}.tfrecord"))
        with tf.io.TFRecordWriter(paths[-1], options="GZIP") as writer:
            for r in range(3):
                writer.write(f"shard{f}-{r}".encode())
    with LocalCluster(tmp_path, {"worker": 1}) as cluster, tf.Graph().as_default():
        with tf.device("/job:worker/task:0"):
            names = tf.placeholder(tf.string, [None])
            dataset = tf.data.TFRecordDataset(names, compression_type="GZIP", num_parallel_reads=2).batch(4)
            iterator = dataset.make_initializable_iterator()
            batch = iterator.get_next()
        with tf.Session(cluster.target("worker")) as sess:
            sess.run(iterator.initializer, {names: paths})
            assert list(sess.run(batch)) == [b"shard0-0", b"shard1-0", b"shard0-1", b"shard1-1"]
            assert list(sess.run(batch)) == [b"shard0-2", b"shard1-2"]
            with pytest.raises(tf.errors.OutOfRangeError):
                sess.run(batch)
            sess.run(iterator.initializer, {names: [str(tmp_path / "absent.tfrecord")]})
            with pytest.raises(tf.errors.NotFoundError, match="absent.tfrecord"):
                sess.run(batch)
