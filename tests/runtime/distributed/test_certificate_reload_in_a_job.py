"""A job replaces its CA while it trains, without a restart: a PS and a worker (``tensorgrid
server`` processes) and this process (their client) train with certificates of CA A; their
files are swapped, as kubelet swaps a renewed Secret's, for certificates of CA B with a
``ca.crt`` holding both, then holding B alone. Every task takes each update within
``TENSORGRID_TLS_RELOAD_SECONDS`` (0.3 s here); a client holding only a B certificate is
then served on gRPC and on the data channel, one holding an A certificate is refused once
A is dropped, and the training goes on through both updates without an error. Tasks talk
TCP with TLS, as between pods (no Unix socket)."""

from __future__ import annotations

import datetime
import re
import time

import numpy as np
import pytest

import cluster_processes
from cluster_processes import BackgroundTraining
from cluster_processes import LocalCluster
from secret_volumes import SecretVolume, grpc_answers
from tensorgrid.distributed.rpc import certificates
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc.transport import data_channel
from tensorgrid.distributed.rpc.transport import tls

pytestmark = pytest.mark.timeout(240)

RELOADED = "reloaded the TLS certificates of"




def _answers_data_channel(port: int, client: tls.Credentials) -> bool:
    channel = data_channel.DataChannelClient(connect_timeout_s=5, io_timeout_s=5, tls=client.client_context)
    try:
        return channel.why_unreachable("localhost", port) == ""
    finally:
        channel.close()


def _wait_for_reloads(task: cluster_processes.TaskProcess, count: int, timeout: float = 30.0) -> None:
    """Until the task logged its ``count``-th reload."""
    deadline = time.monotonic() + timeout
    while task.log().count(RELOADED) < count:
        assert time.monotonic() < deadline, f"{task.job}:{task.index} did not reload {count} times:\n{task.log()}"
        time.sleep(0.05)


def test_a_training_job_replaces_its_ca_without_a_restart(tmp_path, monkeypatch):
    a = certificates.new_authority("job CA A")
    b = certificates.new_authority("job CA B", validity=datetime.timedelta(days=60))  # its end told apart from A's
    longer = datetime.timedelta(days=90)
    volumes = {name: SecretVolume(str(tmp_path / name)) for name in ("ps", "worker", "client")}
    for name, volume in volumes.items():
        volume.write_certificates([a], a, name)
    data_ports = dict(zip(("ps", "worker"), ports.free_ports(2)))
    common = {tls.RELOAD_ENV: "0.3", ports.LOCAL_SOCKETS_ENV: "0"}
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}, start=False) as cluster:
        for job in ("ps", "worker"):
            cluster.task(job).extra_env = dict(common, **{tls.TLS_DIR_ENV: volumes[job].path,
                                                          ports.DATA_PORT_ENV: str(data_ports[job])})
            cluster.task(job).start(wait=False)
        for job in ("ps", "worker"):
            cluster.task(job).wait_listening()
        # This process, the job's client, holds a certificate of its own that follows its files too.
        for variable, value in dict(common, **{tls.TLS_DIR_ENV: volumes["client"].path}).items():
            monkeypatch.setenv(variable, value)
        only_b = tls.load(certificates.write_task_directory(str(tmp_path / "only-b"), b, "a client of CA B"))
        # Trusts both CAs, so that only the server's verdict on its A certificate counts.
        with_a = tls.Credentials(a.certificate_pem + b.certificate_pem,
                                 *certificates.issue(a, "a client of CA A", certificates.LOOPBACK_NAMES), "with-a")

        def served(client: tls.Credentials) -> list[bool]:
            return [answer for job in ("ps", "worker") for answer in (
                grpc_answers(cluster.task(job).address, client), _answers_data_channel(data_ports[job], client))]

        training = BackgroundTraining(cluster.target("worker"))
        try:
            training.advance(20)
            assert served(only_b) == [False] * 4
            for name, volume in volumes.items():  # B shown, A and B trusted
                volume.write_certificates([a, b], b, name, longer)
            for job in ("ps", "worker"):
                _wait_for_reloads(cluster.task(job), 1)
            training.advance(20)
            assert served(only_b) == [True] * 4
            assert served(with_a) == [True] * 4
            for name, volume in volumes.items():  # A dropped
                volume.write_certificates([b], b, name, longer)
            for job in ("ps", "worker"):
                _wait_for_reloads(cluster.task(job), 2)
            training.advance(20)
            assert served(with_a) == [False] * 4
            assert served(only_b) == [True] * 4
        finally:
            training.close()
        # A restarted PS (it reads B alone at start) is reached by the worker, whose channel and
        # data-channel connections to it are new ones: they must show the worker's B certificate.
        cluster.task("ps").kill()
        cluster.task("ps").start()
        np.testing.assert_allclose(cluster_processes.train_three_steps(cluster.target("worker")), -2.0)
        for job in ("ps", "worker"):
            log = cluster.task(job).log()
            # No warning or error of tensorgrid's (log_setup: "12:00:00 W tensorgrid.rpc: ...").
            assert not re.search(r"^\d\d:\d\d:\d\d [WE] |Traceback", log, re.MULTILINE), log
            assert f"valid until {b.certificate.not_valid_after_utc:%Y-%m-%d %H:%M} UTC" in log, log
