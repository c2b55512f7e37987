"""Calls over the data channel (the per-step hot path: RunStep, RunGraph, PushTensors):
tensors arrive intact, errors come back as statuses, bad input is answered and the
server keeps serving, and a task without a data channel is reached over gRPC."""

import os
import socket
import subprocess
import sys
import struct

import grpc
import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster
from cluster_processes import train_three_steps
from tensorgrid.distributed.rpc import clients
from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc import transport
from tensorgrid.distributed.rpc.transport import data_channel
from tensorgrid.distributed.rpc.transport import tls
from tensorgrid.distributed.rpc.transport import wire
from tensorgrid.v1 import tensor_pb2
from tensorgrid.v1 import worker_pb2

pytestmark = [pytest.mark.timeout(120), pytest.mark.gpu_node]

ECHO, FAIL, BROKEN = 1, 2, 3


def _echo(control, tensors, peer):
    return 0, b"echo:" + control, [(t.name, t.array) for t in tensors]


def _fail(control, tensors, peer):
    return grpc.StatusCode.FAILED_PRECONDITION.value[0], b"not now", []


def _broken(control, tensors, peer):
    raise RuntimeError("handler bug")


@pytest.fixture
def server():
    tx = transport.Transport(transport.TransportConfig(data_host="127.0.0.1"))
    tx.data_server.serve_calls({ECHO: _echo, FAIL: _fail, BROKEN: _broken}, tx.pool, 1 << 30)
    client = transport.Transport(transport.TransportConfig(data_channel=False))
    yield tx, client
    client.close()
    tx.close()


def _call(server, method, control=b"", tensors=()):
    tx, client = server
    return client.call("127.0.0.1", tx.data_port, method, control, tensors)


def test_tensors_of_every_kind_go_and_come_back(server):
    sent = {
        "f32": np.arange(12, dtype=np.float32).reshape(3, 4),
        "big": np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32),
        "i64": np.array([-1, 2**40], np.int64),
        "scalar": np.float64(2.5),
        "empty": np.zeros((0, 3), np.float32),
        "flags": np.array([True, False]),
        "text": np.array(["a", b"\x00b", "ü"], dtype=object),
        "strided": np.arange(20, dtype=np.int32).reshape(4, 5)[:, ::2],
    }
    code, reply, received = _call(server, ECHO, b"hello", list(sent.items()))
    assert (code, reply) == (0, b"echo:hello")
    assert [t.name for t in received] == list(sent)
    for item in received:
        expected = np.asarray(sent[item.name])
        assert item.array.dtype == expected.dtype and item.array.shape == expected.shape
        assert item.array.tolist() == expected.tolist()


def test_an_error_status_comes_back_and_the_connection_stays_usable(server):
    assert _call(server, FAIL)[:2] == (grpc.StatusCode.FAILED_PRECONDITION.value[0], b"not now")
    code, reply, _ = _call(server, BROKEN)
    assert code == grpc.StatusCode.INTERNAL.value[0] and b"handler bug" in reply
    assert _call(server, ECHO, b"x")[:2] == (0, b"echo:x")


def _raw_call(port, payload, tls_context=None):
    """Raw bytes as one call; through TLS with ``tls_context`` (a member of the job sending bad input)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as plain:
        sock = tls_context.wrap_socket(plain, server_hostname="127.0.0.1") if tls_context else plain
        sock.sendall(b"TGC1" + payload)
        code, size, _ = struct.unpack("<III", _read_exact(sock, 12))
        return code, _read_exact(sock, size).decode()


def _read_exact(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError(f"connection closed after {len(data)} of {size} bytes")
        data += chunk
    return data


@pytest.mark.parametrize("payload, status, message", [
    (struct.pack("<BII", 99, 0, 0), grpc.StatusCode.UNIMPLEMENTED, "method 99 is not served"),
    (struct.pack("<BII", ECHO, 1 << 31, 0), grpc.StatusCode.INVALID_ARGUMENT, "above the limits"),
    (struct.pack("<BII", ECHO, 0, 5) + b"\x0a\x03abc", grpc.StatusCode.INVALID_ARGUMENT, "malformed header frame"),
])
def test_bad_calls_are_answered_and_the_server_keeps_serving(server, payload, status, message):
    code, text = _raw_call(server[0].data_port, payload)
    assert code == status.value[0] and message in text
    assert _call(server, ECHO, b"y")[:2] == (0, b"echo:y")


def test_a_declared_tensor_above_the_limit_is_refused_before_allocating(server):
    header = wire.header_frame(tensor_pb2.TensorHeader(
        dtype=tensor_pb2.DT_FLOAT, shape=tensor_pb2.TensorShapeProto(dim=[1 << 40]),
        byte_size=4 << 40, name="huge"))
    headers = wire.bundle_frames([header])
    code, text = _raw_call(server[0].data_port, struct.pack("<BII", ECHO, 0, len(headers)) + headers)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0] and "huge" in text
    assert _call(server, ECHO)[0] == 0


@pytest.mark.parametrize("unix", ["1", "0"])
def test_a_peer_on_this_machine_is_reached_over_the_unix_socket_unless_turned_off(monkeypatch, unix):
    monkeypatch.setenv(ports.LOCAL_SOCKETS_ENV, unix)
    tx = transport.Transport(transport.TransportConfig(data_host="127.0.0.1"))
    tx.data_server.serve_calls({ECHO: _echo}, tx.pool, 1 << 30)
    client = transport.Transport(transport.TransportConfig(data_channel=False))
    try:
        payload = np.random.default_rng(1).standard_normal(1 << 20).astype(np.float32)
        for host in ("127.0.0.1", "localhost"):
            code, _, received = client.call(host, tx.data_port, ECHO, b"", [("x", payload)])
            assert code == 0 and np.array_equal(received[0].array, payload)
        families = {conn.family for conn in tx.data_server._connections}
        assert families == ({socket.AF_UNIX} if unix == "1" else {socket.AF_INET})
    finally:
        client.close()
        tx.close()


def test_only_a_data_channel_on_loopback_has_a_unix_socket_and_it_is_gone_when_it_closes():
    everywhere = data_channel.DataServer(host="")  # a pod: other containers share its network
    loopback = data_channel.DataServer(host="127.0.0.1")
    for server in (everywhere, loopback):
        name = ports.local_data_socket(server.port)
        assert name is not None and name.startswith("\0")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.connect(ports.local_data_socket(loopback.port))
    probe.close()
    loopback.close()
    for closed_or_none in (loopback, everywhere):
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with pytest.raises(ConnectionRefusedError):
            probe.connect(ports.local_data_socket(closed_or_none.port))
        probe.close()
    everywhere.close()


@pytest.mark.parametrize("data_channel", ["1", "tcp", "0"])
def test_training_steps_cross_tasks_with_and_without_data_channels(tmp_path, data_channel):
    env = {"TENSORGRID_DATA_CHANNEL": "1", ports.LOCAL_SOCKETS_ENV: "0"} if data_channel == "tcp" else {
        "TENSORGRID_DATA_CHANNEL": data_channel}
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}, extra_env=env) as c:
        client = clients.WorkerClient(c.task("worker").address, "/job:worker/replica:0/task:0")
        client.incarnation_quick()
        assert bool(client._data_port) == (data_channel != "0")
        client.close()
        # d(sum(x @ w))/dw = 2 for every element; three steps of 0.5 each.
        np.testing.assert_allclose(train_three_steps(c.target("worker")), np.full((3, 2), -2.0))


def test_bad_input_on_a_servers_data_channel_is_answered_and_it_keeps_serving(tmp_path):
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}) as c:
        client = clients.WorkerClient(c.task("ps").address, "/job:ps/replica:0/task:0")
        client.incarnation_quick()
        control = b"\xff\xff not a RunGraphRequest"
        run_graph = data_channel.Method.RUN_GRAPH
        member = tls.from_env().current().client_context
        code, text = _raw_call(client._data_port, struct.pack("<BII", run_graph, len(control), 0) + control, member)
        assert code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and "RunGraph" in text
        request = worker_pb2.RunGraphRequest(graph_handle="nope", step_id=1).SerializeToString()
        code, text = _raw_call(client._data_port, struct.pack("<BII", run_graph, len(request), 0) + request, member)
        assert code == grpc.StatusCode.ABORTED.value[0] and "nope" in text
        client.close()
        np.testing.assert_allclose(train_three_steps(c.target("worker")), np.full((3, 2), -2.0))


def test_blas_threads_are_shared_among_the_tasks_of_one_machine():
    local = cluster_lib.ClusterSpec({"ps": ["localhost:1"], "worker": ["127.0.0.1:2", "localhost:3"]})
    remote = cluster_lib.ClusterSpec({"ps": ["ps-0.svc:2222"], "worker": ["worker-0.svc:2222"]})
    assert cluster_lib.tasks_on_this_host(local, "localhost:1") == 3
    assert cluster_lib.tasks_on_this_host(remote, "worker-0.svc:2222") == 1
    cores = cluster_lib.default_intra_op_threads(remote, "worker-0.svc:2222")
    assert cores >= 1 and cluster_lib.default_intra_op_threads(local, "localhost:1") == max(1, cores // 3)


def test_intra_op_parallelism_threads_sizes_the_blas_pool():
    import threadpoolctl  # a runtime dependency
    server = tf.train.Server({"local": [f"localhost:{ports.free_ports(1)[0]}"]},
                             config=tf.ConfigProto(intra_op_parallelism_threads=1))
    try:
        blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(p["num_threads"] == 1 for p in blas)
    finally:
        server.stop()


_AS_ANOTHER_USER = """
import os, socket, sys, time
os.setgid(65534); os.setuid(65534)  # nobody
mode, name = sys.argv[1], "\\0" + sys.argv[2]
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
if mode == "dial":
    sock.connect(name)
    sock.settimeout(5)
    try:
        sock.sendall(bytes.fromhex(sys.argv[3]))  # a valid probe: a data channel answers it
        answer = sock.recv(1)
    except ConnectionError:
        answer = b""
    print("refused" if answer == b"" else "served", flush=True)
else:
    sock.bind(name)
    sock.listen(8)
    print("bound", flush=True)
    time.sleep(30)
"""


def _as_another_user(mode: str, name: str) -> subprocess.Popen:
    if os.geteuid() != 0:
        message = "becoming another user needs root"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI runs as root: {message}")
        pytest.skip(message)
    probe = data_channel.FETCH_MAGIC + bytes(data_channel.TICKET_BYTES)
    return subprocess.Popen([sys.executable, "-c", _AS_ANOTHER_USER, mode, name.lstrip("\0"), probe.hex()],
                            stdout=subprocess.PIPE, text=True)


def test_the_unix_socket_refuses_another_user_and_a_client_never_talks_to_another_users_socket(monkeypatch):
    tx = transport.Transport(transport.TransportConfig(data_host="127.0.0.1"))
    tx.data_server.serve_calls({ECHO: _echo}, tx.pool, 1 << 30)
    try:
        dialer = _as_another_user("dial", ports.local_data_socket(tx.data_port))
        assert dialer.communicate(timeout=30)[0].strip() == "refused"
        assert not any(conn.family == socket.AF_UNIX for conn in tx.data_server._connections)
    finally:
        tx.close()
    # A squatter of another user holds the name of a port where a data channel listens on TCP only.
    monkeypatch.setenv(ports.LOCAL_SOCKETS_ENV, "0")
    tcp_only = transport.Transport(transport.TransportConfig(data_host="127.0.0.1"))
    tcp_only.data_server.serve_calls({ECHO: _echo}, tcp_only.pool, 1 << 30)
    monkeypatch.setenv(ports.LOCAL_SOCKETS_ENV, "1")
    squatter = _as_another_user("bind", ports.local_data_socket(tcp_only.data_port))
    client = transport.Transport(transport.TransportConfig(data_channel=False))
    try:
        assert squatter.stdout.readline().strip() == "bound"
        code, _, received = client.call("127.0.0.1", tcp_only.data_port, ECHO, b"", [("x", np.arange(3.0))])
        assert code == 0 and received[0].array.tolist() == [0.0, 1.0, 2.0]
        assert {conn.family for conn in tcp_only.data_server._connections} == {socket.AF_INET}
    finally:
        squatter.kill()
        squatter.wait()
        client.close()
        tcp_only.close()
