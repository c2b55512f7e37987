"""Ports, in one place: free ports for loopback clusters, and where a task's data
channel listens.

A task listens on two ports: its gRPC port (from the cluster spec) and its data
channel (``transport/data_channel.py``; on 127.0.0.1 also a Unix socket for peers on the
same machine, ``local_data_socket``). The data channel's port is
``TENSORGRID_DATA_PORT`` when set (Kubernetes declares it, conventionally 2223 beside
the gRPC port 2222); otherwise a free port of ``DATA_PORT_RANGE``, so that many tasks
of a loopback cluster never collide. Either way the bound port is what the task
advertises to peers (``GetStatusResponse.data_port``, ``CreateSessionResponse.data_port``)
and what they dial.
"""

from __future__ import annotations

import os
import secrets
import sys
import socket
from typing import Mapping, Optional

DATA_PORT_ENV = "TENSORGRID_DATA_PORT"
"""The environment variable fixing the data channel's listening port (1-65535)."""

DATA_PORT_RANGE = (20000, 32000)
"""Where a data channel without a fixed port listens: below the kernel's ephemeral range
(32768+), so it never takes a port that a launcher picked (as a free ephemeral port) for a
task that has not bound it yet."""


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (held open together while chosen)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def data_port_from_env(environ: Optional[Mapping[str, str]] = None) -> int:
    """The data channel port that ``TENSORGRID_DATA_PORT`` sets, or 0 (pick one) when it
    is unset or empty. ValueError naming the value if it is not an integer 1-65535."""
    value = (os.environ if environ is None else environ).get(DATA_PORT_ENV, "").strip()
    if not value:
        return 0
    port = int(value) if value.isascii() and value.isdigit() else -1
    if not 1 <= port <= 65535:
        raise ValueError(f"{DATA_PORT_ENV}={value!r} is not a TCP port: set it to an integer from 1 to 65535, "
                         f"or leave it unset to pick a free port")
    return port


def listen_for_data(host: str, port: int) -> socket.socket:
    """A listening socket for a data channel on ``host`` ("" = every interface, IPv4 and
    IPv6) at ``port``; port 0 tries random ports of ``DATA_PORT_RANGE``, then any free
    port. OSError (naming the port) if a fixed port cannot be bound."""
    def listen(candidate: int) -> socket.socket:
        if host == "" and socket.has_dualstack_ipv6():
            return socket.create_server(("", candidate), family=socket.AF_INET6, backlog=128, dualstack_ipv6=True)
        return socket.create_server((host, candidate), backlog=128)

    if port:
        try:
            return listen(port)
        except OSError as e:
            raise OSError(e.errno, f"cannot listen for the data channel on port {port}: {e.strerror}") from None
    rng = secrets.SystemRandom()
    for _ in range(64):
        try:
            return listen(rng.randrange(*DATA_PORT_RANGE))
        except OSError:
            continue
    return listen(0)


BIND_ADDRESS_ENV = "TENSORGRID_BIND_ADDRESS"
_LOOPBACK_NAMES = {"localhost", "ip6-localhost", "ip6-loopback"}


def listen_host(own_address: str) -> str:
    """Where a task listens (gRPC, data channel, metrics): ``""`` for every interface.

    A task whose own address in the cluster is a loopback name or address (``tensorgrid
    local``, tests: ``localhost:2222``) listens on loopback only, so nothing outside the
    machine reaches it; any other task (a pod's ``<job>-ps-0.<ns>.svc:2222``) on every
    interface, as peers dial its pod IP. ``TENSORGRID_BIND_ADDRESS`` overrides both
    (``0.0.0.0`` or ``::`` for every interface, or one address).
    """
    configured = os.environ.get(BIND_ADDRESS_ENV, "").strip()
    if configured:
        return "" if configured in ("0.0.0.0", "::", "*") else configured.strip("[]")
    host = own_address.rpartition(":")[0].strip("[]").lower()
    if is_loopback(host):
        return "::1" if host == "::1" else "127.0.0.1"
    return ""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, no port) is this machine's loopback."""
    host = host.strip("[]").lower()
    return host in _LOOPBACK_NAMES or host.startswith("127.") or host == "::1"


LOCAL_SOCKETS_ENV = "TENSORGRID_DATA_CHANNEL_UNIX"


def local_data_socket(port: int) -> Optional[str]:
    """The Unix socket of the data channel listening on IPv4 loopback ``port``, for peers on
    this machine, or None where there is none (not Linux, or ``TENSORGRID_DATA_CHANNEL_UNIX=0``).

    An abstract socket (Linux): no file, gone with the process, reachable from the
    same network namespace as the loopback port itself, so it reaches exactly what
    127.0.0.1:``port`` reaches. Tasks on one machine (``tensorgrid local``) exchange their
    tensors through it: a Unix socket moves a payload with the same two copies as
    loopback TCP but without TCP's segmenting, acknowledgements and soft interrupts,
    about a tenth of a training step's CPU (docs/limits.md).
    """
    if not sys.platform.startswith("linux") or os.environ.get(LOCAL_SOCKETS_ENV, "1").strip() == "0":
        return None
    return f"\0tensorgrid-data-127.0.0.1:{port}"
