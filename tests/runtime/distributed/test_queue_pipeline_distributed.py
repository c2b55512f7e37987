"""A queue input pipeline on a real cluster: the file-name queue and the reader placed on a PS
task (another process) are read there, as TensorFlow's stateful readers are, and the batches
a worker dequeues are those a single process gives, ending with OutOfRangeError."""

from __future__ import annotations

from typing import Any

import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster

pytestmark = pytest.mark.timeout(180)


def write_records(directory: Any) -> list[str]:
    paths = []
    for f in range(2):
        path = str(directory / f"records-{f}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(5):
                writer.write(b"record %d" % (10 * f + i))
        paths.append(path)
    return paths


def drain(target: str, paths: list[str], reader_device: str, batch_device: str) -> tuple[list[list[bytes]], str]:
    with tf.Graph().as_default():
        with tf.device(reader_device):
            filenames = tf.train.string_input_producer(paths, num_epochs=2, shuffle=False)
            _, value = tf.TFRecordReader().read(filenames)
        with tf.device(batch_device):
            batch = tf.train.batch([value], batch_size=3, allow_smaller_final_batch=True)
        batches = []
        with tf.Session(target) as sess:
            sess.run(tf.local_variables_initializer())
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess, coord)
            try:
                while True:
                    batches.append(sess.run(batch).tolist())
            except tf.errors.OutOfRangeError:
                pass
            finally:
                coord.request_stop()
            coord.join(threads, stop_grace_period_secs=10)
        return batches, value.device


def test_a_reader_on_a_ps_is_read_there_and_its_epochs_end_the_batches(tmp_path: Any) -> None:
    paths = write_records(tmp_path)
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}) as cluster:
        batches, device = drain(cluster.target("worker"), paths, "/job:ps/task:0", "/job:worker/task:0")
    local, _ = drain("", paths, "", "")
    assert device == "/job:ps/task:0"
    expected = [b"record %d" % n for n in [0, 1, 2, 3, 4, 10, 11, 12, 13, 14] * 2]
    assert [r for b in local for r in b] == expected
    assert batches == local
    assert [len(b) for b in batches] == [3] * 6 + [2]
