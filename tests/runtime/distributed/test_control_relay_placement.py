"""Where a step's control tokens travel: NoOps that only relay control edges run on the
task that waits for them (partition.py's ``_move_control_relays``), so an optimizer's
``update`` group does not send every PS's tokens to the worker and one more to ps0."""

import numpy as np

import tensorgrid as tf
from cluster_processes import LocalCluster
from tensorgrid import monitoring
from tensorgrid.distributed import partition as partition_lib
from tensorgrid.distributed.rpc import ports
from tensorgrid.framework import device as device_lib

CLUSTER = tf.train.ClusterSpec({"ps": ["ps0:1", "ps1:1"], "worker": ["w0:1"]})
WORKER = device_lib.DeviceSpec.from_string("/job:worker/replica:0/task:0")


def _partitions(fetches=(), targets=()):
    graph = tf.get_default_graph()
    return partition_lib.partition(graph, [], list(fetches), list(targets), WORKER, CLUSTER, lambda task: 1)


def _ops(part):
    return {node.name: node for node in part.graph_def.nodes}


def _sends(part):
    return sorted(node.attrs["recv_task"] for node in part.graph_def.nodes if node.op == "_Send")


def test_the_update_group_of_a_minimize_runs_on_the_ps_of_the_global_step():
    with tf.Graph().as_default():
        with tf.device(tf.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:0")):
            a = tf.get_variable("a", initializer=np.ones([3], np.float32))
            b = tf.get_variable("b", initializer=np.ones([3], np.float32))
            step = tf.train.get_or_create_global_step()
            loss = tf.reduce_sum(a * b)
            train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        parts = _partitions(targets=[train])
        ps0, ps1, worker = (parts[f"/job:{j}/replica:0/task:{i}"] for j, i in (("ps", 0), ("ps", 1), ("worker", 0)))
        update = train.control_inputs[0]
        assert update.type == "NoOp"
        assert update.name in _ops(ps0) and update.name not in _ops(worker)
        # The worker sends only data (the gradients) to the PS tasks and receives no token;
        # ps1's apply token goes straight to ps0.
        assert not [n for n in worker.graph_def.nodes if n.op == "_Recv" and n.name.startswith("_recv/^")]
        assert "/job:ps/replica:0/task:0" in _sends(ps1)
        assert _sends(ps0) == ["/job:worker/replica:0/task:0"] * len(_sends(ps0))


def test_a_relay_waited_on_by_two_tasks_stays_where_it_was_put():
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            x = tf.Variable(1.0)
            bump0 = x.assign_add(1.0)
        with tf.device("/job:ps/task:1"):
            y = tf.Variable(1.0)
            bump1 = y.assign_add(1.0)
        with tf.device("/job:worker/task:0"):
            relay = tf.group(bump0, bump1)
        with tf.control_dependencies([relay]):
            with tf.device("/job:ps/task:0"):
                after0 = x.assign_add(10.0)
            with tf.device("/job:ps/task:1"):
                after1 = y.assign_add(10.0)
        parts = _partitions(targets=[after0.op, after1.op])
        assert relay.name in _ops(parts["/job:worker/replica:0/task:0"])


def test_a_relay_nobody_waits_for_runs_where_most_of_its_tokens_come_from():
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:1"):
            x = tf.Variable(1.0)
            y = tf.Variable(2.0)
            bumps = [x.assign_add(1.0), y.assign_add(1.0)]
        with tf.device("/job:ps/task:0"):
            z = tf.Variable(1.0)
            bumps.append(z.assign_add(1.0))
        with tf.device("/job:worker/task:0"):
            relay = tf.group(*bumps)
        parts = _partitions(targets=[relay])
        assert relay.name in _ops(parts["/job:ps/replica:0/task:1"])
        assert "/job:worker/replica:0/task:0" not in parts


def test_training_through_moved_relays_updates_every_ps_once_per_step(tmp_path):
    """Real tasks: the moved update group still orders the global step after both PS's
    applies, and every step applies each PS's update exactly once."""
    with LocalCluster(tmp_path, {"ps": 2, "worker": 1}) as cluster:
        with tf.Graph().as_default():
            with tf.device(tf.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:0")):
                a = tf.get_variable("a", initializer=np.zeros([3], np.float32))
                b = tf.get_variable("b", initializer=np.zeros([3], np.float32))
                step = tf.train.get_or_create_global_step()
                loss = -tf.reduce_sum(a) - 2.0 * tf.reduce_sum(b)
                train = tf.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=step)
            with tf.Session(cluster.target("worker")) as sess:
                sess.run(tf.global_variables_initializer())
                for _ in range(5):
                    sess.run(train)
                got_a, got_b, got_step = sess.run([a, b, step])
    np.testing.assert_allclose(got_a, np.full(3, 2.5, np.float32))
    np.testing.assert_allclose(got_b, np.full(3, 5.0, np.float32))
    assert got_step == 5


def test_a_sparse_step_on_two_ps_tasks_makes_seven_pushes(monkeypatch):
    """The pushes of one step of a partitioned embedding model: the worker's ids and its
    gradients to each PS (4), each PS's rows back (2), and ps1's apply tokens to ps0 (1).
    Nine before: the executor flushed after each Recv's completion even when the others
    of the same push had arrived (it now takes those first), and the update group on the
    worker made both PS send it their tokens and the worker send one to ps0. Counted on
    the data channels of three in-process servers."""
    monkeypatch.setenv("TENSORGRID_INSECURE", "1")
    addresses = [f"localhost:{port}" for port in ports.free_ports(3)]
    cluster = tf.train.ClusterSpec({"ps": addresses[:2], "worker": addresses[2:]})
    servers = [tf.train.Server(cluster, job_name=job, task_index=index)
               for job, index in (("ps", 0), ("ps", 1), ("worker", 0))]
    pushes = monitoring.DATA_CHANNEL_CALLS.labels("PushTensors")
    try:
        with tf.Graph().as_default():
            with tf.device(tf.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:0")):
                ids = tf.placeholder(tf.int64, [8])
                table = tf.get_variable("table", [100, 4], partitioner=tf.fixed_size_partitioner(2))
                loss = tf.reduce_sum(tf.nn.embedding_lookup(table, ids) ** 2)
                step = tf.train.get_or_create_global_step()
                train = tf.train.AdagradOptimizer(0.1).minimize(loss, global_step=step)
            feed = {ids: np.arange(0, 80, 10, dtype=np.int64)}
            with tf.Session(servers[2].target) as sess:
                sess.run(tf.global_variables_initializer())
                sess.run(train, feed)  # registers the partitions
                before = pushes._value.get()
                for _ in range(4):
                    sess.run(train, feed)
                per_step = (pushes._value.get() - before) / 4
                assert sess.run(step) == 5
    finally:
        for server in servers:
            server.stop()
    assert per_step == 7, f"{per_step} pushes per step"
