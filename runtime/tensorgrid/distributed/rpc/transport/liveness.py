"""How soon a silent peer is noticed and a returning one reached again: one place for
the timeouts and their environment variables (docs/limits.md, "Peers that vanish").

Why it exists: a peer can vanish without closing its connections (power loss, a
network partition, a frozen process). Without keepalive a call waiting for its reply
waits forever and nothing is logged; without a cap on gRPC's reconnect backoff (up
to 120 s by default) a peer that is back is reached minutes later. The settings here
go into every gRPC channel and server (``grpc_options``), every data-channel socket
(``enable_tcp_keepalive``) and the wait of a data-channel call for its reply, which
checks every ``reply_probe_s`` that the peer still answers a probe. No sockets are
opened here and grpc is not imported.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from typing import Any, Mapping, Optional

KEEPALIVE_ENV = "TENSORGRID_KEEPALIVE_SECONDS"
KEEPALIVE_TIMEOUT_ENV = "TENSORGRID_KEEPALIVE_TIMEOUT_SECONDS"
REPLY_PROBE_ENV = "TENSORGRID_REPLY_PROBE_SECONDS"
RECONNECT_BACKOFF_ENV = "TENSORGRID_RECONNECT_BACKOFF_MAX_SECONDS"
CONNECT_TIMEOUT_ENV = "TENSORGRID_CONNECT_TIMEOUT_SECONDS"


@dataclasses.dataclass(frozen=True)
class Liveness:
    """The timeouts that bound how long a vanished peer goes unnoticed."""

    keepalive_s: float = 10.0
    """Idle seconds on a connection before keepalive probes start (TCP keepalive on the
    data channel, gRPC keepalive pings); ``TENSORGRID_KEEPALIVE_SECONDS``."""
    keepalive_timeout_s: float = 10.0
    """Seconds without an answer to keepalive probes (or to a data-channel probe) after
    which the peer counts as gone; ``TENSORGRID_KEEPALIVE_TIMEOUT_SECONDS``."""
    reply_probe_s: float = 15.0
    """While a data-channel call waits for its reply (a step may take as long as it
    needs), every this many seconds the peer is probed on a new connection; one that
    does not answer within ``keepalive_timeout_s`` fails the call with UnavailableError;
    ``TENSORGRID_REPLY_PROBE_SECONDS``."""
    reconnect_backoff_max_s: float = 2.0
    """Most seconds gRPC waits between attempts to reach a peer that went away (its
    default grows to 120 s); ``TENSORGRID_RECONNECT_BACKOFF_MAX_SECONDS``."""
    connect_timeout_s: float = 5.0
    """Most seconds one gRPC connection attempt (TCP and TLS handshakes) may take before
    it is abandoned and tried again (gRPC's default is 20 s); a call's own deadline ends
    it sooner. Long enough for a TLS handshake with a loaded peer, short enough that an
    attempt stuck on a vanished address is soon made again;
    ``TENSORGRID_CONNECT_TIMEOUT_SECONDS``."""


def seconds_from_env(environ: Mapping[str, str], name: str, default: float, minimum: float = 0.1,
                     meaning: str = "") -> float:
    """The number of seconds variable ``name`` of ``environ`` sets, or ``default`` when it
    is unset or empty. ValueError naming the variable and its value unless it is a
    number from ``minimum`` to 86400 (``meaning`` says what 0 does, where allowed)."""
    value = environ.get(name, "").strip()
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not minimum <= seconds <= 86400:
        raise ValueError(f"{name}={value!r} is not a number of seconds from {minimum:g} to 86400; "
                         f"leave it unset for the default of {default:g}{meaning}")
    return seconds


def from_env(environ: Optional[Mapping[str, str]] = None) -> Liveness:
    """The settings of this process: the defaults, overridden by the environment
    variables named on each field. ValueError naming the variable and its value when
    one is not a number of seconds from 0.1 to 86400."""
    env = os.environ if environ is None else environ
    defaults = Liveness()
    return Liveness(
        keepalive_s=seconds_from_env(env, KEEPALIVE_ENV, defaults.keepalive_s),
        keepalive_timeout_s=seconds_from_env(env, KEEPALIVE_TIMEOUT_ENV, defaults.keepalive_timeout_s),
        reply_probe_s=seconds_from_env(env, REPLY_PROBE_ENV, defaults.reply_probe_s),
        reconnect_backoff_max_s=seconds_from_env(env, RECONNECT_BACKOFF_ENV, defaults.reconnect_backoff_max_s),
        connect_timeout_s=seconds_from_env(env, CONNECT_TIMEOUT_ENV, defaults.connect_timeout_s),
    )


def grpc_options(settings: Liveness) -> list[tuple[str, Any]]:
    """gRPC channel and server arguments: keepalive pings (also between calls, so a
    waiting call notices a silent peer), servers that accept them at that rate,
    reconnect backoff capped at ``reconnect_backoff_max_s``, and connection attempts
    bounded by ``connect_timeout_s``: gRPC reads "grpc.min_reconnect_backoff_ms" as the
    least time it gives an attempt to connect, not as a backoff. Set to the first backoff
    (1 s) it cut TLS handshakes short, so that a call with a longer deadline to a peer
    slow to answer failed with UNAVAILABLE at 1 s."""
    keepalive_ms = int(settings.keepalive_s * 1000)
    backoff_max_ms = int(settings.reconnect_backoff_max_s * 1000)
    backoff_first_ms = min(1000, backoff_max_ms)
    return [
        ("grpc.keepalive_time_ms", keepalive_ms),
        ("grpc.keepalive_timeout_ms", int(settings.keepalive_timeout_s * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.http2.min_ping_interval_without_data_ms", min(keepalive_ms, 5000)),
        ("grpc.http2.min_time_between_pings_ms", min(keepalive_ms, 5000)),
        ("grpc.initial_reconnect_backoff_ms", backoff_first_ms),
        ("grpc.min_reconnect_backoff_ms", int(settings.connect_timeout_s * 1000)),
        ("grpc.max_reconnect_backoff_ms", backoff_max_ms),
    ]


def enable_tcp_keepalive(sock: socket.socket, settings: Liveness) -> None:
    """Turns on TCP keepalive: after ``keepalive_s`` idle, a probe a second (at most
    ``keepalive_s`` apart) until ``keepalive_timeout_s`` have passed unanswered, then
    the kernel fails the connection, and a blocked read with it."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    interval = max(1, min(int(settings.keepalive_s), int(settings.keepalive_timeout_s)))
    for option, value in (("TCP_KEEPIDLE", max(1, int(settings.keepalive_s))), ("TCP_KEEPINTVL", interval),
                          ("TCP_KEEPCNT", max(1, int(settings.keepalive_timeout_s) // interval))):
        if hasattr(socket, option):  # Linux; macOS has TCP_KEEPALIVE for the first only
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
