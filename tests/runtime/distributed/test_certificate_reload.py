"""A running task follows its certificate files: files swapped in as kubelet updates a
renewed Secret are taken for every new connection (the gRPC server's, the data
channel's both ways, gRPC channels to peers), within ``TENSORGRID_TLS_RELOAD_SECONDS``;
files that are not usable are logged as an error and kept out. The expiry it reports
(log, metric) follows. A whole job rotating its CA while it trains:
test_certificate_reload_in_a_job.py."""

from __future__ import annotations

import concurrent.futures
import datetime
import logging
import os
import threading
import time

import grpc
import pytest

import tensorgrid as tf
from secret_volumes import SecretVolume, grpc_answers
from tensorgrid import monitoring
from tensorgrid.distributed.rpc import certificates
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc import transport
from tensorgrid.distributed.rpc.transport import data_channel
from tensorgrid.distributed.rpc.transport import grpc_frames
from tensorgrid.distributed.rpc.transport import peer_channel
from tensorgrid.distributed.rpc.transport import tls
from tensorgrid.v1 import worker_pb2

pytestmark = pytest.mark.timeout(120)

WORKER_SERVICE = worker_pb2.DESCRIPTOR.services_by_name["Worker"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _following(tmp_path, authority, interval: float) -> tuple[SecretVolume, FakeClock, tls.LiveCredentials]:
    """A volume holding a certificate of ``authority``, and credentials following it every
    ``interval`` seconds of a clock the test moves."""
    volume = SecretVolume(str(tmp_path / "tls"))
    volume.write_certificates([authority], authority, "task")
    clock = FakeClock()
    return volume, clock, tls.LiveCredentials(volume.path, reload_interval_s=interval, clock=clock)


@pytest.fixture(scope="module")
def authorities() -> tuple[certificates.Authority, certificates.Authority]:
    """Two CAs: the job's first (A) and its successor (B)."""
    return certificates.new_authority("CA A"), certificates.new_authority("CA B")


def _tls_records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tensorgrid.tls" and r.levelno == level]


def test_files_swapped_in_as_kubelet_does_are_taken_after_the_interval(tmp_path, authorities, caplog):
    a, b = authorities
    volume, clock, live = _following(tmp_path, a, 30)
    first = live.current()
    renewed = volume.write_certificates([a, b], b, "task", validity=datetime.timedelta(days=90))
    clock.now += 29
    assert live.current() is first  # not read again before the interval
    clock.now += 1
    with caplog.at_level(logging.INFO, logger="tensorgrid.tls"):
        second = live.current()
        assert second.certificate == renewed and second.ca == a.certificate_pem + b.certificate_pem
        clock.now += 30
        assert live.current() is second  # unchanged files: the same credentials, nothing logged
    assert _tls_records(caplog, logging.INFO) == [
        f"reloaded the TLS certificates of TENSORGRID_TLS_DIR={volume.path!r}: new connections use them; valid "
        f"until {second.not_after:%Y-%m-%d %H:%M} UTC"]
    assert second.not_after == b.certificate.not_valid_after_utc  # the CA of tls.crt, not the older A
    assert not [name for name in os.listdir(volume.path) if name.startswith("..2026") and name != os.readlink(
        os.path.join(volume.path, "..data"))], "the old version's directory is gone, as kubelet removes it"


def _broken(kind: str, a: certificates.Authority, b: certificates.Authority) -> dict[str, bytes]:
    certificate, key = certificates.issue(b, "task", certificates.LOOPBACK_NAMES)
    _, other_key = certificates.issue(b, "task", certificates.LOOPBACK_NAMES)
    expired, expired_key = certificates.issue(b, "task", certificates.LOOPBACK_NAMES,
                                              validity=datetime.timedelta(minutes=-30))
    ca = a.certificate_pem + b.certificate_pem
    return {
        "a key of another certificate": {"ca.crt": ca, "tls.crt": certificate, "tls.key": other_key},
        "a half-written key": {"ca.crt": ca, "tls.crt": certificate, "tls.key": key[:len(key) // 2]},
        "a half-written ca.crt": {"ca.crt": ca[:len(ca) - 40], "tls.crt": certificate, "tls.key": key},
        "an expired certificate": {"ca.crt": ca, "tls.crt": expired, "tls.key": expired_key},
        "no key": {"ca.crt": ca, "tls.crt": certificate},
    }[kind]


@pytest.mark.parametrize("kind", ["a key of another certificate", "a half-written key", "a half-written ca.crt",
                                  "an expired certificate", "no key"])
def test_an_unusable_update_is_logged_once_and_kept_out(tmp_path, authorities, caplog, kind):
    a, b = authorities
    volume, clock, live = _following(tmp_path, a, 30)
    first = live.current()
    volume.write(_broken(kind, a, b))
    with caplog.at_level(logging.INFO, logger="tensorgrid.tls"):
        for _ in range(3):
            clock.now += 30
            assert live.current() is first
        errors = _tls_records(caplog, logging.ERROR)
        assert len(errors) == 1, errors  # once, not at every look
        assert f"TENSORGRID_TLS_DIR={volume.path!r}" in errors[0], errors[0]
        assert f"keeps the certificates it has (valid until {first.not_after:%Y-%m-%d %H:%M} UTC)" in errors[0]
        assert not _tls_records(caplog, logging.INFO)
        # Fixed files are taken at the next look.
        fixed = volume.write_certificates([a, b], b, "task")
        clock.now += 30
        assert live.current().certificate == fixed
    assert len(_tls_records(caplog, logging.INFO)) == 1


def test_zero_seconds_reads_the_files_only_at_start(tmp_path, authorities):
    a, b = authorities
    volume, clock, live = _following(tmp_path, a, 0)
    first = live.current()
    volume.write_certificates([b], b, "task")
    clock.now += 86400
    assert live.current() is first


def test_certificates_a_process_made_for_itself_are_not_followed(tmp_path, authorities, monkeypatch):
    """``create_local_server``'s own CA: nothing renews it, and its directory is removed as the
    process exits, while its last calls (the end-of-training report) still dial."""
    a, _ = authorities
    volume = SecretVolume(str(tmp_path / "own"))
    volume.write_certificates([a], a, "task")
    monkeypatch.delenv(tls.TLS_DIR_ENV, raising=False)
    monkeypatch.setenv(tls.RELOAD_ENV, "5")
    monkeypatch.setattr(tls, "_process_directory", volume.path)
    own = tls.from_env()
    assert own is not None and own.reload_interval_s == 0
    monkeypatch.setenv(tls.TLS_DIR_ENV, volume.path)
    given = tls.from_env()
    assert given is not None and given.reload_interval_s == 5


@pytest.mark.parametrize("value", ["soon", "-1", "90000"])
def test_a_bad_reload_interval_is_named(value):
    with pytest.raises(ValueError, match=f"TENSORGRID_TLS_RELOAD_SECONDS='{value}' is not a number of seconds from 0 "
                       "to 86400; leave it unset for the default of 30 .*0: only at start"):
        tls.reload_interval_from_env({tls.RELOAD_ENV: value})


def test_an_expired_old_ca_beside_the_new_one_does_not_stop_a_task(tmp_path):
    """ca.crt holding the old CA and its successor while a CA is replaced: the old one's
    end does not count (nor refuse the files), the new one's does."""
    old = certificates.new_authority("old CA", validity=datetime.timedelta(minutes=-30))  # ended 30 min ago
    new = certificates.new_authority("new CA", validity=datetime.timedelta(days=20))
    volume = SecretVolume(str(tmp_path / "tls"))
    volume.write_certificates([old, new], new, "task", validity=datetime.timedelta(days=60))
    assert tls.load(volume.path).not_after == new.certificate.not_valid_after_utc


# ---------------------------------------------------------------------- new connections, both protocols

class _Recorder:
    """A gRPC server's Worker service answering GetStatus with the client certificate's
    common name seen; CleanupAll waits until ``release`` (a call that lasts)."""

    def __init__(self) -> None:
        self.clients: list[str] = []
        self.release = threading.Event()
        self.waiting = threading.Event()

    def handler(self) -> grpc.GenericRpcHandler:
        def get_status(request: bytes, context: grpc.ServicerContext) -> bytes:
            self.clients.append(context.auth_context()["x509_common_name"][0].decode())
            return worker_pb2.GetStatusResponse().SerializeToString()

        def cleanup_all(request: bytes, context: grpc.ServicerContext) -> bytes:
            self.waiting.set()
            self.release.wait(30)
            return worker_pb2.CleanupAllResponse().SerializeToString()

        return grpc.method_handlers_generic_handler(WORKER_SERVICE.full_name, {
            "GetStatus": grpc.unary_unary_rpc_method_handler(get_status),
            "CleanupAll": grpc.unary_unary_rpc_method_handler(cleanup_all)})


@pytest.fixture
def recorder():
    recorder = _Recorder()
    yield recorder
    recorder.release.set()


def _grpc_server(credentials: tls.CredentialSource, recorder: _Recorder) -> tuple[grpc.Server, str]:
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((recorder.handler(),))
    port = tls.add_port(server, "127.0.0.1:0", credentials)
    server.start()
    return server, f"localhost:{port}"




def _client(tmp_path, name: str, trusted, issuer) -> tls.Credentials:
    volume = SecretVolume(str(tmp_path / name))
    volume.write_certificates(trusted, issuer, name)
    return tls.load(volume.path)


def _wait_for(condition, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.05)


def test_a_grpc_server_and_a_data_channel_present_and_trust_the_reloaded_certificates(tmp_path, authorities,
                                                                                       recorder, monkeypatch):
    a, b = authorities
    monkeypatch.setenv(ports.LOCAL_SOCKETS_ENV, "0")  # TCP and TLS, as between pods
    volume = SecretVolume(str(tmp_path / "server"))
    volume.write_certificates([a], a, "server")
    live = tls.LiveCredentials(volume.path, reload_interval_s=0.1)
    server, address = _grpc_server(live, recorder)
    tx = transport.Transport(transport.TransportConfig(data_host="127.0.0.1"), live)
    only_b = _client(tmp_path, "client B", [b], b)  # trusts only B: the server must show a B certificate
    of_a = _client(tmp_path, "client A", [a, b], a)
    try:
        def data_channel_answers(client: tls.Credentials) -> bool:
            channel = data_channel.DataChannelClient(connect_timeout_s=5, io_timeout_s=5, tls=client.client_context)
            try:
                return channel.why_unreachable("localhost", tx.data_port) == ""
            finally:
                channel.close()

        assert not grpc_answers(address, only_b) and not data_channel_answers(only_b)
        assert grpc_answers(address, of_a) and data_channel_answers(of_a)
        volume.write_certificates([a, b], b, "server")  # a CA change: both trusted, B shown
        _wait_for(lambda: grpc_answers(address, only_b), "the gRPC server taking B")
        assert data_channel_answers(only_b)
        assert grpc_answers(address, of_a) and data_channel_answers(of_a)
        volume.write_certificates([b], b, "server")  # then A is dropped
        _wait_for(lambda: not grpc_answers(address, of_a), "the gRPC server dropping A")
        assert not data_channel_answers(of_a)
        assert grpc_answers(address, only_b) and data_channel_answers(only_b)
    finally:
        server.stop(grace=None)
        tx.close()


def test_a_peer_channel_dials_with_the_reloaded_certificate_and_closes_the_old_channel_after_its_calls(
        tmp_path, authorities, recorder):
    a, b = authorities
    server, address = _grpc_server(_client(tmp_path, "server", [a, b], a), recorder)
    volume = SecretVolume(str(tmp_path / "client"))
    volume.write_certificates([a], a, "client A")
    live = tls.LiveCredentials(volume.path, reload_interval_s=0.1)
    channel = peer_channel.PeerChannel(address, live, grpc_frames.GRPC_OPTIONS, WORKER_SERVICE)
    try:
        with channel.stub() as stub:
            stub.GetStatus(worker_pb2.GetStatusRequest(), timeout=10)
        lasting = concurrent.futures.ThreadPoolExecutor(1)

        def cleanup_all() -> None:
            with channel.stub() as stub:
                stub.CleanupAll(worker_pb2.CleanupAllRequest(), timeout=30)

        running = lasting.submit(cleanup_all)
        assert recorder.waiting.wait(10)
        volume.write_certificates([a, b], b, "client B")
        time.sleep(0.2)
        with channel.stub() as stub:
            stub.GetStatus(worker_pb2.GetStatusRequest(), timeout=10)
        assert recorder.clients == ["client A", "client B"]
        assert channel.open_channels == 2  # the old one still carries the lasting call
        recorder.release.set()
        running.result(timeout=10)  # ends normally on the old channel
        assert channel.open_channels == 1  # then that channel is closed
        lasting.shutdown()
    finally:
        channel.close()
        server.stop(grace=None)
    assert channel.open_channels == 0
    with pytest.raises(ValueError, match="is closed"):
        with channel.stub():
            pass


def test_a_quiet_server_reloads_and_its_expiry_log_and_metric_follow(tmp_path, authorities, monkeypatch, caplog):
    a, _ = authorities
    short = certificates.new_authority("short CA", validity=datetime.timedelta(days=3))
    volume = SecretVolume(str(tmp_path / "tls"))
    volume.write_certificates([short], short, "task")
    monkeypatch.setenv(tls.TLS_DIR_ENV, volume.path)
    monkeypatch.setenv(tls.RELOAD_ENV, "0.2")
    caplog.set_level(logging.INFO, logger="tensorgrid")
    server = tf.train.Server.create_local_server()
    try:
        expiry = "tensorgrid_tls_certificate_expiry_timestamp_seconds"
        old = short.certificate.not_valid_after_utc
        assert monitoring.REGISTRY.get_sample_value(expiry) == old.timestamp()
        _wait_for(lambda: _tls_records(caplog, logging.WARNING), "the warning of certificates ending in 3 days")
        warning = _tls_records(caplog, logging.WARNING)[0]
        assert f"expire at {old:%Y-%m-%d %H:%M} UTC, in 3.0 days" in warning, warning
        assert "within 0.2 s, without a restart" in warning and "restart the" not in warning, warning
        volume.write_certificates([a], a, "task")  # no connection is made: the watch looks by itself
        _wait_for(lambda: _tls_records(caplog, logging.INFO), "the reload")
        new = a.certificate.not_valid_after_utc
        assert _tls_records(caplog, logging.INFO)[0].endswith(f"valid until {new:%Y-%m-%d %H:%M} UTC")
        assert monitoring.REGISTRY.get_sample_value(expiry) == new.timestamp()
        time.sleep(0.5)
        assert len(_tls_records(caplog, logging.WARNING)) == 1 and not _tls_records(caplog, logging.ERROR)
    finally:
        server.stop()
