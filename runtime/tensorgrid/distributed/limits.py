"""The resource bounds of a task's servers, in one place, and how the environment sets them.

Why it exists: a task's ports answer anyone who can reach them, so everything such a
client can make the task hold (memory for a declared tensor, a pushed tensor nobody
takes, a waiting RecvTensor, a data-channel connection, a TLS handshake, a master
session and its graph) is bounded.
The defaults are sized so that training never meets them; each can be changed with an
environment variable (``ServerLimits.from_env``). docs/limits.md ("Resource bounds") is
the table of every limit, its default and its variable.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Mapping, Optional

from tensorgrid.framework import errors


MIN_GRPC_MESSAGE_BYTES = 16 << 20
"""The smallest gRPC message limit a task accepts: a request carrying less than
``TransportConfig.stream_min_bytes`` (4 MiB) of tensors inline, or a chunk frame of
``chunk_bytes`` (4 MiB), plus its control message, must fit."""


@dataclasses.dataclass(frozen=True)
class ServerLimits:
    """What one task's servers accept from a client before refusing or dropping."""

    max_tensor_bytes: int = 4 << 30
    """Largest tensor a task receives, counted as the memory it takes once decoded (a
    string tensor: its payload plus 48 bytes per element); a header declaring more is
    refused with RESOURCE_EXHAUSTED before anything is allocated.
    ``TENSORGRID_MAX_TENSOR_BYTES``."""
    grpc_max_message_bytes: int = 256 << 20
    """Largest gRPC message a server or channel receives or sends (RESOURCE_EXHAUSTED
    above it). Tensors of at least ``TransportConfig.stream_min_bytes`` travel in chunk
    frames, so only graphs with large constants come near it.
    ``TENSORGRID_GRPC_MAX_MESSAGE_BYTES``."""
    data_max_connections: int = 512
    """Open data-channel connections a task serves at once; a new one closes the one
    that waited longest for a request, or is closed when all are busy (its client falls
    back to gRPC). ``TENSORGRID_DATA_MAX_CONNECTIONS``."""
    data_header_timeout_s: float = 10.0
    """Time a data-channel client has to send a whole opening, fetch ticket or call
    header once it started one: a client trickling bytes is dropped.
    ``TENSORGRID_DATA_HEADER_TIMEOUT_S``."""
    data_idle_timeout_s: float = 600.0
    """Time a data-channel connection may stay idle between calls or fetches before the
    server closes it (peers reconnect transparently). ``TENSORGRID_DATA_IDLE_TIMEOUT_S``."""
    recv_tensor_timeout_s: float = 300.0
    """Longest a RecvTensor call waits for its tensor before DEADLINE_EXCEEDED.
    ``TENSORGRID_RECV_TENSOR_TIMEOUT_S``."""
    recv_tensor_max_waiting: int = 32
    """RecvTensor calls that may wait at once, each on a thread of RecvTensor's own pool
    (never one of the threads the gRPC server shares among its other methods); one more
    is refused with RESOURCE_EXHAUSTED. ``TENSORGRID_RECV_TENSOR_MAX_WAITING``."""
    rendezvous_ttl_s: float = 300.0
    """Longest a tensor pushed to this task waits for its step to take it; then it is
    dropped and its step fails with an error saying so. ``TENSORGRID_RENDEZVOUS_TTL_S``."""
    rendezvous_max_bytes: int = 1 << 30
    """Total bytes of pushed tensors waiting to be taken; above it the oldest are dropped
    first (as for ``rendezvous_ttl_s``). ``TENSORGRID_RENDEZVOUS_MAX_BYTES``."""
    rendezvous_max_entries: int = 1 << 18
    """Pushed tensors waiting to be taken, counted one by one; above it the oldest are
    dropped first (as for ``rendezvous_max_bytes``). ``TENSORGRID_RENDEZVOUS_MAX_ENTRIES``."""
    session_idle_timeout_s: float = 3600.0
    """A master session with no step, extension or other call for this long and no step
    running is closed (NOT_FOUND afterwards); every step keeps it alive. A worker forgets
    a graph partition unused for as long when it needs room.
    ``TENSORGRID_SESSION_IDLE_TIMEOUT_S``."""
    max_sessions: int = 1024
    """Open master sessions; CreateSession beyond it first closes idle-expired ones,
    then is refused with RESOURCE_EXHAUSTED. ``TENSORGRID_MAX_SESSIONS``."""
    max_graph_nodes: int = 1_000_000
    """Nodes of one session's graph (CreateSession plus every ExtendSession) and of one
    registered partition (RegisterGraph); a request beyond it is refused with
    RESOURCE_EXHAUSTED before its graph is decoded. ``TENSORGRID_MAX_GRAPH_NODES``."""
    max_graph_bytes: int = 1 << 30
    """Bytes of GraphDef (as serialized) of one session's graph, counted as for
    ``max_graph_nodes``. ``TENSORGRID_MAX_GRAPH_BYTES``."""
    tls_handshake_timeout_s: float = 10.0
    """Time a client has for its whole TLS handshake, on the data channel and on gRPC;
    then its connection is closed. ``TENSORGRID_TLS_HANDSHAKE_TIMEOUT_S``."""
    max_registered_graphs: int = 16384
    """Graph partitions registered on a worker (one per session, step signature and
    task); RegisterGraph beyond it first forgets partitions unused for
    ``session_idle_timeout_s``, then is refused with RESOURCE_EXHAUSTED.
    ``TENSORGRID_MAX_REGISTERED_GRAPHS``."""
    max_registered_graph_bytes: int = 4 << 30
    """Bytes of GraphDef (as serialized) of all the graph partitions registered on a worker
    and not yet forgotten, whatever session or master registered them: RegisterGraph beyond
    it first forgets partitions unused for ``session_idle_timeout_s``, then is refused with
    RESOURCE_EXHAUSTED. DeregisterGraph, the close or expiry of the session that
    registered a partition, and a CleanupAll of every container free its bytes. Four times
    ``max_graph_bytes``, so the largest graph fits with room.
    ``TENSORGRID_MAX_REGISTERED_GRAPH_BYTES``."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"ServerLimits.{field.name} must be a finite number > 0, got {value!r}")
        if self.grpc_max_message_bytes < MIN_GRPC_MESSAGE_BYTES:
            raise ValueError(f"ServerLimits.grpc_max_message_bytes ({env_var('grpc_max_message_bytes')}) is "
                             f"{self.grpc_max_message_bytes}; it must be at least {MIN_GRPC_MESSAGE_BYTES} (16 MiB) so "
                             f"that 4 MiB chunk frames and requests below the 4 MiB streaming threshold fit")

    def check_graph_size(self, what: str, nodes: int, graph_bytes: int) -> None:
        """ResourceExhaustedError naming ``what``, the graph's size and the limits when it
        has more than ``max_graph_nodes`` nodes or ``max_graph_bytes`` bytes."""
        if nodes > self.max_graph_nodes or graph_bytes > self.max_graph_bytes:
            raise errors.ResourceExhaustedError(
                None, None, f"{what}: the graph would have {nodes} nodes and {graph_bytes} bytes of GraphDef, over "
                f"this task's limit of {self.max_graph_nodes} nodes ({env_var('max_graph_nodes')}) and "
                f"{self.max_graph_bytes} bytes ({env_var('max_graph_bytes')})")

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "ServerLimits":
        """The defaults, with each limit whose ``TENSORGRID_*`` variable is set replaced
        by its value. ValueError naming the variable and the value if it is not a number
        > 0 (an integer for byte and count limits)."""
        env = os.environ if environ is None else environ
        values: dict[str, float] = {}
        for field in dataclasses.fields(cls):
            name = env_var(field.name)
            raw = env.get(name, "").strip()
            if not raw:
                continue
            integral = field.type in ("int", int)
            try:
                value: float = int(raw) if integral else float(raw)
            except ValueError:
                value = -1
            if not (math.isfinite(value) and value > 0):
                kind = "an integer" if integral else "a number of seconds"
                raise ValueError(f"{name}={raw!r} is not valid: set it to {kind} > 0, or unset it for the default "
                                 f"{getattr(cls, field.name)}")
            values[field.name] = value
        return cls(**values)  # type: ignore[arg-type]


def env_var(field_name: str) -> str:
    """The environment variable of a ``ServerLimits`` field."""
    return f"TENSORGRID_{field_name.upper()}"
