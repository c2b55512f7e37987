"""A long job does not fail silently when its certificates expire: a task does not start
with expired ones (the error names the date), and a running task says when they expire,
in its log (at start; a warning two weeks before; an error once expired) and as the
metric ``tensorgrid_tls_certificate_expiry_timestamp_seconds``.
"""

from __future__ import annotations

import datetime
import logging
import os
import time

import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster
from tensorgrid import monitoring
from tensorgrid.distributed.rpc import certificates
from tensorgrid.distributed.rpc.transport import tls

pytestmark = [pytest.mark.timeout(240)]


def _task_directory(path, validity: datetime.timedelta) -> str:
    authority = certificates.new_authority("expiry test CA")
    return certificates.write_task_directory(str(path), authority, "expiry test", validity=validity)


def test_a_task_with_expired_certificates_does_not_start_and_names_the_date(tmp_path):
    directory = _task_directory(tmp_path / "tls", datetime.timedelta(minutes=-30))  # ended 30 min ago
    with pytest.raises(ValueError, match=r"expired at \d{4}-\d\d-\d\d \d\d:\d\d UTC: peers refuse expired "
                                         r"certificates\. Renew them: a TrainingJob's are in its Secrets <job>-ca and <pod>-tls"):
        tls.load(directory)
    with LocalCluster(tmp_path, {"ps": 1}, start=False, extra_env={tls.TLS_DIR_ENV: directory}) as cluster:
        task = cluster.task("ps")
        task.start(wait=False)
        assert task.wait(timeout=120) != 0
        assert "expired at" in task.log() and directory in task.log()


def test_a_server_says_when_its_certificates_expire(tmp_path, monkeypatch, caplog):
    directory = _task_directory(tmp_path / "tls", datetime.timedelta(days=3))
    monkeypatch.setenv(tls.TLS_DIR_ENV, directory)
    caplog.set_level(logging.INFO, logger="tensorgrid")
    server = tf.train.Server.create_local_server()
    try:
        not_after = tls.load(os.path.abspath(directory)).not_after
        started = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("Started server"))
        assert started.endswith(f"; TLS certificates valid until {not_after:%Y-%m-%d %H:%M} UTC)"), started
        assert monitoring.REGISTRY.get_sample_value(
            "tensorgrid_tls_certificate_expiry_timestamp_seconds") == not_after.timestamp()
        deadline = time.monotonic() + 60  # less than two weeks left: the watch warns at once
        while not any(r.levelno == logging.WARNING and "expire at" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.1)
        warning = next(r.getMessage() for r in caplog.records if "expire at" in r.getMessage())
        assert f"expire at {not_after:%Y-%m-%d %H:%M} UTC, in 3.0 days" in warning, warning
    finally:
        server.stop()


def _tls_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The records of tensorgrid.tls only: caplog also holds other loggers' records (a kopf
    thread of an operator test that ran earlier in this process, still posting events)."""
    return [r for r in caplog.records if r.name == "tensorgrid.tls"]


def test_a_running_task_logs_an_error_when_its_certificates_expire(tmp_path, caplog):
    directory = _task_directory(tmp_path / "tls", datetime.timedelta(seconds=3))
    credentials = tls.load(directory)
    with caplog.at_level(logging.INFO, logger="tensorgrid.tls"):
        watch = tls.ExpiryWatch(credentials, "/job:ps/replica:0/task:0")
        try:
            deadline = time.monotonic() + 120
            while not any(r.levelno == logging.ERROR for r in _tls_records(caplog)):
                assert time.monotonic() < deadline, caplog.text
                time.sleep(0.2)
        finally:
            watch.stop()
    messages = [r.getMessage() for r in _tls_records(caplog)]
    assert any("expire at" in m and "then peers refuse this task's new connections" in m for m in messages), messages
    error = next(r.getMessage() for r in _tls_records(caplog) if r.levelno == logging.ERROR)
    assert error.startswith(f"/job:ps/replica:0/task:0: the TLS certificates of {tls.TLS_DIR_ENV}={directory!r} "
                            f"expired at {credentials.not_after:%Y-%m-%d %H:%M} UTC: every new connection")


def test_the_first_certificate_to_expire_counts_the_ca_included(tmp_path):
    authority = certificates.new_authority("short CA", validity=datetime.timedelta(days=2))
    directory = certificates.write_task_directory(str(tmp_path / "tls"), authority, "task",
                                                  validity=datetime.timedelta(days=10))
    credentials = tls.load(directory)
    assert credentials.not_after == authority.certificate.not_valid_after_utc
