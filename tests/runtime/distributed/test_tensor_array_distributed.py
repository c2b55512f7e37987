"""tf.TensorArray on a real cluster: a PS process holds the variables, a worker process's
master runs the steps (``replica_device_setter``).

An RNN-style loop unstacks its inputs into one TensorArray and writes its states to another
on the worker, reading the PS's weights through the ordinary Send/Recv of the loop's inputs;
training through it (gradients through the While and the TensorArrays, updates applied on
the PS) must give the same numbers as the same graph run in-process.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster

pytestmark = pytest.mark.timeout(180)

INPUTS = np.array([[0.5, -1.0], [1.5, 0.25], [0.1, -0.3], [1.0, 0.4]])


def build(cluster: Any) -> tuple[tf.Graph, dict[str, Any]]:
    graph = tf.Graph()
    with graph.as_default():
        with tf.device(tf.train.replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0")):
            w = tf.get_variable("w", initializer=tf.constant(np.array([[0.3, -0.2], [0.1, 0.4]])))
            x = tf.placeholder(tf.float64, [4, 2], name="x")
            inputs = tf.TensorArray(tf.float64, size=4).unstack(x)
            states = tf.TensorArray(tf.float64, size=4, element_shape=[2])

            def body(t: Any, h: Any, out: Any) -> Any:
                h = tf.tanh(tf.reshape(tf.matmul(tf.reshape(inputs.read(t) + h, [1, 2]), w), [2]))
                return t + 1, h, out.write(t, h)

            _, _, states = tf.while_loop(lambda t, h, out: t < 4, body,
                                         [tf.constant(0), tf.zeros([2], tf.float64), states])
            stacked = states.stack()
            loss = tf.reduce_sum(tf.square(stacked - 0.5))
            train = tf.train.GradientDescentOptimizer(0.3).minimize(loss)
    return graph, {"w": w, "x": x, "loss": loss, "train": train, "stacked": stacked}


def run(target: str, cluster: Any) -> list[Any]:
    graph, t = build(cluster)
    with tf.Session(target, graph=graph) as sess:
        sess.run(tf.variables_initializer(graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)))
        losses = [sess.run([t["loss"], t["train"]], {t["x"]: INPUTS})[0] for _ in range(5)]
        return [np.array(losses), sess.run(t["stacked"], {t["x"]: INPUTS}), sess.run(t["w"])]


def test_a_tensor_array_loop_trains_across_worker_and_ps(tmp_path: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}) as cluster:
        graph, t = build(cluster.cluster)
        assert t["w"].device == "/job:ps/task:0"
        assert t["stacked"].device == "/job:worker/task:0"
        loops = [op for op in graph.get_operations() if op.type in ("While", "WhileGrad")]
        assert loops and all(op.device == "/job:worker/task:0" for op in loops)
        remote = run(cluster.target("worker"), cluster.cluster)
    local = run("", {"ps": ["unused:1"], "worker": ["unused:2"]})
    for got, want in zip(remote, local):
        np.testing.assert_array_equal(got, want)
    losses, _, w = remote
    assert losses[-1] < losses[0]
    assert not np.allclose(w, [[0.3, -0.2], [0.1, 0.4]])


def test_a_tensor_array_made_on_the_ps_stays_there(tmp_path: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}) as cluster:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.placeholder(tf.float64, [2], name="x")
            with tf.device("/job:ps/task:0"):
                on_ps = tf.TensorArray(tf.float64, size=2, tensor_array_name="on_ps")
            with tf.device("/job:worker/task:0"):
                ta = on_ps.write(0, x * 3.0).write(1, tf.tanh(x))
                total = tf.reduce_sum(ta.stack() * x)
                grad = tf.gradients(total, x)[0]
                looped = tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, a.write(i, x)),
                                       [tf.constant(0), on_ps])
        array_ops = [op for op in graph.get_operations() if op.type.startswith("TensorArray")]
        assert {op.type for op in array_ops} >= {"TensorArrayNew", "TensorArrayWrite", "TensorArrayGather",
                                                 "TensorArrayWriteGrad", "TensorArrayGatherGrad"}
        assert all(op.device == "/job:ps/task:0" for op in array_ops)
        feed = {x: np.array([0.5, -2.0])}
        with tf.Session(cluster.target("worker"), graph=graph) as sess:
            got_total, got_grad = sess.run([total, grad], feed)
        with tf.Session(graph=graph) as sess:
            want_total, want_grad = sess.run([total, grad], feed)
        np.testing.assert_array_equal(got_total, want_total)
        np.testing.assert_array_equal(got_grad, want_grad)
        with tf.Session(cluster.target("worker"), graph=graph) as sess:
            with pytest.raises(tf.errors.InvalidArgumentError, match="would go from .*ps.* to .*worker"):
                sess.run(looped[1].stack(), feed)
