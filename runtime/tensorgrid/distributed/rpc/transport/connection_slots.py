"""The data channel's bounded set of open connections: which one gives way to a new one.

Why it exists: a data channel serves each connection with a thread, and anyone who can
reach its port can open connections (docs/limits.md, "Resource bounds"). ``ConnectionSlots``
holds at most ``capacity`` of them. A connection is *waiting* while no request of it has
been read (in its TLS handshake, before its opening, between requests) and *busy* while a
request is served. At capacity a new connection takes the slot of the connection that has
waited longest among those of the client address holding the most connections (one
flooding address evicts only its own), or of any address when that one has none waiting;
when every connection is busy, the new one is refused. An evicted connection is shut down
and its request is never read, so a client's retry cannot run a request twice. No
threads, no protocol: ``data_channel.DataServer`` calls it under its own lock.
"""

from __future__ import annotations

import collections
import socket
import time
from typing import Optional


class ConnectionSlots:
    """Open connections of one data channel, with their state and address; not
    thread-safe (the caller holds its lock)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.connections: set[socket.socket] = set()
        """Every open connection (``DataServer.close`` shuts them down)."""
        self._waiting: dict[socket.socket, float] = {}
        """Connections no request of which is being served, longest-waiting first."""
        self._evicted: set[socket.socket] = set()
        self._host_of: dict[socket.socket, str] = {}
        self._per_host: collections.Counter[str] = collections.Counter()
        self.evicted = 0
        """Waiting connections that gave way to new ones (for tests)."""

    def admit(self, conn: socket.socket, host: str) -> tuple[bool, Optional[socket.socket]]:
        """Takes a new connection from ``host``: whether it has a slot, and the connection
        it evicted to get one (shut it down; its thread then ends and calls ``forget``)."""
        victim = None
        if len(self.connections) - len(self._evicted) >= self.capacity:
            victim = self._evict()
        if len(self.connections) - len(self._evicted) >= self.capacity:
            return False, victim
        self._add(conn, host)
        return True, victim

    def waiting(self, conn: socket.socket) -> None:
        """``conn`` waits for its next request (evictable from now on)."""
        self._waiting.pop(conn, None)
        self._waiting[conn] = time.monotonic()

    def busy(self, conn: socket.socket) -> bool:
        """``conn`` starts serving the request it read; False if it was evicted meanwhile
        (then that request must be dropped unread)."""
        if conn in self._evicted:
            return False
        self._waiting.pop(conn, None)
        return True

    def replace(self, conn: socket.socket, wrapped: socket.socket) -> bool:
        """``wrapped`` (its TLS side) takes the place of ``conn``; False if ``conn`` was
        evicted during its handshake."""
        if conn in self._evicted:
            self.forget(conn)
            return False
        host = self._host_of.get(conn, "")
        self.forget(conn)
        self._add(wrapped, host)
        return True

    def forget(self, conn: socket.socket) -> None:
        """Drops every record of a connection that ended."""
        self.connections.discard(conn)
        self._waiting.pop(conn, None)
        self._evicted.discard(conn)
        self._count_out(conn)

    def _add(self, conn: socket.socket, host: str) -> None:
        self.connections.add(conn)
        self._waiting[conn] = time.monotonic()
        self._host_of[conn] = host
        self._per_host[host] += 1

    def _evict(self) -> Optional[socket.socket]:
        busiest = max(self._per_host, key=self._per_host.__getitem__, default=None)
        victim = next((c for c in self._waiting if self._host_of.get(c) == busiest), None)
        if victim is None:
            victim = next(iter(self._waiting), None)
        if victim is not None:
            del self._waiting[victim]
            self._evicted.add(victim)
            self._count_out(victim)
            self.evicted += 1
        return victim

    def _count_out(self, conn: socket.socket) -> None:
        host = self._host_of.pop(conn, None)
        if host is not None:
            self._per_host[host] -= 1
            if self._per_host[host] <= 0:
                del self._per_host[host]
