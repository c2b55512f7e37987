"""Every resource a client outside the job can make a task hold is bounded, and an
outsider's flood of each kind does not stop a training running beside it.

The cluster runs as real processes (``cluster_processes``) with small limits set
through the documented environment variables (docs/limits.md, "Resource bounds"); the
outsider speaks raw gRPC and raw data-channel bytes from this process, while a
training loop steps in a thread of this process.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import grpc
import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import BackgroundTraining
from cluster_processes import LocalCluster
from tensorgrid.distributed.rpc import clients
from tensorgrid.distributed import limits as limits_lib
from tensorgrid.distributed.rpc.transport import data_channel
from tensorgrid.distributed.rpc.transport import grpc_frames
from tensorgrid.distributed.rpc.transport import tls
from tensorgrid.distributed.rpc.transport import wire
from tensorgrid.execution import rendezvous as rendezvous_lib
from tensorgrid.v1 import graph_pb2, master_pb2, tensor_pb2, worker_pb2

pytestmark = [pytest.mark.timeout(240)]

MiB = 1 << 20
LIMITS = {
    "TENSORGRID_DATA_MAX_CONNECTIONS": "32",
    "TENSORGRID_DATA_HEADER_TIMEOUT_S": "1",
    "TENSORGRID_DATA_IDLE_TIMEOUT_S": "3",
    "TENSORGRID_RECV_TENSOR_MAX_WAITING": "4",
    "TENSORGRID_RECV_TENSOR_TIMEOUT_S": "10",
    "TENSORGRID_RENDEZVOUS_MAX_BYTES": str(8 * MiB),
    "TENSORGRID_GRPC_MAX_MESSAGE_BYTES": str(16 * MiB),
    "TENSORGRID_SESSION_IDLE_TIMEOUT_S": "4",
    "TENSORGRID_MAX_SESSIONS": "8",
    "TENSORGRID_MAX_REGISTERED_GRAPHS": "40",
    "TENSORGRID_MAX_GRAPH_NODES": "500",
    "TENSORGRID_MAX_GRAPH_BYTES": str(2 * MiB),
}
GRPC_ONLY = {
    "TENSORGRID_DATA_CHANNEL": "0",
    "TENSORGRID_RECV_TENSOR_MAX_WAITING": "160",
    "TENSORGRID_RENDEZVOUS_TTL_S": "2",
}
"""Tasks that talk over gRPC only, so every step is a RunStep and a RunGraph on the gRPC
server's shared threads (128); more RecvTensor calls may wait (160) than it has threads."""
PS = "/job:ps/replica:0/task:0"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The cluster without TLS (``TENSORGRID_INSECURE=1``, the documented opt-out, here
    for every process of the module): where an outsider reaches every parser and every
    resource. With mutual TLS (the default) an outsider cannot get past the handshake;
    ``test_an_outsider_without_a_certificate_cannot_hold_the_data_channel`` covers that."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(tls.INSECURE_ENV, "1")
        env.delenv(tls.TLS_DIR_ENV, raising=False)
        with LocalCluster(tmp_path_factory.mktemp("bounds"), {"ps": 1, "worker": 1}, extra_env=LIMITS) as c:
            yield c


@pytest.fixture(scope="module")
def grpc_only_cluster(tmp_path_factory):
    """A cluster of ``GRPC_ONLY`` tasks, without TLS as ``cluster``."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(tls.INSECURE_ENV, "1")
        env.delenv(tls.TLS_DIR_ENV, raising=False)
        with LocalCluster(tmp_path_factory.mktemp("grpc-only"), {"ps": 1, "worker": 1}, extra_env=GRPC_ONLY) as c:
            yield c


@pytest.fixture
def training(cluster):
    run = BackgroundTraining(cluster.target("worker"))
    run.advance(5)
    yield run
    run.advance(5)
    run.close()


def _worker_stub(address: str, max_send: int = -1) -> tuple[grpc.Channel, grpc_frames.Stub]:
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", max_send),
                                                      ("grpc.max_receive_message_length", -1)])
    return channel, grpc_frames.Stub(channel, worker_pb2.DESCRIPTOR.services_by_name["Worker"])


def _status(cluster, job: str) -> worker_pb2.GetStatusResponse:
    channel, stub = _worker_stub(cluster.task(job).address)
    try:
        return stub.GetStatus(worker_pb2.GetStatusRequest(), timeout=30)
    finally:
        channel.close()


def _outsider_connection(port: int) -> socket.socket:
    """A connection from another address than the cluster's (127.0.0.2: a second host)."""
    return socket.create_connection(("127.0.0.1", port), timeout=30, source_address=("127.0.0.2", 0))


def _closed_by_peer(sock: socket.socket, timeout: float = 60.0) -> bool:
    """Whether the server closes ``sock`` within ``timeout`` (reading until it does)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
        return True
    except (ConnectionError, OSError) as e:
        return not isinstance(e, TimeoutError)


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, f"the server closed the connection {n - len(data)} bytes short of an answer"
        data += chunk
    return data


def _call(port: int, method: int, control: bytes, headers: bytes) -> tuple[int, str]:
    """One raw data-channel call; the reply's status and message."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data_channel.CALL_MAGIC + struct.pack("<BII", method, len(control), len(headers)) + control
                     + headers)
        status, control_bytes, _ = struct.unpack("<III", _read(sock, 12))
        return status, _read(sock, control_bytes).decode()


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        line = next(line for line in f if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


# ---------------------------------------------------------------------------- the data channel

def test_a_flood_of_idle_and_trickling_data_channel_connections_does_not_stop_training(cluster, training):
    port = _status(cluster, "ps").data_port
    flood = [_outsider_connection(port) for _ in range(48)]  # the limit is 32
    try:
        for sock in flood[:24]:
            sock.sendall(data_channel.CALL_MAGIC)  # then idle: closed after TENSORGRID_DATA_IDLE_TIMEOUT_S
        trickling = flood[24]
        trickling.sendall(data_channel.CALL_MAGIC)
        training.advance(20)
        dropped = False
        for byte in struct.pack("<BII", 1, 0, 0):  # one byte every 0.4 s: past the 1 s header timeout
            try:
                trickling.sendall(bytes([byte]))
            except OSError:
                dropped = True
                break
            time.sleep(0.4)
        assert dropped or _closed_by_peer(trickling), "a client trickling its call header was not dropped"
        # More connections from the outsider's address evict only its own; a new connection
        # of a peer is served while the flood holds every slot (the probe gets the
        # unknown-ticket answer) and the training's pooled connections stay.
        flood += [_outsider_connection(port) for _ in range(32)]
        probe = data_channel.DataChannelClient()
        assert probe.why_unreachable("127.0.0.1", port) == ""
        probe.close()
        assert all(_closed_by_peer(sock) for sock in flood[:24]), "idle connections were not closed"
        training.advance(20)
    finally:
        for sock in flood:
            sock.close()


def test_bad_data_channel_headers_are_answered_with_a_status(cluster, training):
    port = _status(cluster, "ps").data_port
    control = worker_pb2.PushTensorsRequest(step_id=1, from_task="outsider").SerializeToString()
    method = data_channel.Method.PUSH_TENSORS
    empty_but_vast = tensor_pb2.TensorHeader(dtype=tensor_pb2.DT_FLOAT, name="vast",
                                             shape=tensor_pb2.TensorShapeProto(dim=[0, 2**62]), byte_size=0)
    status, message = _call(port, method, control, wire.bundle_frames([wire.header_frame(empty_but_vast)]))
    assert status == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert "[0, 4611686018427387904]" in message and "vast" in message
    # 10**8 strings of one byte each: 100 MB of payload, but 4.9 GB as Python objects.
    strings = tensor_pb2.TensorHeader(dtype=tensor_pb2.DT_STRING, name="strings",
                                      shape=tensor_pb2.TensorShapeProto(dim=[10**8]), byte_size=10**8)
    rss_before = _rss_bytes(cluster.task("ps").process.pid)
    status, message = _call(port, method, control, wire.bundle_frames([wire.header_frame(strings)]))
    assert status == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert "100000000 strings" in message
    assert _rss_bytes(cluster.task("ps").process.pid) - rss_before < 100 * MiB
    unknown = struct.pack("<BII", 99, 0, 0)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data_channel.CALL_MAGIC + unknown)
        status, length, _ = struct.unpack("<III", _read(sock, 12))
        assert status == grpc.StatusCode.UNIMPLEMENTED.value[0]
        assert "method 99" in _read(sock, length).decode()
    training.advance(10)


# ---------------------------------------------------------------------------- RecvTensor and the rendezvous

def test_waiting_recv_tensor_calls_cannot_starve_the_server(cluster, training):
    address = cluster.task("ps").address
    incarnation = _status(cluster, "ps").device[0].incarnation
    channel, stub = _worker_stub(address)
    try:
        pending = []
        for i in range(12):  # 4 may wait at once; each at most 10 s
            key = f"/job:outsider/task:0;{incarnation:016x};{PS};never{i}:0;0:0"
            request = worker_pb2.RecvTensorRequest(step_id=1000 + i, rendezvous_key=[key])
            pending.append(stub.RecvTensor.future(request, timeout=60))
        refused = [f for f in pending if _code(f, 30) == grpc.StatusCode.RESOURCE_EXHAUSTED]
        assert len(refused) >= 8
        assert "TENSORGRID_RECV_TENSOR_MAX_WAITING" in refused[0].exception().details()
        # While 4 calls wait, the server answers other calls and the training steps.
        assert stub.GetStatus(worker_pb2.GetStatusRequest(), timeout=10).device
        with tf.Session(cluster.target("ps")) as other:
            assert other.run(tf.constant(3.0) * 2.0) == 6.0
        training.advance(20)
        waited = [f for f in pending if f not in refused]
        assert all(_code(f, 60) == grpc.StatusCode.DEADLINE_EXCEEDED for f in waited)
    finally:
        channel.close()


def _never_sent(incarnation: int, name: str, step_id: int) -> worker_pb2.RecvTensorRequest:
    key = f"/job:outsider/task:0;{incarnation:016x};{PS};{name}:0;0:0"
    return worker_pb2.RecvTensorRequest(step_id=step_id, rendezvous_key=[key])


def test_waiting_recv_tensor_calls_hold_threads_of_their_own(grpc_only_cluster):
    """160 RecvTensor calls wait for tensors nobody sends, more than the 128 threads gRPC
    shares among the other methods: steps (RunStep, RunGraph and PushTensors, all on gRPC
    here) go on, the 161st call is refused, and a cancelled call frees its thread."""
    cluster = grpc_only_cluster
    training = BackgroundTraining(cluster.target("worker"))
    training.advance(5)
    incarnation = _status(cluster, "ps").device[0].incarnation
    channel, stub = _worker_stub(cluster.task("ps").address)
    pending: list[grpc.Future] = []

    def waiting_call(i: int) -> grpc.Future:
        return stub.RecvTensor.future(_never_sent(incarnation, f"never{i}", 2000 + i), timeout=240)

    def one_more() -> grpc.StatusCode:  # waits 1 s at most if a slot is free (then it is cancelled)
        return _code(stub.RecvTensor.future(_never_sent(incarnation, "one-more", 1999), timeout=1), 30)

    try:
        pending = [waiting_call(i) for i in range(160)]
        deadline = time.monotonic() + 120
        while True:  # until all 160 wait and a 161st is refused
            code = one_more()
            assert code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED), code
            # A probe that reached the server before some of the 160 held a slot while they
            # arrived: those were refused, as they should be. Send them again.
            refused = [i for i, f in enumerate(pending) if f.done()]
            for i in refused:
                assert _code(pending[i], 0) == grpc.StatusCode.RESOURCE_EXHAUSTED, _code(pending[i], 0)
                pending[i] = waiting_call(i)
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED and not refused:
                time.sleep(2)  # answers to calls refused just before are in by now
                if not any(f.done() for f in pending):
                    break
            assert time.monotonic() < deadline, "160 RecvTensor calls never all waited"
        training.advance(20)
        assert stub.GetStatus(worker_pb2.GetStatusRequest(), timeout=30).device
        with tf.Session(cluster.target("ps")) as other:
            assert other.run(tf.constant(3.0) * 2.0) == 6.0
        for future in pending[:10]:
            future.cancel()  # ends their waits on the server, so their threads are free again
        deadline = time.monotonic() + 120
        while one_more() != grpc.StatusCode.DEADLINE_EXCEEDED:
            assert time.monotonic() < deadline, "cancelled RecvTensor calls kept their threads"
        training.advance(10)
        training.close()
    finally:
        for future in pending:
            future.cancel()
        channel.close()


def test_tensors_of_steps_that_never_run_expire_without_another_push(grpc_only_cluster):
    """No training runs and nothing more is pushed: the worker's sweep alone expires the
    pushed tensors after the TTL (2 s here), and a step that comes for them is told why."""
    ps = clients.WorkerClient(grpc_only_cluster.task("ps").address, PS)
    incarnation = ps.incarnation_quick()
    keys = [f"/job:outsider/task:0;{incarnation:016x};{PS};orphan{i}:0;0:0" for i in range(4)]
    for i, key in enumerate(keys):
        ps.push_tensors(7000 + i, "outsider", [(key, np.full(1024, i, np.float32))])
    channel, stub = _worker_stub(grpc_only_cluster.task("ps").address)
    try:
        deadline = time.monotonic() + 60
        while True:  # another key of the step: it waits (no expiry yet) or fails (the step was expired)
            probe = stub.RecvTensor.future(_never_sent(incarnation, "probe", 7003), timeout=1)
            if _code(probe, 30) == grpc.StatusCode.ABORTED:
                break
            assert time.monotonic() < deadline, "pushed tensors never expired without another push"
        assert "nobody took it within 2 s (TENSORGRID_RENDEZVOUS_TTL_S)" in probe.exception().details()
    finally:
        channel.close()
    with pytest.raises(tf.errors.AbortedError, match="nobody took it within 2 s"):
        ps.recv_tensor(7000, keys[0])
    ps.close()


def _code(future: grpc.Future, timeout: float) -> grpc.StatusCode:
    error = future.exception(timeout=timeout)
    return grpc.StatusCode.OK if error is None else error.code()


def test_tensors_pushed_for_steps_that_never_run_are_bounded(cluster, training):
    ps = clients.WorkerClient(cluster.task("ps").address, PS)
    incarnation = ps.incarnation_quick()
    rss_before = _rss_bytes(cluster.task("ps").process.pid)
    keys = [f"/job:outsider/task:0;{incarnation:016x};{PS};pushed{i}:0;0:0" for i in range(400)]
    for i, key in enumerate(keys):  # 400 MiB for steps that never run; the limit is 8 MiB
        ps.push_tensors(5000 + i, "outsider", [(key, np.full(MiB // 4, i, np.float32))])
    assert _rss_bytes(cluster.task("ps").process.pid) - rss_before < 128 * MiB
    with pytest.raises(tf.errors.AbortedError, match="dropped: the tensors waiting to be taken"):
        ps.recv_tensor(5000, keys[0])
    np.testing.assert_array_equal(ps.recv_tensor(5399, keys[-1]), np.full(MiB // 4, 399, np.float32))
    ps.close()
    training.advance(20)


def test_a_value_nobody_takes_expires_and_fails_its_step():
    now = [0.0]
    table = rendezvous_lib.LocalRendezvous(ttl_s=10.0, max_bytes=1 << 30, clock=lambda: now[0])
    table.send(1, "a", np.zeros(4))
    now[0] = 11.0
    table.send(2, "b", np.zeros(4))  # each send drops what expired
    assert table.dropped == 1 and table.pending_count() == 1
    with pytest.raises(tf.errors.AbortedError, match="nobody took it within 10 s"):
        table.take(1, "a", timeout=1.0)
    assert table.take(2, "b", timeout=1.0).shape == (4,)
    assert table.pending_bytes() == 0


def test_the_sweep_expires_entries_of_steps_that_are_gone():
    now = [0.0]
    table = rendezvous_lib.LocalRendezvous(ttl_s=10.0, max_bytes=1 << 30, max_entries=3, clock=lambda: now[0])
    failures: dict[str, BaseException] = {}

    def waiter(name: str):
        return lambda value=None, failure=None: failures.__setitem__(name, failure)

    table.send(1, "sent-never-taken", np.zeros(4))
    table.take_async(2, "awaited-never-sent", waiter("gone"))
    table.take_async(3, "awaited-by-a-running-step", waiter("running"))
    now[0] = 5.0
    assert table.sweep(running_steps={3}) == 0
    now[0] = 11.0
    assert table.sweep(running_steps={3}) == 2  # nothing was sent meanwhile
    assert "within 10 s" in str(failures["gone"]) and "running" not in failures
    with pytest.raises(tf.errors.AbortedError, match="nobody took it within 10 s"):
        table.take(1, "sent-never-taken", timeout=1.0)
    for i in range(5):  # at most 3 values wait: the oldest give way
        table.send(10 + i, "v", np.zeros(1))
    assert table.pending_count() == 3 + 1  # and the running step's receiver
    with pytest.raises(tf.errors.AbortedError, match="TENSORGRID_RENDEZVOUS_MAX_ENTRIES"):
        table.take(10, "v", timeout=1.0)
    table.cleanup_step(3)
    assert "cleaned up" in str(failures["running"])


def test_over_the_bounds_a_flooding_origin_loses_its_own_values_first_whatever_its_keys_say():
    table = rendezvous_lib.LocalRendezvous(max_bytes=10 * MiB)
    training_key = "/job:worker/task:0;1;/job:ps/task:0;gradient:0;0:0"
    table.deliver(1, training_key, np.zeros(MiB // 4, np.float32), "host 10.0.0.1")  # the oldest, of a training step
    for i in range(40):  # 40 MiB from another origin, whose keys name the training's task as their sender
        table.deliver(100 + i, f"/job:worker/task:0;1;/job:ps/task:0;junk{i}:0;0:0", np.zeros(MiB // 4, np.float32),
                      "host 10.0.0.66")
    assert table.take(1, training_key, timeout=1.0).nbytes == MiB
    with pytest.raises(tf.errors.AbortedError, match="the oldest of the origin sending the most"):
        table.take(100, "/job:worker/task:0;1;/job:ps/task:0;junk0:0;0:0", timeout=1.0)
    assert table.pending_bytes() <= 10 * MiB


def test_a_waiting_take_ends_when_its_call_ends():
    table = rendezvous_lib.LocalRendezvous()
    ended = threading.Event()
    threading.Timer(0.2, ended.set).start()
    with pytest.raises(tf.errors.CancelledError, match="ended before it was sent"):
        table.take(1, "k", timeout=60.0, wake=ended)
    assert table.pending_count() == 0
    table.send(1, "k", np.ones(2))  # a later send is kept for a later receiver
    assert table.take(1, "k", timeout=1.0, wake=threading.Event()).shape == (2,)


def test_a_wait_pool_refuses_calls_beyond_its_limit_on_the_overflow_executor():
    import concurrent.futures

    from tensorgrid.distributed.rpc.transport import wait_pool

    overflow = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    pool = wait_pool.WaitPool(2, overflow, "test-wait")
    release = threading.Event()
    try:
        waiting = [pool.submit(lambda: (pool.refusing(), release.wait(60))) for _ in range(2)]
        refused = pool.submit(lambda: pool.refusing())
        assert refused.result(timeout=30) is True  # answered at once, not queued behind the waiting two
        release.set()
        assert [f.result(timeout=30)[0] for f in waiting] == [False, False]
        assert pool.submit(lambda: pool.refusing()).result(timeout=30) is False  # their slots are free again
    finally:
        release.set()
        pool.shutdown()
        overflow.shutdown()
    with pytest.raises(ValueError, match="limit >= 1"):
        wait_pool.WaitPool(0, overflow, "none")


# ---------------------------------------------------------------------------- gRPC and the master

def test_an_oversized_grpc_message_is_refused(cluster, training):
    channel, stub = _worker_stub(cluster.task("worker").address)
    try:
        with pytest.raises(grpc.RpcError) as e:
            channel.unary_unary("/tensorgrid.v1.Worker/GetStatus")(b"\0" * (20 * MiB), timeout=30)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert stub.GetStatus(worker_pb2.GetStatusRequest(), timeout=10).device
    finally:
        channel.close()
    training.advance(20)


def test_idle_sessions_expire_and_their_number_is_bounded(cluster, training):
    master = clients.MasterClient(cluster.task("worker").address)
    graph_def = tf.Graph().as_graph_def()
    handles = []
    with pytest.raises(tf.errors.ResourceExhaustedError, match="TENSORGRID_MAX_SESSIONS=8"):
        for _ in range(9):
            handles.append(master.create_session(graph_def, clients.master_lib.SessionOptions()))
    # The training's session, stepping all along, outlives the 4 s idle timeout; the
    # outsider's sessions do not, so sessions can be created again.
    deadline = time.monotonic() + 60
    while True:
        try:
            master.create_session(graph_def, clients.master_lib.SessionOptions())
            break
        except tf.errors.ResourceExhaustedError:
            assert time.monotonic() < deadline, "idle sessions never expired"
            time.sleep(0.5)
    with pytest.raises(tf.errors.NotFoundError, match="TENSORGRID_SESSION_IDLE_TIMEOUT_S"):
        master.run_step(handles[0], {}, [], [])
    training.advance(20)
    master.close()


def test_registered_graphs_are_bounded_and_unused_ones_forgotten(cluster, training):
    from tensorgrid.framework import graph_def as graph_def_lib

    ps = clients.WorkerClient(cluster.task("ps").address, PS)
    tiny = graph_def_lib.GraphDef(nodes=[graph_def_lib.NodeDef("c", "NoOp", [], "", {}, [], [])])
    with pytest.raises(tf.errors.ResourceExhaustedError, match="TENSORGRID_MAX_REGISTERED_GRAPHS=40"):
        for i in range(41):
            ps.register_graph(f"outsider{i}", tiny, [], [], ["c"])
    training.advance(20)  # its partitions, used every step, stay registered
    deadline = time.monotonic() + 60
    while True:  # the outsider's partitions, unused for the 4 s idle timeout, make room again
        try:
            ps.register_graph("outsider-late", tiny, [], [], ["c"])
            break
        except tf.errors.ResourceExhaustedError:
            assert time.monotonic() < deadline, "unused graph partitions were never forgotten"
            time.sleep(0.5)
    ps.close()
    training.advance(20)


def _no_ops(count: int, prefix: str):
    from tensorgrid.framework import graph_def as graph_def_lib

    return graph_def_lib.GraphDef(nodes=[graph_def_lib.NodeDef(f"{prefix}{i}", "NoOp", [], "", {}, [], [])
                                         for i in range(count)])


def test_graphs_beyond_the_size_limits_are_refused(cluster, training):
    master = clients.MasterClient(cluster.task("worker").address)
    options = clients.master_lib.SessionOptions()
    with pytest.raises(tf.errors.ResourceExhaustedError,
                       match=r"CreateSession: the graph would have 501 nodes and \d+ bytes of GraphDef, over this "
                             r"task's limit of 500 nodes \(TENSORGRID_MAX_GRAPH_NODES\)"):
        master.create_session(_no_ops(501, "n"), options)
    handle = master.create_session(_no_ops(400, "a"), options)
    with pytest.raises(tf.errors.ResourceExhaustedError, match=f"ExtendSession of session {handle}: the graph "
                                                               f"would have 550 nodes"):
        master.extend_session(handle, _no_ops(150, "b"))  # each part fits; the session's graph would not
    master.extend_session(handle, _no_ops(100, "b"))
    master.close_session(handle)
    # Bytes: one node with a 3 MiB device string (the limit is 2 MiB), refused before it is decoded.
    channel = grpc.insecure_channel(cluster.task("worker").address)
    try:
        stub = grpc_frames.Stub(channel, master_pb2.DESCRIPTOR.services_by_name["Master"])
        huge = graph_pb2.GraphDef(node=[graph_pb2.NodeDef(name="big", op="NoOp", device="x" * (3 * MiB))])
        with pytest.raises(grpc.RpcError) as e:
            stub.CreateSession(master_pb2.CreateSessionRequest(graph_def=huge), timeout=30)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"{huge.ByteSize()} bytes of GraphDef" in e.value.details()
        assert "2097152 bytes (TENSORGRID_MAX_GRAPH_BYTES)" in e.value.details()
    finally:
        channel.close()
    ps = clients.WorkerClient(cluster.task("ps").address, PS)
    with pytest.raises(tf.errors.ResourceExhaustedError, match="RegisterGraph: the graph would have 501 nodes"):
        ps.register_graph("outsider", _no_ops(501, "r"), [], [], [])
    ps.close()
    master.close()
    training.advance(20)


def test_remote_feeds_are_checked_against_the_fed_tensor(cluster):
    with tf.Graph().as_default() as graph:
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        y = tf.identity(x * 2.0, name="y")
    master = clients.MasterClient(cluster.task("worker").address)
    handle = master.create_session(graph.as_graph_def(), clients.master_lib.SessionOptions())
    with pytest.raises(tf.errors.InvalidArgumentError, match="dtype int64 to tensor 'x:0' of dtype float32"):
        master.run_step(handle, {x.name: np.ones((2, 3), np.int64)}, [y.name], [])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"shape \(2, 4\) to tensor 'x:0'"):
        master.run_step(handle, {x.name: np.ones((2, 4), np.float32)}, [y.name], [])
    np.testing.assert_array_equal(master.run_step(handle, {x.name: np.ones((2, 3), np.float32)}, [y.name], [])[0],
                                  np.full((2, 3), 2.0, np.float32))
    master.close_session(handle)
    master.close()


# ---------------------------------------------------------------------------- the limits themselves

def test_limits_come_from_the_environment_and_bad_values_are_named():
    limits = limits_lib.ServerLimits.from_env({"TENSORGRID_RECV_TENSOR_TIMEOUT_S": "2.5",
                                               "TENSORGRID_DATA_MAX_CONNECTIONS": "7"})
    assert limits.recv_tensor_timeout_s == 2.5 and limits.data_max_connections == 7
    assert limits.max_tensor_bytes == limits_lib.ServerLimits().max_tensor_bytes
    with pytest.raises(ValueError, match=r"TENSORGRID_DATA_MAX_CONNECTIONS='lots' is not valid: set it to an integer"):
        limits_lib.ServerLimits.from_env({"TENSORGRID_DATA_MAX_CONNECTIONS": "lots"})
    with pytest.raises(ValueError, match=r"TENSORGRID_SESSION_IDLE_TIMEOUT_S='-1'"):
        limits_lib.ServerLimits.from_env({"TENSORGRID_SESSION_IDLE_TIMEOUT_S": "-1"})
    with pytest.raises(ValueError, match="at least 16777216"):
        limits_lib.ServerLimits.from_env({"TENSORGRID_GRPC_MAX_MESSAGE_BYTES": "1000"})


def test_a_string_header_is_counted_as_the_memory_it_decodes_to():
    header = tensor_pb2.TensorHeader(dtype=tensor_pb2.DT_STRING, shape=tensor_pb2.TensorShapeProto(dim=[1000]),
                                     byte_size=1000, name="s")
    assert wire.check_header(header, 1000 + 1000 * wire.STRING_ELEMENT_BYTES)[1] == (1000,)
    with pytest.raises(wire.TensorTooLargeError, match="1000 strings of 48 bytes each"):
        wire.check_header(header, 1000 + 1000 * wire.STRING_ELEMENT_BYTES - 1)


def test_a_new_connection_beyond_the_limit_closes_the_busiest_address_longest_waiting_one():
    server = data_channel.DataServer("127.0.0.1", max_connections=3)

    def connect(source: str) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30, source_address=(source, 0))
        sock.sendall(data_channel.FETCH_MAGIC)
        time.sleep(0.2)  # let the server read its opening: it then waits for a ticket
        return sock

    try:
        peer = connect("127.0.0.1")  # waiting longest, but its address holds one connection
        oldest, newer = connect("127.0.0.2"), connect("127.0.0.2")
        newest = connect("127.0.0.2")
        for served in (newest, newer, peer):
            served.sendall(bytes(data_channel.TICKET_BYTES))
            assert struct.unpack("<Q", _read(served, 8))[0] == 0xFFFFFFFFFFFFFFFF  # the unknown-ticket answer
        assert _closed_by_peer(oldest)
        assert server.evicted_connections == 1 and server.refused_connections == 0
        for sock in (peer, oldest, newer, newest):
            sock.close()
    finally:
        server.close()


def test_a_thread_that_cannot_start_never_stops_the_accept_loop(monkeypatch):
    server = data_channel.DataServer("127.0.0.1")
    original = threading.Thread
    failures = []

    class FailingOnce(original):  # type: ignore[misc, valid-type]
        def start(self) -> None:
            if self.name.endswith("-conn") and not failures:
                failures.append(self.name)
                raise RuntimeError("can't start new thread")
            super().start()

    monkeypatch.setattr(threading, "Thread", FailingOnce)
    client = data_channel.DataChannelClient()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as refused:
            assert _closed_by_peer(refused)
        assert failures
        assert client.why_unreachable("127.0.0.1", server.port) == ""  # the next connection is served
    finally:
        client.close()
        server.close()


def _trickles_a_tls_hello_until_closed(port: int, most_bytes: int = 40) -> bool:
    """Sends a TLS record header announcing a 512-byte ClientHello, then one byte of it
    every 0.25 s: each read of the server gets a byte well within any per-read timeout.
    Whether the server closed the connection before ``most_bytes`` were sent."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"\x16\x03\x01\x02\x00")
        for _ in range(most_bytes):
            try:
                sock.sendall(b"\x01")
            except OSError:
                return True
            time.sleep(0.25)
            sock.setblocking(False)
            try:
                if sock.recv(1) == b"":
                    return True
            except BlockingIOError:
                pass
            except OSError:
                return True
            finally:
                sock.setblocking(True)
        return False


def test_a_tls_handshake_has_one_deadline_on_both_protocols(test_run_certificates):
    """A client trickling its handshake a byte at a time is closed once the whole
    handshake took ``TENSORGRID_TLS_HANDSHAKE_TIMEOUT_S`` (1 s here), not kept while each
    byte comes in time: on the data channel and on gRPC."""
    import concurrent.futures

    assert test_run_certificates, "this test needs the test run's certificates (conftest.py), not the opt-out"
    credentials = tls.load(test_run_certificates)
    server = data_channel.DataServer("127.0.0.1", tls=credentials.server_context, header_timeout_s=60,
                                     idle_timeout_s=60, handshake_timeout_s=1)
    try:
        assert _trickles_a_tls_hello_until_closed(server.port), "the data channel kept a trickling handshake"
        member = data_channel.DataChannelClient(tls=credentials.client_context)
        assert member.why_unreachable("localhost", server.port) == ""  # a full handshake is served
        member.close()
    finally:
        server.close()
    rpc_server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2),
                             options=grpc_frames.server_options(handshake_timeout_s=1))
    rpc_server.add_generic_rpc_handlers((grpc_frames.generic_handler(
        worker_pb2.DESCRIPTOR.services_by_name["Worker"], object()),))
    port = tls.add_port(rpc_server, "127.0.0.1:0", credentials)
    rpc_server.start()
    try:
        assert _trickles_a_tls_hello_until_closed(port), "gRPC kept a trickling handshake"
    finally:
        rpc_server.stop(grace=None)


def test_an_outsider_without_a_certificate_cannot_hold_the_data_channel(tmp_path, monkeypatch, test_run_certificates):
    """With mutual TLS (the default), what an outsider can still hold is connections that
    never finish a handshake: they are bounded like any other, by address first."""
    assert test_run_certificates, "this test needs the test run's certificates (conftest.py), not the opt-out"
    monkeypatch.setenv(tls.TLS_DIR_ENV, test_run_certificates)  # the module's insecure cluster may still be up
    monkeypatch.delenv(tls.INSECURE_ENV, raising=False)
    credentials = tls.from_env()
    assert credentials is not None
    env = {"TENSORGRID_DATA_MAX_CONNECTIONS": "16", "TENSORGRID_DATA_HEADER_TIMEOUT_S": "2"}
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}, extra_env=env) as cluster:
        channel = tls.open_channel(cluster.task("ps").address, credentials, grpc_frames.GRPC_OPTIONS)
        port = grpc_frames.Stub(channel, worker_pb2.DESCRIPTOR.services_by_name["Worker"]).GetStatus(
            worker_pb2.GetStatusRequest(), timeout=30).data_port
        channel.close()
        training = BackgroundTraining(cluster.target("worker"))
        training.advance(5)
        flood = [_outsider_connection(port) for _ in range(40)]  # no TLS handshake: silent, or plaintext
        try:
            for sock in flood[::2]:
                sock.sendall(data_channel.CALL_MAGIC)
            member = data_channel.DataChannelClient(tls=credentials.current().client_context)
            assert member.why_unreachable("localhost", port) == ""  # a member's new connection is served
            member.close()
            training.advance(20)
            assert all(_closed_by_peer(sock) for sock in flood), "connections without a handshake were kept"
            training.advance(20)
        finally:
            for sock in flood:
                sock.close()
            training.close()
