"""dynamic_shards where the chief hosts the shard service in its own process (the usual case): its hook
and its pipeline call the service directly, with no RPC, answering as the gRPC client does; a chief
whose task 0 is another process asks for the state at most once per interval, and the state its
variable holds is never ahead of the model. The service's progress gauges (epoch, fraction of shards
done, shards per epoch: what status.progress.dataShards shows) follow the queue."""

from __future__ import annotations

from typing import Iterator

import pytest

import tensorgrid as tf
from tensorgrid import monitoring
from tensorgrid.data import dynamic_sharding
from tensorgrid.distributed import shard_queue
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc import session_targets
from tensorgrid.distributed.rpc import shard_calls

pytestmark = [pytest.mark.timeout(60)]

SHARDS_METHODS = ("NextShard", "RenewLeases", "OpenShards", "GetShardsState")


@pytest.fixture
def server() -> Iterator[tf.train.Server]:
    server = tf.train.Server({"worker": [f"localhost:{ports.free_ports(1)[0]}"]}, "worker", 0)
    yield server
    server.stop()


def _shards_calls_served() -> dict[str, float]:
    return {method: monitoring.REGISTRY.get_sample_value("tensorgrid_rpc_duration_seconds_count",
                                                         {"method": method}) or 0.0 for method in SHARDS_METHODS}


def test_a_chief_hosting_the_service_trains_each_record_once_per_epoch_without_a_shards_rpc(server):
    served_before = _shards_calls_served()
    trained: list[int] = []
    with tf.Graph().as_default():
        records = tf.data.experimental.dynamic_shard_records(num_records=24, shard_size=8, num_epochs=2,
                                                             name="in_process")
        ids = records.batch(4).make_one_shot_iterator().get_next()
        state = tf.get_collection(dynamic_sharding.COLLECTION)[0].state
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True,
                                               hooks=[tf.data.experimental.DynamicShardsHook(True)]) as sess:
            while not sess.should_stop():
                trained.extend(int(r) for r in sess.run(ids))
        with tf.Session(server.target) as session:
            saved = [int(v) for v in session.run(state)]
    assert sorted(trained) == sorted(list(range(24)) * 2)
    assert _shards_calls_served() == served_before
    # The hook's end writes the final state: both epochs done.
    assert saved == [shard_queue.STATE_VERSION, 2, 3, shard_queue.DONE, shard_queue.DONE, shard_queue.DONE]
    assert monitoring.REGISTRY.get_sample_value("tensorgrid_data_shards_epoch", {"dataset": "in_process"}) == 2
    assert monitoring.REGISTRY.get_sample_value("tensorgrid_data_shards_done_fraction",
                                                {"dataset": "in_process"}) == 1.0
    assert monitoring.REGISTRY.get_sample_value("tensorgrid_data_shards_per_epoch", {"dataset": "in_process"}) == 3


def test_the_state_variable_follows_the_shards_done_as_each_step_begins(server):
    with tf.Graph().as_default():
        records = tf.data.experimental.dynamic_shard_records(num_records=16, shard_size=4, name="per_step")
        ids = records.batch(4).make_one_shot_iterator().get_next()
        state = tf.get_collection(dynamic_sharding.COLLECTION)[0].state
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True,
                                               hooks=[tf.data.experimental.DynamicShardsHook(True)]) as sess:
            seen = [[int(v) for v in sess.run([ids, state])[1]] for _ in range(3)]
    # A shard a step, reported done by the next step's read: as step 3 began, shard 0 was done (shard 1 is
    # reported during step 3, so a checkpoint after step 3 trains it again: never ahead of the model).
    assert [row[3:] for row in seen] == [[0, 0, 0, 0], [0, 0, 0, 0], [shard_queue.DONE, 0, 0, 0]]


def test_a_chief_whose_task_0_is_another_process_asks_for_the_state_once_per_interval(server, monkeypatch):
    # Stood in for by hiding the in-process server: the hook and the pipeline call it over gRPC.
    monkeypatch.setattr(session_targets, "local_server_for_target", lambda target: None)
    monkeypatch.setattr(dynamic_sharding, "REMOTE_STATE_INTERVAL_SECONDS", 3600.0)
    served_before = _shards_calls_served()
    with tf.Graph().as_default():
        records = tf.data.experimental.dynamic_shard_records(num_records=16, shard_size=4, name="remote_chief")
        ids = records.batch(4).make_one_shot_iterator().get_next()
        state = tf.get_collection(dynamic_sharding.COLLECTION)[0].state
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True,
                                               hooks=[tf.data.experimental.DynamicShardsHook(True)]) as sess:
            seen = [[int(v) for v in sess.run([ids, state])[1]] for _ in range(4)]
        with tf.Session(server.target) as session:
            saved = [int(v) for v in session.run(state)]
    served = {method: n - served_before[method] for method, n in _shards_calls_served().items()}
    # The first step's look wrote the opened state; the next ones did not ask (an older state only
    # widens what a restart trains again); the end wrote the last one.
    assert all(row[3:] == [0, 0, 0, 0] for row in seen), seen
    assert saved[3:] == [shard_queue.DONE, shard_queue.DONE, shard_queue.DONE, 0]
    assert served["GetShardsState"] == 2 and served["OpenShards"] == 1 and served["NextShard"] == 4


@pytest.mark.parametrize("endpoint", ["local", "grpc"])
def test_both_endpoints_refuse_bad_requests_alike(server, endpoint):
    service: shard_queue.ShardsEndpoint = (shard_queue.LocalShards(server.shards) if endpoint == "local"
                                           else shard_calls.ShardsClient(server.address))
    spec = shard_queue.ShardsSpec(num_records=8, shard_size=4)
    try:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"^GetShardsState: \"dynamic shards 'nothing' are not open on this task; open: \[\]"):
            service.state("nothing")
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"^OpenShards: .*does not fit this data set"):
            service.open("d", spec, [1, 0, 7, 0])
        service.open("d", spec, None)
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"^NextShard: .*num_records=9 \(the chief opened"):
            service.next_shard("d", shard_queue.ShardsSpec(num_records=9, shard_size=4), "w", "c", 0)
        first = service.next_shard("d", spec, "w", "c", 0)
        second = service.next_shard("d", spec, "w", "c", first.lease)
        assert (first.outcome, first.index, second.outcome, second.index) == ("shard", 0, "shard", 1)
        assert service.renew("d", "c", [first.lease, second.lease]) == [first.lease]
        snapshot = service.state("d")
        assert (snapshot.state, snapshot.fraction_done, snapshot.unchanged) == ([1, 0, 2, shard_queue.DONE, 0], 0.5,
                                                                                False)
        assert service.state("d", snapshot.version).unchanged and service.state("d", snapshot.version).state == []
    finally:
        service.close()
