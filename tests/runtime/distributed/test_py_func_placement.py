"""A ``tf.py_func`` runs only on a task served by the process that built the graph.

The function lives in the client's process; a partition holding the op, sent to a task
in another process, is refused when it is registered, with InvalidArgumentError naming
the op and the task (TensorFlow fails too, later, when the op runs: its callback is
not found there). On the client's own in-process server the op runs and its result
feeds an update of a variable on a real PS process.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster

pytestmark = pytest.mark.timeout(120)


def build(py_func_device: str) -> tuple[tf.Graph, Any, Any]:
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(np.zeros(3, np.float32), name="w")
        with tf.device(py_func_device):
            doubled = tf.py_func(lambda a: a * 2 + 1, [tf.constant(np.float32([1, 2, 3]))], tf.float32,
                                 name="doubler")
            doubled.set_shape([3])
        with tf.device("/job:ps/task:0"):
            update = w.assign_add(doubled)
    return graph, w, update


def test_a_py_func_on_a_task_of_another_process_is_refused_naming_op_and_task(tmp_path: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}) as cluster:
        for device, task in (("/job:ps/task:0", "/job:ps/replica:0/task:0"), ("/job:worker/task:0", "/job:worker/replica:0/task:0")):
            graph, w, update = build(device)
            with tf.Session(cluster.target("worker"), graph=graph) as sess:
                sess.run(w.initializer)
                with pytest.raises(tf.errors.InvalidArgumentError) as raised:
                    sess.run(update)
            message = str(raised.value)
            assert "doubler" in message and task in message and "process that built the graph" in message


def test_a_py_func_on_the_clients_own_server_runs_and_updates_a_ps_variable(tmp_path: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}, start=False) as cluster:
        cluster.task("ps").start()
        server = tf.train.Server(cluster.cluster, job_name="worker", task_index=0)
        try:
            graph, w, update = build("/job:worker/task:0")
            with tf.Session(server.target, graph=graph) as sess:
                sess.run(w.initializer)
                sess.run(update)
                np.testing.assert_array_equal(sess.run(update), [6.0, 10.0, 14.0])
            graph, w, update = build("/job:ps/task:0")
            with tf.Session(server.target, graph=graph) as sess:
                sess.run(w.initializer)
                with pytest.raises(tf.errors.InvalidArgumentError, match="doubler.*/job:ps/replica:0/task:0"):
                    sess.run(update)
        finally:
            server.stop()
