"""How a data-channel call waits on its peer: as long as the peer's step needs, while
the peer shows it is alive and is still the process that was called.

Why it exists: a peer can stop answering without closing its connection (a frozen
process, a lost node whose kernel still acknowledges the bytes sent to it). So a call
that gets no reply for ``reply_probe_s`` probes the peer's data channel on a new
connection. That probe reaches whatever the peer's address leads to now, which is not
always the process of the waiting connection: a pod of a lost node is started again on
another node under the same name while the old one, frozen, still holds its
connections. A call on such a connection would wait for good, every probe answered by
the replacement; the caller's ``ReplacedCheck`` (the client knows the peer's
incarnation, the data channel does not) tells the two apart.

Apart from ``data_channel.py`` (the protocol: which bytes go where) because this is
when to give up on a peer; no gRPC.
"""

from __future__ import annotations

import dataclasses
import socket
from typing import Any, Callable, Optional

from tensorgrid.distributed.rpc.transport import liveness
from tensorgrid.distributed.rpc.transport import stream_io

ReplacedCheck = Callable[[], str]
"""Asked when a probe was answered while a call waits: "" while the process called is
still the one at its address, else words saying what answers there now."""

Probe = Callable[[str, int, float], str]
"""``DataChannelClient.why_unreachable``: (host, port, timeout) -> why no data channel
answers there, "" when one does."""


@dataclasses.dataclass(frozen=True)
class PeerWatch:
    """The watch over one call to the data channel at ``host:port``."""

    host: str
    port: int
    probe: Probe
    settings: liveness.Liveness
    replaced: Optional[ReplacedCheck] = None
    """None: a probe answered is enough (the caller cannot know the peer's incarnation)."""

    def check_alive(self, symptom: str) -> None:
        """TimeoutError naming ``symptom`` unless the peer's data channel answers a probe
        on a new connection within ``keepalive_timeout_s`` (it is gone or frozen without
        having closed the connection), or when what answers is a replacement of the
        process called (``replaced``)."""
        reason = self.probe(self.host, self.port, self.settings.keepalive_timeout_s)
        if reason:
            raise TimeoutError(f"{symptom}, and {reason}: the peer is gone or frozen")
        successor = self.replaced() if self.replaced is not None else ""
        if successor:
            raise TimeoutError(f"{symptom}, and {successor}: this connection leads to the process it replaced, "
                               f"frozen or cut off")

    def send(self, sock: socket.socket, parts: list[Any]) -> None:
        """Sends ``parts`` (bytes, memoryviews) in order; while the peer takes none of
        them for ``reply_probe_s``, it must pass ``check_alive``. Leaves that timeout on
        ``sock`` for ``await_reply``."""
        sock.settimeout(self.settings.reply_probe_s)
        stalled = 0.0
        pending = [view for view in map(stream_io.as_bytes, parts) if len(view)]
        while pending:
            try:
                stream_io.send_some(sock, pending)
                stalled = 0.0
            except socket.timeout:
                stalled += self.settings.reply_probe_s
                self.check_alive(f"the peer took no data for {stalled:.0f} s")

    def await_reply(self, sock: socket.socket, size: int, io_timeout_s: float) -> bytes:
        """The reply's first ``size`` bytes, however long the peer's step takes (as a gRPC
        call without deadline), as long as the peer passes ``check_alive`` every
        ``reply_probe_s`` (``send`` set that timeout); then ``io_timeout_s`` again."""
        prefix = bytearray(size)
        view = memoryview(prefix)
        waited = 0.0
        while len(view):
            try:
                received = sock.recv_into(view)
            except socket.timeout:
                waited += self.settings.reply_probe_s
                self.check_alive(f"no reply after {waited:.0f} s")
                continue
            if received == 0:
                raise EOFError(f"connection closed with {len(view)} bytes of the reply still expected")
            view = view[received:]
        sock.settimeout(io_timeout_s)
        return bytes(prefix)
