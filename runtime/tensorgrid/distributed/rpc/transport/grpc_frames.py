"""Frames on gRPC: the frame writer and reader, and the generic handler and ``Stub``
that serve and call a service of ``tensorgrid.v1`` with raw frames.

gRPC carries frames (``wire.py``) as raw ``bytes``: methods are registered with
identity (de)serializers where frames travel, and protobuf parses only the small
control frames and headers. The frames of one direction of a call travel either as
a stream (a streaming method, chunks of at most ``chunk_bytes``) or as one bundle
message (a unary method: about 0.13 ms per round trip against 0.5 ms for a stream,
so small steps are unary; a large payload inline in one bundle is gRPC's slowest
path, so large ones stream: docs/data-channel.md says which path is used when).

Costs (bench/README.md): grpcio's Python API accepts only ``bytes`` messages, so the
sending side copies once (``b"".join`` of tags, lengths and slices of the array's
buffer) and gRPC copies again; the receiver copies gRPC's ``bytes`` once into the
destination array. When the receiver can reach the sender's data channel
(``RunOptions.allow_data_channel``), a tensor of at least ``offer_min_bytes``
travels instead as a header carrying a one-use ticket and the receiver fetches the
bytes over the data channel (``data_channel.py``). gRPC stays the control path:
ordering, deadlines, cancellation, errors.

Serving, in short::

    tx = transport.Transport()
    class Servicer:
        def RecvTensor(self, request, context):      # serves RecvTensor and RecvTensorStream
            tensors = [(key, worker.recv_tensor(request.step_id, key)) for key in request.rendezvous_key]
            return tx.write_frames(None, tensors, context=context,
                                   use_data_channel=request.options.allow_data_channel)
        def RunGraph(self, frames, context):         # serves RunGraph and RunGraphStream
            first, feeds = tx.read_message(frames, worker_pb2.RunGraphFrame)
            ...
            return tx.write_frames(worker_pb2.RunGraphFrame(response=...), fetched.items())
    server = grpc.server(executor, options=grpc_frames.server_options())
    server.add_generic_rpc_handlers((grpc_frames.generic_handler(WORKER_SERVICE, Servicer()),))

Calling::

    stub = grpc_frames.Stub(channel, WORKER_SERVICE)
    bundle = stub.RecvTensor(worker_pb2.RecvTensorRequest(..., options={"allow_data_channel": True}))
    for tensor in tx.read_frames(bundle, peer_host=grpc_frames.host_of(target)): ...
    frames = stub.RunGraphStream(iter(tx.write_frames(worker_pb2.RunGraphFrame(request=...), big_feeds)))
    first, fetched = tx.read_message(frames, worker_pb2.RunGraphFrame, peer_host=host)
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Union, cast

import grpc
from google.protobuf import descriptor as descriptor_lib
from google.protobuf import message as message_lib
from google.protobuf import message_factory

from tensorgrid.distributed.rpc.transport import buffers
from tensorgrid.distributed.rpc.transport import data_channel
from tensorgrid.distributed.rpc.transport import liveness
from tensorgrid.distributed.rpc.transport import wire
from tensorgrid.framework import errors
from tensorgrid.v1 import tensor_pb2

DEFAULT_MAX_MESSAGE_BYTES = 256 << 20
"""gRPC's message-size limit on what a server receives (``ServerLimits.grpc_max_message_bytes``)."""


def server_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                   handshake_timeout_s: float = 10.0) -> list[tuple[str, Any]]:
    """Options of a tensorgrid gRPC server: requests above ``max_message_bytes`` are
    refused with RESOURCE_EXHAUSTED before they are buffered whole. Tensors of a request
    travel in chunk frames from ``TransportConfig.stream_min_bytes`` (4 MiB) on, so only a
    graph with large constants comes near the limit. Replies are not limited here: the
    client chose its peer. A connection's handshakes (TLS, then HTTP/2's settings) must
    end within ``handshake_timeout_s`` of its accept (gRPC's default: 120 s).
    ``SO_REUSEPORT`` is off (gRPC turns it on by default on Linux): a second server on a
    port in use must fail to start, not share the port and answer another task's clients."""
    return [("grpc.max_receive_message_length", max_message_bytes), ("grpc.max_send_message_length", -1),
            ("grpc.server_handshake_timeout_ms", max(1, int(handshake_timeout_s * 1000))), ("grpc.so_reuseport", 0)]


def channel_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[tuple[str, Any]]:
    """Options of a tensorgrid gRPC channel: it sends at most what servers receive (a
    request above it fails on the client, naming the limit) and receives replies of any
    size, since a reply on the gRPC fallback is one bundle until the client learns the
    call's replies are large and switches to the streaming twin."""
    return [("grpc.max_send_message_length", max_message_bytes), ("grpc.max_receive_message_length", -1)]


GRPC_OPTIONS: list[tuple[str, Any]] = channel_options()
"""Channel options with the default limit (tests, benchmarks); servers use ``server_options``."""


def grpc_options(base: Optional[list[tuple[str, Any]]] = None) -> list[tuple[str, Any]]:
    """``base`` (``server_options`` or ``channel_options``; default ``GRPC_OPTIONS``) with
    keepalive and capped reconnect backoff from this process's environment
    (``liveness.from_env``): what tasks' servers and channels use."""
    return (GRPC_OPTIONS if base is None else base) + liveness.grpc_options(liveness.from_env())


_STATUS_BY_CODE = {status.value[0]: status for status in grpc.StatusCode}


def status_code(code: int) -> grpc.StatusCode:
    """The gRPC status of a status number (``errors.OpError.code``, ``TransportError.code``)."""
    return _STATUS_BY_CODE.get(code, grpc.StatusCode.UNKNOWN)


def host_of(target: str) -> str:
    """The host part of ``grpc://host:port``, ``host:port`` or ``[v6addr]:port``."""
    address = target.split("://", 1)[-1]
    host = address.rpartition(":")[0] if ":" in address else address
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


# ---------------------------------------------------------------------------- writing frames

class FrameWriter:
    """One direction of a call, produced lazily: a control frame, then tensors.

    Iterate it for a streaming method: each item is one frame, and iteration ends
    only once every payload offered on the data channel was fetched (so an offer
    never outlives its call). Call ``bundle()`` for a unary method: one message
    holding every frame, each tensor as a single chunk, built with one copy of the
    payload; offers then outlive the call until fetched or until
    ``fetch_timeout_s`` passes. Use it once, one way.

    With ``offer_to`` (a server's data channel), tensors of at least
    ``offer_min_bytes`` are offered there and only their header travels; ``context``
    ends a streaming call's wait for them when the call ends. Device arrays are
    staged to host memory from ``pool`` (``BufferPool.stage``) as they are written.
    """

    def __init__(self, first: Optional[message_lib.Message], tensors: Iterable[tuple[str, Any]], *,
                 pool: buffers.BufferPool, chunk_bytes: int, context: Optional[grpc.ServicerContext] = None,
                 offer_to: Optional[data_channel.DataServer] = None, offer_min_bytes: int = 0,
                 fetch_timeout_s: float = 300.0) -> None:
        self._first = first
        self._tensors = tensors
        self._pool = pool
        self._chunk_bytes = chunk_bytes
        self._context = context
        self._server = offer_to
        self._offer_min_bytes = max(1, offer_min_bytes)
        self._fetch_timeout_s = fetch_timeout_s

    def __iter__(self) -> Iterator[bytes]:
        offers: list[data_channel.Offer] = []
        ended = threading.Event()
        context = self._context
        if self._server is not None and context is not None \
                and not context.add_callback(lambda: _end_offers(ended, offers)):
            return  # the call already ended
        try:
            for pieces in self._frames(offers, self._chunk_bytes, expires_at=None):
                yield b"".join(pieces)  # a single bytes piece is returned as is, not copied
            self._wait_fetched(offers, ended)
        finally:
            if self._server is not None:
                for offer in offers:
                    self._server.withdraw(offer)

    def bundle(self) -> bytes:
        offers: list[data_channel.Offer] = []
        expires_at = time.monotonic() + self._fetch_timeout_s
        try:
            return wire.bundle_of_pieces(list(self._frames(offers, chunk_bytes=None, expires_at=expires_at)))
        except BaseException:
            if self._server is not None:
                for offer in offers:
                    self._server.withdraw(offer)
            raise

    def _frames(self, offers: list[data_channel.Offer], chunk_bytes: Optional[int],
                expires_at: Optional[float]) -> Iterator[list[Union[bytes, memoryview]]]:
        """Each frame as the pieces that, joined, make it (payloads are views, not copies)."""
        if self._first is not None:
            yield [self._first.SerializeToString()]
        for name, value in self._pool.staged_tensors(self._tensors):
            array = wire.as_wire_array(value)
            payload = wire.wire_payload(array)
            header = wire.header_for(array, len(payload), name)
            if self._server is not None and len(payload) >= self._offer_min_bytes:
                offer = self._server.offer(name, payload, expires_at)
                offers.append(offer)
                header.data_channel.port = self._server.port
                header.data_channel.ticket = offer.ticket
                yield [wire.header_frame(header)]
                continue
            yield [wire.header_frame(header)]
            step = chunk_bytes or max(1, len(payload))
            for offset in range(0, len(payload), step):
                yield wire.chunk_frame_pieces(payload[offset:offset + step])

    def _wait_fetched(self, offers: list[data_channel.Offer], ended: threading.Event) -> None:
        timeout = self._fetch_timeout_s
        remaining = self._context.time_remaining() if self._context is not None else None
        if remaining is not None:
            timeout = min(timeout, remaining)
        deadline = time.monotonic() + timeout
        for offer in offers:
            if not offer.done.wait(max(0.0, deadline - time.monotonic())):
                raise wire.TransportError(f"the peer did not fetch tensor {offer.name!r} over the data channel "
                                          f"within {timeout:.0f} s", errors.DeadlineExceededError.code)
            if ended.is_set():
                return  # the call is over; nobody is waiting for the rest
            if offer.error:
                raise wire.TransportError(offer.error, errors.UnavailableError.code)


def _end_offers(ended: threading.Event, offers: list[data_channel.Offer]) -> None:
    ended.set()
    for offer in list(offers):
        offer.done.set()


# ---------------------------------------------------------------------------- reading frames

def read_frames(frames: wire.Frames, frame_type: type[message_lib.Message], assembler: buffers.TensorAssembler,
                fetch: Callable[[tensor_pb2.TensorHeader], wire.ReceivedTensor],
                ) -> Iterator[Union[message_lib.Message, wire.ReceivedTensor]]:
    """Decodes one direction of a call (a bundle or a stream of frames): yields each
    control frame as a parsed ``frame_type`` message and each tensor, once complete,
    as a ``ReceivedTensor`` (chunks through ``assembler``; a header with a ticket
    through ``fetch``). TransportError on a malformed frame, a chunk without a header,
    a header inconsistent with its byte count or above the assembler's limit, too
    many bytes, or a stream that ends inside a tensor.
    """
    wire.check_frame_type(frame_type)
    if isinstance(frames, (bytes, bytearray, memoryview)):
        frames = wire.split_bundle(frames)
    for frame in frames:
        chunk = wire.parse_chunk(frame)
        if chunk is not None:
            done = assembler.add(chunk)
            if done is not None:
                yield done
            continue
        try:
            message = frame_type.FromString(frame)
        except message_lib.DecodeError as e:
            raise wire.TransportError(f"malformed {frame_type.__name__} frame of {len(frame)} bytes: {e}") from None
        kind = message.WhichOneof("kind")
        if kind is None:
            raise wire.TransportError(f"{frame_type.__name__} frame of {len(frame)} bytes has no field of "
                                      f"oneof kind set")
        if assembler.busy:
            raise wire.TransportError(f"{kind} frame arrived while tensor {assembler.name!r} still lacks "
                                      f"{assembler.missing} bytes")
        if kind != "header":
            yield message
        elif message.header.HasField("data_channel"):
            yield fetch(message.header)
        else:
            done = assembler.start(message.header)
            if done is not None:
                yield done
    assembler.finish()


def collect_message(items: Iterable[Union[message_lib.Message, wire.ReceivedTensor]],
                    frame_type: type[message_lib.Message]) -> tuple[message_lib.Message, dict[str, Any]]:
    """A direction shaped as one control frame then tensors (RunStep, RunGraph,
    PushTensors), from ``read_frames``: the control message and the tensors by name.
    TransportError if the first frame is not a control frame, another control frame
    follows, or a name repeats."""
    first: Optional[message_lib.Message] = None
    tensors: dict[str, Any] = {}
    for item in items:
        if isinstance(item, wire.ReceivedTensor):
            if first is None:
                raise wire.TransportError(f"tensor {item.name!r} arrived before the "
                                          f"{frame_type.__name__} control frame")
            if item.name in tensors:
                raise wire.TransportError(f"tensor {item.name!r} arrived twice")
            tensors[item.name] = item.array
        elif first is not None:
            raise wire.TransportError(f"a second {frame_type.__name__} control frame "
                                      f"({item.WhichOneof('kind')}) arrived")
        else:
            first = item
    if first is None:
        raise wire.TransportError(f"stream ended without a {frame_type.__name__} control frame")
    return first, tensors


# ---------------------------------------------------------------------------- serving and calling

def _message_class(descriptor: descriptor_lib.Descriptor) -> type[message_lib.Message]:
    return cast("type[message_lib.Message]", message_factory.GetMessageClass(descriptor))


def _serialize(message: message_lib.Message) -> bytes:
    data: bytes = message.SerializeToString()
    return data


@contextlib.contextmanager
def _statuses(context: grpc.ServicerContext) -> Iterator[None]:
    """Answers a TransportError with its gRPC status and message (the server goes on)."""
    try:
        yield
    except wire.TransportError as e:
        context.abort(status_code(e.code), str(e))


def _request_reader(method: descriptor_lib.MethodDescriptor) -> Callable[[bytes, grpc.ServicerContext], Any]:
    """How a unary method's raw request reaches the servicer: a lazy frame iterator for
    a bundle (errors surface while the servicer reads it), else the parsed message."""
    if wire.is_bundle(method.input_type):
        return lambda raw, context: wire.split_bundle(raw)
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
    if not wire.is_bundle(method.output_type):
        return _serialize
    return lambda frames: frames.bundle() if isinstance(frames, FrameWriter) else wire.bundle_frames(frames)


def _method_handler(method: descriptor_lib.MethodDescriptor, behavior: Callable[..., Any],
                    thread_pool: Optional[concurrent.futures.ThreadPoolExecutor] = None) -> grpc.RpcMethodHandler:
    handler = _plain_method_handler(method, behavior)
    if thread_pool is not None:
        # grpc runs a method on the pool its behavior names, else on the server's own.
        for arity in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
            function = getattr(handler, arity)
            if function is not None:
                setattr(function, "experimental_thread_pool", thread_pool)
    return handler


def _plain_method_handler(method: descriptor_lib.MethodDescriptor,
                          behavior: Callable[..., Any]) -> grpc.RpcMethodHandler:
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


def generic_handler(service: descriptor_lib.ServiceDescriptor, servicer: object,
                    thread_pools: Optional[Mapping[str, concurrent.futures.ThreadPoolExecutor]] = None,
                    ) -> grpc.GenericRpcHandler:
    """A handler serving ``service`` (e.g. ``worker_pb2.DESCRIPTOR.services_by_name["Worker"]``)
    with the methods of ``servicer`` of the same names; add it with
    ``server.add_generic_rpc_handlers((handler,))`` on a server built with ``server_options()``.

    Plain messages are protobuf: the method gets the parsed request (malformed bytes
    are answered INVALID_ARGUMENT without calling it) and returns a response message.
    Frames are raw: where the request is a stream or a bundle, the method gets an
    iterator of frames (decode with ``Transport.read_frames``); where the response
    is, it returns frames (``Transport.write_frames``), which are streamed or
    bundled as the method needs. A method ``XStream`` without a servicer method of
    that name is served by ``X``: one implementation serves both the unary and the
    streaming form. A TransportError raised by a method is answered with its status
    code and message; methods the servicer lacks answer UNIMPLEMENTED. ``thread_pools``
    names, by servicer method, a pool of its own to run it on instead of the server's
    (``wait_pool.WaitPool``: calls that wait must not take the server's threads).
    """
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in service.methods:
        name = method.name
        behavior = getattr(servicer, name, None)
        if behavior is None and name.endswith("Stream"):
            name = name[:-len("Stream")]
            behavior = getattr(servicer, name, None)
        if behavior is not None:
            handlers[method.name] = _method_handler(method, behavior, (thread_pools or {}).get(name))
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


class Stub:
    """A client of ``service`` on ``channel`` with one callable per method, named as
    the method. Plain messages go and come as protobuf messages; frames as raw
    ``bytes``: pass ``writer.bundle()`` to a unary frame method and ``iter(writer)`` to
    a streaming one, and decode what comes back with ``Transport.read_frames``."""

    def __init__(self, channel: grpc.Channel, service: descriptor_lib.ServiceDescriptor) -> None:
        for method in service.methods:
            path = f"/{service.full_name}/{method.name}"
            raw_request = method.client_streaming or wire.is_bundle(method.input_type)
            raw_response = method.server_streaming or wire.is_bundle(method.output_type)
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
