"""The bounds on silent peers: their environment variables, and a data-channel call to a
peer that accepts connections but never answers (a frozen process, a host whose
connections were not reset) failing with UNAVAILABLE instead of waiting forever."""

import socket
import threading

import numpy as np
import pytest

from tensorgrid.distributed.transport import buffers
from tensorgrid.distributed.transport import data_channel
from tensorgrid.distributed.transport import liveness
from tensorgrid.distributed.transport import wire
from tensorgrid.framework import errors


def test_defaults_and_overrides_come_from_the_environment():
    assert liveness.from_env({}) == liveness.Liveness()
    settings = liveness.from_env({liveness.REPLY_PROBE_ENV: "3", liveness.KEEPALIVE_ENV: " 4.5 ",
                                  liveness.KEEPALIVE_TIMEOUT_ENV: "", liveness.RECONNECT_BACKOFF_ENV: "1"})
    assert (settings.reply_probe_s, settings.keepalive_s, settings.reconnect_backoff_max_s) == (3.0, 4.5, 1.0)
    assert settings.keepalive_timeout_s == liveness.Liveness().keepalive_timeout_s
    options = dict(liveness.grpc_options(settings))
    assert options["grpc.max_reconnect_backoff_ms"] == 1000
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
