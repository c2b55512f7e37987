"""The distributed runtime with real server processes on loopback: sharing, isolation, replication."""

import os
import shutil
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster

pytestmark = [pytest.mark.timeout(120), pytest.mark.gpu_node]


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(tmp_path, {"ps": 1, "worker": 2}) as c:
        yield c


def _model(container=""):
    graph = tf.Graph()
    with graph.as_default(), tf.container(container):
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(np.zeros((2, 2), np.float32), name="w")
        with tf.device("/job:worker/task:0"):
            bump = tf.assign_add(w, tf.ones([2, 2]))
    return graph, w, bump


def test_two_clients_share_ps_variables(cluster):
    g1, w1, bump1 = _model()
    g2, w2, bump2 = _model()
    with tf.Session(cluster.target("worker", 0), graph=g1) as s1, \
            tf.Session(cluster.target("worker", 1), graph=g2) as s2:
        s1.run(w1.initializer)
        s1.run(bump1)
        s2.run(bump2)
        s2.run(bump2)
        np.testing.assert_array_equal(s1.run(w1), np.full((2, 2), 3.0))
        np.testing.assert_array_equal(s2.run(w2), np.full((2, 2), 3.0))


def test_containers_isolate_and_reset_clears(cluster):
    ga, wa, bumpa = _model("experiment_a")
    gb, wb, bumpb = _model("experiment_b")
    target = cluster.target("worker", 0)
    with tf.Session(target, graph=ga) as sa, tf.Session(target, graph=gb) as sb:
        sa.run(wa.initializer)
        sb.run(wb.initializer)
        sa.run(bumpa)
        np.testing.assert_array_equal(sa.run(wa), np.ones((2, 2)))
        np.testing.assert_array_equal(sb.run(wb), np.zeros((2, 2)))
        tf.Session.reset(target, ["experiment_a"])
        with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized value w"):
            sa.run(wa)
        np.testing.assert_array_equal(sb.run(wb), np.zeros((2, 2)))


def test_in_graph_replication_matches_single_device_gradients(cluster):
    rng = np.random.default_rng(0)
    x_value = rng.standard_normal((8, 4)).astype(np.float32)
    y_value = rng.standard_normal((8, 3)).astype(np.float32)
    w_value = rng.standard_normal((4, 3)).astype(np.float32)
    with tf.Graph().as_default() as g:
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(w_value, name="w")
        x = tf.placeholder(tf.float32, [8, 4])
        y = tf.placeholder(tf.float32, [8, 3])
        tower_grads = []
        for i, (xs, ys) in enumerate(zip(tf.split(x, 2), tf.split(y, 2))):
            with tf.device(f"/job:worker/task:{i}"):
                loss = tf.reduce_mean(tf.square(tf.matmul(xs, w) - ys))
                tower_grads.append(tf.gradients(loss, [w])[0])
        with tf.device("/job:ps/task:0"):
            averaged = tf.add_n(tower_grads) / 2.0
        full_loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        full_grad = tf.gradients(full_loss, [w])[0]
    with tf.Session(cluster.target("worker", 0), graph=g) as sess:
        sess.run(w.initializer)
        replicated, single = sess.run([averaged, full_grad], {x: x_value, y: y_value})
    expected = 2 * x_value.T @ (x_value @ w_value - y_value) / y_value.size
    np.testing.assert_allclose(replicated, expected, rtol=1e-5)
    np.testing.assert_allclose(single, expected, rtol=1e-5)
    assert [t.device for t in tower_grads] == ["/job:worker/task:0", "/job:worker/task:1"]


def test_checkpoint_restored_into_a_fresh_cluster_gives_identical_variables(tmp_path):
    def build():
        graph = tf.Graph()
        with graph.as_default():
            with tf.device(tf.train.replica_device_setter(ps_tasks=2)):
                w = tf.get_variable("w", [50, 20], initializer=tf.random_normal_initializer(seed=1))
                b = tf.get_variable("b", [20], initializer=tf.random_uniform_initializer(seed=2))
                step = tf.train.get_or_create_global_step()
                loss = tf.reduce_sum(tf.square(w)) + tf.reduce_sum(b)
                train = tf.train.AdamOptimizer(0.1).minimize(loss, global_step=step)
            saver = tf.train.Saver()
        return graph, train, saver

    prefix = os.path.join(str(tmp_path), "model.ckpt")
    graph, train, saver = build()
    (tmp_path / "first").mkdir()
    with LocalCluster(tmp_path / "first", {"ps": 2, "worker": 1}) as first:
        with tf.Session(first.target("worker"), graph=graph) as sess:
            sess.run(tf.variables_initializer(graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)))
            for _ in range(3):
                sess.run(train)
            path = saver.save(sess, prefix, global_step=tf.train.get_global_step(graph))
            before = {v.op.name: sess.run(v) for v in graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)}
    assert before["global_step"] == 3
    graph2, _, saver2 = build()
    (tmp_path / "second").mkdir()
    with LocalCluster(tmp_path / "second", {"ps": 2, "worker": 1}) as second:
        with tf.Session(second.target("worker"), graph=graph2) as sess:
            saver2.restore(sess, path)
            after = {v.op.name: sess.run(v) for v in graph2.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)}
    assert sorted(before) == sorted(after)
    for name in before:
        np.testing.assert_array_equal(before[name], after[name], err_msg=name)


def test_unknown_device_in_cluster_is_a_clear_error(cluster):
    with tf.Graph().as_default() as g:
        with tf.device("/job:ps/task:3"):
            v = tf.Variable(1.0, name="v")
    with tf.Session(cluster.target("worker", 0), graph=g) as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"placed on /job:ps/replica:0/task:3.*tasks are"):
            sess.run(v.initializer)


def test_runtime_error_on_ps_names_the_op_and_the_task(cluster):
    with tf.Graph().as_default() as g:
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(1.0, name="never_initialized")
        with tf.device("/job:worker/task:0"):
            y = v * 2.0
    with tf.Session(cluster.target("worker", 0), graph=g) as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized value never_initialized"):
            sess.run(y)
        # The session still works after a failed step.
        sess.run(v.initializer)
        assert sess.run(y) == 2.0


def test_large_variable_round_trip(cluster):
    value = np.arange(16 * 1024 * 1024, dtype=np.float32).reshape(4096, 4096)  # 64 MiB
    with tf.Graph().as_default() as g:
        with tf.device("/job:ps/task:0"):
            big = tf.Variable(tf.zeros([4096, 4096]), name="big")
            load = tf.assign(big, tf.placeholder(tf.float32, [4096, 4096], name="value"))
    with tf.Session(cluster.target("worker", 0), graph=g) as sess:
        sess.run(big.initializer)
        sess.run(load, {"value:0": value})
        np.testing.assert_array_equal(sess.run(big), value)


def test_a_1_gib_variable_on_the_ps_works(cluster):
    elements = 256 * 1024 * 1024  # float32: 1 GiB
    with tf.Graph().as_default() as g:
        with tf.device("/job:ps/task:0"):
            big = tf.Variable(tf.zeros([elements]), name="big")
            bump = tf.assign_add(big, tf.ones([elements]))
        with tf.device("/job:worker/task:0"):
            total = tf.reduce_sum(big.value())
    with tf.Session(cluster.target("worker", 0), graph=g) as sess:
        sess.run(big.initializer)
        sess.run(bump)
        assert sess.run(total) == float(elements)
        fetched = sess.run(big)
        assert fetched.nbytes == 1 << 30
        assert fetched[0] == 1.0 and fetched[-1] == 1.0
        del fetched


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_server_stopped_by_a_signal_exits_128_plus_its_number(tmp_path, sig):
    # A drained or evicted PS must not look like a finished one to the operator (exit 0).
    with LocalCluster(str(tmp_path), {"ps": 1}) as c:
        ps = c.task("ps")
        ps.kill(sig)
        assert ps.process is not None and ps.process.returncode == 128 + sig, ps.log()


def test_a_program_that_is_pid_1_exits_on_sigterm_without_ending_training(tmp_path):
    # A pod's command is the first process of its PID namespace, for which the kernel ignores
    # SIGTERM's default action: without the server's handler, `kubectl delete` waits 30 s.
    # Stopped so, a worker has not finished training: the PS must not be told it has.
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        message = "needs unshare(1) and root for a PID namespace"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI runs as root with util-linux: {message}")
        pytest.skip(message)
    with LocalCluster(str(tmp_path), {"ps": 1, "worker": 1}, start=False) as c:
        ps = c.task("ps").start()
        program = ("import tensorgrid as tf; "
                   f"s = tf.train.Server({c.cluster!r}, job_name='worker', task_index=0); "
                   "print('pid', __import__('os').getpid(), flush=True); s.join()")
        process = subprocess.Popen([unshare, "--pid", "--fork", "--kill-child", sys.executable, "-c", program],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert process.stdout is not None
            lines = [process.stdout.readline() for _ in range(2)]
            assert "pid 1\n" in lines, lines
            child = int(subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True,
                                       check=True).stdout.split()[0])
            os.kill(child, signal.SIGTERM)
            assert process.wait(timeout=20) == 128 + signal.SIGTERM, process.stdout.read()
        finally:
            process.kill()
        with pytest.raises(subprocess.TimeoutExpired):
            ps.process.wait(timeout=3)  # still serving: no "training finished" report arrived
        assert "finished" not in ps.log(), ps.log()


def test_a_peer_that_does_not_answer_is_unavailable_not_a_failed_step(monkeypatch):
    # A replaced pod's stale address accepts nothing or answers nothing: callers must be able
    # to retry (UnavailableError), not end the program on DeadlineExceeded.
    from tensorgrid.distributed.rpc import clients

    monkeypatch.setattr(clients, "STATUS_TIMEOUT_SECONDS", 0.5)
    with socket.socket() as silent:  # listens, accepts into the backlog, never speaks HTTP/2
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        client = clients.WorkerClient(f"127.0.0.1:{silent.getsockname()[1]}", "/job:worker/replica:0/task:1")
        with pytest.raises(tf.errors.UnavailableError, match="no answer within 0.5 s"):
            client.incarnation_quick()
