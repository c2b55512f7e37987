"""What a PS pushes to its replica (only the rows that changed), what the holder keeps, and
what a restarted PS loads back; the Replication service on gRPC, bad pushes included."""

import grpc
import numpy as np
import pytest

from tensorgrid import monitoring
from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.distributed import replication
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc import replication_service
from tensorgrid.execution import resources as resources_lib
from tensorgrid.framework import errors
from tensorgrid.kernels import backend as backend_lib
from tensorgrid.v1 import replication_pb2

CPU = backend_lib.for_device("CPU")
PRIMARY = "/job:ps/replica:0/task:0"


def _variable(resources, name, value):
    variable = resources.lookup_or_create("", name, resources_lib.Variable,
                                          lambda: resources_lib.Variable(name, value.dtype, value.shape, CPU))
    variable.assign(value, validate_shape=True)
    return variable


def _state(resources):
    return {(c, n): (np.array(r.value), r.updates) for c, n, r in resources.items()}


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


def test_after_a_full_push_only_changed_rows_travel():
    resources = resources_lib.ResourceManager()
    table = _variable(resources, "table", np.zeros((100, 4), np.float32))
    step = _variable(resources, "global_step", np.array(0, np.int64))
    tracker = replication.DeltaTracker()
    full, pieces, pushed = tracker.changes(resources)
    assert full and sum(p.values.nbytes for p in pieces) == 100 * 4 * 4 + 8
    tracker.commit(pushed)
    table.value[[3, 70]] += 1.0
    table.written.wrote_rows(np.array([3, 70]))
    step.assign(np.array(5, np.int64), validate_shape=True)
    full, pieces, pushed = tracker.changes(resources)
    by_name = {p.key[1]: p for p in pieces}
    assert not full
    assert by_name["table"].rows.tolist() == [3, 70] and by_name["table"].values.shape == (2, 4)
    assert int(by_name["global_step"].values) == 5
    tracker.commit(pushed)
    assert tracker.changes(resources)[1] == []


def test_the_restored_state_is_the_primary_s_values_and_update_counts():
    primary = resources_lib.ResourceManager()
    table = _variable(primary, "table", np.arange(40, dtype=np.float32).reshape(10, 4))
    _variable(primary, "global_step", np.array(7, np.int64))
    peer = StorePeer(replication.ReplicaStore())
    replicator = replication.Replicator(PRIMARY, 11, primary, peer, "ps:1", replication.ReplicationSettings())
    assert replicator.push_once()
    table.value[2] = -1.0
    table.updates += 1
    table.written.wrote_rows(np.array([2]))
    assert replicator.push_once()
    assert not peer.pushes[1][0].full and peer.pushes[1][1][0].rows.tolist() == [2]
    sample = monitoring.REGISTRY.get_sample_value
    assert sample("tensorgrid_ps_replica_bytes_total", {"task": PRIMARY}) >= 40 * 4 + 8 + 4 * 4
    assert sample("tensorgrid_ps_replica_lag_updates", {"task": PRIMARY}) == 0
    assert 0 <= sample("tensorgrid_ps_replica_lag_seconds", {"task": PRIMARY}) < 5
    restarted = resources_lib.ResourceManager()
    restored = replication.restore_from_replica(restarted, CPU, peer, PRIMARY, "ps:1", wait_s=1.0)
    assert restored is not None and restored.global_step == 7 and restored.variables == 2
    expected, got = _state(primary), _state(restarted)
    assert got.keys() == expected.keys()
    for key in expected:
        np.testing.assert_array_equal(got[key][0], expected[key][0])
        assert got[key][1] == expected[key][1]


def test_a_delta_for_an_unknown_incarnation_asks_for_a_full_push():
    store = replication.ReplicaStore()
    rows = replication.Rows(("", "w"), (2,), np.ones(2, np.float32), 1, row_start=0, row_count=2)
    assert store.apply(replication.Push(PRIMARY, 1, 1, full=False), [rows]).needs_full
    assert not store.apply(replication.Push(PRIMARY, 1, 2, full=True), [rows]).needs_full
    assert store.apply(replication.Push(PRIMARY, 2, 3, full=False), [rows]).needs_full  # the primary restarted


def test_a_primary_whose_holder_is_gone_does_not_wait_for_it():
    class GonePeer:
        def push(self, push, pieces):
            raise errors.UnavailableError(None, None, "ps:1 is gone")

        def fetch(self, primary_task):
            raise errors.UnavailableError(None, None, "ps:1 is gone")

    resources = resources_lib.ResourceManager()
    _variable(resources, "w", np.ones(3, np.float32))
    settings = replication.ReplicationSettings(max_lag_s=0.01)
    replicator = replication.Replicator(PRIMARY, 1, resources, GonePeer(), "ps:1", settings)
    assert not replicator.push_once()
    replicator.wait_within_lag()  # returns: an unreachable holder does not stop training
    assert replication.restore_from_replica(resources_lib.ResourceManager(), CPU, GonePeer(), PRIMARY, "ps:1",
                                            wait_s=0.01) is None


def test_replication_is_off_by_default_and_on_with_a_standby():
    assert not replication.ReplicationSettings.from_env({}).enabled
    assert replication.ReplicationSettings.from_env({"TENSORGRID_PS_REPLICATION": "1"}).enabled
    assert replication.ReplicationSettings.from_env({"TENSORGRID_PS_REPLICA_ADDRESS": "s:5"}).enabled
    assert not replication.ReplicationSettings.from_env({"TENSORGRID_PS_REPLICA_ADDRESS": "s:5",
                                                         "TENSORGRID_PS_REPLICATION": "0"}).enabled


def test_the_ring_and_the_standby_name_the_holder():
    cluster = cluster_lib.ClusterSpec({"ps": ["a:1", "b:2", "c:3"], "worker": ["w:4"]})
    on = replication.ReplicationSettings()
    assert replication.replica_holder(cluster, "ps", 2, on) == ("/job:ps/replica:0/task:0", "a:1")
    assert replication.replica_holder(cluster, "worker", 0, on) is None
    assert replication.replica_holder(cluster, "ps", 0, replication.ReplicationSettings(enabled=False)) is None
    single = cluster_lib.ClusterSpec({"ps": ["a:1"], "worker": ["w:4"]})
    assert replication.replica_holder(single, "ps", 0, on) is None
    standby = replication.ReplicationSettings(replica_address="s:5")
    assert replication.replica_holder(single, "ps", 0, standby)[1] == "s:5"


@pytest.mark.parametrize("env, message", [
    ({"TENSORGRID_PS_REPLICATION": "yes"}, "TENSORGRID_PS_REPLICATION='yes': valid values are '1'"),
    ({"TENSORGRID_PS_REPLICA_MAX_LAG_S": "0"}, "TENSORGRID_PS_REPLICA_MAX_LAG_S='0': must be a number"),
    ({"TENSORGRID_PS_REPLICA_ADDRESS": "nohost"}, "TENSORGRID_PS_REPLICA_ADDRESS='nohost'"),
])
def test_bad_settings_are_named(env, message):
    with pytest.raises(ValueError, match=message):
        replication.ReplicationSettings.from_env(env)


def test_pushes_and_fetches_on_grpc_and_a_bad_push_is_refused_with_the_server_serving_on():
    address = f"localhost:{ports.free_ports(1)[0]}"
    server, store = replication_service.serve_standby(address, PRIMARY)
    client = replication_service.ReplicationClient(address)
    try:
        assert client.fetch(PRIMARY) is None
        resources = resources_lib.ResourceManager()
        _variable(resources, "big", np.arange(3 * (2 << 20), dtype=np.float32).reshape(-1, 3))  # several messages
        _variable(resources, "global_step", np.array(42, np.int64))
        replicator = replication.Replicator(PRIMARY, 5, resources, client, "standby", replication.ReplicationSettings())
        assert replicator.push_once()
        snapshot = client.fetch(PRIMARY)
        assert snapshot is not None and snapshot.primary_incarnation == 5 and len(snapshot.rows) > 2
        restarted = resources_lib.ResourceManager()
        replication.restore_from_replica(restarted, CPU, client, PRIMARY, "standby", wait_s=1.0)
        np.testing.assert_array_equal(_state(restarted)[("localhost", "big")][0],
                                      _state(resources)[("localhost", "big")][0])

        bad = replication_pb2.ReplicaRows(container="", name="w", dtype="float32", shape=[4, 2], row_start=0,
                                          row_count=4, values=b"\0" * 12)
        batch = replication_pb2.ReplicaBatch(primary_task=PRIMARY, primary_incarnation=5, sequence=9, full=True,
                                             rows=[bad]).SerializeToString()
        with client._channel.stub() as stub, pytest.raises(grpc.RpcError) as refused:
            stub.PushReplica(iter([batch]), timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "replica rows of /w: 12 value bytes do not hold 4 rows" in refused.value.details()
        assert client.fetch(PRIMARY).primary_incarnation == 5  # nothing lost, still serving
    finally:
        client.close()
        server.stop(grace=0)
