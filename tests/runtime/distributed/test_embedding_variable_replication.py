"""Embedding variable tables in the live replica of a PS (``TENSORGRID_PS_REPLICATION=1``): a push
carries the keys stored, updated and evicted since the last one, and a PS restarted from its replica
has the table it had (keys, rows, frequencies, versions, slots, counts of keys not yet admitted)."""

from __future__ import annotations

import signal
import time
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster
from tensorgrid.distributed import replica_tables
from tensorgrid.distributed import replication
from tensorgrid.distributed.rpc import replication_service
from tensorgrid.execution import resources as resources_lib
from tensorgrid.kernels import backend as backend_lib
from tensorgrid.ops import op_util

PRIMARY = "/job:ps/replica:0/task:0"
DIM = 4


class WirePeer:
    """The holder's store behind the wire's encoding (``ReplicaPeer`` without gRPC)."""

    def __init__(self) -> None:
        self.store = replication.ReplicaStore()
        self.pushes: list[tuple[Any, list[Any]]] = []

    def push(self, push: Any, pieces: list[Any]) -> Any:
        decoded = [replication_service._table_from_proto(replication_service._table_to_proto(p))
                   if isinstance(p, replica_tables.TableRows) else p for p in pieces]
        self.pushes.append((push, decoded))
        return self.store.apply(push, decoded)

    def fetch(self, primary_task: str) -> Any:
        return self.store.snapshot(primary_task)


def _model(parts: int, filter_option: Any = None) -> tuple[Any, Any, Any, list[Any]]:
    option = tf.EmbeddingVariableOption(filter_option=filter_option or tf.CounterFilter(filter_freq=2),
                                        evict_option=tf.GlobalStepEvict(steps_to_live=2), evict_every_n_steps=2)
    ev = tf.get_embedding_variable("emb", DIM, ev_option=option,
                                   partitioner=tf.fixed_size_partitioner(parts) if parts > 1 else None)
    ids = tf.placeholder(tf.int64, [None])
    rows = tf.nn.embedding_lookup(ev, ids)
    step = tf.train.get_or_create_global_step()
    train = tf.train.AdagradOptimizer(0.3).minimize(tf.reduce_sum(rows * rows), global_step=step)
    exports = []
    for part in (list(ev) if parts > 1 else [ev]):
        specs = [(tf.int64, [None]), (tf.float32, [None, DIM]), (tf.int64, [None]), (tf.int64, [None]),
                 (tf.int64, [None]), (tf.int64, [None])] + [(tf.int64, [None])] * bool(part.bloom_filter_counters) \
            + [(tf.float32, [None, DIM])] * len(part.slots)
        with tf.get_default_graph().colocate_with(part.op):  # global step -1: the export evicts nothing
            exports.append(op_util.make_op("KvResourceExport", [part.handle, tf.constant(-1, tf.int64)], specs,
                                           "KvResourceExport", {"slot_names": [s.name for s in part.slots]}).outputs)
    return ids, train, step, exports


def _batches(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    # Hot ids every step, warm ids (admitted on their second lookup, evicted 2 steps after), rare ids never admitted.
    return [np.concatenate([[7, -2**50, 2**62 + 9], np.arange(1000 + s, 1003 + s), rng.integers(-2**62, 2**62, 3)])
            for s in range(count)]


def _held_table(peer: Any, name: str) -> dict[str, np.ndarray]:
    snapshot = peer.fetch(PRIMARY)
    variables: dict[Any, Any] = {}
    tables: dict[Any, replica_tables.HeldTable] = {}
    for piece in snapshot.rows:
        assert replication._apply_piece(variables, tables, piece)
    (held,) = [t for key, t in tables.items() if key[1] == name]
    return held.arrays


def _assert_same_table(held: dict[str, np.ndarray], exported: list[np.ndarray], slot: str) -> None:
    keys, values, freqs, versions, pending, counts, *bloom, slot_values = exported
    for name, expected in (("keys", keys), ("values", values), ("freqs", freqs), ("versions", versions),
                           ("pending_keys", pending), ("pending_counts", counts), (f"slot:{slot}", slot_values),
                           *(("bloom_counters", counters) for counters in bloom)):
        np.testing.assert_array_equal(held[name], expected, err_msg=name)


@pytest.mark.parametrize("filter_option", [None, tf.CBFFilter(filter_freq=2, max_element_size=64,
                                                              false_positive_probability=0.01)])
def test_pushes_carry_the_changed_and_evicted_keys_and_the_replica_loads_into_the_same_table(filter_option: Any):
    server = tf.train.Server.create_local_server()
    try:
        graph = tf.Graph()
        with graph.as_default():
            ids, train, _, (export,) = _model(1, filter_option)
            init = tf.global_variables_initializer()
        with tf.Session(server.target, graph=graph) as sess:
            sess.run(init)
            resources = server.worker.resources
            peer = WirePeer()
            replicator = replication.Replicator(PRIMARY, 5, resources, peer, "ps:1", replication.ReplicationSettings())
            assert replicator.push_once() and peer.pushes[-1][0].full
            evicted_somewhere = False
            for i, batch in enumerate(_batches(8)):
                sess.run(train, {ids: batch})
                assert replicator.push_once()
                (piece, *more) = [p for p in peer.pushes[-1][1] if isinstance(p, replica_tables.TableRows)]
                # Only the keys the step looked up or updated, the first update's too (it makes Adagrad's slot:
                # the holder gives the keys it did not update the slot's initial value).
                assert not more and not piece.whole
                assert set(piece.arrays["keys"].tolist()) <= set(batch.tolist())
                evicted_somewhere |= bool(piece.arrays["removed_keys"].size)
                _assert_same_table(_held_table(peer, "emb"), sess.run(export), "Adagrad")
            assert evicted_somewhere
            expected = sess.run(export)
            fresh = resources_lib.ResourceManager()
            restored = replication.restore_from_replica(fresh, backend_lib.for_device("CPU"), peer, PRIMARY, "ps:1", 1)
            assert restored is not None and restored.tables == 1
            ((_, _, table),) = [item for item in fresh.items() if item[1] == "emb"]
            loaded = table.export(["Adagrad"])
            assert len(loaded) == len(expected)
            for name, a, b in zip(("keys", "values", "freqs", "versions", "pending", "counts", "bloom or slot",
                                   "slot"), loaded, expected):
                np.testing.assert_array_equal(a, b, err_msg=name)
    finally:
        server.stop()


@pytest.mark.timeout(120)
def test_a_ps_killed_and_restarted_loads_its_table_from_the_replica(tmp_path: Any):
    with LocalCluster(tmp_path, {"ps": 2, "worker": 1}, extra_env={"TENSORGRID_PS_REPLICATION": "1"}) as cluster:
        spec = tf.train.ClusterSpec(cluster.cluster)
        with tf.Graph().as_default() as graph:
            with tf.device(tf.train.replica_device_setter(cluster=spec)):
                ids, train, step, exports = _model(2)
            init = tf.global_variables_initializer()
        holder = replication_service.ReplicationClient(cluster.cluster["ps"][1])
        try:
            with tf.Session(cluster.target("worker"), graph=graph) as sess:
                sess.run(init)
                for batch in _batches(10):
                    sess.run(train, {ids: batch})
                before = sess.run(exports[0])  # part 0 lives on ps:0
            assert before[0].size and before[4].size  # keys stored, and keys seen but not yet admitted
            deadline = time.monotonic() + 30
            while True:  # the pushes of the last steps land within an interval or two
                try:
                    _assert_same_table(_held_table(holder, "emb/part_0"), before, "Adagrad")
                    break
                except AssertionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            ps0 = cluster.task("ps", 0)
            ps0.kill(signal.SIGKILL)
            ps0.start()
            ps0.wait_for_output("embedding variable tables", timeout=60)
            assert "from its live replica" in ps0.log()
            with tf.Session(cluster.target("worker"), graph=graph) as sess:
                after = sess.run(exports[0])
                for name, a, b in zip(("keys", "values", "freqs", "versions", "pending", "counts", "slot"), after,
                                      before):
                    np.testing.assert_array_equal(a, b, err_msg=name)
                assert sess.run(step) == 10  # the global step (on ps:0) came back with it
                sess.run(train, {ids: _batches(11)[-1]})  # and training goes on
        finally:
            holder.close()
