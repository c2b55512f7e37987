"""Where a peer's data channel cannot be reached, calls go over gRPC, and large
tensors on that path travel in chunks on the streaming methods, not as one big
message."""

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.distributed import ports

pytestmark = pytest.mark.timeout(120)

PS = "/job:ps/replica:0/task:0"
MiB = 1 << 20


class _InProcessCluster:
    """A PS and a worker as servers in this process, so the test sees the worker's
    clients of the PS (their calls, their metrics, their log)."""

    def __init__(self, monkeypatch, ps_data_channel="1"):
        ps_port, worker_port = ports.free_ports(2)
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


def _stub_calls(client):
    """Records the name of every gRPC method ``client`` calls."""
    calls = []
    for name in ("RunGraph", "RunGraphStream", "PushTensors", "PushTensorsStream"):
        method = getattr(client._stub, name)
        setattr(client._stub, name, lambda *args, _name=name, _method=method, **kwargs: (
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
