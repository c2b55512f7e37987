"""Ports, in one place: free ports for loopback clusters, and where a task's data
channel listens.

A task listens on two ports: its gRPC port (from the cluster spec) and its data
channel (``transport/data_channel.py``), on a free port of ``DATA_PORT_RANGE``, so
that many tasks of a loopback cluster never collide. The bound port is what the task
advertises to peers (``GetStatusResponse.data_port``, ``CreateSessionResponse.data_port``)
and what they dial.
"""

from __future__ import annotations

import secrets
import socket

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
