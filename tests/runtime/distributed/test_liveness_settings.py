"""The bounds on silent peers: their environment variables, and a data-channel call to a
peer that accepts connections but never answers (a frozen process, a host whose
connections were not reset) failing with UNAVAILABLE instead of waiting forever."""

import socket
import threading
import time
from concurrent import futures

import grpc
import numpy as np
import pytest

from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc.transport import buffers
from tensorgrid.distributed.rpc.transport import data_channel
from tensorgrid.distributed.rpc.transport import grpc_frames
from tensorgrid.distributed.rpc.transport import liveness
from tensorgrid.distributed.rpc.transport import wire
from tensorgrid.framework import errors


def test_defaults_and_overrides_come_from_the_environment():
    assert liveness.from_env({}) == liveness.Liveness()
    settings = liveness.from_env({liveness.REPLY_PROBE_ENV: "3", liveness.KEEPALIVE_ENV: " 4.5 ",
                                  liveness.KEEPALIVE_TIMEOUT_ENV: "", liveness.RECONNECT_BACKOFF_ENV: "1",
                                  liveness.CONNECT_TIMEOUT_ENV: "7"})
    assert (settings.reply_probe_s, settings.keepalive_s, settings.reconnect_backoff_max_s) == (3.0, 4.5, 1.0)
    assert settings.keepalive_timeout_s == liveness.Liveness().keepalive_timeout_s
    options = dict(liveness.grpc_options(settings))
    assert options["grpc.max_reconnect_backoff_ms"] == 1000
    assert options["grpc.min_reconnect_backoff_ms"] == 7000  # gRPC's least time for one connection attempt
    assert options["grpc.keepalive_time_ms"] == 4500


@pytest.mark.parametrize("value", ["soon", "0", "-1", "1e9", "nan"])
def test_a_bad_value_is_refused_naming_the_variable_and_the_valid_range(value):
    with pytest.raises(ValueError, match=rf"TENSORGRID_REPLY_PROBE_SECONDS={value!r}.*0\.1 to 86400"):
        liveness.from_env({liveness.REPLY_PROBE_ENV: value})


def test_data_channel_sockets_have_tcp_keepalive():
    settings = liveness.Liveness(keepalive_s=3, keepalive_timeout_s=9)
    with socket.socket() as sock:
        liveness.enable_tcp_keepalive(sock, settings)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        if hasattr(socket, "TCP_KEEPIDLE"):
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 3
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) * \
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 9


class SilentPeer:
    """Accepts connections and reads nothing, answers nothing: the kernel completes the
    handshake, as for a frozen process."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.accepted.append(self.listener.accept()[0])
            except OSError:
                return

    def close(self):
        self.listener.close()
        for conn in self.accepted:
            conn.close()


@pytest.mark.parametrize("payload_bytes", [16, 64 << 20], ids=["waiting-for-the-reply", "sending"])
def test_a_call_to_a_silent_peer_fails_unavailable_naming_it(payload_bytes):
    peer = SilentPeer()
    client = data_channel.DataChannelClient(
        liveness_settings=liveness.Liveness(reply_probe_s=0.3, keepalive_timeout_s=0.3))
    tensor = np.zeros(payload_bytes // 4, np.float32)
    try:
        with pytest.raises(wire.TransportError, match=rf"127\.0\.0\.1:{peer.port}.*does not answer a probe") as caught:
            client.call("127.0.0.1", peer.port, data_channel.Method.PUSH_TENSORS, b"", [("t", tensor)],
                        buffers.BufferPool(0), 1 << 30)
        assert caught.value.code == errors.UnavailableError.code
    finally:
        client.close()
        peer.close()


def test_a_grpc_call_to_a_peer_slow_to_handshake_waits_for_its_own_deadline():
    """gRPC gives one connection attempt "grpc.min_reconnect_backoff_ms" to finish its TCP and
    TLS handshakes. Set to 1 s, a call with a 3 s deadline to a peer that had not answered
    the TLS handshake failed with UNAVAILABLE at 1 s, and a loaded PS could be given up on
    that way; with the connect timeout (5 s) the call runs to its deadline."""
    peer = SilentPeer()
    channel = grpc.secure_channel(f"127.0.0.1:{peer.port}", grpc.ssl_channel_credentials(),
                                  options=liveness.grpc_options(liveness.Liveness()))
    started = time.monotonic()
    try:
        with pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary("/tensorgrid.test/Nothing")(b"", timeout=3.0)
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, caught.value.details()
        assert time.monotonic() - started >= 2.9
    finally:
        channel.close()
        peer.close()


def _reached_after_outage(options, outage_s):
    """Seconds from a gRPC server starting on a port that refused connections for
    ``outage_s`` (while a client kept calling) until the client's call reaches it."""
    port = ports.free_ports(1)[0]
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
    call = channel.unary_unary("/tensorgrid.test/Nothing")
    started = time.monotonic()
    while time.monotonic() - started < outage_s:
        with pytest.raises(grpc.RpcError):
            call(b"", timeout=1.0)
        time.sleep(0.2)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    assert server.add_insecure_port(f"127.0.0.1:{port}") == port
    server.start()
    back = time.monotonic()
    try:
        while True:
            try:
                call(b"", timeout=1.0)
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNIMPLEMENTED:  # answered: the server was reached
                    return time.monotonic() - back
            time.sleep(0.2)
    finally:
        channel.close()
        server.stop(None)


def test_a_peer_back_after_a_long_outage_is_reached_within_seconds():
    """gRPC's own backoff grows by 1.6 per failed attempt: after 30 s of refusals its next
    attempt came 14.6-15.7 s after the peer was back (docs/limits.md). The capped backoff
    (2 s) reached it in 0.2-0.6 s; 8 s is a generous deadline between the two."""
    assert _reached_after_outage(grpc_frames.grpc_options(), outage_s=30) < 8
