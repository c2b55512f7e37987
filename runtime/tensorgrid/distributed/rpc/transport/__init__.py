"""Tensors between tasks, with no message-size limit and no protobuf copy of a payload:
a header plus raw chunks on gRPC, or a raw TCP data channel.

Why: putting a tensor in a protobuf ``bytes`` field costs a copy into protobuf and
another out of it (0.15-0.3 GB/s on this project's machines), and gRPC's default
4 MiB message limit breaks on the first big variable. The package, bottom up (each
module imports only the ones listed before it; ``.importlinter`` checks it):

- ``wire``: the codec. A tensor as a header and payload bytes; frames, bundles and
  header bundles. No sockets, no gRPC.
- ``buffers``: the transport's host memory: ``BufferPool`` (receive buffers reused
  across steps, and the staging of device tensors into reused pinned buffers before
  they are sent) and ``TensorAssembler`` (a tensor from a header and chunks). No
  sockets, no gRPC.
- ``connection_slots``: the data channel's bounded set of open connections (which
  waiting one gives way to a new one at the limit). No I/O.
- ``data_channel``: the raw TCP data channel, for payloads fetched by ticket and for
  the calls of every step; its module docstring is the byte-level protocol. No gRPC.
- ``tls``: mutual TLS for both protocols: where a task's certificates are
  (``TENSORGRID_TLS_DIR``), the opt-out, the credentials of gRPC and of the data
  channel made from them, and their reload when the files change. Imports none of
  the modules above or below.
- ``grpc_frames``: frames on gRPC: ``FrameWriter`` and the frame reader, and
  ``generic_handler`` and ``Stub``, which serve and call a service of
  ``tensorgrid.v1`` with raw frames.
- ``peer_channel``: a gRPC channel to a peer that a reload of the certificates
  replaces, closing the old one when its last call ends.
- this module: ``Transport``, the facade a task holds (one receive pool, its data
  channel server and client, its settings), and ``TransportConfig``.

Which path a tensor takes, and when, is in docs/data-channel.md.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Iterable, Iterator, Optional, Union

import grpc
import numpy as np
from google.protobuf import message as message_lib

from tensorgrid.distributed.rpc.transport import buffers
from tensorgrid.distributed.rpc.transport import call_watch
from tensorgrid.distributed.rpc.transport import data_channel
from tensorgrid.distributed.rpc.transport import grpc_frames
from tensorgrid.distributed.rpc.transport import tls
from tensorgrid.distributed.rpc.transport import wire
from tensorgrid.v1 import tensor_pb2

CHUNK_BYTES = 4 << 20
"""Default payload bytes per chunk frame: large enough to amortize per-message costs,
small enough to keep gRPC's buffers and flow-control windows small."""


@dataclasses.dataclass
class TransportConfig:
    """How one task sends and receives tensors."""

    chunk_bytes: int = CHUNK_BYTES
    """Payload bytes per chunk frame on gRPC streams."""
    stream_min_bytes: int = CHUNK_BYTES
    """Where the data channel cannot be used, a call whose tensors of one direction
    total at least this many bytes goes on the method's streaming twin, in chunk
    frames: one large bundle is gRPC's slowest path (0.07 of a socket at 1 GiB)."""
    max_tensor_bytes: int = 4 << 30
    """Largest tensor this task accepts, as the memory it takes decoded
    (``wire.decoded_bytes``); a header declaring more is refused with
    RESOURCE_EXHAUSTED before any memory is allocated."""
    pool_bytes: int = 1 << 30
    """Total size of idle receive buffers kept for reuse (0 disables the pool)."""
    data_channel: bool = True
    """Listen on a raw TCP data channel so peers can fetch large tensors from this task
    and make calls on it."""
    data_host: str = ""
    """Address the data channel binds to; "" means every interface (IPv4 and IPv6)."""
    data_port: int = 0
    """Port of the data channel; 0 picks a free one (``ports.listen_for_data``). The
    bound port is advertised in GetStatus and CreateSession responses."""
    data_channel_min_bytes: int = 256 << 10
    """Tensors at least this big use the data channel when the receiver allows it;
    smaller ones go as chunk frames (the extra round trip costs more than it saves)."""
    data_channel_timeout_s: float = 300.0
    """How long a sender waits for an offered payload to be fetched (bounded also by
    the call's deadline), and the I/O timeout of data channel sockets."""
    data_max_connections: int = 512
    """Connections the data channel serves at once (``DataServer``)."""
    data_header_timeout_s: float = 10.0
    """Time the data channel gives a request header to arrive whole (``DataServer``)."""
    data_idle_timeout_s: float = 600.0
    """Time the data channel keeps a connection idle between requests (``DataServer``)."""
    tls_handshake_timeout_s: float = 10.0
    """Time the data channel gives a client's whole TLS handshake (``DataServer``)."""

    def __post_init__(self) -> None:
        if self.chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes must be > 0, got {self.chunk_bytes}")
        if min(self.max_tensor_bytes, self.pool_bytes, self.data_channel_min_bytes, self.stream_min_bytes) < 0:
            raise ValueError(f"byte limits must be >= 0, got {self}")


class Transport:
    """One task's tensor transport: receive buffer pool, data channel server and client.

    Senders describe one direction of a call with ``write_frames`` (iterate it for a
    streaming method, ``.bundle()`` it for a unary one); receivers decode with
    ``read_frames`` / ``read_message``, which take either form; ``call`` makes a call
    on a peer's data channel. Thread-safe: one instance serves every call of the
    task. ``close()`` stops the data channel. With ``credentials`` its data channel
    connections, both ways, are mutual TLS (``tls``), each new one with
    ``credentials.current()`` (renewed certificates, once reloaded); without, plaintext.
    """

    def __init__(self, config: Optional[TransportConfig] = None,
                 credentials: Optional[tls.CredentialSource] = None) -> None:
        self.config = config or TransportConfig()
        self.credentials = credentials
        self.pool = buffers.BufferPool(self.config.pool_bytes)
        self.data_server: Optional[data_channel.DataServer] = None
        if self.config.data_channel:
            self.data_server = data_channel.DataServer(
                self.config.data_host, self.config.data_port, self.config.data_channel_timeout_s,
                tls=(lambda: credentials.current().server_context) if credentials is not None else None,
                max_connections=self.config.data_max_connections, header_timeout_s=self.config.data_header_timeout_s,
                idle_timeout_s=self.config.data_idle_timeout_s,
                handshake_timeout_s=self.config.tls_handshake_timeout_s)
        self.data_client = data_channel.DataChannelClient(
            self.config.data_channel_timeout_s,
            tls=(lambda: credentials.current().client_context) if credentials is not None else None)

    @property
    def data_port(self) -> int:
        """Port of this task's data channel (0: none), to advertise to peers."""
        return self.data_server.port if self.data_server is not None else 0

    def close(self) -> None:
        if self.data_server is not None:
            self.data_server.close()
        self.data_client.close()

    def serve_calls(self, handlers: dict[int, data_channel.CallHandler]) -> None:
        """Answers calls on this task's data channel (if it has one) with ``handlers``
        by method number, receiving into this transport's pool within its limits."""
        if self.data_server is not None:
            self.data_server.serve_calls(handlers, self.pool, self.config.max_tensor_bytes)

    def call(self, host: str, port: int, method: int, control: bytes, tensors: Iterable[tuple[str, Any]] = (),
             replaced: Optional[call_watch.ReplacedCheck] = None) -> tuple[int, bytes, list[wire.ReceivedTensor]]:
        """``DataChannelClient.call`` with this transport's receive pool and limits."""
        return self.data_client.call(host, port, method, control, tensors, self.pool, self.config.max_tensor_bytes,
                                     replaced=replaced)

    def start_call(self, host: str, port: int, method: int, control: bytes, tensors: Iterable[tuple[str, Any]] = (),
                   replaced: Optional[call_watch.ReplacedCheck] = None) -> data_channel.PendingCall:
        """``DataChannelClient.start_call`` with this transport's receive pool and limits."""
        return self.data_client.start_call(host, port, method, control, tensors, self.pool,
                                           self.config.max_tensor_bytes, replaced=replaced)

    def write_frames(
        self,
        first: Optional[message_lib.Message],
        tensors: Iterable[tuple[str, Any]] = (),
        *,
        context: Optional[grpc.ServicerContext] = None,
        use_data_channel: bool = False,
    ) -> grpc_frames.FrameWriter:
        """One direction of a call: ``first`` (a control frame message, e.g.
        ``RunStepFrame(response=...)``, or None), then each ``(name, value)`` of
        ``tensors`` (numpy arrays, array-likes, or device arrays, which are staged to host
        memory from this transport's pool), taken lazily so tensors may become
        ready over time. A servicer returns it as is; ``generic_handler`` iterates or
        bundles it as the method needs. Clients pass ``iter(writer)`` to a streaming
        method or ``writer.bundle()`` to a unary one.

        ``use_data_channel`` (servers only: set it from the request's
        ``RunOptions.allow_data_channel``) offers tensors of at least
        ``data_channel_min_bytes`` on the data channel instead of sending their bytes;
        ``context`` ends a streaming call's wait for them when the call ends. Values
        must stay unmodified until fetched.
        """
        return grpc_frames.FrameWriter(
            first, tensors, pool=self.pool, chunk_bytes=self.config.chunk_bytes, context=context,
            offer_to=self.data_server if use_data_channel else None,
            offer_min_bytes=self.config.data_channel_min_bytes, fetch_timeout_s=self.config.data_channel_timeout_s)

    def read_frames(
        self, frames: wire.Frames, frame_type: type[message_lib.Message] = tensor_pb2.TensorFrame, *,
        peer_host: str = "",
    ) -> Iterator[Union[message_lib.Message, wire.ReceivedTensor]]:
        """``grpc_frames.read_frames`` into this transport's pool, within its limits.
        Tensors on the data channel are fetched from ``peer_host`` (the host the
        client dialed; servers never get data-channel tensors)."""
        assembler = buffers.TensorAssembler(self.pool, self.config.max_tensor_bytes)
        return grpc_frames.read_frames(frames, frame_type, assembler, functools.partial(self._fetch, peer_host))

    def read_message(
        self, frames: wire.Frames, frame_type: type[message_lib.Message], *, peer_host: str = "",
    ) -> tuple[message_lib.Message, dict[str, np.ndarray]]:
        """Reads a whole direction shaped as one control frame then tensors (RunStep,
        RunGraph, PushTensors): returns the control message and the tensors by name
        (``grpc_frames.collect_message``)."""
        return grpc_frames.collect_message(self.read_frames(frames, frame_type, peer_host=peer_host), frame_type)

    def _fetch(self, peer_host: str, header: tensor_pb2.TensorHeader) -> wire.ReceivedTensor:
        if not peer_host:
            raise wire.TransportError(f"tensor {header.name!r} was sent over the data channel, which this side "
                                      f"did not allow")
        array, payload = buffers.allocate(self.pool, header, self.config.max_tensor_bytes)
        self.data_client.fetch(peer_host, header.data_channel, payload.data, header.name)
        return wire.ReceivedTensor(header.name, buffers.finish_payload(header, array, payload))
