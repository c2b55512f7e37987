"""A task that no longer knows a partition's graph handle answers ABORTED (as TensorFlow's
GraphMgr does), and the master registers the session's partitions again for the next step.

The master decides this on the status code alone, so rewording the worker's message cannot
change what happens."""

import pytest

import tensorgrid as tf
from tensorgrid.distributed.rpc import ports


@pytest.fixture
def servers():
    ps_port, worker_port = ports.free_ports(2)
    cluster = {"ps": [f"127.0.0.1:{ps_port}"], "worker": [f"127.0.0.1:{worker_port}"]}
    ps = tf.train.Server(cluster, job_name="ps", task_index=0)
    worker = tf.train.Server(cluster, job_name="worker", task_index=0)
    yield ps, worker
    worker.stop()
    ps.stop()


def _forget_every_partition(server):
    for handle in list(server.worker._graphs):
        server.worker.deregister_graph(handle)


def test_a_forgotten_graph_handle_aborts_one_step_and_the_next_registers_again(servers):
    ps, worker = servers
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(3.0)
            doubled = v * 2.0
        with tf.device("/job:worker/task:0"):
            total = doubled + 1.0
        with tf.Session(worker.target) as sess:
            sess.run(v.initializer)
            assert sess.run(total) == 7.0
            _forget_every_partition(ps)
            with pytest.raises(tf.errors.AbortedError, match="is not registered on /job:ps"):
                sess.run(total)
            assert sess.run(total) == 7.0
            assert sess.run(total) == 7.0


def test_an_unknown_graph_handle_is_aborted_on_the_worker_interface(servers):
    ps, _ = servers
    with pytest.raises(tf.errors.AbortedError, match="'no-such-graph'"):
        ps.worker.signature("no-such-graph")
