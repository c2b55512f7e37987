"""With its tasks on one machine, a job's steps make no gRPC call, so mutual TLS costs a step nothing.

Why it matters: on one machine the tensors go over the tasks' Unix sockets, which TLS does
not cover (the kernel authenticates the peer); gRPC, which TLS does cover, carries only a
task's set-up calls. bench/README.md ("Mutual TLS on one machine costs a step nothing")
measured TLS and plaintext equal that way; a step call moved to gRPC would bring the
TLS cost back unnoticed. A PS in its own process, the worker's server in this one, with the
test run's certificates (mutual TLS): after the set-up, the steps' calls in both directions
go over the data channel and no gRPC call is made or served.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster
from tensorgrid import monitoring
from tensorgrid.distributed.rpc.transport import peer_channel
from tensorgrid.distributed.rpc.transport import tls

pytestmark = pytest.mark.timeout(120)


def _served_calls() -> tuple[int, int]:
    """(calls this process served, on either protocol; of them on the data channel)."""
    served = on_data_channel = 0
    for metric in monitoring.REGISTRY.collect():
        for sample in metric.samples:
            if sample.name == "tensorgrid_rpc_duration_seconds_count":
                served += int(sample.value)
            elif sample.name == "tensorgrid_data_channel_calls_total":
                on_data_channel += int(sample.value)
    return served, on_data_channel


def test_a_step_between_tasks_on_one_machine_makes_no_grpc_call(tmp_path: Any, monkeypatch: Any) -> None:
    assert tls.from_env() is not None, "this test needs the test run's mutual TLS"
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}, start=False) as cluster:
        cluster.task("ps").start()
        server = tf.train.Server(cluster.cluster, job_name="worker", task_index=0)
        try:
            with tf.Graph().as_default() as graph:
                with tf.device("/job:ps/task:0"):
                    w = tf.Variable(np.ones((3, 2), np.float32), name="w")
                with tf.device("/job:worker/task:0"):
                    x = tf.placeholder(tf.float32, [None, 3])
                    train = tf.train.GradientDescentOptimizer(0.5).minimize(tf.reduce_sum(tf.matmul(x, w)))
            with tf.Session(server.target, graph=graph) as sess:
                sess.run(w.initializer)
                sess.run(train, {x: np.ones((2, 3), np.float32)})  # the set-up: RegisterGraph on gRPC

                grpc_calls_made = []
                opened = peer_channel.PeerChannel.stub

                @contextlib.contextmanager
                def counted(channel: peer_channel.PeerChannel) -> Iterator[Any]:
                    grpc_calls_made.append(channel.address)
                    with opened(channel) as stub:
                        yield stub

                monkeypatch.setattr(peer_channel.PeerChannel, "stub", counted)
                served_before, on_data_channel_before = _served_calls()
                for _ in range(3):
                    sess.run(train, {x: np.ones((2, 3), np.float32)})
                served, on_data_channel = _served_calls()
                monkeypatch.undo()  # fetching w below is a new plan: its RegisterGraph goes on gRPC
                np.testing.assert_allclose(sess.run(w), np.full((3, 2), -3.0))
        finally:
            server.stop()
    assert grpc_calls_made == []
    assert served - served_before == on_data_channel - on_data_channel_before > 0
