"""Tensors on a GPU: where they cross to the host and back, and how often.

Run on the strict cupy stand-in (``strict_gpu``: not a GPU), whose device arrays refuse
implicit conversion to numpy and whose ``COUNTERS`` count every copy between host and
device. The contract checked here (docs/limits.md, "GPU tasks"): a feed or a received
tensor is copied to a device once per step however many ops there consume it; a
device tensor sent to another task is copied to the host once, into a reused pinned
buffer; fetches come back to the client as numpy; strings never go to a device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster
from tensorgrid.distributed.rpc import transport
from tensorgrid.kernels import backend as backend_lib

pytestmark = pytest.mark.timeout(120)


def _on_device(strict_gpu: Any, value: np.ndarray) -> Any:
    device = backend_lib.for_device("GPU", 0)
    array = device.asarray(value)
    assert isinstance(array, strict_gpu.ndarray)
    return array


def test_ops_default_to_the_gpu_when_one_is_present(strict_gpu: Any) -> None:
    x = tf.placeholder(tf.float32, [3])
    y = tf.exp(x)
    with tf.Session() as sess:
        assert any(d.device_type == "GPU" for d in sess.list_devices())
        value = sess.run(y, {x: np.zeros(3, np.float32)})
    assert type(value) is np.ndarray
    np.testing.assert_array_equal(value, np.ones(3))
    assert strict_gpu.COUNTERS.host_to_device >= 1 and strict_gpu.COUNTERS.device_to_host == 1


def test_a_feed_goes_to_the_device_once_per_step_however_many_ops_consume_it(strict_gpu: Any) -> None:
    x = tf.placeholder(tf.float32, [256, 64])
    total = tf.exp(x) + x * 2.0 + (x + 1.0)
    feed = np.full((256, 64), 0.5, np.float32)
    with tf.Session() as sess:
        sess.run(total, {x: feed})  # the first run also copies the constants, once
        strict_gpu.COUNTERS.reset()
        value = sess.run(total, {x: feed})
    np.testing.assert_allclose(value, np.exp(0.5) + 1.0 + 1.5, rtol=1e-6)
    assert strict_gpu.COUNTERS.host_to_device == 1
    assert strict_gpu.COUNTERS.host_to_device_bytes == feed.nbytes
    assert strict_gpu.COUNTERS.device_to_host == 1  # the fetch


def test_string_tensors_stay_on_the_host(strict_gpu: Any) -> None:
    words = tf.constant(np.array(["tensor", b"grid"], dtype=object))
    same = tf.identity(words)
    with tf.device("/device:GPU:0"):
        pinned = tf.identity(words)
    with tf.Session() as sess:
        assert sess.run(same).tolist() == ["tensor", b"grid"]
        assert sess.run(pinned).tolist() == ["tensor", b"grid"]


def test_queue_ops_run_on_the_host_even_after_gpu_ops_were_placed(strict_gpu: Any) -> None:
    counter = tf.Variable(0)  # on the GPU: the first op placed decides nothing for the next ones
    q = tf.FIFOQueue(3, tf.int32, shapes=())
    with tf.device("/device:GPU:0"):
        enqueue = q.enqueue(tf.assign_add(counter, 1))
    take = q.dequeue_many(2)
    with tf.Session() as sess:
        sess.run(counter.initializer)
        sess.run(enqueue)
        sess.run(enqueue)
        np.testing.assert_array_equal(sess.run(take), [1, 2])


@pytest.fixture
def transports(strict_gpu: Any) -> Any:
    server = transport.Transport(transport.TransportConfig(data_host="127.0.0.1"))
    server.serve_calls({1: lambda control, tensors, peer: (0, b"", [(t.name, t.array) for t in tensors])})
    client = transport.Transport(transport.TransportConfig(data_channel=False))
    yield server, client
    client.close()
    server.close()


def test_device_tensors_are_staged_once_into_reused_pinned_buffers_on_every_path(strict_gpu: Any,
                                                                                  transports: Any) -> None:
    server, client = transports
    value = np.arange(1 << 16, dtype=np.float32).reshape(256, 256)
    weights = _on_device(strict_gpu, value)
    strict_gpu.COUNTERS.reset()
    for _ in range(3):  # a data channel call
        code, _, received = client.call("127.0.0.1", server.data_port, 1, b"", [("w", weights)])
        assert code == 0
        np.testing.assert_array_equal(received[0].array, value)
        del received
    for _ in range(3):  # gRPC frames: a unary bundle, then a stream of chunks
        bundle = client.write_frames(None, [("w", weights)]).bundle()
        np.testing.assert_array_equal(next(iter(server.read_frames(bundle))).array, value)  # type: ignore[union-attr]
        frames = list(client.write_frames(None, [("w", weights)]))
        np.testing.assert_array_equal(next(iter(server.read_frames(frames))).array, value)  # type: ignore[union-attr]
    assert strict_gpu.COUNTERS.device_to_host == 9
    assert strict_gpu.COUNTERS.device_to_host_pinned == 9
    # One staging buffer, reused; in a process with a GPU the receiving side's pooled buffers
    # are pinned too (test_gpu_host_memory.py), each made once per path and reused.
    receive_buffers = server.pool.allocations + client.pool.allocations
    assert strict_gpu.COUNTERS.pinned_allocations == 1 + receive_buffers and receive_buffers <= 3
    assert client.pool.staged == 9 and client.pool.staging_allocations == 1


def test_a_staging_buffer_is_not_reused_while_its_bytes_wait_to_be_fetched(strict_gpu: Any,
                                                                           transports: Any) -> None:
    server, client = transports
    first, second = (_on_device(strict_gpu, np.full(1 << 18, v, np.float32)) for v in (1.0, 2.0))
    # Offered on the server's data channel: only headers travel until the peer fetches.
    offered = [server.write_frames(None, [("t", t)], use_data_channel=True).bundle() for t in (first, second)]
    assert server.pool.staging_allocations == 2
    for bundle, expected in zip(offered, (1.0, 2.0)):
        (tensor,) = list(client.read_frames(bundle, peer_host="127.0.0.1"))
        assert float(tensor.array[0]) == expected and float(tensor.array[-1]) == expected  # type: ignore[union-attr]


def test_host_values_pass_the_transport_untouched(strict_gpu: Any, transports: Any) -> None:
    server, client = transports
    code, _, received = client.call("127.0.0.1", server.data_port, 1, b"",
                                    [("f", np.float32(2.5)), ("s", np.array(["a", b"b"], dtype=object))])
    assert code == 0 and received[0].array == 2.5 and received[1].array.tolist() == ["a", b"b"]
    assert client.pool.staged == 0 and strict_gpu.COUNTERS.device_to_host == 0


def test_a_worker_on_a_gpu_with_variables_on_a_cpu_ps(tmp_path: Any, strict_gpu: Any) -> None:
    # The usual layout: the PS has no GPU (variables in host memory), the worker has one.
    # The worker (in this process) receives w, uses it in three GPU ops and sends a
    # device tensor back: per step one copy of w to the device, one staged copy back.
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}, start=False,
                      # No GPU on the PS: neither the stand-in nor, on a GPU machine, the real one.
                      extra_env={"TENSORGRID_FAKE_GPU": "0", "CUDA_VISIBLE_DEVICES": ""}) as cluster:
        cluster.task("ps").start()
        server = tf.train.Server(cluster.cluster, "worker", 0)
        try:
            with tf.Graph().as_default() as g:
                with tf.device("/job:ps/task:0"):
                    w = tf.Variable(np.ones((128, 64), np.float32), name="w")
                with tf.device("/job:worker/task:0"):
                    delta = w * 2.0 + tf.exp(w * 0.0) + (w - 1.0)
                with tf.device("/job:ps/task:0"):
                    update = tf.assign_sub(w, delta * 0.25)
            with tf.Session(server.target, graph=g) as sess:
                devices = {d.name for d in sess.list_devices()}
                assert "/job:worker/replica:0/task:0/device:GPU:0" in devices
                assert "/job:ps/replica:0/task:0/device:GPU:0" not in devices
                sess.run(w.initializer)
                sess.run(update.op)  # the first step also copies the constants, once
                strict_gpu.COUNTERS.reset()
                for _ in range(3):
                    sess.run(update.op)
                counters = strict_gpu.COUNTERS
                assert (counters.host_to_device, counters.host_to_device_bytes) == (3, 3 * 128 * 64 * 4)
                assert counters.device_to_host == counters.device_to_host_pinned == 3
                assert counters.pinned_allocations == 0  # the buffer of the first step is reused
                fetched = sess.run(w)
        finally:
            server.stop()
    assert type(fetched) is np.ndarray
    # w = 1, then each step w -= (3w) * 0.25 = w * 0.25: 1 * 0.25 ** 4
    np.testing.assert_allclose(fetched, np.full((128, 64), 0.25 ** 4), rtol=1e-6)


def test_every_task_of_a_strict_gpu_cluster_has_a_gpu_and_steps_cross_tasks(tmp_path: Any,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENSORGRID_FAKE_GPU", "strict")
    with LocalCluster(tmp_path, {"ps": 1, "worker": 2}) as cluster:
        with tf.Graph().as_default() as g:
            with tf.device("/job:ps/task:0"):
                w = tf.Variable(np.ones((4, 4), np.float32), name="w")
            parts = []
            for i in range(2):
                with tf.device(f"/job:worker/task:{i}"):
                    parts.append(tf.matmul(w, w) * float(i + 1))
            with tf.device("/job:ps/task:0"):
                total = tf.add_n(parts)
        with tf.Session(cluster.target("worker", 0), graph=g) as sess:
            gpus = sorted(d.name for d in sess.list_devices() if d.device_type == "GPU")
            sess.run(w.initializer)
            value = sess.run(total)
    assert gpus == [f"/job:{job}/replica:0/task:{i}/device:GPU:0" for job, i in (("ps", 0), ("worker", 0), ("worker", 1))]
    assert type(value) is np.ndarray
    np.testing.assert_array_equal(value, np.full((4, 4), 12.0))
