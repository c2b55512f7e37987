"""Graphs are bounded in bytes of GraphDef wherever they come from.

The bytes of graph partitions registered on a worker are bounded in total, not only per
graph: an outsider registering many graphs, each under the per-graph limit, is refused
once the worker holds ``TENSORGRID_MAX_REGISTERED_GRAPH_BYTES``, while a training beside it
goes on; deregistering, closing the session and a CleanupAll of every container free the
room again. A session created in the task's own process is held to the same node and byte
limits as one created over gRPC.

The cluster runs as real processes (``cluster_processes``) without TLS, so the outsider
(this process, over gRPC) reaches RegisterGraph as a member of a job could.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster
from tensorgrid.distributed.rpc import clients
from tensorgrid.distributed import limits as limits_lib
from tensorgrid.distributed.rpc.transport import tls
from test_resource_bounds import BackgroundTraining

pytestmark = [pytest.mark.timeout(240)]

KiB = 1 << 10
PS = "/job:ps/replica:0/task:0"
TOTAL_LIMIT = 1024 * KiB
LIMITS = {
    "TENSORGRID_MAX_GRAPH_BYTES": str(512 * KiB),
    "TENSORGRID_MAX_REGISTERED_GRAPH_BYTES": str(TOTAL_LIMIT),
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        env.setenv(tls.INSECURE_ENV, "1")
        env.delenv(tls.TLS_DIR_ENV, raising=False)
        with LocalCluster(tmp_path_factory.mktemp("graph-bytes"), {"ps": 1, "worker": 1}, extra_env=LIMITS) as c:
            yield c


def _constant_graph(name: str, kib: int):
    """A GraphDef of one constant of ``kib`` KiB: under the per-graph limit, registrable."""
    with tf.Graph().as_default() as graph:
        tf.constant(np.zeros(kib * KiB // 4, np.float32), name=name)
    return graph.as_graph_def()


def test_a_flood_of_small_graphs_is_refused_in_total_while_training_goes_on(cluster):
    training = BackgroundTraining(cluster.target("worker"))
    training.advance(5)
    ps = clients.WorkerClient(cluster.task("ps").address, PS)
    handles = []
    with pytest.raises(tf.errors.ResourceExhaustedError) as refused:
        for i in range(20):  # 20 x 200 KiB, each under the 512 KiB per-graph limit
            handles.append(ps.register_graph(f"outsider{i}", _constant_graph("c", 200), [], [], ["c"]))
    message = str(refused.value)
    assert f"limit of {TOTAL_LIMIT} bytes (TENSORGRID_MAX_REGISTERED_GRAPH_BYTES={TOTAL_LIMIT})" in message
    assert 3 <= len(handles) <= 5, message  # the training's partition holds some of the 1 MiB
    training.advance(20)  # its partition stays registered and keeps running

    ps.deregister_graph(handles.pop())  # deregistering frees its bytes: one more fits, and no more
    handles.append(ps.register_graph("outsider-again", _constant_graph("c", 200), [], [], ["c"]))
    with pytest.raises(tf.errors.ResourceExhaustedError, match="TENSORGRID_MAX_REGISTERED_GRAPH_BYTES"):
        ps.register_graph("outsider-more", _constant_graph("c", 200), [], [], ["c"])
    for handle in handles:
        ps.deregister_graph(handle)
    handles = [ps.register_graph(f"outsider-after{i}", _constant_graph("c", 200), [], [], ["c"]) for i in range(3)]
    training.advance(20)
    ps.close()
    training.close()


def test_a_closed_session_frees_the_bytes_of_its_partitions(cluster):
    ps = clients.WorkerClient(cluster.task("ps").address, PS)
    with tf.Graph().as_default() as graph:
        with tf.device("/job:ps/task:0"):
            big = tf.constant(np.ones(150 * KiB // 4, np.float32), name="big")
        with tf.device("/job:worker/task:0"):
            total = tf.reduce_sum(big)
    sessions = []
    with pytest.raises(tf.errors.ResourceExhaustedError, match="TENSORGRID_MAX_REGISTERED_GRAPH_BYTES"):
        for _ in range(10):  # each session registers its own 150 KiB partition on the PS
            session = tf.Session(cluster.target("worker"), graph=graph)
            sessions.append(session)
            assert session.run(total) == 150 * KiB // 4
    for session in sessions:
        session.close()
    with tf.Session(cluster.target("worker"), graph=graph) as session:  # the closed ones' room is free
        assert session.run(total) == 150 * KiB // 4
    ps.close()


def test_in_process_registrations_count_their_bytes_and_cleanup_all_frees_them():
    limits = limits_lib.ServerLimits(max_registered_graph_bytes=600 * KiB)
    server = tf.train.Server.create_local_server()
    worker = server.worker
    try:
        worker.limits = limits
        handle = worker.register_graph("s1", _constant_graph("c", 250), [], [], ["c"])
        assert 250 * KiB < worker.registered_graph_bytes < 260 * KiB
        worker.register_graph("s2", _constant_graph("c", 250), [], [], ["c"])
        with pytest.raises(tf.errors.ResourceExhaustedError, match=r"holds \d+ bytes of GraphDef in 2 registered"):
            worker.register_graph("s3", _constant_graph("c", 250), [], [], ["c"])
        worker.deregister_graph(handle)
        worker.register_graph("s3", _constant_graph("c", 250), [], [], ["c"])
        worker.cleanup_all()
        assert worker.registered_graph_bytes == 0
        with pytest.raises(tf.errors.AbortedError, match="is not registered"):
            worker.run_graph(handle, 1, [])
    finally:
        server.stop()


def test_the_total_limit_comes_from_its_variable():
    limits = limits_lib.ServerLimits.from_env({"TENSORGRID_MAX_REGISTERED_GRAPH_BYTES": "12345"})
    assert limits.max_registered_graph_bytes == 12345
    assert limits_lib.ServerLimits().max_registered_graph_bytes == 4 * limits_lib.ServerLimits().max_graph_bytes
    with pytest.raises(ValueError, match="TENSORGRID_MAX_REGISTERED_GRAPH_BYTES='1e9' is not valid"):
        limits_lib.ServerLimits.from_env({"TENSORGRID_MAX_REGISTERED_GRAPH_BYTES": "1e9"})


def test_an_in_process_session_is_held_to_the_byte_limit_as_a_remote_one(monkeypatch):
    monkeypatch.setenv("TENSORGRID_MAX_GRAPH_BYTES", str(256 * KiB))
    server = tf.train.Server.create_local_server()
    try:
        with tf.Graph().as_default() as graph:
            tf.constant(np.zeros(300 * KiB // 4, np.float32), name="big")
        with tf.Session(server.target, graph=graph) as session:
            with pytest.raises(tf.errors.ResourceExhaustedError,
                               match=r"CreateSession: the graph would have 1 nodes and \d+ bytes of GraphDef, over "
                                     r"this task's limit of 1000000 nodes \(TENSORGRID_MAX_GRAPH_NODES\) and 262144 "
                                     r"bytes \(TENSORGRID_MAX_GRAPH_BYTES\)"):
                session.run("big:0")
        with tf.Graph().as_default() as graph:
            small = tf.constant(np.ones(100 * KiB // 4, np.float32))
            total = tf.reduce_sum(small)
        with tf.Session(server.target, graph=graph) as session:
            assert session.run(total) == 100 * KiB // 4
            with graph.as_default():
                more = tf.reduce_sum(tf.constant(np.ones(200 * KiB // 4, np.float32)))
            with pytest.raises(tf.errors.ResourceExhaustedError, match="ExtendSession of session .*: the graph would "
                                                                       "have 4 nodes"):
                session.run(more)
    finally:
        server.stop()


def test_partitions_of_dropped_plans_are_deregistered_not_piled_up():
    server = tf.train.Server.create_local_server()
    try:
        with tf.Graph().as_default() as graph:
            total = tf.reduce_sum(tf.constant(np.ones(1000, np.float32)))
        with tf.Session(server.target, graph=graph) as session:
            session.run(total)
            held = server.worker.registered_graph_bytes
            assert held > 0
            for _ in range(5):  # each reset drops the session's plans; its next step registers again
                tf.Session.reset(server.target, ["a-container-nobody-uses"])
                assert session.run(total) == 1000
            deadline = time.monotonic() + 60
            while server.worker.registered_graph_bytes != held:  # the old partitions go in the background
                assert time.monotonic() < deadline, f"{server.worker.registered_graph_bytes} bytes stay registered"
                time.sleep(0.05)
        assert server.worker.registered_graph_bytes == 0  # and the session's close deregisters the last ones
    finally:
        server.stop()


def test_a_graph_is_measured_as_serialized_without_serializing_its_large_constants():
    from tensorgrid.distributed import graph_codec
    from tensorgrid.framework import graph_def as graph_def_lib

    with tf.Graph().as_default() as graph:
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        w = tf.Variable(np.ones((3, 2), np.float32))
        tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf.matmul(x, w)))
        tf.constant(["a", "bc"])
    small = graph.as_graph_def()  # no tensor of 1 KiB or more: exact
    assert graph_codec.serialized_size(small) == graph_codec.to_proto(small).ByteSize()
    with graph.as_default():
        tf.constant(np.zeros((300, 1000), np.float32))
        tf.Variable(np.zeros((64, 64), np.float64))
    large = graph.as_graph_def()
    large.nodes.append(graph_def_lib.NodeDef("listed", "NoOp", [], "", {"values": [np.arange(5000), np.arange(7)]},
                                             [], []))  # a list attribute holding a large array
    exact = graph_codec.to_proto(large).ByteSize()
    assert exact - 16 * 3 <= graph_codec.serialized_size(large) <= exact


def test_after_an_aborted_step_the_failed_plans_partitions_are_deregistered_everywhere():
    from tensorgrid.distributed.rpc import ports

    addresses = [f"localhost:{port}" for port in ports.free_ports(2)]
    spec = tf.train.ClusterSpec({"ps": [addresses[0]], "worker": [addresses[1]]})
    ps = tf.train.Server(spec, job_name="ps", task_index=0)
    worker = tf.train.Server(spec, job_name="worker", task_index=0)
    try:
        with tf.Graph().as_default() as graph:
            with tf.device("/job:ps/task:0"):
                total = tf.reduce_sum(tf.constant(np.ones(1000, np.float32)))
            with tf.device("/job:worker/task:0"):
                doubled = total * 2.0
        with tf.Session(worker.target, graph=graph) as session:
            assert session.run(doubled) == 2000
            held = ps.worker.registered_graph_bytes
            for _ in range(3):  # the worker forgets its partition: the step fails ABORTED, the next registers again
                worker.worker.cleanup_all()
                with pytest.raises(tf.errors.AbortedError, match="is not registered"):
                    session.run(doubled)
                assert session.run(doubled) == 2000
            deadline = time.monotonic() + 60
            while ps.worker.registered_graph_bytes != held:  # the failed plans' PS partitions go in the background
                assert time.monotonic() < deadline, f"{ps.worker.registered_graph_bytes} bytes stay registered on the PS"
                time.sleep(0.05)
    finally:
        worker.stop()
        ps.stop()
