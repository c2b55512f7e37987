"""The data channel's byte streams: exact reads into caller buffers, gathered writes,
per-socket tuning, and the Unix socket that tasks on one machine use.

Apart from ``data_channel.py`` (the protocol: who sends which bytes when) because these
are about sockets, not messages: what a read or a write costs, which socket a peer is
reached on and who may use it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import logging
import os
import socket
import ssl
import struct
import time
from typing import Any, Optional

from tensorgrid.distributed.rpc import ports

log = logging.getLogger("tensorgrid.transport")


def recv_exact_into(sock: socket.socket, view: memoryview, deadline: Optional[float] = None) -> None:
    """Fills ``view`` from ``sock``; with a ``deadline`` (a ``time.monotonic()`` instant),
    TimeoutError once it passes, however steadily a slow peer trickles bytes (the
    socket's own timeout bounds only each wait)."""
    while len(view):
        received = sock.recv_into(view)
        if received == 0:
            raise EOFError(f"connection closed with {len(view)} bytes still expected")
        view = view[received:]
        if deadline is not None and len(view) and time.monotonic() > deadline:
            raise TimeoutError(f"peer too slow: {len(view)} bytes still expected past the deadline")


def recv_exact(sock: socket.socket, n: int, deadline: Optional[float] = None) -> bytes:
    buffer = bytearray(n)
    recv_exact_into(sock, memoryview(buffer), deadline)
    return bytes(buffer)


MAX_BUFFERS_PER_SEND = 512
"""Buffers handed to one ``sendmsg`` (Linux accepts up to 1024, IOV_MAX)."""


def as_bytes(part: Any) -> memoryview:
    view = memoryview(part)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def send_some(sock: socket.socket, pending: list[memoryview]) -> None:
    """Sends what the kernel takes now of ``pending`` (byte views, in order) and drops
    it from the list: a gathered write (``sendmsg``) of every part, so a push of seven
    tensors is one system call rather than seven; TLS has no gathered writes (it writes
    records), so there, the first part."""
    if isinstance(sock, ssl.SSLSocket):
        sent = sock.send(pending[0])
    else:
        sent = sock.sendmsg(pending[:MAX_BUFFERS_PER_SEND])
    while pending and sent >= len(pending[0]):
        sent -= len(pending.pop(0))
    if sent:
        pending[0] = pending[0][sent:]


def send_message(sock: socket.socket, prefix: bytes, control: bytes, headers: bytes,
                  payloads: list[memoryview]) -> None:
    """Sends a message: its frames and every payload, in as few system calls as the
    kernel takes them (``send_some``)."""
    pending = [memoryview(b"".join((prefix, control, headers)))]
    pending.extend(as_bytes(payload) for payload in payloads if len(payload))
    while pending:
        send_some(sock, pending)


def linger(conn: socket.socket, seconds: float = 1.0) -> None:
    """Ends a connection after an error reply so that the reply arrives: closing a socket
    whose peer's bytes are still unread sends a reset, which discards the reply on the
    way. Sends FIN, then reads and drops what the peer still sends, for ``seconds`` at most."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(seconds)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and conn.recv(1 << 16):
            pass


# ---------------------------------------------------------------------------- sockets

LOCAL_SEND_BUFFER = 4 << 20
"""Bytes a Unix-socket sender may have in flight (the kernel caps it at net.core.wmem_max).
With the default, about 200 KiB, a sender of a 2.7 MB payload blocks and wakes a dozen
times, and its receiver as many (measured in the base training case: the PS's voluntary
context switches per step went from 39 to 18 with this buffer; CPU per step unchanged
within the noise)."""


def tune(sock: socket.socket) -> None:
    """TCP: no Nagle delay (a call's header and payloads go at once). Unix socket: a
    send buffer that holds a step's payloads."""
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    elif sock.family == socket.AF_UNIX:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, LOCAL_SEND_BUFFER)


def listen_local(port: int) -> Optional[socket.socket]:
    """The Unix listener beside a data channel on loopback ``port`` (None: none here, or
    its name is taken, which only a live process on the same port could do)."""
    name = ports.local_data_socket(port)
    if name is None:
        return None
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(name)
        listener.listen(128)
    except OSError as e:
        listener.close()
        log.debug("data channel on port %d: no Unix socket for local peers (%s)", port, e)
        return None
    return listener


PEER_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


def same_user(sock: socket.socket) -> bool:
    """Whether the process at the other end of Unix socket ``sock`` runs as this
    process's user, as the kernel says (SO_PEERCRED): only such a peer may use a data
    channel's Unix socket, either way (anyone on the machine may bind or dial an abstract
    name; a process of the same user could read this task's keys and memory anyway)."""
    credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEER_CREDENTIALS.size)
    _, uid, _ = PEER_CREDENTIALS.unpack(credentials)
    return bool(uid == os.getuid())


@dataclasses.dataclass(frozen=True)
class Peer:
    """Who sent a call, as far as a server can tell without trusting anything the call says."""

    identity: str
    """The process (a Unix socket), the host, or the loopback connection (``peer_identity``): what
    the rendezvous counts pushed tensors against."""
    names: Optional[frozenset[str]] = None
    """The DNS names and IP addresses of the client's TLS certificate, lower case; ``None`` without
    TLS (``sender_names`` holds a client to them)."""


def peer_of(sock: socket.socket) -> Peer:
    """The peer of an accepted connection (TLS handshake done, for a TLS one)."""
    names = None
    if isinstance(sock, ssl.SSLSocket):
        alt_names: Any = (sock.getpeercert() or {}).get("subjectAltName", ())  # ((kind, value), ...)
        names = frozenset(str(value).strip().lower() for kind, value in alt_names if kind in ("DNS", "IP Address"))
    return Peer(peer_identity(sock), names)


def peer_identity(sock: socket.socket) -> str:
    """Who is at the other end of an accepted connection, as far as this end can tell
    without trusting anything the peer sends (the rendezvous counts pushed tensors by it):
    the process, for a Unix socket (SO_PEERCRED, from the kernel); else as
    ``address_identity`` says of the peer's address."""
    if sock.family == socket.AF_UNIX:
        credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEER_CREDENTIALS.size)
        pid, _, _ = PEER_CREDENTIALS.unpack(credentials)
        return f"process {pid} on this machine"
    host, port = sock.getpeername()[:2]
    return address_identity(str(host), int(port))


def address_identity(host: str, port: int) -> str:
    """The identity of a TCP peer at ``host:port``: its host (a pod has an address of its
    own), or the connection itself when the host is a loopback address, which every
    process of this machine shares."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"host {host}"
    mapped = getattr(address, "ipv4_mapped", None)
    if (mapped or address).is_loopback:
        return f"connection from {host} port {port}"
    return f"host {host}"


def connect_local(address: tuple[str, int], timeout_s: float) -> Optional[socket.socket]:
    """A connection to the Unix socket of a data channel on this machine's loopback, or
    None (not loopback, no such socket, or a socket of another user: the caller dials
    TCP)."""
    host, port = address
    name = ports.local_data_socket(port)
    if name is None or not ports.is_loopback(host) or host.strip("[]") == "::1":
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(name)
        if not same_user(sock):
            log.warning("the Unix socket of the data channel on port %d belongs to another user: using TCP", port)
            raise ConnectionRefusedError
    except OSError:
        sock.close()
        return None
    return sock
