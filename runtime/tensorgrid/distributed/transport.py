"""Tensors between tasks: a header plus raw chunks on gRPC, or a raw TCP data channel for
large payloads, with no message-size limit and no protobuf copy of a payload.

Why this module exists: putting a tensor in a protobuf ``bytes`` field costs a copy
into protobuf and another out of it (0.15-0.3 GB/s on this project's machines), and
gRPC's default 4 MiB message limit breaks on the first big variable. Here a tensor
is one *header frame* (a serialized ``TensorHeader``: dtype, shape, byte size, name)
followed by *chunk frames* of raw bytes (wire format in
``protos/tensorgrid/v1/tensor.proto``). The frames of one direction of a call travel
either as a stream (a streaming method, chunks of at most ``chunk_bytes``) or as one
*bundle* message (a unary method: about 0.13 ms per round trip against 0.5 ms for a
stream, so small steps are unary). Either way gRPC carries raw ``bytes`` (methods
registered with identity (de)serializers) and protobuf only parses the small
control frames and headers.

Costs, measured (bench/README.md). grpcio's Python API accepts only ``bytes``
messages (a ``memoryview`` or ``bytearray`` is refused with a TypeError), so the
sending side makes one copy (``b"".join`` of tags, lengths and slices of the array's
buffer) and gRPC copies again into its own slices; the receiving side gets ``bytes``
from gRPC and copies them once into the destination array. That path reaches about
a third to a half of a plain socket. So, when the receiver says it can reach the
sender's *data channel* (``RunOptions.allow_data_channel``), a tensor of at least
``data_channel_min_bytes`` travels as a header carrying a one-use ticket, and the
receiver fetches the bytes over a pooled raw TCP connection: ``socket.sendall``
straight from the array's buffer and ``recv_into`` straight into the destination
array, no user-space copy on either side. gRPC stays the control path (ordering,
deadlines, cancellation, errors).

The data channel also answers *calls* (``Transport.call``, ``DataServer.serve_calls``):
a method number, control bytes and tensors one way, a status, control bytes and
tensors back, on a pooled raw TCP connection. A step's hot path (RunStep, RunGraph,
PushTensors) uses them: one socket round trip (about 0.05 ms) instead of a gRPC
call (about 0.25-0.3 ms, with two thread hand-offs in grpcio), and payloads go
``sendall`` from the arrays to ``recv_into`` the receiver's pooled arrays. gRPC stays
for everything else, for calls with deadlines, and for peers whose data channel
cannot be reached.

Received tensors land in arrays from a ``BufferPool``: one allocation per tensor,
reused across steps once nothing references it, because first-touching freshly
mapped memory (page faults) costs more than the copy itself.

Public surface: ``Transport`` (one per task: pool, data channel server and client,
``write_frames`` / ``read_frames`` / ``read_message`` / ``call``), ``generic_handler`` and
``Stub`` (serve and call a service of ``tensorgrid.v1`` with raw frames where frames
travel), ``GRPC_OPTIONS``, and the frame-level helpers they are built from
(``header_frame``, ``chunk_frame``, ``check_header``, ``TensorAssembler``,
``BufferPool``, ``split_bundle``, ``DataServer``, ``DataChannelClient``).

Serving, in short::

    tx = transport.Transport()
    class WorkerServicer:
        def RecvTensor(self, request, context):        # serves RecvTensor and RecvTensorStream
            tensors = rendezvous.wait_all(request.step_id, request.rendezvous_key)  # (key, array) pairs
            return tx.write_frames(None, tensors, context=context,
                                   use_data_channel=request.options.allow_data_channel)
        def RunGraph(self, frames, context):           # serves RunGraph and RunGraphStream
            first, feeds = tx.read_message(frames, worker_pb2.RunGraphFrame)
            ...
            return tx.write_frames(worker_pb2.RunGraphFrame(response=...), fetched.items())
    server = grpc.server(executor, options=transport.GRPC_OPTIONS)
    server.add_generic_rpc_handlers((transport.generic_handler(WORKER_SERVICE, WorkerServicer()),))

Calling::

    stub = transport.Stub(channel, WORKER_SERVICE)
    bundle = stub.RecvTensor(worker_pb2.RecvTensorRequest(..., options={"allow_data_channel": True}))
    for name, array in tx.read_frames(bundle, peer_host=transport.host_of(target)): ...
    frames = stub.RunGraphStream(iter(tx.write_frames(worker_pb2.RunGraphFrame(request=...), big_feeds)))
    first, fetched = tx.read_message(frames, worker_pb2.RunGraphFrame, peer_host=host)
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import secrets
import socket
import struct
import sys
import threading
import time
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Optional, Union, cast

import grpc
import numpy as np
from google.protobuf import descriptor as descriptor_lib
from google.protobuf import message as message_lib
from google.protobuf import message_factory

from tensorgrid.framework import dtypes
from tensorgrid.v1 import tensor_pb2

log = logging.getLogger("tensorgrid.transport")

if sys.byteorder != "little":  # pragma: no cover - every supported platform is little-endian
    raise ImportError("tensorgrid's wire format is little-endian; big-endian hosts are not supported")

CHUNK_BYTES = 4 << 20
"""Default payload bytes per chunk frame: large enough to amortize per-message costs,
small enough to keep gRPC's buffers and flow-control windows small."""

GRPC_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
]
"""Options for every tensorgrid gRPC server and channel: no message-size limit. Chunks
stay at ``chunk_bytes``; this only keeps a large GraphDef (big constants) from failing."""

_CHUNK_TAG = 0x12  # field 2 (chunk), wire type 2 (length-delimited): 2 << 3 | 2
_DATA_MAGIC = b"TGD1"
_CALL_MAGIC = b"TGC1"
_CALL_REQUEST = struct.Struct("<BII")  # method, control bytes, header bundle bytes
_CALL_REPLY = struct.Struct("<III")  # status code, control bytes (the error message if not OK), header bundle bytes
_MAX_CALL_CONTROL_BYTES = 64 << 20
_MAX_CALL_HEADER_BYTES = 64 << 20
_TICKET_BYTES = 16
_LENGTH = struct.Struct("<Q")
_UNKNOWN_TICKET = 0xFFFFFFFFFFFFFFFF


# ---------------------------------------------------------------------------- errors

class TransportError(ValueError):
    """A malformed, inconsistent or failed tensor stream; ``status_code`` is the gRPC
    status a server answers it with (``generic_handler`` does so)."""

    status_code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, message: str, status_code: Optional[grpc.StatusCode] = None) -> None:
        super().__init__(message)
        if status_code is not None:
            self.status_code = status_code


class TensorTooLarge(TransportError):
    """A header declares more bytes than the receiver accepts (refused before allocating)."""

    status_code = grpc.StatusCode.RESOURCE_EXHAUSTED


# ---------------------------------------------------------------------------- settings

@dataclasses.dataclass
class TransportConfig:
    """How one task sends and receives tensors."""

    chunk_bytes: int = CHUNK_BYTES
    """Payload bytes per chunk frame on gRPC streams."""
    max_tensor_bytes: int = 4 << 30
    """Largest tensor this task accepts; a header declaring more is refused with
    RESOURCE_EXHAUSTED before any memory is allocated."""
    pool_bytes: int = 1 << 30
    """Total size of idle receive buffers kept for reuse (0 disables the pool)."""
    data_channel: bool = True
    """Listen on a raw TCP data channel so peers can fetch large tensors from this task."""
    data_host: str = ""
    """Address the data channel binds to; "" means every interface (IPv4 and IPv6)."""
    data_port: int = 0
    """Port of the data channel; 0 picks a free one (advertised in GetStatus and
    CreateSession responses)."""
    data_channel_min_bytes: int = 256 << 10
    """Tensors at least this big use the data channel when the receiver allows it;
    smaller ones go as chunk frames (the extra round trip costs more than it saves)."""
    data_channel_timeout_s: float = 300.0
    """How long a sender waits for an offered payload to be fetched (bounded also by
    the call's deadline), and the I/O timeout of data channel sockets."""

    def __post_init__(self) -> None:
        if self.chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes must be > 0, got {self.chunk_bytes}")
        if self.max_tensor_bytes < 0 or self.pool_bytes < 0 or self.data_channel_min_bytes < 0:
            raise ValueError(f"byte limits must be >= 0, got {self}")


# ---------------------------------------------------------------------------- dtypes and shapes

_WIRE_DTYPES: dict[int, dtypes.DType] = {}
for _name, _number in tensor_pb2.DataType.items():
    if _number != tensor_pb2.DT_INVALID:
        _WIRE_DTYPES[_number] = dtypes.as_dtype(_number)
        if _WIRE_DTYPES[_number].enum != _number:  # pragma: no cover - guards dtypes.py and tensor.proto drifting
            raise ImportError(f"tensor.proto's {_name}={_number} is not tensorgrid dtype enum {_number}")
_VALID_DTYPES = ", ".join(f"{number} ({dt.name})" for number, dt in sorted(_WIRE_DTYPES.items()))


def dtype_to_proto(dtype: Any) -> int:
    """The ``DataType`` number of a dtype (DType, name, or numpy dtype)."""
    return dtypes.as_dtype(dtype).enum


def dtype_from_proto(value: int, what: str = "dtype") -> dtypes.DType:
    """The DType of a ``DataType`` number; ValueError naming ``what`` if it is not one."""
    dtype = _WIRE_DTYPES.get(int(value))
    if dtype is None:
        raise ValueError(f"{what} has unknown DataType {value}; valid values are {_VALID_DTYPES}")
    return dtype


def shape_to_proto(shape: Optional[Iterable[Optional[int]]]) -> tensor_pb2.TensorShapeProto:
    """A static shape (None: unknown rank; a None dim: unknown size) as a proto."""
    if shape is None:
        return tensor_pb2.TensorShapeProto(unknown_rank=True)
    return tensor_pb2.TensorShapeProto(dim=[-1 if d is None else int(d) for d in shape])


def shape_from_proto(proto: tensor_pb2.TensorShapeProto, what: str = "shape") -> Optional[tuple[Optional[int], ...]]:
    """The static shape of a proto (None for unknown rank); ValueError naming ``what``."""
    if proto.unknown_rank:
        if proto.dim:
            raise ValueError(f"{what} has unknown_rank set but also dims {list(proto.dim)}")
        return None
    for d in proto.dim:
        if d < -1:
            raise ValueError(f"{what} has dimension {d}; valid sizes are >= 0, or -1 for unknown")
    return tuple(None if d == -1 else int(d) for d in proto.dim)


def header_for(array: np.ndarray, payload_bytes: int, name: str = "") -> tensor_pb2.TensorHeader:
    """The header announcing ``array`` whose payload (``wire_payload``) has ``payload_bytes``."""
    dtype = cast("tensor_pb2.DataType", dtypes.as_dtype(array.dtype).enum)
    return tensor_pb2.TensorHeader(dtype=dtype, shape=tensor_pb2.TensorShapeProto(dim=array.shape),
                                   byte_size=payload_bytes, name=name)


def check_header(header: tensor_pb2.TensorHeader, max_bytes: int) -> tuple[np.dtype, tuple[int, ...]]:
    """Validates a received header; returns the numpy dtype and shape to allocate.

    Raises TransportError if the dtype is not a base type that travels or the shape is
    not fully known, or if ``byte_size`` does not fit them (element size x element
    count; for strings at least one byte per element), and TensorTooLarge if it
    exceeds ``max_bytes``; all before anything is allocated.
    """
    what = f"tensor {header.name!r}"
    try:
        dtype = dtype_from_proto(header.dtype, f"header of {what}")
    except ValueError as e:
        raise TransportError(str(e)) from None
    if dtype.is_ref_dtype or dtype is dtypes.resource:
        raise TransportError(f"header of {what} has dtype {dtype.name}, which never travels between tasks "
                             f"(references travel as their value's dtype, resources stay on their task)")
    if header.shape.unknown_rank or any(d < 0 for d in header.shape.dim):
        shown = "unknown rank" if header.shape.unknown_rank else list(header.shape.dim)
        raise TransportError(f"header of {what} has shape {shown}; a sent tensor's shape must be fully known "
                             f"(every dimension >= 0)")
    shape = tuple(int(d) for d in header.shape.dim)
    count = math.prod(shape)
    if dtype is dtypes.string:
        if header.byte_size < count:
            raise TransportError(f"header of {what} declares byte_size {header.byte_size}, but {count} strings "
                                 f"need at least {count} bytes")
    elif header.byte_size != dtype.size * count:
        raise TransportError(f"header of {what} declares byte_size {header.byte_size}, but dtype {dtype.name} "
                             f"and shape {list(shape)} need {dtype.size * count} bytes")
    if header.byte_size > max_bytes:
        raise TensorTooLarge(f"{what} declares {header.byte_size} bytes, above this receiver's limit of "
                             f"{max_bytes} bytes (TransportConfig.max_tensor_bytes)")
    return np.dtype(dtype.as_numpy_dtype), shape


def as_wire_array(value: Any) -> np.ndarray:
    """``value`` as a C-contiguous, native-order numpy array of a tensorgrid dtype
    (copied only when it is not one already). TypeError for other dtypes."""
    array = np.asarray(value)
    dtypes.as_dtype(array.dtype.newbyteorder("="))
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    # Not np.ascontiguousarray unconditionally: it turns a 0-d array into shape (1,).
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def wire_payload(array: np.ndarray) -> memoryview:
    """The payload bytes of a C-contiguous array (from ``as_wire_array``).

    Numeric and bool arrays: a view of the array's own buffer, no copy. String
    (object) arrays: per element in C order, a varint ``length << 1 | is_text`` then
    the bytes (UTF-8 for a str), so str and bytes elements come back as they were;
    TypeError for an element that is neither (a resource handle, for one).
    """
    if array.dtype != np.object_:
        return array.reshape(-1).view(np.uint8).data
    parts: list[bytes] = []
    for item in array.flat:
        if isinstance(item, str):
            data, is_text = item.encode("utf-8"), 1
        elif isinstance(item, bytes):
            data, is_text = item, 0
        else:
            raise TypeError(f"a string tensor holds {item!r} of type {type(item).__name__}; only str and bytes "
                            f"elements travel between tasks")
        parts.append(_varint(len(data) << 1 | is_text))
        parts.append(data)
    return memoryview(b"".join(parts))


def decode_strings(payload: Union[bytes, memoryview, np.ndarray], shape: tuple[int, ...], name: str = "") -> np.ndarray:
    """The object array of str/bytes encoded by ``wire_payload``; TransportError if
    the payload does not hold exactly ``prod(shape)`` well-formed strings."""
    data = (payload.data if isinstance(payload, np.ndarray) else memoryview(payload)).cast("B")
    out = np.empty(math.prod(shape), dtype=object)
    pos = 0
    for i in range(out.size):
        prefix, pos = _read_varint(data, pos, f"string {i} of tensor {name!r}")
        end = pos + (prefix >> 1)
        if end > len(data):
            raise TransportError(f"string {i} of tensor {name!r} runs {end - len(data)} bytes past the payload")
        raw = bytes(data[pos:end])
        if prefix & 1:
            try:
                out[i] = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise TransportError(f"string {i} of tensor {name!r} is marked text but is not UTF-8: {e}") from None
        else:
            out[i] = raw
        pos = end
    if pos != len(data):
        raise TransportError(f"tensor {name!r} has {len(data) - pos} bytes after its {out.size} strings")
    return out.reshape(shape)


def _read_varint(data: Union[bytes, memoryview], pos: int, what: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise TransportError(f"{what}: truncated or overlong length prefix")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


# ---------------------------------------------------------------------------- frames

def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def chunk_frame(payload: Union[bytes, memoryview]) -> bytes:
    """A chunk frame (field 2 of every frame message) holding ``payload``: one copy."""
    return b"".join((bytes((_CHUNK_TAG,)), _varint(len(payload)), payload))


def header_frame(header: tensor_pb2.TensorHeader) -> bytes:
    """A header frame (field 1 of every frame message)."""
    return _serialize(tensor_pb2.TensorFrame(header=header))


def parse_chunk(frame: Union[bytes, memoryview]) -> Optional[memoryview]:
    """The payload of a chunk frame as a view into ``frame`` (no copy), or None if the
    frame is of another kind. TransportError if it is a malformed chunk frame."""
    if not frame or frame[0] != _CHUNK_TAG:
        return None
    length, pos = _read_varint(frame, 1, f"chunk frame of {len(frame)} bytes")
    if pos + length != len(frame):
        raise TransportError(f"malformed chunk frame: declares {length} payload bytes but holds "
                             f"{len(frame) - pos}")
    return memoryview(frame)[pos:]


class ReceivedTensor(NamedTuple):
    """A tensor decoded from a stream: its header name and its value."""

    name: str
    array: np.ndarray


# ---------------------------------------------------------------------------- receive buffers

def _refcounts(buffers: list[np.ndarray]) -> list[int]:
    return [sys.getrefcount(b) for b in buffers]


# What _refcounts reports for a pooled buffer nobody else references (the list and the
# call's own references), measured rather than assumed so interpreter changes cannot
# make a buffer still in use look free.
_FREE_REFCOUNT = _refcounts([np.empty(1, np.uint8)])[0]


class BufferPool:
    """Receive buffers reused by size.

    ``empty(dtype, shape)`` returns an array viewing a pooled byte buffer of exactly
    the needed size when one is idle, else a new one. A buffer is idle when nothing
    outside the pool references it: every array handed out (and every view derived
    from it) keeps a reference, so a buffer is never reused while any of them lives.
    Buffers smaller than ``min_bytes`` are not pooled (malloc serves them fast); idle
    buffers are dropped, oldest first, to keep the total within ``capacity_bytes``.
    """

    def __init__(self, capacity_bytes: int, min_bytes: int = 256 << 10) -> None:
        self.capacity_bytes = capacity_bytes
        self.min_bytes = min_bytes
        self._buffers: list[np.ndarray] = []
        self._pooled_bytes = 0
        self._lock = threading.Lock()
        self.allocations = 0
        """Number of fresh allocations (for tests and benchmarks)."""
        self.reuses = 0
        """Number of times an idle buffer was handed out again."""

    def empty(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        nbytes = dtype.itemsize * math.prod(shape)
        if nbytes < self.min_bytes or nbytes > self.capacity_bytes:
            self.allocations += 1
            return np.empty(shape, dtype)
        with self._lock:
            same_size = [b for b in self._buffers if b.nbytes == nbytes]
            for buffer, count in zip(same_size, _refcounts(same_size)):
                if count <= _FREE_REFCOUNT + 1:  # +1: the same_size list
                    self.reuses += 1
                    return buffer.view(dtype).reshape(shape)
            del same_size
            buffer = np.empty(nbytes, np.uint8)
            self.allocations += 1
            if self._make_room(nbytes):
                self._buffers.append(buffer)
                self._pooled_bytes += nbytes
            return buffer.view(dtype).reshape(shape)

    def _make_room(self, nbytes: int) -> bool:
        while self._pooled_bytes + nbytes > self.capacity_bytes:
            counts = _refcounts(self._buffers)
            idle = next((i for i, c in enumerate(counts) if c <= _FREE_REFCOUNT), None)
            if idle is None:
                return False
            self._pooled_bytes -= self._buffers.pop(idle).nbytes
        return True

    @property
    def pooled_bytes(self) -> int:
        """Bytes held by the pool, idle or in use."""
        return self._pooled_bytes


def allocate(pool: BufferPool, header: tensor_pb2.TensorHeader, max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Validates ``header`` and allocates for it: returns the destination array and the
    flat uint8 array its payload is written into (the same memory for numeric
    tensors; a staging buffer, decoded by ``finish_payload``, for strings)."""
    dtype, shape = check_header(header, max_bytes)
    return _allocate_checked(pool, header, dtype, shape)


def _allocate_checked(pool: BufferPool, header: tensor_pb2.TensorHeader, dtype: np.dtype,
                      shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    if dtype == np.object_:
        staging = pool.empty(np.dtype(np.uint8), (header.byte_size,))
        return np.empty(shape, dtype), staging
    array = pool.empty(dtype, shape)
    return array, array.reshape(-1).view(np.uint8)


def finish_payload(header: tensor_pb2.TensorHeader, array: np.ndarray, payload: np.ndarray) -> np.ndarray:
    """The usable value once ``payload`` (from ``allocate``) is filled."""
    if array.dtype == np.object_:
        return decode_strings(payload, array.shape, header.name)
    return array


class TensorAssembler:
    """Rebuilds tensors from a header frame and the chunk frames after it.

    ``start(header)`` validates the header (``check_header``) and allocates the one
    destination array; ``add(chunk)`` copies each chunk into place; both return the
    finished ``ReceivedTensor`` once all ``byte_size`` bytes arrived. More bytes than
    declared, a new header before the current tensor is complete, or ``finish()``
    while one is incomplete raise TransportError naming the tensor.
    """

    def __init__(self, pool: BufferPool, max_tensor_bytes: int) -> None:
        self._pool = pool
        self._max_tensor_bytes = max_tensor_bytes
        self._header: Optional[tensor_pb2.TensorHeader] = None
        self._array: Optional[np.ndarray] = None
        self._payload: Optional[np.ndarray] = None
        self._filled = 0

    @property
    def busy(self) -> bool:
        """A tensor is started and still lacks bytes."""
        return self._header is not None

    @property
    def name(self) -> str:
        """Name of the tensor being assembled ("" when not busy)."""
        return self._header.name if self._header is not None else ""

    @property
    def missing(self) -> int:
        """Bytes the tensor being assembled still lacks."""
        return 0 if self._payload is None else self._payload.size - self._filled

    def start(self, header: tensor_pb2.TensorHeader) -> Optional[ReceivedTensor]:
        if self._header is not None:
            raise TransportError(f"header of tensor {header.name!r} arrived while tensor {self.name!r} "
                                 f"still lacks {self.missing} bytes")
        array, payload = allocate(self._pool, header, self._max_tensor_bytes)
        if payload.size == 0:
            return ReceivedTensor(header.name, finish_payload(header, array, payload))
        self._header, self._array, self._payload, self._filled = header, array, payload, 0
        return None

    def add(self, chunk: memoryview) -> Optional[ReceivedTensor]:
        if self._header is None or self._array is None or self._payload is None:
            raise TransportError(f"chunk frame of {len(chunk)} bytes arrived without a tensor header before it")
        end = self._filled + len(chunk)
        size = self._payload.size
        if end > size:
            raise TransportError(f"tensor {self._header.name!r} got {end - size} bytes more than the "
                                 f"{size} its header declared")
        self._payload[self._filled:end] = np.frombuffer(chunk, np.uint8)
        self._filled = end
        if end < size:
            return None
        header, array, payload = self._header, self._array, self._payload
        self._header = self._array = self._payload = None
        return ReceivedTensor(header.name, finish_payload(header, array, payload))

    def finish(self) -> None:
        """Checks that no tensor was left incomplete (call when the stream ends)."""
        if self._header is not None and self._payload is not None:
            raise TransportError(f"stream ended after {self._filled} of {self._payload.size} bytes of tensor "
                                 f"{self._header.name!r}")


# ---------------------------------------------------------------------------- data channel

def _recv_exact_into(sock: socket.socket, view: memoryview) -> None:
    while len(view):
        received = sock.recv_into(view)
        if received == 0:
            raise EOFError(f"connection closed with {len(view)} bytes still expected")
        view = view[received:]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buffer = bytearray(n)
    _recv_exact_into(sock, memoryview(buffer))
    return bytes(buffer)


class _Offer:
    """A payload waiting to be fetched once over the data channel."""

    __slots__ = ("ticket", "name", "view", "expires_at", "done", "error")

    def __init__(self, ticket: bytes, name: str, view: memoryview, expires_at: Optional[float]) -> None:
        self.ticket = ticket
        self.name = name
        self.view = view
        self.expires_at = expires_at
        self.done = threading.Event()
        self.error = ""


DATA_PORT_RANGE = (20000, 32000)
"""Where a data channel without a fixed port listens: below the kernel's ephemeral range
(32768+), so it never takes a port that a launcher picked (as a free ephemeral port) for a
task that has not bound it yet."""


def _listen_for_data(host: str, port: int) -> socket.socket:
    def listen(candidate: int) -> socket.socket:
        if host == "" and socket.has_dualstack_ipv6():
            return socket.create_server(("", candidate), family=socket.AF_INET6, backlog=128, dualstack_ipv6=True)
        return socket.create_server((host, candidate), backlog=128)

    if port:
        return listen(port)
    rng = secrets.SystemRandom()
    for _ in range(64):
        try:
            return listen(rng.randrange(*DATA_PORT_RANGE))
        except OSError:
            continue
    return listen(0)


class DataServer:
    """The sending side of the data channel: serves offered payloads by ticket.

    One thread accepts connections, one thread per connection serves its fetches in
    order (``sendall`` from the offered buffer: no user-space copy). Protocol in
    tensor.proto (DataChannelRef).
    """

    def __init__(self, host: str = "", port: int = 0, io_timeout_s: float = 300.0) -> None:
        self._listener = _listen_for_data(host, port)
        self.port: int = self._listener.getsockname()[1]
        self._io_timeout_s = io_timeout_s
        self._offers: dict[bytes, _Offer] = {}
        self._next_expiry = math.inf
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._call_handlers: dict[int, CallHandler] = {}
        self._pool: Optional[BufferPool] = None
        self._max_tensor_bytes = 0
        self._thread = threading.Thread(target=self._accept_loop, name=f"tensorgrid-data-{self.port}", daemon=True)
        self._thread.start()

    def offer(self, name: str, payload: memoryview, expires_at: Optional[float] = None) -> _Offer:
        """Registers a payload (``wire_payload``) for one fetch; keep it unmodified until
        done. Without ``expires_at`` (a ``time.monotonic()`` instant) the caller must
        ``withdraw`` it; with one, it is dropped once expired (checked on each offer)."""
        offer = _Offer(secrets.token_bytes(_TICKET_BYTES), name, payload, expires_at)
        now = time.monotonic()
        expired: list[_Offer] = []
        with self._lock:
            if now >= self._next_expiry:  # scan only when something did expire
                expired = [o for o in self._offers.values() if o.expires_at is not None and o.expires_at < now]
                for old in expired:
                    del self._offers[old.ticket]
                self._next_expiry = min((o.expires_at for o in self._offers.values() if o.expires_at is not None),
                                        default=math.inf)
            self._offers[offer.ticket] = offer
            if expires_at is not None:
                self._next_expiry = min(self._next_expiry, expires_at)
        for old in expired:
            old.error = f"tensor {old.name!r} was not fetched over the data channel before its offer expired"
            old.done.set()
        return offer

    def serve_calls(self, handlers: dict[int, "CallHandler"], pool: "BufferPool", max_tensor_bytes: int) -> None:
        """Answers calls (``DataChannelClient.call``) from now on: a call's tensors are
        received into arrays from ``pool`` and handed, with its control bytes, to the
        handler of its method number, whose ``(status code, control bytes, tensors)``
        is the reply (a non-zero code: the control bytes are the error message)."""
        self._pool = pool
        self._max_tensor_bytes = max_tensor_bytes
        self._call_handlers = dict(handlers)

    @property
    def pending(self) -> int:
        """Offers not fetched yet (for metrics and tests)."""
        with self._lock:
            return len(self._offers)

    def withdraw(self, offer: _Offer) -> None:
        """Forgets an offer not fetched yet (its call ended); a fetch in progress finishes."""
        with self._lock:
            self._offers.pop(offer.ticket, None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections = list(self._connections)
            offers = list(self._offers.values())
            self._offers.clear()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for offer in offers:
            offer.error = "the data channel closed"
            offer.done.set()
        self._thread.join(timeout=5)

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                if self._closed:
                    return
                log.exception("data channel on port %d: accept failed", self.port)
                time.sleep(0.1)
                continue
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._connections.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name=f"tensorgrid-data-{self.port}-conn",
                             daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(10.0)
            magic = _recv_exact(conn, len(_DATA_MAGIC))
            if magic == _CALL_MAGIC and self._call_handlers:
                return self._serve_calls(conn)
            if magic != _DATA_MAGIC:
                return  # not a tensorgrid peer (or calls are not served here): drop it without a word
            while True:
                conn.settimeout(None)  # an idle pooled connection may wait for its next fetch indefinitely
                ticket = _recv_exact(conn, _TICKET_BYTES)
                with self._lock:
                    offer = self._offers.pop(ticket, None)
                conn.settimeout(self._io_timeout_s)
                if offer is None:
                    conn.sendall(_LENGTH.pack(_UNKNOWN_TICKET))
                    continue
                try:
                    conn.sendall(_LENGTH.pack(len(offer.view)))
                    conn.sendall(offer.view)
                except OSError as e:
                    offer.error = f"sending tensor {offer.name!r} over the data channel failed: {e}"
                    raise
                finally:
                    offer.done.set()
        except (OSError, EOFError):
            pass  # the peer went away; its gRPC call reports the failure
        finally:
            with self._lock:
                self._connections.discard(conn)
            conn.close()

    def _serve_calls(self, conn: socket.socket) -> None:
        """The calls of one connection, in order; a malformed one is answered and ends it."""
        assert self._pool is not None
        while True:
            conn.settimeout(None)  # an idle pooled connection may wait for its next call indefinitely
            prefix = _recv_exact(conn, _CALL_REQUEST.size)
            conn.settimeout(self._io_timeout_s)
            method, control_bytes, header_bytes = _CALL_REQUEST.unpack(prefix)
            handler = self._call_handlers.get(method)
            if handler is None:
                _send_reply(conn, grpc.StatusCode.UNIMPLEMENTED.value[0],
                            f"method {method} is not served on this data channel; methods are "
                            f"{sorted(self._call_handlers)}".encode(), ())
                return
            if control_bytes > _MAX_CALL_CONTROL_BYTES or header_bytes > _MAX_CALL_HEADER_BYTES:
                _send_reply(conn, grpc.StatusCode.INVALID_ARGUMENT.value[0],
                            f"call declares {control_bytes} control and {header_bytes} header bytes, above the "
                            f"limits of {_MAX_CALL_CONTROL_BYTES} and {_MAX_CALL_HEADER_BYTES}".encode(), ())
                return
            control = _recv_exact(conn, control_bytes)
            headers = _recv_exact(conn, header_bytes)
            try:
                tensors = _receive_tensors(conn, headers, self._pool, self._max_tensor_bytes)
            except TransportError as e:
                _send_reply(conn, e.status_code.value[0], str(e).encode(), ())
                return  # the rest of the stream cannot be trusted
            try:
                code, reply, reply_tensors = handler(control, tensors)
            except Exception as e:  # noqa: BLE001 - answered to the caller, the server goes on
                log.exception("data channel call of method %d failed", method)
                code, reply, reply_tensors = grpc.StatusCode.INTERNAL.value[0], f"{type(e).__name__}: {e}".encode(), ()
            del tensors
            try:
                _send_reply(conn, code, reply, reply_tensors)
            except (TypeError, ValueError) as e:  # a fetched value that cannot travel
                _send_reply(conn, grpc.StatusCode.INVALID_ARGUMENT.value[0], str(e).encode(), ())


CallHandler = Callable[[bytes, list["ReceivedTensor"]], tuple[int, bytes, Iterable[tuple[str, Any]]]]
"""Takes a call's control bytes and tensors; returns the gRPC status code value of the
answer (0: OK), the reply's control bytes (the error message when not OK) and its tensors."""


class _FrameCache:
    """Header frames by what determines them. A step sends and receives the same
    tensors (names, dtypes, shapes) every time, so their headers are encoded, parsed
    and validated once, not per step. Bounded: cleared when full."""

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._entries: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        return self._entries.get(key)

    def put(self, key: Any, value: Any) -> None:
        if len(self._entries) >= self._capacity:
            self._entries.clear()
        self._entries[key] = value


_encoded_headers = _FrameCache()
_checked_headers = _FrameCache()


def _encode_tensors(tensors: Iterable[tuple[str, Any]]) -> tuple[bytes, list[memoryview]]:
    """The header bundle and the payloads of ``tensors`` (views of the arrays' buffers)."""
    frames = []
    payloads = []
    for name, value in tensors:
        array = as_wire_array(value)
        payload = wire_payload(array)
        key = (name, array.dtype.str, array.shape, len(payload))
        frame = _encoded_headers.get(key)
        if frame is None:
            frame = header_frame(header_for(array, len(payload), name))
            _encoded_headers.put(key, frame)
        frames.append(frame)
        payloads.append(payload)
    return bundle_frames(frames), payloads


def _send_message(sock: socket.socket, prefix: bytes, control: bytes, headers: bytes,
                  payloads: list[memoryview]) -> None:
    sock.sendall(b"".join((prefix, control, headers)))
    for payload in payloads:
        if len(payload):
            sock.sendall(payload)


def _send_reply(conn: socket.socket, code: int, control: bytes, tensors: Iterable[tuple[str, Any]]) -> None:
    headers, payloads = _encode_tensors(tensors)
    _send_message(conn, _CALL_REPLY.pack(code, len(control), len(headers)), control, headers, payloads)


def _receive_tensors(sock: socket.socket, headers: bytes, pool: "BufferPool", max_tensor_bytes: int,
                    ) -> list["ReceivedTensor"]:
    """Reads the payloads announced by a header bundle from ``sock`` straight into
    arrays from ``pool`` (``recv_into``: no user-space copy)."""
    tensors = []
    for frame in split_bundle(headers):
        key = (bytes(frame), max_tensor_bytes)
        checked = _checked_headers.get(key)
        if checked is None:
            try:
                message = tensor_pb2.TensorFrame.FromString(frame)
            except message_lib.DecodeError as e:
                raise TransportError(f"malformed header frame of {len(frame)} bytes: {e}") from None
            if message.WhichOneof("kind") != "header":
                raise TransportError("a header bundle holds a frame that is not a tensor header")
            checked = (message.header, *check_header(message.header, max_tensor_bytes))
            _checked_headers.put(key, checked)
        header, dtype, shape = checked
        array, payload = _allocate_checked(pool, header, dtype, shape)
        if payload.size:
            _recv_exact_into(sock, payload.data)
        tensors.append(ReceivedTensor(header.name, finish_payload(header, array, payload)))
    return tensors


class DataChannelClient:
    """The receiving side of the data channel: fetches payloads by ticket into
    caller-provided buffers (``recv_into``: no user-space copy), over connections
    pooled per peer and reused across fetches."""

    def __init__(self, io_timeout_s: float = 300.0, connect_timeout_s: float = 10.0) -> None:
        self._io_timeout_s = io_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._idle: dict[tuple[str, int, bytes], list[socket.socket]] = {}
        self._lock = threading.Lock()

    def call(self, host: str, port: int, method: int, control: bytes, tensors: Iterable[tuple[str, Any]],
             pool: "BufferPool", max_tensor_bytes: int) -> tuple[int, bytes, list["ReceivedTensor"]]:
        """Calls ``method`` of the data channel at ``host:port`` with ``control`` (opaque
        bytes for its handler) and ``tensors`` (sent straight from the arrays' buffers),
        and returns the reply: status code (0: OK), control bytes (the error message if
        not OK) and tensors (received into arrays from ``pool``). TransportError
        (UNAVAILABLE) if the connection fails. The arrays may be reused once this returns.
        """
        headers, payloads = _encode_tensors(tensors)
        prefix = _CALL_REQUEST.pack(method, len(control), len(headers))
        address = (host, int(port))
        for attempt in (1, 2):
            sock, reused = self._checkout(address, _CALL_MAGIC)
            replied = False
            try:
                _send_message(sock, prefix, control, headers, payloads)
                sock.settimeout(None)  # a step may take as long as it needs (as a gRPC call without deadline)
                code, control_bytes, header_bytes = _CALL_REPLY.unpack(_recv_exact(sock, _CALL_REPLY.size))
                sock.settimeout(self._io_timeout_s)
                replied = True
                reply = _recv_exact(sock, control_bytes)
                received = _receive_tensors(sock, _recv_exact(sock, header_bytes), pool, max_tensor_bytes)
            except (OSError, EOFError) as e:
                sock.close()
                if reused and attempt == 1 and not replied and isinstance(e, (EOFError, ConnectionError)):
                    continue  # a pooled connection the peer closed meanwhile: retry once on a new one
                raise TransportError(f"call {method} to the data channel at {host}:{port} failed: {e}",
                                     grpc.StatusCode.UNAVAILABLE) from None
            except TransportError:
                sock.close()  # a malformed reply: the connection cannot be trusted
                raise
            self._checkin(address, sock, _CALL_MAGIC)
            return code, reply, received
        raise AssertionError("unreachable: the second attempt returns or raises")

    def fetch(self, host: str, ref: tensor_pb2.DataChannelRef, into: memoryview, name: str = "") -> None:
        """Reads the payload of ``ref`` from ``host`` into ``into`` (exactly its size)."""
        address = (host, int(ref.port))
        for attempt in (1, 2):
            sock, reused = self._checkout(address, _DATA_MAGIC)
            try:
                sock.sendall(ref.ticket)
                (length,) = _LENGTH.unpack(_recv_exact(sock, _LENGTH.size))
            except (OSError, EOFError) as e:
                sock.close()
                if reused and attempt == 1:
                    continue  # a pooled connection the peer closed meanwhile: retry once on a new one
                raise TransportError(f"data channel {host}:{ref.port} failed before tensor {name!r}: {e}",
                                     grpc.StatusCode.UNAVAILABLE) from None
            break
        if length == _UNKNOWN_TICKET:
            self._checkin(address, sock, _DATA_MAGIC)
            raise TransportError(f"data channel {host}:{ref.port} does not know the ticket of tensor {name!r} "
                                 f"(already fetched, or its call ended)", grpc.StatusCode.ABORTED)
        if length != len(into):
            sock.close()
            raise TransportError(f"data channel {host}:{ref.port} sends {length} bytes for tensor {name!r}, "
                                 f"whose header declared {len(into)}")
        try:
            _recv_exact_into(sock, into)
        except (OSError, EOFError) as e:
            sock.close()
            raise TransportError(f"data channel {host}:{ref.port} failed while receiving tensor {name!r}: {e}",
                                 grpc.StatusCode.UNAVAILABLE) from None
        self._checkin(address, sock, _DATA_MAGIC)

    def probe(self, host: str, port: int, timeout_s: float = 2.0) -> bool:
        """Whether a tensorgrid data channel answers at ``host:port`` (for setting
        ``allow_data_channel``); the probing connection is kept for later fetches."""
        if not port:
            return False
        try:
            sock = self._connect((host, port), timeout_s, _DATA_MAGIC)
        except OSError:
            return False
        try:
            sock.sendall(bytes(_TICKET_BYTES))
            (length,) = _LENGTH.unpack(_recv_exact(sock, _LENGTH.size))
        except (OSError, EOFError):
            sock.close()
            return False
        if length != _UNKNOWN_TICKET:
            sock.close()
            return False
        self._checkin((host, port), sock, _DATA_MAGIC)
        return True

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for sockets in idle.values():
            for sock in sockets:
                sock.close()

    def _connect(self, address: tuple[str, int], timeout_s: float, magic: bytes) -> socket.socket:
        sock = socket.create_connection(address, timeout=timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self._io_timeout_s)
        sock.sendall(magic)
        return sock

    def _checkout(self, address: tuple[str, int], magic: bytes) -> tuple[socket.socket, bool]:
        """An idle pooled connection of kind ``magic`` (fetches or calls) to ``address``, or a new one."""
        with self._lock:
            idle = self._idle.get((*address, magic))
            if idle:
                return idle.pop(), True
        try:
            return self._connect(address, self._connect_timeout_s, magic), False
        except OSError as e:
            raise TransportError(f"cannot connect to the data channel at {address[0]}:{address[1]}: {e}",
                                 grpc.StatusCode.UNAVAILABLE) from None

    def _checkin(self, address: tuple[str, int], sock: socket.socket, magic: bytes) -> None:
        with self._lock:
            self._idle.setdefault((*address, magic), []).append(sock)


# ---------------------------------------------------------------------------- streams and bundles

Frames = Union[bytes, Iterable[Union[bytes, memoryview]]]
"""What a receiver decodes: a bundle (one ``bytes``, the response or request of a
unary method) or an iterable of frames (a streaming method's messages)."""

_BUNDLE_TAG = 0x0A  # field 1 (frame), wire type 2: 1 << 3 | 2


def _check_frame_type(frame_type: type[message_lib.Message]) -> None:
    if not _is_frame_message(frame_type.DESCRIPTOR):
        raise TypeError(f"{frame_type.__name__} is not a frame message: it needs oneof kind with "
                        f"TensorHeader header = 1 and bytes chunk = 2")


def _is_frame_message(descriptor: descriptor_lib.Descriptor) -> bool:
    fields = descriptor.fields_by_number
    return (1 in fields and fields[1].name == "header" and 2 in fields and fields[2].name == "chunk"
            and "kind" in descriptor.oneofs_by_name)


def _is_bundle(descriptor: descriptor_lib.Descriptor) -> bool:
    """A message whose only field is ``repeated <frame message> frame = 1``."""
    fields = descriptor.fields
    return (len(fields) == 1 and fields[0].number == 1 and fields[0].name == "frame"
            and fields[0].message_type is not None and _is_frame_message(fields[0].message_type))


def split_bundle(bundle: Union[bytes, memoryview]) -> Iterator[memoryview]:
    """The frames of a bundle message, as views into it (no copy). TransportError if
    it is not a sequence of ``frame`` fields."""
    data = memoryview(bundle)
    pos = 0
    while pos < len(data):
        if data[pos] != _BUNDLE_TAG:
            raise TransportError(f"malformed bundle of {len(data)} bytes: byte {pos} is not a frame field")
        length, start = _read_varint(data, pos + 1, f"bundle of {len(data)} bytes, frame at byte {pos}")
        pos = start + length
        if pos > len(data):
            raise TransportError(f"malformed bundle of {len(data)} bytes: a frame runs {pos - len(data)} bytes past "
                                 f"its end")
        yield data[start:pos]


class FrameWriter:
    """One direction of a call, produced lazily: a control frame, then tensors.

    Iterate it for a streaming method: each item is one frame, and iteration ends
    only once every payload offered on the data channel was fetched (so an offer
    never outlives its call). Call ``bundle()`` for a unary method: one message
    holding every frame, each tensor as a single chunk, built with one copy of the
    payload; offers then outlive the call until fetched or until
    ``data_channel_timeout_s`` passes. Use it once, one way.
    """

    def __init__(self, tx: "Transport", first: Optional[message_lib.Message], tensors: Iterable[tuple[str, Any]],
                 context: Optional[grpc.ServicerContext], use_data_channel: bool) -> None:
        self._tx = tx
        self._first = first
        self._tensors = tensors
        self._context = context
        self._server = tx.data_server if use_data_channel else None

    def __iter__(self) -> Iterator[bytes]:
        offers: list[_Offer] = []
        ended = threading.Event()
        context = self._context
        if self._server is not None and context is not None \
                and not context.add_callback(lambda: _end_offers(ended, offers)):
            return  # the call already ended
        try:
            for pieces in self._frames(offers, self._tx.config.chunk_bytes, expires_at=None):
                yield b"".join(pieces)  # a single bytes piece is returned as is, not copied
            self._tx._wait_fetched(offers, ended, context)
        finally:
            if self._server is not None:
                for offer in offers:
                    self._server.withdraw(offer)

    def bundle(self) -> bytes:
        offers: list[_Offer] = []
        expires_at = time.monotonic() + self._tx.config.data_channel_timeout_s
        parts: list[Union[bytes, memoryview]] = []
        try:
            for pieces in self._frames(offers, chunk_bytes=None, expires_at=expires_at):
                parts.append(_BUNDLE_TAG_BYTES)
                parts.append(_varint(sum(len(p) for p in pieces)))
                parts.extend(pieces)
        except BaseException:
            if self._server is not None:
                for offer in offers:
                    self._server.withdraw(offer)
            raise
        return b"".join(parts)

    def _frames(self, offers: list[_Offer], chunk_bytes: Optional[int],
                expires_at: Optional[float]) -> Iterator[list[Union[bytes, memoryview]]]:
        """Each frame as the pieces that, joined, make it (payloads are views, not copies)."""
        if self._first is not None:
            yield [self._first.SerializeToString()]
        min_bytes = max(1, self._tx.config.data_channel_min_bytes)
        for name, value in self._tensors:
            array = as_wire_array(value)
            payload = wire_payload(array)
            header = header_for(array, len(payload), name)
            if self._server is not None and len(payload) >= min_bytes:
                offer = self._server.offer(name, payload, expires_at)
                offers.append(offer)
                header.data_channel.port = self._server.port
                header.data_channel.ticket = offer.ticket
                yield [header_frame(header)]
                continue
            yield [header_frame(header)]
            step = chunk_bytes or max(1, len(payload))
            for offset in range(0, len(payload), step):
                chunk = payload[offset:offset + step]
                yield [_CHUNK_TAG_BYTES, _varint(len(chunk)), chunk]


_CHUNK_TAG_BYTES = bytes((_CHUNK_TAG,))
_BUNDLE_TAG_BYTES = bytes((_BUNDLE_TAG,))


def _end_offers(ended: threading.Event, offers: list[_Offer]) -> None:
    ended.set()
    for offer in list(offers):
        offer.done.set()


def bundle_frames(frames: Iterable[Union[bytes, memoryview]]) -> bytes:
    """A bundle message of already-made frames (one more copy; ``FrameWriter.bundle``
    avoids it)."""
    parts: list[Union[bytes, memoryview]] = []
    for frame in frames:
        parts.append(_BUNDLE_TAG_BYTES)
        parts.append(_varint(len(frame)))
        parts.append(frame)
    return b"".join(parts)


class Transport:
    """One task's tensor transport: receive buffer pool, data channel server and client.

    Senders describe one direction of a call with ``write_frames`` (iterate it for a
    streaming method, ``.bundle()`` it for a unary one); receivers decode with
    ``read_frames`` / ``read_message``, which take either form. Thread-safe: one
    instance serves every call of the task. ``close()`` stops the data channel.
    """

    def __init__(self, config: Optional[TransportConfig] = None) -> None:
        self.config = config or TransportConfig()
        self.pool = BufferPool(self.config.pool_bytes)
        self.data_server: Optional[DataServer] = None
        if self.config.data_channel:
            self.data_server = DataServer(self.config.data_host, self.config.data_port,
                                          self.config.data_channel_timeout_s)
        self.data_client = DataChannelClient(self.config.data_channel_timeout_s)

    @property
    def data_port(self) -> int:
        """Port of this task's data channel (0: none), to advertise to peers."""
        return self.data_server.port if self.data_server is not None else 0

    def close(self) -> None:
        if self.data_server is not None:
            self.data_server.close()
        self.data_client.close()

    def call(self, host: str, port: int, method: int, control: bytes,
             tensors: Iterable[tuple[str, Any]] = ()) -> tuple[int, bytes, list[ReceivedTensor]]:
        """``DataChannelClient.call`` with this transport's receive pool and limits."""
        return self.data_client.call(host, port, method, control, tensors, self.pool, self.config.max_tensor_bytes)

    def write_frames(
        self,
        first: Optional[message_lib.Message],
        tensors: Iterable[tuple[str, Any]] = (),
        *,
        context: Optional[grpc.ServicerContext] = None,
        use_data_channel: bool = False,
    ) -> FrameWriter:
        """One direction of a call: ``first`` (a control frame message, e.g.
        ``RunStepFrame(response=...)``, or None), then each ``(name, value)`` of
        ``tensors`` (numpy arrays or array-likes), taken lazily so tensors may become
        ready over time. A servicer returns it as is; ``generic_handler`` iterates or
        bundles it as the method needs. Clients pass ``iter(writer)`` to a streaming
        method or ``writer.bundle()`` to a unary one.

        ``use_data_channel`` (servers only: set it from the request's
        ``RunOptions.allow_data_channel``) offers tensors of at least
        ``data_channel_min_bytes`` on the data channel instead of sending their bytes;
        ``context`` ends a streaming call's wait for them when the call ends. Values
        must stay unmodified until fetched.
        """
        return FrameWriter(self, first, tensors, context, use_data_channel)

    def _wait_fetched(self, offers: list[_Offer], ended: threading.Event,
                      context: Optional[grpc.ServicerContext]) -> None:
        timeout = self.config.data_channel_timeout_s
        remaining = context.time_remaining() if context is not None else None
        if remaining is not None:
            timeout = min(timeout, remaining)
        deadline = time.monotonic() + timeout
        for offer in offers:
            if not offer.done.wait(max(0.0, deadline - time.monotonic())):
                raise TransportError(f"the peer did not fetch tensor {offer.name!r} over the data channel "
                                     f"within {timeout:.0f} s", grpc.StatusCode.DEADLINE_EXCEEDED)
            if ended.is_set():
                return  # the call is over; nobody is waiting for the rest
            if offer.error:
                raise TransportError(offer.error, grpc.StatusCode.UNAVAILABLE)

    def read_frames(
        self, frames: Frames, frame_type: type[message_lib.Message] = tensor_pb2.TensorFrame, *, peer_host: str = "",
    ) -> Iterator[Union[message_lib.Message, ReceivedTensor]]:
        """Decodes one direction of a call (a bundle or a stream of frames): yields each
        control frame as a parsed ``frame_type`` message and each tensor, once
        complete, as a ``ReceivedTensor``.

        Tensors on the data channel are fetched from ``peer_host`` (the host the
        client dialed; servers never get data-channel tensors). TransportError on a
        malformed frame, a chunk without a header, a header inconsistent with its
        byte count or above ``max_tensor_bytes``, too many bytes, or a stream that
        ends inside a tensor.
        """
        _check_frame_type(frame_type)
        if isinstance(frames, (bytes, bytearray, memoryview)):
            frames = split_bundle(frames)
        assembler = TensorAssembler(self.pool, self.config.max_tensor_bytes)
        for frame in frames:
            chunk = parse_chunk(frame)
            if chunk is not None:
                done = assembler.add(chunk)
                if done is not None:
                    yield done
                continue
            try:
                message = frame_type.FromString(frame)
            except message_lib.DecodeError as e:
                raise TransportError(f"malformed {frame_type.__name__} frame of {len(frame)} bytes: {e}") from None
            kind = message.WhichOneof("kind")
            if kind is None:
                raise TransportError(f"{frame_type.__name__} frame of {len(frame)} bytes has no field of "
                                     f"oneof kind set")
            if assembler.busy:
                raise TransportError(f"{kind} frame arrived while tensor {assembler.name!r} still lacks "
                                     f"{assembler.missing} bytes")
            if kind != "header":
                yield message
            elif message.header.HasField("data_channel"):
                yield self._fetch(message.header, peer_host)
            else:
                done = assembler.start(message.header)
                if done is not None:
                    yield done
        assembler.finish()

    def _fetch(self, header: tensor_pb2.TensorHeader, peer_host: str) -> ReceivedTensor:
        if not peer_host:
            raise TransportError(f"tensor {header.name!r} was sent over the data channel, which this side "
                                 f"did not allow")
        array, payload = allocate(self.pool, header, self.config.max_tensor_bytes)
        self.data_client.fetch(peer_host, header.data_channel, payload.data, header.name)
        return ReceivedTensor(header.name, finish_payload(header, array, payload))

    def read_message(
        self, frames: Frames, frame_type: type[message_lib.Message], *, peer_host: str = "",
    ) -> tuple[message_lib.Message, dict[str, np.ndarray]]:
        """Reads a whole direction shaped as one control frame then tensors (RunStep,
        RunGraph): returns the control message and the tensors by name.
        TransportError if the first frame is not a control frame, another control
        frame follows, or a name repeats."""
        first: Optional[message_lib.Message] = None
        tensors: dict[str, np.ndarray] = {}
        for item in self.read_frames(frames, frame_type, peer_host=peer_host):
            if isinstance(item, ReceivedTensor):
                if first is None:
                    raise TransportError(f"tensor {item.name!r} arrived before the "
                                         f"{frame_type.__name__} control frame")
                if item.name in tensors:
                    raise TransportError(f"tensor {item.name!r} arrived twice")
                tensors[item.name] = item.array
            elif first is not None:
                raise TransportError(f"a second {frame_type.__name__} control frame "
                                     f"({item.WhichOneof('kind')}) arrived")
            else:
                first = item
        if first is None:
            raise TransportError(f"stream ended without a {frame_type.__name__} control frame")
        return first, tensors


# ---------------------------------------------------------------------------- gRPC plumbing

def host_of(target: str) -> str:
    """The host part of ``grpc://host:port``, ``host:port`` or ``[v6addr]:port``."""
    address = target.split("://", 1)[-1]
    host = address.rpartition(":")[0] if ":" in address else address
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _message_class(descriptor: descriptor_lib.Descriptor) -> type[message_lib.Message]:
    return cast("type[message_lib.Message]", message_factory.GetMessageClass(descriptor))


@contextlib.contextmanager
def _statuses(context: grpc.ServicerContext) -> Iterator[None]:
    """Answers a TransportError with its gRPC status and message (the server goes on)."""
    try:
        yield
    except TransportError as e:
        context.abort(e.status_code, str(e))


def _request_reader(method: descriptor_lib.MethodDescriptor) -> Callable[[bytes, grpc.ServicerContext], Any]:
    """How a unary method's raw request reaches the servicer: a lazy frame iterator for
    a bundle (errors surface while the servicer reads it), else the parsed message."""
    if _is_bundle(method.input_type):
        return lambda raw, context: split_bundle(raw)
    request_class = _message_class(method.input_type)

    def parse(raw: bytes, context: grpc.ServicerContext) -> message_lib.Message:
        try:
            return request_class.FromString(raw)
        except message_lib.DecodeError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"malformed {request_class.DESCRIPTOR.name} of {len(raw)} bytes: {e}")
            raise  # unreachable: abort raises
    return parse


def _response_writer(method: descriptor_lib.MethodDescriptor) -> Callable[[Any], bytes]:
    if not _is_bundle(method.output_type):
        return _serialize
    return lambda frames: frames.bundle() if isinstance(frames, FrameWriter) else bundle_frames(frames)


def _method_handler(method: descriptor_lib.MethodDescriptor, behavior: Callable[..., Any]) -> grpc.RpcMethodHandler:
    if method.client_streaming and method.server_streaming:
        def stream_stream(frames: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
            with _statuses(context):
                yield from behavior(frames, context)
        return grpc.stream_stream_rpc_method_handler(stream_stream)
    if method.client_streaming:
        write = _response_writer(method)

        def stream_unary(frames: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
            with _statuses(context):
                return write(behavior(frames, context))
            raise AssertionError("unreachable: abort raises")
        return grpc.stream_unary_rpc_method_handler(stream_unary)
    read = _request_reader(method)
    if method.server_streaming:
        def unary_stream(raw: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
            request = read(raw, context)
            with _statuses(context):
                yield from behavior(request, context)
        return grpc.unary_stream_rpc_method_handler(unary_stream)
    write = _response_writer(method)

    def unary_unary(raw: bytes, context: grpc.ServicerContext) -> bytes:
        request = read(raw, context)
        with _statuses(context):
            return write(behavior(request, context))
        raise AssertionError("unreachable: abort raises")
    return grpc.unary_unary_rpc_method_handler(unary_unary)


def generic_handler(service: descriptor_lib.ServiceDescriptor, servicer: object) -> grpc.GenericRpcHandler:
    """A handler serving ``service`` (e.g. ``worker_pb2.DESCRIPTOR.services_by_name["Worker"]``)
    with the methods of ``servicer`` of the same names; add it with
    ``server.add_generic_rpc_handlers((handler,))`` on a server built with ``GRPC_OPTIONS``.

    Plain messages are protobuf: the method gets the parsed request (malformed bytes
    are answered INVALID_ARGUMENT without calling it) and returns a response message.
    Frames are raw: where the request is a stream or a bundle, the method gets an
    iterator of frames (decode with ``Transport.read_frames``); where the response
    is, it returns frames (``Transport.write_frames``), which are streamed or
    bundled as the method needs. A method ``XStream`` without a servicer method of
    that name is served by ``X``: one implementation serves both the unary and the
    streaming form. A TransportError raised by a method is answered with its status
    code and message; methods the servicer lacks answer UNIMPLEMENTED.
    """
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in service.methods:
        behavior = getattr(servicer, method.name, None)
        if behavior is None and method.name.endswith("Stream"):
            behavior = getattr(servicer, method.name[:-len("Stream")], None)
        if behavior is not None:
            handlers[method.name] = _method_handler(method, behavior)
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


class Stub:
    """A client of ``service`` on ``channel`` with one callable per method, named as
    the method. Plain messages go and come as protobuf messages; frames as raw
    ``bytes``: pass ``writer.bundle()`` to a unary frame method and ``iter(writer)`` to
    a streaming one, and decode what comes back with ``Transport.read_frames``."""

    def __init__(self, channel: grpc.Channel, service: descriptor_lib.ServiceDescriptor) -> None:
        for method in service.methods:
            path = f"/{service.full_name}/{method.name}"
            raw_request = method.client_streaming or _is_bundle(method.input_type)
            raw_response = method.server_streaming or _is_bundle(method.output_type)
            serialize: Optional[Callable[[Any], bytes]] = None if raw_request else _serialize
            deserialize = None if raw_response else _message_class(method.output_type).FromString
            if method.client_streaming and method.server_streaming:
                call: Any = channel.stream_stream(path, serialize, deserialize, _registered_method=True)
            elif method.server_streaming:
                call = channel.unary_stream(path, serialize, deserialize, _registered_method=True)
            elif method.client_streaming:
                call = channel.stream_unary(path, serialize, deserialize, _registered_method=True)
            else:
                call = channel.unary_unary(path, serialize, deserialize, _registered_method=True)
            setattr(self, method.name, call)

    def __getattr__(self, name: str) -> Any:  # for type checkers: methods are set per service
        raise AttributeError(f"this service has no method {name!r}")


def _serialize(message: message_lib.Message) -> bytes:
    data: bytes = message.SerializeToString()
    return data

