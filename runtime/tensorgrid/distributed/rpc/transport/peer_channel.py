"""A gRPC channel to one peer that follows the task's reloaded certificates.

Why it exists: a gRPC channel keeps the credentials it was made with for its whole life
and reconnects with them whenever its connection drops. A task that takes renewed
certificates (``tls.LiveCredentials``) must show the new ones on its next connection,
or a reconnect after the old ones expired fails its handshake. So each call asks for
the channel of the credentials current now (``stub``): after a reload it gets a new
channel; the one replaced still carries the calls begun on it, and is closed when the
last of them ends. No thread of its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import Any, Iterator, Optional, Sequence

import grpc
from google.protobuf import descriptor as descriptor_lib

from tensorgrid.distributed.rpc.transport import grpc_frames
from tensorgrid.distributed.rpc.transport import tls


@dataclasses.dataclass(eq=False)
class _Channel:
    credentials: Optional[tls.Credentials]
    channel: grpc.Channel
    stub: grpc_frames.Stub
    calls: int = 0
    """Calls running on it now."""


class PeerChannel:
    """Calls to ``service`` at ``address`` (``grpc_frames.Stub``), over mutual TLS with
    ``credentials.current()`` (plaintext without ``credentials``)."""

    def __init__(self, address: str, credentials: Optional[tls.CredentialSource], options: Sequence[tuple[str, Any]],
                 service: descriptor_lib.ServiceDescriptor) -> None:
        self.address = address
        self._credentials = credentials
        self._options = options
        self._service = service
        self._lock = threading.Lock()
        self._current = self._open()
        self._replaced: list[_Channel] = []
        """Channels of earlier credentials with calls still running on them."""
        self._closed = False
        self.answered = False
        """Whether a call on it ever ended without an error (the peer was reached, TLS and all)."""

    def _open(self) -> _Channel:
        credentials = self._credentials.current() if self._credentials is not None else None
        channel = tls.open_channel(self.address, credentials, self._options)
        return _Channel(credentials, channel, grpc_frames.Stub(channel, self._service))

    @property
    def credentials(self) -> Optional[tls.CredentialSource]:
        """What its calls' TLS credentials come from; None: plaintext."""
        return self._credentials

    @property
    def open_channels(self) -> int:
        """gRPC channels open now: the current one, and those replaced whose calls still run."""
        with self._lock:
            return 0 if self._closed else 1 + len(self._replaced)

    @contextlib.contextmanager
    def stub(self) -> Iterator[grpc_frames.Stub]:
        """The stub for one call, on the channel of the current credentials; the call must
        have ended (its reply read whole) when the block ends. ValueError once closed."""
        retired: Optional[_Channel] = None
        with self._lock:
            if self._closed:
                raise ValueError(f"the channel to {self.address} is closed")
            current = self._current
            if self._credentials is not None and self._credentials.current() is not current.credentials:
                retired, current = current, self._open()
                self._current = current
                if retired.calls:
                    self._replaced.append(retired)
                    retired = None
            current.calls += 1
        if retired is not None:
            retired.channel.close()
        try:
            yield current.stub
            self.answered = True
        finally:
            self._end_call(current)

    def reconnect(self) -> None:
        """Opens a new channel for the calls from now on; the current one keeps the calls
        begun on it and is closed when the last of them ends. For a peer that stopped
        answering on its connection without closing it (a frozen process): gRPC keeps such
        a connection (its keepalive did not drop it), while the peer's address may now lead
        to its replacement, which only a new connection reaches."""
        retired: Optional[_Channel] = None
        with self._lock:
            if self._closed:
                return
            retired, self._current = self._current, self._open()
            if retired.calls:
                self._replaced.append(retired)
                retired = None
        if retired is not None:
            retired.channel.close()

    def _end_call(self, channel: _Channel) -> None:
        with self._lock:
            channel.calls -= 1
            finished = not channel.calls and channel in self._replaced
            if finished:
                self._replaced.remove(channel)
        if finished:
            channel.channel.close()

    def close(self) -> None:
        """Closes every channel, ending the calls still running on them."""
        with self._lock:
            channels = [] if self._closed else [self._current, *self._replaced]
            self._closed, self._replaced = True, []
        for channel in channels:
            channel.channel.close()
