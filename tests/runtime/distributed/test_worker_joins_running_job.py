"""A worker that joins a running asynchronous job: its TF_CONFIG lists one more worker than
the parameter servers' and the other workers' did, as the operator gives a worker added to a
running TrainingJob (``kubectl scale``). The parameter servers take its partitions and push
it its tensors at the address its master's cluster spec gives, count it among the training
tasks whose end they wait for, and nothing of the running workers changes."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import BackgroundTraining, LocalCluster, TaskProcess
from tensorgrid.distributed.rpc import ports

pytestmark = [pytest.mark.timeout(180)]


def _train_on_worker_2(target: str, steps: int) -> np.ndarray:
    """``steps`` SGD steps of ``sum(x @ w)`` computed on worker 2 with ``w`` on the PS, the
    variable worker 0 created and initialised; returns ``w`` read before and after."""
    with tf.Graph().as_default() as graph:
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(np.zeros((3, 2), np.float32), name="w")
        with tf.device("/job:worker/task:2"):
            x = tf.placeholder(tf.float32, [None, 3])
            loss = tf.reduce_sum(tf.matmul(x, w))
            train = tf.train.GradientDescentOptimizer(0.001).minimize(loss)
    with tf.Session(target, graph=graph) as sess:
        for _ in range(steps):
            sess.run(train, {x: np.ones((2, 3), np.float32)})
        return np.asarray(sess.run(w))


def test_a_third_worker_with_a_larger_cluster_joins_and_trains(tmp_path: object) -> None:
    with LocalCluster(str(tmp_path), {"ps": 1, "worker": 2}) as cluster:
        first = BackgroundTraining(cluster.target("worker", 0))
        try:
            first.advance(5)
            grown = dict(cluster.cluster, worker=[*cluster.cluster["worker"], f"localhost:{ports.free_ports(1)[0]}"])
            joined = TaskProcess("worker", 2, grown["worker"][2], grown, os.path.join(str(tmp_path), "worker2.log"))
            cluster.tasks[("worker", 2)] = joined  # killed with the others
            joined.start()
            before = first.steps
            w = _train_on_worker_2(joined.target, steps=10)
            first.advance(5)
        finally:
            first.close()
        # Every step (of worker 0's and worker 2's alike) moved w by 0.001 * 2 the gradient of sum(x @ w).
        steps = first.steps + 10
        assert before >= 5
        assert np.all(w <= -0.002 * (before + 10) + 1e-5) and np.all(w > -0.002 * (steps + 1)), w
        assert "/job:worker/replica:0/task:2 joined the running job at " + grown["worker"][2] in (
            cluster.task("ps", 0).log())


def test_a_parameter_server_takes_only_workers_from_a_larger_cluster() -> None:
    cluster = {"ps": ["localhost:2222"], "worker": ["localhost:2223", "localhost:2224"]}
    server = tf.train.Server(cluster, job_name="ps", task_index=0, start=False)
    server.learn_peers({"/job:ps/replica:0/task:0": "localhost:2222",
                        "/job:worker/replica:0/task:5": "localhost:2299"})
    assert "/job:worker/replica:0/task:5" in server.training_task_names()
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"names /job:ps/replica:0/task:1 at localhost:2300, which the cluster spec of "
                             r"/job:ps/replica:0/task:0 does not have; only workers may join"):
        server.learn_peers({"/job:ps/replica:0/task:1": "localhost:2300"})
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"the address of /job:worker/replica:0/task:6: 'nowhere'"):
        server.learn_peers({"/job:worker/replica:0/task:6": "nowhere"})
