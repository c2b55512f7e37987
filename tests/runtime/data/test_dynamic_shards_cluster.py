"""dynamic_shards on real servers: each record trained once per epoch while a worker is killed and
another added; the state restored from a checkpoint; bad requests answered by name.

The multi-process test runs examples/dynamic_shards_regression.py as every task: worker 1 stops in
the middle of a shard and is SIGKILLed there, worker 2 starts late; the records each worker trained
(one line per step) must cover every record exactly once per epoch, counting the killed worker's
finished shards and not the shard it died in, which another worker trains whole.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time

import grpc
import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid import monitoring
from cluster_processes import LocalCluster
from tensorgrid.distributed import shard_queue
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc import shard_calls
from tensorgrid.distributed.rpc.transport import grpc_frames
from tensorgrid.distributed.rpc.transport import tls
from tensorgrid.v1 import shards_pb2

pytestmark = [pytest.mark.timeout(240)]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROGRAM = os.path.join(ROOT, "examples", "dynamic_shards_regression.py")
RECORDS, SHARD, BATCH, EPOCHS = 384, 16, 8, 2


def _records_by_step(path: str) -> list[list[int]]:
    with open(path) as f:
        return [[int(r) for r in line.split()] for line in f if line.strip()]


def test_each_record_once_per_epoch_while_a_worker_is_killed_and_another_added(tmp_path):
    trained = tmp_path / "trained"
    flags = ["--records", str(RECORDS), "--shard-size", str(SHARD), "--batch-size", str(BATCH), "--epochs",
             str(EPOCHS), "--lease-seconds", "4", "--step-seconds", "0.01", "--trained-records", str(trained)]
    with LocalCluster(tmp_path, {"ps": 1, "worker": 3}, start=False) as cluster:
        chief, leaving, joining = (cluster.task("worker", i) for i in range(3))
        # The chief takes one step, then waits until the added worker has trained, so that it joins mid-epoch.
        chief_paused = tmp_path / "chief-paused"
        chief_paused.touch()
        cluster.task("ps", 0).start(wait=False, command=[sys.executable, PROGRAM, *flags])
        chief.start(wait=False, command=[sys.executable, PROGRAM, *flags, "--pause-while-exists", str(chief_paused)])
        # Three steps: its first shard (two steps, reported done by the third) and half of its second.
        leaving.start(wait=False, command=[sys.executable, PROGRAM, *flags, "--hold-after-steps", "3"])
        leaving.wait_for_output("holding after 3 steps", timeout=120)
        leaving.kill(signal.SIGKILL)
        joining.start(wait=False, command=[sys.executable, PROGRAM, *flags])
        deadline = time.monotonic() + 120
        while not (trained / "worker2.txt").exists() or len(_records_by_step(str(trained / "worker2.txt"))) < 4:
            assert time.monotonic() < deadline and joining.process.poll() is None, joining.log()
            time.sleep(0.1)
        chief_paused.unlink()
        assert chief.wait(timeout=180) == 0, chief.log()
        assert joining.wait(timeout=60) == 0, joining.log()
        assert "goes back to the queue: /job:worker/replica:0/task:1 held it" in chief.log(), chief.log()

    survivors = [_records_by_step(str(trained / f"worker{i}.txt")) for i in (0, 2)]
    killed = _records_by_step(str(trained / "worker1.txt"))
    assert survivors[1], "the worker added late trained nothing:\n" + joining.log()
    assert len(killed) == 3 and all(len(step) == BATCH for step in killed)
    killed_shards = collections.Counter(r // SHARD for step in killed for r in step)
    finished = [s for s, n in killed_shards.items() if n == SHARD]
    died_in = [s for s, n in killed_shards.items() if n < SHARD]
    assert len(finished) == 1 and len(died_in) == 1 and killed_shards[died_in[0]] == BATCH
    counts = collections.Counter(r for steps in survivors for step in steps for r in step)
    counts.update(r for step in killed for r in step if r // SHARD in finished)
    assert sorted(counts) == list(range(RECORDS)) and set(counts.values()) == {EPOCHS}, \
        {r: n for r, n in counts.items() if n != EPOCHS}


def _train(checkpoint_dir: str, steps: int) -> list[int]:
    """Up to ``steps`` steps (0: to the end) of a one-task cluster of its own, from ``checkpoint_dir``; the records trained."""
    server = tf.train.Server({"worker": [f"localhost:{ports.free_ports(1)[0]}"]}, "worker", 0)
    trained: list[int] = []
    try:
        with tf.Graph().as_default():
            records = tf.data.experimental.dynamic_shard_records(num_records=40, shard_size=4, lease_seconds=5.0)
            ids = records.batch(4).make_one_shot_iterator().get_next()
            step = tf.assign_add(tf.train.get_or_create_global_step(), 1)
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True, checkpoint_dir=checkpoint_dir,
                                                   save_checkpoint_steps=1000,
                                                   hooks=[tf.data.experimental.DynamicShardsHook(True)]) as sess:
                while not sess.should_stop() and (not steps or len(trained) < steps * 4):
                    trained.extend(int(r) for r in sess.run([ids, step])[0])
    finally:
        server.stop()
    return trained


def test_a_restart_from_a_checkpoint_goes_on_after_the_shards_it_holds_as_done(tmp_path):
    first = _train(str(tmp_path), steps=3)
    assert first == list(range(12))
    # The checkpoint written at the end holds the state as the third step began: shard 0 done,
    # shard 1 reported during that step and shard 2 in flight, so both are trained again.
    assert _train(str(tmp_path), steps=0) == list(range(4, 40))


def test_bad_requests_are_refused_by_name_and_the_service_keeps_serving():
    server = tf.train.Server({"worker": [f"localhost:{ports.free_ports(1)[0]}"]}, "worker", 0)
    client = shard_calls.ShardsClient(server.address)
    try:
        spec = shard_queue.ShardsSpec(num_records=8, shard_size=4)
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"not open on this task; open: \[\]"):
            client.state("nothing")
        with pytest.raises(tf.errors.InvalidArgumentError, match="does not fit this data set"):
            client.open("d", spec, [1, 0, 7, 0])
        channel = tls.open_channel(server.address, tls.from_env(), grpc_frames.GRPC_OPTIONS)
        with pytest.raises(grpc.RpcError) as garbage:
            channel.unary_unary("/tensorgrid.v1.Shards/NextShard")(b"\xff\xff\xff not a protobuf", timeout=10)
        bad_spec = shards_pb2.OpenShardsRequest(dataset="d", spec=shards_pb2.ShardsSpec(num_records=8, lease_seconds=1))
        with pytest.raises(grpc.RpcError) as zero_size:
            channel.unary_unary("/tensorgrid.v1.Shards/OpenShards")(bad_spec.SerializeToString(), timeout=10)
        channel.close()
        assert garbage.value.code() == zero_size.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "malformed NextShardRequest" in garbage.value.details()
        assert "OpenShards: shard_size must be a positive number of records, got 0" in zero_size.value.details()
        client.open("d", spec, None)
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"num_records=9 \(the chief opened it with 8\)"):
            client.next_shard("d", shard_queue.ShardsSpec(num_records=9, shard_size=4), "w", "c", 0)
        answer = client.next_shard("d", spec, "w", "c", 0)
        assert answer.outcome == "shard" and spec.shard(answer.index) == ("", 0, 4)
        state = client.state("d")
        assert state.state == [1, 0, 2, 0, 0] and state.fraction_done == 0.0
        assert np.isclose(monitoring.REGISTRY.get_sample_value("tensorgrid_data_shards_done_fraction",
                                                                  {"dataset": "d"}), 0.0)
    finally:
        client.close()
        server.stop()


def test_tensorgrid_local_with_a_chief_task_trains_each_record_once_per_epoch(tmp_path):
    """A ``chief`` job hosts the shards (not worker 0), under ``tensorgrid local``."""
    trained = tmp_path / "trained"
    result = subprocess.run(
        [sys.executable, "-m", "tensorgrid", "local", "--ps", "1", "--chief", "--workers", "1", "--", sys.executable,
         PROGRAM, "--records", "96", "--shard-size", "16", "--batch-size", "8", "--trained-records", str(trained)],
        capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    counts = collections.Counter(r for name in os.listdir(trained)
                                 for step in _records_by_step(str(trained / name)) for r in step)
    assert sorted(counts) == list(range(96)) and set(counts.values()) == {EPOCHS}
    assert "dynamic shards 'dynamic_shards': epoch 1 done (6 shards)" in result.stdout


def test_files_are_shards_read_whole_in_an_order_shuffled_anew_each_epoch(tmp_path):
    files = []
    for i in range(3):
        files.append(str(tmp_path / f"part{i}.tfrecord"))
        with tf.io.TFRecordWriter(files[-1]) as writer:
            for j in range(2):
                writer.write(f"{i}-{j}".encode())
    server = tf.train.Server({"worker": [f"localhost:{ports.free_ports(1)[0]}"]}, "worker", 0)
    read = []
    try:
        with tf.Graph().as_default():
            shards = tf.data.experimental.dynamic_shards(files=files, num_epochs=2, shuffle=True, seed=1)
            record = shards.flat_map(lambda s: tf.data.TFRecordDataset(s["file"])).make_one_shot_iterator().get_next()
            with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True,
                                                   hooks=[tf.data.experimental.DynamicShardsHook(True)]) as sess:
                while not sess.should_stop():
                    read.append(sess.run(record).decode())
    finally:
        server.stop()
    epochs = [read[:6], read[6:]]
    assert len(read) == 12 and all(sorted(e) == [f"{i}-{j}" for i in range(3) for j in range(2)] for e in epochs)
    assert [r[0] for r in epochs[0][::2]] != [r[0] for r in epochs[1][::2]]


def test_a_restarted_chief_goes_on_from_the_state_its_variable_holds_on_the_live_ps(tmp_path, monkeypatch):
    """The chief's task (with the shard service) restarts, the PS keeps the model and the state
    variable: no checkpoint is read, and training goes on after the shards done as its last step began."""
    ps_address, chief_address = (f"localhost:{port}" for port in ports.free_ports(2))
    cluster = {"ps": [ps_address], "worker": [chief_address]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    ps = tf.train.Server(cluster, "ps", 0)

    def train(steps: int) -> list[int]:
        chief = tf.train.Server(cluster, "worker", 0)
        trained: list[int] = []
        try:
            with tf.Graph().as_default():
                with tf.device(tf.train.replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0")):
                    records = tf.data.experimental.dynamic_shard_records(num_records=40, shard_size=4)
                    ids = records.batch(4).make_one_shot_iterator().get_next()
                    step = tf.assign_add(tf.train.get_or_create_global_step(), 1)
                with tf.train.MonitoredTrainingSession(master=chief.target, is_chief=True,
                                                       hooks=[tf.data.experimental.DynamicShardsHook(True)]) as sess:
                    while not sess.should_stop() and (not steps or len(trained) < steps * 4):
                        trained.extend(int(r) for r in sess.run([ids, step])[0])
        finally:
            chief.stop()
        return trained

    try:
        assert train(steps=5) == list(range(20))
        # As the fifth step began, shards 0 to 3 were done: the state variable on the PS says so.
        assert train(steps=0) == list(range(16, 40))
    finally:
        ps.stop()
