"""Replication reads what the variables' write tracking reports: after real training steps (a
sparse optimizer's rows, dense updates, the global step) only the rows written travel, and the
replica equals the primary's state; another reader's baseline (an incremental save) does not
make it miss a write."""

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.distributed import replication

PRIMARY = "/job:ps/replica:0/task:0"


class StorePeer:
    """The holder's store called directly (``ReplicaPeer`` without the wire)."""

    def __init__(self, store):
        self.store = store
        self.pushes = []

    def push(self, push, pieces):
        self.pushes.append((push, pieces))
        return self.store.apply(push, pieces)

    def fetch(self, primary_task):
        return self.store.snapshot(primary_task)


@pytest.fixture
def server():
    """An in-process task: its worker's resources are what a PS task's replicator reads."""
    local = tf.train.Server.create_local_server()
    yield local
    local.stop()


def _model():
    graph = tf.Graph()
    with graph.as_default():
        table = tf.get_variable("table", initializer=tf.random_normal([1000, 8], seed=1))
        dense = tf.get_variable("dense", initializer=tf.ones([8, 1]))
        ids = tf.placeholder(tf.int64, [None])
        loss = tf.reduce_sum(tf.matmul(tf.nn.embedding_lookup(table, ids), dense) ** 2)
        step = tf.train.get_or_create_global_step()
        train = tf.train.MomentumOptimizer(0.01, 0.9).minimize(loss, global_step=step)
        init = tf.global_variables_initializer()
    return graph, ids, train, init


def _replicated(session, peer):
    snapshot = peer.fetch(PRIMARY)
    held = {}
    for piece in snapshot.rows:
        replication._apply(held, piece)
    return held


def test_training_steps_push_the_rows_written_and_the_replica_equals_the_primary(server):
    graph, ids, train, init = _model()
    with tf.Session(server.target, graph=graph) as session:
        session.run(init)
        resources = server.worker.resources  # what a PS task's replicator reads
        peer = StorePeer(replication.ReplicaStore())
        replicator = replication.Replicator(PRIMARY, 3, resources, peer, "ps:1", replication.ReplicationSettings())
        assert replicator.push_once() and peer.pushes[-1][0].full
        session.run(train, {ids: [5, 17, 900]})
        assert replicator.push_once()
        by_name = {}
        for piece in peer.pushes[-1][1]:
            by_name.setdefault(piece.key[1], []).append(piece)
        # The table and its momentum slot: the three rows looked up; the dense variable and the step: whole.
        for name in ("table", "table/Momentum"):
            assert [p.rows.tolist() for p in by_name[name]] == [[5, 17, 900]]
        assert by_name["dense"][0].rows is None and by_name["global_step"][0].rows is None
        for batch in ([1, 2], [2, 999], [0]):
            session.run(train, {ids: batch})
            assert replicator.push_once()
        held = _replicated(session, peer)
        for container, name, variable in resources.items():
            np.testing.assert_array_equal(held[(container, name)][0], variable.backend.to_numpy(variable.value),
                                              err_msg=name)
        assert int(held[next(k for k in held if k[1] == "global_step")][0]) == 4


def test_nothing_written_nothing_pushed_and_another_readers_baseline_changes_nothing(server):
    graph, ids, train, init = _model()
    with tf.Session(server.target, graph=graph) as session:
        session.run(init)
        resources = server.worker.resources  # what a PS task's replicator reads
        peer = StorePeer(replication.ReplicaStore())
        replicator = replication.Replicator(PRIMARY, 3, resources, peer, "ps:1", replication.ReplicationSettings())
        assert replicator.push_once()
        assert replicator.push_once() and len(peer.pushes) == 1  # nothing written: no push
        table = next(v for _, name, v in resources.items() if name == "table")
        saver_baseline, _ = table.written.changed_since(0, 0, 1000)
        session.run(train, {ids: [42]})
        # A saver asks first and moves its own baseline; the replicator still gets row 42.
        saver_baseline, rows = table.written.changed_since(*saver_baseline, 1000)
        assert rows.tolist() == [42]
        assert replicator.push_once()
        pushed = {p.key[1]: p for p in peer.pushes[-1][1]}
        assert pushed["table"].rows.tolist() == [42]
        np.testing.assert_array_equal(_replicated(session, peer)[("localhost", "table")][0],
                                      table.backend.to_numpy(table.value))
