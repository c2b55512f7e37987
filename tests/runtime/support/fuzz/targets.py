"""Fuzz targets: every parser of bytes that arrive from the network, each as a function
of one input that raises ``EscapedInputError`` when the input is not answered with a status.

Why it exists: servers must answer any bytes with a clear status and keep serving
(docs/limits.md, "Resource bounds"). The targets are driven by ``run.py`` (atheris,
coverage-guided; or a seeded random mutator where atheris is missing), for a bounded
number of inputs by ``tests/runtime/distributed/test_fuzz.py`` in ``make test`` and for minutes by ``make fuzz``.

- ``header_bundle``: a data-channel call's header bundle (``wire.decode_headers``,
  ``check_header``), then the allocation it asks for;
- ``frames``: one direction of a gRPC call (a bundle of control, header and chunk
  frames) read by ``Transport.read_message``, for each step call's frame type;
- ``data_channel``: the raw bytes of a data-channel connection, sent to a real
  ``DataServer`` on loopback, with the real step handlers of a task behind it;
- ``servicer``: a request to any method of the Master and Worker services, through
  the same generic gRPC handlers a server uses (the first byte picks the method).

An input is answered when the parser returns, or raises a ``TransportError``, or the
servicer aborts with a status; anything else (another exception, an ERROR logged by
the server, a reply that is not well-formed) is an escape.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import socket
import struct
from typing import Any, Callable, Iterator, Optional

import grpc
import numpy as np

# Small limits, so that a fuzzed request never waits long or allocates much.
os.environ.update({
    "TENSORGRID_RECV_TENSOR_TIMEOUT_S": "0.01",
    "TENSORGRID_MAX_TENSOR_BYTES": str(64 << 20),
    "TENSORGRID_DATA_HEADER_TIMEOUT_S": "1",
    "TENSORGRID_DATA_IDLE_TIMEOUT_S": "1",
    "TENSORGRID_DATA_CHANNEL": "1",
})

from tensorgrid.distributed.rpc import sender_names
from tensorgrid.distributed.rpc import server as server_lib
from tensorgrid.distributed.rpc import services
from tensorgrid.distributed.rpc import transport
from tensorgrid.distributed.rpc.transport import buffers
from tensorgrid.distributed.rpc.transport import data_channel
from tensorgrid.distributed.rpc.transport import grpc_frames
from tensorgrid.distributed.rpc.transport import wait_pool
from tensorgrid.distributed.rpc.transport import wire
from tensorgrid.v1 import master_pb2, tensor_pb2, worker_pb2

MAX_TENSOR_BYTES = 64 << 20


class EscapedInputError(Exception):
    """An input was not answered with a status: the finding of a fuzz run."""


class _ErrorLog(logging.Handler):
    """Remembers ERROR records of the runtime: a server logs what escaped a handler."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def check(self) -> None:
        if self.records:
            record, self.records = self.records[0], []
            raise EscapedInputError(f"the server logged an error: {record.getMessage()}\n{record.exc_text or ''}")


_errors = _ErrorLog()
logging.getLogger("tensorgrid").addHandler(_errors)
logging.getLogger("tensorgrid").propagate = False


# ---------------------------------------------------------------------------- one task, in this process

class _Task:
    """A real task (``tf.train.Server`` of a one-task cluster, not started: its Worker,
    Master, transport and servicers) on which inputs are served."""

    def __init__(self) -> None:
        self.server = server_lib.Server({"worker": ["localhost:1"]}, start=False)
        self.tx = transport.Transport(transport.TransportConfig(data_host="127.0.0.1",
                                                                max_tensor_bytes=MAX_TENSOR_BYTES,
                                                                data_header_timeout_s=1.0, data_idle_timeout_s=1.0))
        steps = services.StepHandlers(self.server.worker, self.server.master,
                                      sender_names.SenderNames(self.server.cluster))
        self.tx.serve_calls(steps.data_channel_handlers())
        recv_pool = wait_pool.WaitPool(self.server.limits.recv_tensor_max_waiting,
                                       concurrent.futures.ThreadPoolExecutor(max_workers=1), "fuzz-recv-tensor")
        self.handlers = {
            services.MASTER_SERVICE.full_name: grpc_frames.generic_handler(
                services.MASTER_SERVICE, services.MasterServicer(self.server, self.tx, steps)),
            services.WORKER_SERVICE.full_name: grpc_frames.generic_handler(
                services.WORKER_SERVICE, services.WorkerServicer(self.server, self.tx, steps, recv_pool)),
        }
        self.methods = [(service, method) for service in (services.MASTER_SERVICE, services.WORKER_SERVICE)
                        for method in service.methods]


_task: Optional[_Task] = None


def _the_task() -> _Task:
    global _task
    if _task is None:
        _task = _Task()
    return _task


# ---------------------------------------------------------------------------- parsers of the codec

def header_bundle(data: bytes) -> None:
    pool = buffers.BufferPool(0)
    try:
        for header, dtype, shape in wire.decode_headers(data, MAX_TENSOR_BYTES):
            array, payload = buffers.allocate_checked(pool, header, dtype, shape)
            if array.dtype != np.object_ and array.nbytes != header.byte_size:
                raise EscapedInputError(f"header {header} allocated {array.nbytes} bytes")
            if payload.nbytes > MAX_TENSOR_BYTES:
                raise EscapedInputError(f"header {header} allocated {payload.nbytes} bytes, above the limit")
    except wire.TransportError:
        pass


_FRAME_TYPES = [worker_pb2.RunGraphFrame, worker_pb2.PushTensorsFrame, master_pb2.RunStepFrame]


def frames(data: bytes) -> None:
    if not data:
        return
    frame_type = _FRAME_TYPES[data[0] % len(_FRAME_TYPES)]
    tx = _the_task().tx
    try:
        tx.read_message(data[1:], frame_type)
    except wire.TransportError:
        pass
    except Exception as e:
        from tensorgrid.framework import errors

        if not isinstance(e, errors.OpError):
            raise EscapedInputError(f"read_message raised {type(e).__name__}: {e}") from e
    _errors.check()


# ---------------------------------------------------------------------------- the data channel

_REPLY = struct.Struct("<III")


def data_channel_connection(data: bytes) -> None:
    """``data`` as what a client sends on a connection to a real data channel (after
    ``TGC1`` or ``TGD1``, chosen by the first byte); the replies must be well-formed."""
    if not data:
        return
    magic = data_channel.CALL_MAGIC if data[0] % 2 == 0 else data_channel.FETCH_MAGIC
    port = _the_task().tx.data_port
    with socket.create_connection(("127.0.0.1", port), timeout=10.0) as client:
        client.sendall(magic + data[1:])
        client.shutdown(socket.SHUT_WR)  # the server reads to the end, answers, and closes
        reply = b""
        while chunk := client.recv(1 << 16):
            reply += chunk
    _errors.check()
    if magic == data_channel.CALL_MAGIC:
        _check_call_replies(reply)


def _check_call_replies(reply: bytes) -> None:
    pos = 0
    while pos < len(reply):
        if len(reply) - pos < _REPLY.size:
            raise EscapedInputError(f"a reply ends inside its prefix: {reply[pos:]!r}")
        status, control_bytes, header_bytes = _REPLY.unpack_from(reply, pos)
        pos += _REPLY.size + control_bytes
        headers = reply[pos:pos + header_bytes]
        pos += header_bytes
        payload = sum(h.byte_size for h, _, _ in wire.decode_headers(headers, MAX_TENSOR_BYTES))
        pos += payload
        if pos > len(reply):
            raise EscapedInputError(f"a reply (status {status}) declares more bytes than it holds")
        if status != 0 and control_bytes == 0:
            raise EscapedInputError(f"an error reply (status {status}) without a message")


# ---------------------------------------------------------------------------- the servicers

class _AbortedError(Exception):
    """What ``_Context.abort`` raises: the servicer answered with a status (no finding)."""


class _Context:
    """What a servicer uses of ``grpc.ServicerContext``; ``abort`` raises as gRPC's does."""

    def __init__(self) -> None:
        self.code: Optional[grpc.StatusCode] = None

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        if code == grpc.StatusCode.OK or not details:
            raise EscapedInputError(f"aborted with {code} and details {details!r}")
        self.code = code
        raise _AbortedError(details)

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return False

    def is_active(self) -> bool:
        return True

    def time_remaining(self) -> Optional[float]:
        return 1.0

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    def auth_context(self) -> dict[str, list[bytes]]:
        return {"transport_security_type": [b"insecure"]}  # what grpc says of a plaintext call

    def invocation_metadata(self) -> tuple[Any, ...]:
        return ()


class _CallDetails:
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


def servicer(data: bytes) -> None:
    """``data[1:]`` as the request of the method ``data[0]`` picks (a stream: as one frame)."""
    if not data:
        return
    task = _the_task()
    service, method = task.methods[data[0] % len(task.methods)]
    if method.name == "Shutdown":
        return  # a task told to stop stops: not a parser's answer to check
    handler = task.handlers[service.full_name].service(_CallDetails(f"/{service.full_name}/{method.name}"))
    if handler is None:
        raise EscapedInputError(f"no handler for {method.name}")
    request: Any = data[1:]
    if method.client_streaming:
        request = iter([data[1:]])
    context = _Context()
    behaviour = handler.stream_stream or handler.stream_unary or handler.unary_stream or handler.unary_unary
    try:
        response = behaviour(request, context)
        if isinstance(response, Iterator):
            for _ in response:
                pass
    except _AbortedError:
        pass
    except Exception as e:
        raise EscapedInputError(f"{method.name} raised {type(e).__name__}: {e}") from e
    _errors.check()


TARGETS: dict[str, Callable[[bytes], None]] = {
    "header_bundle": header_bundle,
    "frames": frames,
    "data_channel": data_channel_connection,
    "servicer": servicer,
}


# ---------------------------------------------------------------------------- seeds

def seeds(target: str) -> list[bytes]:
    """Well-formed inputs of ``target``, which the fuzzers mutate."""
    tensors = [("a", np.arange(6, dtype=np.float32).reshape(2, 3)), ("s", np.array([b"xy", "z"], dtype=object)),
               ("i", np.int64(7))]
    headers, payloads = wire.encode_headers(tensors)
    body = b"".join(bytes(p) for p in payloads)
    push = worker_pb2.PushTensorsRequest(step_id=1, from_task="/job:worker/task:0").SerializeToString()
    run_graph = worker_pb2.RunGraphRequest(graph_handle="g", step_id=2).SerializeToString()
    run_step = master_pb2.RunStepRequest(session_handle="s", feed=["a"], fetch=["a"]).SerializeToString()
    if target == "header_bundle":
        return [headers, wire.bundle_frames([wire.header_frame(tensor_pb2.TensorHeader(
            dtype=tensor_pb2.DT_STRING, shape=tensor_pb2.TensorShapeProto(dim=[3, 0]), byte_size=0, name="e"))])]
    if target == "frames":
        out = []
        for index, (frame_type, request) in enumerate(((worker_pb2.RunGraphFrame, worker_pb2.RunGraphRequest(
                graph_handle="g", step_id=2)), (worker_pb2.PushTensorsFrame, worker_pb2.PushTensorsRequest(step_id=1)),
                (master_pb2.RunStepFrame, master_pb2.RunStepRequest(session_handle="s")))):
            first = frame_type(request=request).SerializeToString()  # type: ignore[operator]
            pieces = [first]
            for name, array in tensors[:2]:
                payload = wire.wire_payload(wire.as_wire_array(array))
                pieces += [wire.header_frame(wire.header_for(array, len(payload), name)), wire.chunk_frame(payload)]
            out.append(bytes([index]) + wire.bundle_frames(pieces))
        return out
    if target == "data_channel":
        calls = []
        for method, control in ((data_channel.Method.PUSH_TENSORS, push), (data_channel.Method.RUN_GRAPH, run_graph),
                                (data_channel.Method.RUN_STEP, run_step)):
            calls.append(b"\0" + struct.pack("<BII", method, len(control), len(headers)) + control + headers + body)
        return calls + [b"\1" + bytes(data_channel.TICKET_BYTES) * 2]
    if target == "servicer":
        task = _the_task()
        requests = {
            "GetStatus": worker_pb2.GetStatusRequest(), "RecvTensor": worker_pb2.RecvTensorRequest(
                step_id=3, rendezvous_key=[f"/job:a/task:0;{task.server.worker.incarnation:016x};/job:b/task:0;x:0;0:0"]),
            "CleanupGraph": worker_pb2.CleanupGraphRequest(step_id=3, abort_reason="x"),
            "CreateSession": master_pb2.CreateSessionRequest(), "CloseSession": master_pb2.CloseSessionRequest(),
            "ListDevices": master_pb2.ListDevicesRequest(),
            "RegisterGraph": worker_pb2.RegisterGraphRequest(session_handle="s"),
        }
        out = []
        for index, (service, method) in enumerate(task.methods):
            if method.name in requests:
                out.append(bytes([index]) + requests[method.name].SerializeToString())
            elif method.name.startswith("RunGraph"):
                out.append(bytes([index]) + wire.bundle_frames([worker_pb2.RunGraphFrame(
                    request=worker_pb2.RunGraphRequest(graph_handle="g")).SerializeToString()]))
        return out
    raise KeyError(f"unknown fuzz target {target!r}; targets are {sorted(TARGETS)}")
