"""The data channel: raw TCP between tasks, for tensor payloads and a step's calls,
with no copy of a payload in user space. Sockets, no gRPC.

Why it exists: grpcio's Python API takes only ``bytes`` messages, so a payload on
gRPC is copied three times and reaches a third to a half of a plain socket. Here the
sender ``sendall``s straight from the array's buffer and the receiver ``recv_into``s
straight into the destination array. Two uses share one listening port per task:

- *fetches*: a tensor announced on gRPC by a header carrying a ticket
  (``DataChannelRef``) is fetched by the receiver, once, by that ticket;
- *calls*: the calls of every step (RunStep, RunGraph, PushTensors) as one request
  and one reply on a pooled connection: one socket round trip (about 0.05 ms)
  instead of a gRPC call (about 0.25-0.3 ms, with two thread hand-offs in grpcio).

Every connection is mutual TLS when the task has credentials (``tls.py``): the server
requires a client certificate of the job's CA, the client checks the server's against
the CA and the host it dialed; the protocol below runs inside TLS.

Byte-level protocol (the one definition; docs/data-channel.md has the message table).
Integers are little-endian unsigned. A client opens a connection and sends a 4-byte
magic naming its kind; the server drops any other opening without a word.

Fetch connections, magic ``TGD1``, reused for any number of fetches, one at a time::

    client -> server   ticket (16 bytes)
    server -> client   length (8 bytes), then exactly `length` payload bytes;
                       or 0xFFFFFFFFFFFFFFFF and nothing else when the ticket is
                       unknown or expired (the connection stays usable)

A ticket is 16 random bytes naming one offered payload, valid for one fetch: while
the gRPC call that carried it is open (a stream), or until the sender's
``data_channel_timeout_s`` passes (a bundle). The host to dial is the host the client
dialed for that gRPC call; the port is ``DataChannelRef.port``. A *probe* fetches the
all-zero ticket and expects the unknown-ticket answer.

Call connections, magic ``TGC1``, reused for any number of calls, one at a time::

    client -> server   method (1 byte), control length (4), header bundle length (4);
                       control bytes; header bundle; each header's payload, in order
    server -> client   status (4), control length (4), header bundle length (4);
                       control bytes; header bundle; each header's payload, in order

The method is a ``Method`` number; the request's control bytes are that method's
request message, the reply's its response message when the status is 0 (OK), else
the error message (UTF-8) with status a gRPC status number. A header bundle is a
``TensorBundle`` of header frames without ``data_channel`` set (``wire.py``); payloads
follow raw, ``byte_size`` bytes each. Control bytes and header bundles are at most
64 MiB each, a tensor at most the receiver's ``max_tensor_bytes``. An unknown method,
a request above the limits or a malformed header is answered with an error status
and the connection closed; an error raised by the method is answered and the
connection stays usable.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import math
import secrets
import socket
import ssl
import struct
import threading
import time
from typing import Any, Callable, Iterable, Optional, Union

from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc.transport import buffers
from tensorgrid.distributed.rpc.transport import call_watch
from tensorgrid.distributed.rpc.transport import connection_slots
from tensorgrid.distributed.rpc.transport import liveness
from tensorgrid.distributed.rpc.transport import stream_io
from tensorgrid.distributed.rpc.transport import wire
from tensorgrid.framework import errors
from tensorgrid.v1 import tensor_pb2

log = logging.getLogger("tensorgrid.transport")

FETCH_MAGIC = b"TGD1"
CALL_MAGIC = b"TGC1"
TICKET_BYTES = 16
_LENGTH = struct.Struct("<Q")
_UNKNOWN_TICKET = 0xFFFFFFFFFFFFFFFF
_CALL_REQUEST = struct.Struct("<BII")  # method, control bytes, header bundle bytes
_CALL_REPLY = struct.Struct("<III")  # status, control bytes, header bundle bytes
MAX_CALL_CONTROL_BYTES = 64 << 20
MAX_CALL_HEADER_BYTES = 64 << 20
MIN_BYTES_PER_S = 1 << 20
"""The slowest a server lets a call's control bytes, headers and payloads arrive, on
average (after the header timeout): a peer trickling bytes is dropped, not served forever."""


class Method(enum.IntEnum):
    """The calls a task answers on its data channel (docs/data-channel.md)."""

    PUSH_TENSORS = 1
    RUN_GRAPH = 2
    RUN_STEP = 3


CallHandler = Callable[[bytes, list[wire.ReceivedTensor], stream_io.Peer], tuple[int, bytes, Iterable[tuple[str, Any]]]]
"""Takes a call's control bytes, its tensors and who sent it (``stream_io.peer_of`` its
connection); returns the status of the answer (a gRPC status number, 0: OK), the
reply's control bytes (the error message when not OK) and its tensors."""

TlsContexts = Union[ssl.SSLContext, Callable[[], ssl.SSLContext], None]
"""The TLS of a side's new connections: one context, a function giving the context for each
(a task's certificates, which a reload replaces: ``tls.LiveCredentials``), or None: none."""


def _context_for_each_connection(tls: TlsContexts) -> Optional[Callable[[], ssl.SSLContext]]:
    if isinstance(tls, ssl.SSLContext):
        context = tls
        return lambda: context
    return tls


def _send_reply(conn: socket.socket, code: int, control: bytes, tensors: Iterable[tuple[str, Any]]) -> None:
    headers, payloads = wire.encode_headers(tensors)
    stream_io.send_message(conn, _CALL_REPLY.pack(code, len(control), len(headers)), control, headers, payloads)


def _receive_tensors(sock: socket.socket, headers: bytes, pool: buffers.BufferPool,
                     max_tensor_bytes: int, min_bytes_per_s: Optional[float] = None) -> list[wire.ReceivedTensor]:
    """Reads the payloads announced by a header bundle from ``sock`` straight into
    arrays from ``pool`` (``recv_into``: no user-space copy). With ``min_bytes_per_s``
    (servers), a payload arriving slower than that on average is a TimeoutError."""
    tensors = []
    for header, dtype, shape in wire.decode_headers(headers, max_tensor_bytes):
        array, payload = buffers.allocate_checked(pool, header, dtype, shape)
        if payload.size:
            deadline = None if min_bytes_per_s is None else time.monotonic() + 1.0 + payload.size / min_bytes_per_s
            stream_io.recv_exact_into(sock, payload.data, deadline)
        tensors.append(wire.ReceivedTensor(header.name, buffers.finish_payload(header, array, payload)))
    return tensors


# ---------------------------------------------------------------------------- server

class Offer:
    """A payload waiting to be fetched once over the data channel."""

    __slots__ = ("ticket", "name", "view", "expires_at", "done", "error")

    def __init__(self, ticket: bytes, name: str, view: memoryview, expires_at: Optional[float]) -> None:
        self.ticket = ticket
        self.name = name
        self.view = view
        self.expires_at = expires_at
        self.done = threading.Event()
        self.error = ""


class DataServer:
    """The serving side of the data channel: offered payloads by ticket, and calls.

    One thread accepts connections, one thread per connection serves its fetches or
    calls in order (``sendall`` from the offered buffer: no user-space copy).
    ``port`` 0 picks one (``ports.listen_for_data``); ``self.port`` is the bound one.

    Bounded for clients outside the job (docs/limits.md): at most ``max_connections``
    open connections; a new one beyond them closes the connection that has waited
    longest for its next request (idle, in its TLS handshake, or still sending its
    opening or header: no request of it was read, so its client's retry is safe) among
    those of the client address holding the most connections, or is closed itself when
    every connection is busy. A TLS handshake must end within ``handshake_timeout_s`` of
    the connection's accept; an opening, ticket or call header must arrive whole
    within ``header_timeout_s`` of its first byte, and the rest of a call at
    ``MIN_BYTES_PER_S`` on average; a connection idle for ``idle_timeout_s`` between
    calls is closed (clients reconnect).

    Listening on IPv4 loopback (a cluster on one machine: ``tensorgrid local``), it also
    accepts peers on its Unix socket (``ports.local_data_socket``), with a thread of its
    own; not when listening on every interface (a pod), where the socket would also be
    reachable from the pod's other containers. With ``tls`` (a server context requiring
    client certificates, or a function giving the one for each new connection: a task's
    reloaded certificates) a TCP connection whose handshake fails is dropped before
    anything is read; a Unix socket's peer is authenticated by the kernel instead
    (``same_user``), and its bytes never leave this machine's memory.
    """

    def __init__(self, host: str = "", port: int = 0, io_timeout_s: float = 300.0,
                 tls: TlsContexts = None, *, max_connections: int = 512, header_timeout_s: float = 10.0,
                 idle_timeout_s: float = 600.0, handshake_timeout_s: float = 10.0,
                 liveness_settings: Optional[liveness.Liveness] = None) -> None:
        self._liveness = liveness_settings or liveness.from_env()
        self._listener = ports.listen_for_data(host, port)
        self.port: int = self._listener.getsockname()[1]
        self._listeners = [self._listener]
        if host == "127.0.0.1":
            local = stream_io.listen_local(self.port)
            if local is not None:
                self._listeners.append(local)
        self._io_timeout_s = io_timeout_s
        self._tls = _context_for_each_connection(tls)
        self._header_timeout_s = header_timeout_s
        self._idle_timeout_s = idle_timeout_s
        self._handshake_timeout_s = handshake_timeout_s
        self.refused_connections = 0
        """Connections closed at once because ``max_connections`` busy ones were open (for tests)."""
        self._last_refusal_log = -math.inf
        self._offers: dict[bytes, Offer] = {}
        self._next_expiry = math.inf
        self._slots = connection_slots.ConnectionSlots(max_connections)
        self._connections = self._slots.connections  # the open connections (read by tests)
        self._lock = threading.Lock()
        self._closed = False
        self._call_handlers: dict[int, CallHandler] = {}
        self._pool: Optional[buffers.BufferPool] = None
        self._max_tensor_bytes = 0
        self._threads = [threading.Thread(target=self._accept_loop, args=(listener,), daemon=True,
                                          name=f"tensorgrid-data-{self.port}") for listener in self._listeners]
        for thread in self._threads:
            thread.start()

    def offer(self, name: str, payload: memoryview, expires_at: Optional[float] = None) -> Offer:
        """Registers a payload (``wire.wire_payload``) for one fetch; keep it unmodified
        until done. Without ``expires_at`` (a ``time.monotonic()`` instant) the caller
        must ``withdraw`` it; with one, it is dropped once expired (checked on each offer)."""
        offer = Offer(secrets.token_bytes(TICKET_BYTES), name, payload, expires_at)
        now = time.monotonic()
        expired: list[Offer] = []
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

    def serve_calls(self, handlers: dict[int, CallHandler], pool: buffers.BufferPool, max_tensor_bytes: int) -> None:
        """Answers calls (``DataChannelClient.call``) from now on: a call's tensors are
        received into arrays from ``pool`` and handed, with its control bytes, to the
        handler of its method number, whose ``(status, control bytes, tensors)`` is the
        reply (a non-zero status: the control bytes are the error message); the reply's
        device arrays are staged to host memory from ``pool``."""
        self._pool = pool
        self._max_tensor_bytes = max_tensor_bytes
        self._call_handlers = dict(handlers)

    @property
    def pending(self) -> int:
        """Offers not fetched yet (for metrics and tests)."""
        with self._lock:
            return len(self._offers)

    def withdraw(self, offer: Offer) -> None:
        """Forgets an offer not fetched yet (its call ended); a fetch in progress finishes."""
        with self._lock:
            self._offers.pop(offer.ticket, None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections = list(self._connections)
            offers = list(self._offers.values())
            self._offers.clear()
        for listener in self._listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for offer in offers:
            offer.error = "the data channel closed"
            offer.done.set()
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, peer = listener.accept()
            except OSError:
                if self._closed:
                    return
                log.exception("data channel on port %d: accept failed", self.port)
                time.sleep(0.1)
                continue
            if conn.family == socket.AF_UNIX and not stream_io.same_user(conn):
                log.warning("data channel on port %d: refused a local connection from another user", self.port)
                conn.close()
                continue
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                admitted, victim = self._slots.admit(conn, "local" if conn.family == socket.AF_UNIX else str(peer[0]))
            if victim is not None:
                with contextlib.suppress(OSError):
                    victim.shutdown(socket.SHUT_RDWR)  # its thread sees the end and frees the slot
            if not admitted:
                self._refuse(conn)
                continue
            try:
                threading.Thread(target=self._serve, args=(conn,), name=f"tensorgrid-data-{self.port}-conn",
                                 daemon=True).start()
            except RuntimeError as e:  # "can't start new thread": refuse this one, keep accepting
                with self._lock:
                    self._slots.forget(conn)
                conn.close()
                log.error("data channel on port %d: cannot start a thread for a connection (%s); closed it", self.port, e)
                time.sleep(0.1)

    @property
    def evicted_connections(self) -> int:
        """Waiting connections that gave way to new ones at the limit (for tests)."""
        return self._slots.evicted

    def _refuse(self, conn: socket.socket) -> None:
        """Closes a connection beyond ``max_connections`` busy ones (its client's call fails
        UNAVAILABLE, and its later calls fall back to gRPC)."""
        conn.close()
        self.refused_connections += 1
        now = time.monotonic()
        if now - self._last_refusal_log > 60.0:
            self._last_refusal_log = now
            log.warning("data channel on port %d: %d connections are open, the limit (TENSORGRID_DATA_MAX_CONNECTIONS);"
                        " closing new ones (%d so far)", self.port, self._slots.capacity, self.refused_connections)

    def _next_request(self, conn: socket.socket, size: int) -> bytes:
        """The next ``size``-byte request header of a connection: waits up to
        ``idle_timeout_s`` for its first byte, then ``header_timeout_s`` for the rest."""
        buffer = bytearray(size)
        with self._lock:
            self._slots.waiting(conn)
        conn.settimeout(self._idle_timeout_s)
        received = conn.recv_into(buffer)
        if received == 0:
            raise EOFError("connection closed between requests")
        conn.settimeout(self._header_timeout_s)
        if received < size:
            stream_io.recv_exact_into(conn, memoryview(buffer)[received:], time.monotonic() + self._header_timeout_s)
        self._end_wait(conn)
        return bytes(buffer)

    def _end_wait(self, conn: socket.socket) -> None:
        """Marks ``conn`` busy with a request; EOFError if it was evicted meanwhile (then
        its request is dropped unread, so the client's retry cannot run it twice)."""
        with self._lock:
            if not self._slots.busy(conn):
                raise EOFError("connection closed to make room for a new one")

    def _serve(self, conn: socket.socket) -> None:
        try:
            stream_io.tune(conn)
            if conn.family != socket.AF_UNIX:  # a local peer's end closes when its process dies
                liveness.enable_tcp_keepalive(conn, self._liveness)  # an idle connection of a vanished client ends
            if self._tls is not None and conn.family != socket.AF_UNIX:
                conn = self._handshake(conn)
            conn.settimeout(self._header_timeout_s)
            magic = stream_io.recv_exact(conn, len(FETCH_MAGIC), time.monotonic() + self._header_timeout_s)
            self._end_wait(conn)
            if magic == CALL_MAGIC and self._call_handlers:
                return self._serve_calls(conn)
            if magic != FETCH_MAGIC:
                return  # not a tensorgrid peer (or calls are not served here): drop it without a word
            while True:
                ticket = self._next_request(conn, TICKET_BYTES)
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
            pass  # the peer went away, failed the TLS handshake, was too slow or idle; its gRPC call reports it
        except Exception:  # a bug must not leak the connection or its slot
            log.exception("data channel on port %d: serving a connection failed", self.port)
        finally:
            with self._lock:
                self._slots.forget(conn)
            conn.close()

    def _handshake(self, conn: socket.socket) -> socket.socket:
        """The TLS side of ``conn``, which replaces it in every record of connections
        (``close`` shuts them down, the limit evicts them), once its handshake ended within
        ``handshake_timeout_s``; ssl.SSLError (an OSError) when the client shows no
        certificate of the CA, TimeoutError when it is too slow."""
        assert self._tls is not None
        # Since Python 3.5 a socket's timeout bounds the whole handshake, however steadily
        # the client trickles its bytes (the ssl module's documentation, do_handshake).
        conn.settimeout(self._handshake_timeout_s)
        wrapped = self._tls().wrap_socket(conn, server_side=True)
        with self._lock:
            closed = self._closed
            admitted = not closed and self._slots.replace(conn, wrapped)
            if closed:
                self._slots.forget(conn)
        if not admitted:
            wrapped.close()
            raise OSError("the data channel closed" if closed else "connection closed to make room for a new one")
        return wrapped

    def _serve_calls(self, conn: socket.socket) -> None:
        """The calls of one connection, in order; a malformed one is answered and ends it."""
        assert self._pool is not None
        peer = stream_io.peer_of(conn)
        while True:
            prefix = self._next_request(conn, _CALL_REQUEST.size)
            method, control_bytes, header_bytes = _CALL_REQUEST.unpack(prefix)
            handler = self._call_handlers.get(method)
            if handler is None:
                _send_reply(conn, errors.UnimplementedError.code,
                            f"method {method} is not served on this data channel; methods are "
                            f"{sorted(self._call_handlers)}".encode(), ())
                return stream_io.linger(conn)
            if control_bytes > MAX_CALL_CONTROL_BYTES or header_bytes > MAX_CALL_HEADER_BYTES:
                _send_reply(conn, errors.InvalidArgumentError.code,
                            f"call declares {control_bytes} control and {header_bytes} header bytes, above the "
                            f"limits of {MAX_CALL_CONTROL_BYTES} and {MAX_CALL_HEADER_BYTES}".encode(), ())
                return stream_io.linger(conn)
            deadline = time.monotonic() + self._header_timeout_s + (control_bytes + header_bytes) / MIN_BYTES_PER_S
            control = stream_io.recv_exact(conn, control_bytes, deadline)
            headers = stream_io.recv_exact(conn, header_bytes, deadline)
            conn.settimeout(self._io_timeout_s)
            try:
                tensors = _receive_tensors(conn, headers, self._pool, self._max_tensor_bytes, MIN_BYTES_PER_S)
            except (wire.TransportError, ValueError) as e:  # ValueError: numpy refused what a header declares
                code = e.code if isinstance(e, wire.TransportError) else errors.InvalidArgumentError.code
                _send_reply(conn, code, str(e).encode(), ())
                return stream_io.linger(conn)  # the rest of the stream cannot be trusted
            try:
                code, reply, reply_tensors = handler(control, tensors, peer)
            except Exception as e:  # answered to the caller, the server goes on
                log.exception("data channel call of method %d failed", method)
                code, reply, reply_tensors = errors.InternalError.code, f"{type(e).__name__}: {e}".encode(), ()
            del tensors
            try:
                _send_reply(conn, code, reply, self._pool.staged_tensors(reply_tensors))
            except (TypeError, ValueError) as e:  # a fetched value that cannot travel
                _send_reply(conn, errors.InvalidArgumentError.code, str(e).encode(), ())


# ---------------------------------------------------------------------------- client

class DataChannelClient:
    """The calling side of the data channel: fetches payloads by ticket into
    caller-provided buffers and makes calls, over connections pooled per peer and
    kind and reused (``recv_into``: no user-space copy). With ``tls`` (a client context
    holding this task's certificate, or a function giving the one for each new
    connection) every connection is mutual TLS, and the server must show a certificate
    of the CA naming the host dialed. Pooled connections keep the certificate they were
    made with."""

    def __init__(self, io_timeout_s: float = 300.0, connect_timeout_s: float = 10.0,
                 tls: TlsContexts = None,
                 liveness_settings: Optional[liveness.Liveness] = None) -> None:
        self._liveness = liveness_settings or liveness.from_env()
        self._io_timeout_s = io_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._tls = _context_for_each_connection(tls)
        self._idle: dict[tuple[str, int, bytes], list[socket.socket]] = {}
        self._lock = threading.Lock()

    def call(self, host: str, port: int, method: int, control: bytes, tensors: Iterable[tuple[str, Any]],
             pool: buffers.BufferPool, max_tensor_bytes: int, *,
             replaced: Optional[call_watch.ReplacedCheck] = None) -> tuple[int, bytes, list[wire.ReceivedTensor]]:
        """Calls ``method`` of the data channel at ``host:port`` with ``control`` (opaque
        bytes for its handler) and ``tensors`` (sent straight from the arrays' buffers),
        and returns the reply: status (0: OK), control bytes (the error message if not
        OK) and tensors (received into arrays from ``pool``). Device arrays are staged to
        host memory from ``pool`` first. TransportError (UNAVAILABLE) if the connection
        fails, the peer stops answering, or ``replaced`` finds it replaced
        (``call_watch``). The arrays may be reused once this returns.
        """
        return self.start_call(host, port, method, control, tensors, pool, max_tensor_bytes,
                               replaced=replaced).finish()

    def start_call(self, host: str, port: int, method: int, control: bytes, tensors: Iterable[tuple[str, Any]],
                   pool: buffers.BufferPool, max_tensor_bytes: int, *,
                   replaced: Optional[call_watch.ReplacedCheck] = None) -> "PendingCall":
        """``call``'s request sent; its ``finish`` waits for the reply. A thread can so
        have calls to several peers in flight at once without handing any to another
        thread (a step's pushes to each PS task). The arrays must stay unchanged until
        ``finish`` returns (a retry sends them again)."""
        headers, payloads = wire.encode_headers(pool.staged_tensors(tensors))
        pending = PendingCall(self, self._watch(host, int(port), replaced), method,
                              [_CALL_REQUEST.pack(method, len(control), len(headers)) + control + headers, *payloads],
                              pool, max_tensor_bytes)
        pending.send(attempt=1)
        return pending

    def _watch(self, host: str, port: int, replaced: Optional[call_watch.ReplacedCheck]) -> call_watch.PeerWatch:
        """The watch over a call's wait for its peer (``call_watch``)."""
        return call_watch.PeerWatch(host, port, self.why_unreachable, self._liveness, replaced)

    def fetch(self, host: str, ref: tensor_pb2.DataChannelRef, into: memoryview, name: str = "") -> None:
        """Reads the payload of ``ref`` from ``host`` into ``into`` (exactly its size)."""
        address = (host, int(ref.port))
        for attempt in (1, 2):
            sock, reused = self._checkout(address, FETCH_MAGIC, fresh=attempt == 2)
            try:
                sock.sendall(ref.ticket)
                (length,) = _LENGTH.unpack(stream_io.recv_exact(sock, _LENGTH.size))
            except (OSError, EOFError) as e:
                sock.close()
                if reused and attempt == 1:
                    continue  # a pooled connection the peer closed meanwhile: retry once on a new one
                raise wire.TransportError(f"data channel {host}:{ref.port} failed before tensor {name!r}: {e}",
                                          errors.UnavailableError.code) from None
            break
        if length == _UNKNOWN_TICKET:
            self._checkin(address, sock, FETCH_MAGIC)
            raise wire.TransportError(f"data channel {host}:{ref.port} does not know the ticket of tensor {name!r} "
                                      f"(already fetched, or its call ended)", errors.AbortedError.code)
        if length != len(into):
            sock.close()
            raise wire.TransportError(f"data channel {host}:{ref.port} sends {length} bytes for tensor {name!r}, "
                                      f"whose header declared {len(into)}")
        try:
            stream_io.recv_exact_into(sock, into)
        except (OSError, EOFError) as e:
            sock.close()
            raise wire.TransportError(f"data channel {host}:{ref.port} failed while receiving tensor {name!r}: {e}",
                                      errors.UnavailableError.code) from None
        self._checkin(address, sock, FETCH_MAGIC)

    def why_unreachable(self, host: str, port: int, timeout_s: float = 2.0) -> str:
        """Why no tensorgrid data channel answers at ``host:port``, or "" when one does
        (a probe: the all-zero ticket, answered unknown). The probing connection is kept
        for later fetches."""
        if not port:
            return "it advertises no data channel port"
        try:
            sock = self._connect((host, port), timeout_s, FETCH_MAGIC)
        except OSError as e:
            return f"connecting to {host}:{port} failed: {e}"
        try:
            sock.settimeout(timeout_s)
            sock.sendall(bytes(TICKET_BYTES))
            (length,) = _LENGTH.unpack(stream_io.recv_exact(sock, _LENGTH.size))
            sock.settimeout(self._io_timeout_s)
        except socket.timeout:
            sock.close()
            return f"{host}:{port} accepts connections but does not answer a probe within {timeout_s:g} s"
        except (OSError, EOFError) as e:
            sock.close()
            return f"{host}:{port} does not answer the data channel protocol: {e}"
        if length != _UNKNOWN_TICKET:
            sock.close()
            return f"{host}:{port} answers a probe with a payload of {length} bytes, not the data channel protocol"
        self._checkin((host, port), sock, FETCH_MAGIC)
        return ""

    def forget(self, host: str, port: int) -> None:
        """Closes the idle pooled connections to ``host:port``: another process answers
        there now (a new incarnation), and these lead to the one it replaced, which may
        be frozen with its connections open, so a call on one would wait for good."""
        with self._lock:
            stale = [self._idle.pop((host, port, magic), []) for magic in (FETCH_MAGIC, CALL_MAGIC)]
        for sock in (sock for sockets in stale for sock in sockets):
            sock.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for sockets in idle.values():
            for sock in sockets:
                sock.close()

    def _connect(self, address: tuple[str, int], timeout_s: float, magic: bytes) -> socket.socket:
        """A new connection to the data channel at ``address``: through its Unix socket
        when it is on this machine and has one (no TLS there: ``same_user``), else TCP
        with keepalive, mutual TLS when this client has credentials."""
        sock = stream_io.connect_local(address, timeout_s)
        if sock is None:
            sock = socket.create_connection(address, timeout=timeout_s)
            liveness.enable_tcp_keepalive(sock, self._liveness)
            if self._tls is not None:
                try:
                    sock = self._tls().wrap_socket(sock, server_hostname=address[0])
                except OSError:
                    sock.close()
                    raise
        stream_io.tune(sock)
        sock.settimeout(self._io_timeout_s)
        sock.sendall(magic)
        return sock

    def _checkout(self, address: tuple[str, int], magic: bytes, fresh: bool = False) -> tuple[socket.socket, bool]:
        """An idle pooled connection of kind ``magic`` (fetches or calls) to ``address``, or a
        new one; with ``fresh`` (the retry after a pooled one was found closed: the server
        closed its idle connections, likely all of them) always a new one."""
        with self._lock:
            idle = self._idle.get((*address, magic))
            if idle and not fresh:
                return idle.pop(), True
        try:
            return self._connect(address, self._connect_timeout_s, magic), False
        except OSError as e:
            raise wire.TransportError(f"cannot connect to the data channel at {address[0]}:{address[1]}: {e}",
                                      errors.UnavailableError.code) from None

    def _checkin(self, address: tuple[str, int], sock: socket.socket, magic: bytes) -> None:
        with self._lock:
            self._idle.setdefault((*address, magic), []).append(sock)


class PendingCall:
    """A data channel call whose request went out (``DataChannelClient.start_call``)."""

    def __init__(self, client: DataChannelClient, watch: call_watch.PeerWatch, method: int, parts: list[Any],
                 pool: buffers.BufferPool, max_tensor_bytes: int) -> None:
        self._client = client
        self._watch = watch
        self._address = (watch.host, watch.port)
        self._method = method
        self._parts = parts
        self._pool = pool
        self._max_tensor_bytes = max_tensor_bytes
        self._sock: Optional[socket.socket] = None
        self._reused = False
        self._failure: Optional[BaseException] = None

    def send(self, attempt: int) -> None:
        """Sends the request on a pooled connection (attempt 1) or a new one (2); a
        failure to send is kept for ``finish``, which retries or raises it."""
        self._sock, self._reused = self._client._checkout(self._address, CALL_MAGIC, fresh=attempt == 2)
        try:
            self._watch.send(self._sock, self._parts)
        except (OSError, EOFError) as e:
            self._sock.close()
            self._failure = e

    def finish(self) -> tuple[int, bytes, list[wire.ReceivedTensor]]:
        """The reply: as ``DataChannelClient.call`` returns it. Once per call."""
        client, (host, port) = self._client, self._address
        for attempt in (1, 2):
            sock = self._sock
            assert sock is not None, "finish() of a call already finished"
            replied = False
            try:
                if self._failure is not None:
                    raise self._failure
                prefix = self._watch.await_reply(sock, _CALL_REPLY.size, client._io_timeout_s)
                code, control_bytes, header_bytes = _CALL_REPLY.unpack(prefix)
                replied = True
                reply = stream_io.recv_exact(sock, control_bytes)
                received = _receive_tensors(sock, stream_io.recv_exact(sock, header_bytes), self._pool,
                                            self._max_tensor_bytes)
            except (OSError, EOFError) as e:
                sock.close()
                self._failure = None
                if self._reused and attempt == 1 and not replied and isinstance(e, (EOFError, ConnectionError)):
                    self.send(attempt=2)  # a pooled connection the peer closed meanwhile: once more on a new one
                    continue
                raise wire.TransportError(f"call {self._method} to the data channel at {host}:{port} failed: {e}",
                                          errors.UnavailableError.code) from None
            except wire.TransportError:
                sock.close()  # a malformed reply: the connection cannot be trusted
                raise
            self._sock = None
            client._checkin(self._address, sock, CALL_MAGIC)
            return code, reply, received
        raise AssertionError("unreachable: the second attempt returns or raises")
