"""Every task exports Prometheus metrics (names in docs/architecture.md) on its metrics port."""

import urllib.request

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster
from tensorgrid.distributed.rpc import ports

pytestmark = [pytest.mark.timeout(120), pytest.mark.gpu_node]


def _scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return response.read().decode()


def _value(text, name, **labels):
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} {labels} not in metrics:\n{text}")


def test_worker_metrics_count_steps_rpcs_and_the_global_step(tmp_path):
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}, start=False) as cluster:
        cluster.task("ps").start()
        metrics_port = ports.free_ports(1)[0]
        server = tf.train.Server(cluster.cluster, "worker", 0, metrics_port=metrics_port)
        try:
            with tf.Graph().as_default() as g:
                with tf.device(tf.train.replica_device_setter(cluster=cluster.cluster)):
                    step = tf.train.get_or_create_global_step()
                    w = tf.get_variable("w", initializer=np.ones((4, 4), np.float32))
                    train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(w * w), global_step=step)
            with tf.Session(server.target, graph=g) as sess:
                sess.run(tf.variables_initializer([step, w]))
                for _ in range(5):
                    sess.run(train)
            text = _scrape(metrics_port)
        finally:
            server.stop()
    task = "/job:worker/replica:0/task:0"
    assert _value(text, "tensorgrid_steps_total", task=task) >= 6
    assert _value(text, "tensorgrid_step_duration_seconds_count", task=task) >= 6
    assert _value(text, "tensorgrid_tensors_received_total") >= 5
    assert _value(text, "tensorgrid_tensors_sent_total") >= 5
    assert "tensorgrid_rpc_duration_seconds_bucket" in text
    assert _value(text, "tensorgrid_variable_updates_total", task=task) == 0  # the variables are on the PS
    assert "tensorgrid_device_memory_bytes" in text
