"""tf.cond and tf.while_loop on a real cluster: a PS process holds the variables, a worker
process's master runs the steps (``replica_device_setter``).

The loop runs on the worker and reads the PS's variable through the normal Send/Recv of
its inputs; the cond that assigns a PS variable is placed beside it, on the PS. Training
through the loop (gradients of the While, updates applied on the PS) must give the same
variables as the same graph run in-process.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster

pytestmark = pytest.mark.timeout(180)


def build(cluster: Any) -> tuple[tf.Graph, dict[str, Any]]:
    graph = tf.Graph()
    with graph.as_default():
        with tf.device(tf.train.replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0")):
            w = tf.get_variable("w", initializer=tf.constant(np.array([0.3, -0.2, 0.1])))
            resets = tf.get_variable("resets", initializer=tf.constant(0.0, tf.float64))
            x = tf.placeholder(tf.float64, [3], name="x")
            _, y = tf.while_loop(lambda i, y: i < 4, lambda i, y: (i + 1, tf.tanh(y * w + x)), [0, x])
            loss = tf.reduce_sum(tf.square(y - 0.25))
            train = tf.train.GradientDescentOptimizer(0.2).minimize(loss)
            too_big = tf.reduce_max(tf.abs(w)) > 0.35
            clamp = tf.cond(too_big, lambda: tf.assign_add(resets, 1.0), lambda: tf.identity(resets))
    return graph, {"w": w, "resets": resets, "x": x, "loss": loss, "train": train, "clamp": clamp,
                   "loop": y.op, "cond": clamp.op}


def run(target: str, cluster: Any) -> list[Any]:
    graph, t = build(cluster)
    feeds = [np.array([1.0, 0.5, -1.0]), np.array([0.2, -0.4, 0.8])]
    with tf.Session(target, graph=graph) as sess:
        sess.run(tf.variables_initializer(graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)))
        losses, largest, counts = [], [], []
        for step in range(6):
            losses.append(sess.run([t["loss"], t["train"]], {t["x"]: feeds[step % 2]})[0])
            largest.append(np.max(np.abs(sess.run(t["w"]))))
            counts.append(sess.run(t["clamp"]))
        return [np.array(losses), np.array(largest), np.array(counts), sess.run(t["w"])]


def test_loop_and_cond_run_across_worker_and_ps(tmp_path: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}) as cluster:
        graph, t = build(cluster.cluster)
        assert t["loop"].device == "/job:worker/task:0"
        assert t["w"].device == "/job:ps/task:0"
        assert t["cond"].device == "/job:ps/task:0"  # it assigns a PS variable: placed beside it
        remote = run(cluster.target("worker"), cluster.cluster)
    local = run("", {"ps": ["unused:1"], "worker": ["unused:2"]})
    for got, want in zip(remote, local):
        np.testing.assert_array_equal(got, want)
    losses, largest, counts, w = remote
    assert losses[-1] < losses[0]
    assert not np.allclose(w, [0.3, -0.2, 0.1])
    taken = largest > 0.35
    assert taken.any() and not taken.all()  # both branches ran
    np.testing.assert_array_equal(counts, np.cumsum(taken))  # the assign ran only when its branch was taken
