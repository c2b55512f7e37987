"""Where a task's data channel listens (``TENSORGRID_DATA_PORT``), and what happens when
a peer's data channel cannot be reached: training goes on over gRPC, the peer is
logged once and every call that falls back is counted, and large tensors on that path
travel in chunks on the streaming methods, not as one big message."""

import logging

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster
from cluster_processes import TaskProcess
from cluster_processes import train_three_steps
from tensorgrid import monitoring
from tensorgrid.distributed.rpc import clients
from tensorgrid.distributed.rpc import ports

pytestmark = [pytest.mark.timeout(120), pytest.mark.gpu_node]

PS = "/job:ps/replica:0/task:0"
MiB = 1 << 20


def test_a_server_started_with_tensorgrid_data_port_listens_there_and_advertises_it(tmp_path):
    (data_port,) = ports.free_ports(1)
    with LocalCluster(tmp_path, {"ps": 1}, extra_env={"TENSORGRID_DATA_PORT": str(data_port)}) as c:
        client = clients.WorkerClient(c.task("ps").address, PS)
        try:
            client.incarnation_quick()
            assert client._data_port == data_port
            assert client._reaches_data_channel()
        finally:
            client.close()


@pytest.mark.parametrize("value", ["70000", "0", "-1", "2223.0", "http", "22 23"])
def test_a_bad_tensorgrid_data_port_is_refused_naming_the_value(value):
    with pytest.raises(ValueError, match=f"TENSORGRID_DATA_PORT='{value}' is not a TCP port: set it to an "
                                         f"integer from 1 to 65535"):
        ports.data_port_from_env({"TENSORGRID_DATA_PORT": value})


def test_an_unset_or_empty_tensorgrid_data_port_picks_a_free_port():
    assert ports.data_port_from_env({}) == 0
    assert ports.data_port_from_env({"TENSORGRID_DATA_PORT": ""}) == 0
    assert ports.data_port_from_env({"TENSORGRID_DATA_PORT": "2223"}) == 2223


def test_a_data_port_equal_to_the_grpc_port_is_refused(monkeypatch):
    (port,) = ports.free_ports(1)
    monkeypatch.setenv("TENSORGRID_DATA_PORT", str(port))
    with pytest.raises(ValueError, match=f"TENSORGRID_DATA_PORT={port} is the gRPC port of /job:local"):
        tf.train.Server({"local": [f"localhost:{port}"]})


def test_a_server_process_with_a_bad_data_port_exits_with_a_clear_message(tmp_path):
    (port,) = ports.free_ports(1)
    cluster = {"ps": [f"localhost:{port}"]}
    task = TaskProcess("ps", 0, f"localhost:{port}", cluster, str(tmp_path / "ps0.log"),
                       {"TENSORGRID_DATA_PORT": "not-a-port"})
    task.start(wait=False)
    assert task.wait(timeout=60) == 2
    assert "TENSORGRID_DATA_PORT='not-a-port' is not a TCP port" in task.log()
    assert "Traceback" not in task.log()


def _fallbacks(address):
    return monitoring.REGISTRY.get_sample_value("tensorgrid_data_channel_fallbacks_total", {"peer": address}) or 0.0


class _InProcessCluster:
    """A PS and a worker as servers in this process, so the test sees the worker's
    clients of the PS (their calls, their metrics, their log)."""

    def __init__(self, monkeypatch, ps_data_channel="1", ports_taken=None):
        ps_port, worker_port = ports_taken or ports.free_ports(2)
        self.ports = (ps_port, worker_port)
        self.spec = {"ps": [f"localhost:{ps_port}"], "worker": [f"localhost:{worker_port}"]}
        monkeypatch.setenv("TENSORGRID_DATA_CHANNEL", ps_data_channel)
        self.ps = tf.train.Server(self.spec, "ps", 0)
        monkeypatch.delenv("TENSORGRID_DATA_CHANNEL")
        self.worker = tf.train.Server(self.spec, "worker", 0)
        self.ps_address = self.spec["ps"][0]

    def ps_client(self):
        return self.worker._client(PS)

    def close(self):
        self.worker.stop()
        self.ps.stop()


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_a_peer_whose_data_port_is_blocked_trains_over_grpc_logged_once_and_counted(monkeypatch):
    cluster = _InProcessCluster(monkeypatch)
    records = _Records()
    logging.getLogger("tensorgrid.rpc").addHandler(records)
    try:
        cluster.ps._serving.transport.data_server.close()  # the port is advertised but refuses connections
        before = _fallbacks(cluster.ps_address)
        # d(sum(x @ w))/dw = 2 for every element; three steps of 0.5 each.
        np.testing.assert_allclose(train_three_steps(cluster.worker.target), np.full((3, 2), -2.0))
        assert _fallbacks(cluster.ps_address) - before >= 4  # RunGraph and a push to the PS per step at least
        warnings = [m for m in records.messages if "data channel" in m]
        assert len(warnings) == 1
        assert PS in warnings[0] and cluster.ps_address in warnings[0] and "refused" in warnings[0]
    finally:
        logging.getLogger("tensorgrid.rpc").removeHandler(records)
        cluster.close()


def test_a_new_server_at_an_address_already_logged_is_logged_again(monkeypatch):
    # The warning is once per peer incarnation, not once per address for the process's life:
    # a restarted PS, or a later test's server given a port used before, is logged again.
    records = _Records()
    logging.getLogger("tensorgrid.rpc").addHandler(records)
    try:
        taken = None
        for _ in range(2):
            cluster = _InProcessCluster(monkeypatch, ports_taken=taken)
            taken = cluster.ports
            try:
                cluster.ps._serving.transport.data_server.close()
                train_three_steps(cluster.worker.target)
            finally:
                cluster.close()
        warnings = [m for m in records.messages if "data channel" in m and "cannot be reached" in m]
        assert len(warnings) == 2
        assert all(f"localhost:{taken[0]}" in m for m in warnings)
    finally:
        logging.getLogger("tensorgrid.rpc").removeHandler(records)


def _served_on_data_channel(method):
    return monitoring.REGISTRY.get_sample_value("tensorgrid_data_channel_calls_total", {"method": method}) or 0.0


def test_steps_served_on_the_data_channel_are_counted(monkeypatch):
    # What the e2e suite reads from the pods' metrics to see steps travel on the declared port.
    cluster = _InProcessCluster(monkeypatch)
    try:
        before = {m: _served_on_data_channel(m) for m in ("RunGraph", "PushTensors")}
        before_fallbacks = _fallbacks(cluster.ps_address)
        np.testing.assert_allclose(train_three_steps(cluster.worker.target), np.full((3, 2), -2.0))
        assert _served_on_data_channel("RunGraph") - before["RunGraph"] >= 3
        assert _served_on_data_channel("PushTensors") - before["PushTensors"] >= 3
        assert _fallbacks(cluster.ps_address) == before_fallbacks
    finally:
        cluster.close()


def _stub_calls(client):
    """Records the name of every gRPC method ``client`` calls."""
    calls = []
    with client._channel.stub() as stub:  # the stub of the current certificates (they do not change here)
        for name in ("RunGraph", "RunGraphStream", "PushTensors", "PushTensorsStream"):
            method = getattr(stub, name)
            setattr(stub, name, lambda *args, _name=name, _method=method, **kwargs: (
                calls.append(_name), _method(*args, **kwargs))[1])
    return calls


def test_large_tensors_on_the_grpc_fallback_go_on_the_streaming_methods(monkeypatch):
    cluster = _InProcessCluster(monkeypatch, ps_data_channel="0")
    try:
        calls = _stub_calls(cluster.ps_client())
        big = np.arange(4 * MiB, dtype=np.float32)  # 16 MiB
        with tf.Graph().as_default() as g:
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(np.zeros(4 * MiB, np.float32), name="v")
                on_ps = tf.placeholder(tf.float32, [4 * MiB])
                doubled = on_ps * 2.0
            with tf.device("/job:worker/task:0"):
                on_worker = tf.placeholder(tf.float32, [4 * MiB])
                bump = v.assign_add(on_worker * 1.0)
        with tf.Session(cluster.worker.target, graph=g) as sess:
            sess.run(v.initializer)
            del calls[:]
            sess.run(bump, {on_worker: big})  # 16 MiB pushed from the worker to the PS
            assert "PushTensorsStream" in calls
            del calls[:]
            np.testing.assert_array_equal(sess.run(doubled, {on_ps: big}), big * 2.0)  # 16 MiB each way
            assert calls == ["RunGraphStream"]
            del calls[:]
            np.testing.assert_array_equal(sess.run(v), big)  # a large reply: learned, streamed next time
            np.testing.assert_array_equal(sess.run(v), big)
            assert calls == ["RunGraph", "RunGraphStream"]
    finally:
        cluster.close()
