"""Mutual TLS between tasks: a job's tasks train over it; a program outside the job (no
certificate, or one from another CA) is refused on gRPC and on the data channel, and the
job keeps serving; a task with neither certificates nor the explicit opt-out does not start."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import grpc
import numpy as np
import pytest

import cluster_processes
from cluster_processes import LocalCluster
from tensorgrid.distributed.rpc import certificates
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc.transport import buffers
from tensorgrid.distributed.rpc.transport import data_channel
from tensorgrid.distributed.rpc.transport import tls
from tensorgrid.distributed.rpc.transport import wire

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A PS and a worker with the test run's certificates; the worker's data channel on a known port."""
    data_port = ports.free_ports(1)[0]
    with LocalCluster(tmp_path_factory.mktemp("tls"), {"ps": 1, "worker": 1}, start=False) as c:
        c.task("ps", 0).start(wait=False)
        c.task("worker", 0).extra_env = {ports.DATA_PORT_ENV: str(data_port)}
        c.task("worker", 0).start()
        c.task("ps", 0).wait_listening()
        c.data_port = data_port
        yield c


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory) -> tls.Credentials:
    """Certificates for localhost from a CA the job does not trust."""
    directory = str(tmp_path_factory.mktemp("other-ca"))
    certificates.write_task_directory(directory, certificates.new_authority("another job's CA"), "outsider")
    return tls.load(directory)


def _get_status(address: str, credentials: grpc.ChannelCredentials | None) -> bytes:
    """The raw answer of the worker's GetStatus, as any gRPC client would ask for it."""
    channel = (grpc.insecure_channel(address) if credentials is None
               else grpc.secure_channel(address, credentials))
    try:
        answer: bytes = channel.unary_unary("/tensorgrid.v1.Worker/GetStatus")(b"", timeout=5)
        return answer
    finally:
        channel.close()


def test_a_job_with_tls_trains(cluster):
    w = cluster_processes.train_three_steps(cluster.target("worker"))
    np.testing.assert_allclose(w, np.full((3, 2), -2.0))


@pytest.mark.parametrize("outsider", ["plaintext", "no client certificate", "another CA"])
def test_grpc_refuses_a_client_outside_the_job(cluster, other_ca, outsider):
    live = tls.from_env()
    assert live is not None
    own = live.current()
    credentials = {
        "plaintext": None,
        "no client certificate": grpc.ssl_channel_credentials(root_certificates=own.ca),
        "another CA": grpc.ssl_channel_credentials(root_certificates=own.ca, private_key=other_ca.key,
                                                   certificate_chain=other_ca.certificate),
    }[outsider]
    with pytest.raises(grpc.RpcError) as refused:
        _get_status(cluster.task("worker").address, credentials)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    # A member of the job is answered, and the job still trains.
    assert _get_status(cluster.task("worker").address, own.grpc_channel())
    np.testing.assert_allclose(cluster_processes.train_three_steps(cluster.target("worker")), -2.0)


def test_a_client_refuses_a_server_of_another_ca(cluster, other_ca):
    """Mutual: a job's task does not talk to an impostor either (the job's CA did not sign it)."""
    impostor_view = grpc.ssl_channel_credentials(root_certificates=other_ca.ca, private_key=other_ca.key,
                                                 certificate_chain=other_ca.certificate)
    with pytest.raises(grpc.RpcError) as refused:
        _get_status(cluster.task("worker").address, impostor_view)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize("outsider", ["plaintext", "another CA"])
def test_data_channel_refuses_a_client_outside_the_job(cluster, other_ca, outsider, monkeypatch):
    live = tls.from_env()
    assert live is not None
    own = live.current()
    # The outsider dials TCP, as from another machine. (On this machine the channel's Unix
    # socket admits processes of the tasks' own user only: test_data_channel_calls.py.)
    monkeypatch.setenv(ports.LOCAL_SOCKETS_ENV, "0")
    if outsider == "plaintext":
        client = data_channel.DataChannelClient(connect_timeout_s=5, io_timeout_s=5)
    else:
        # Trusts the job's CA (so only the server's verdict on its certificate matters).
        context = tls.Credentials(own.ca, other_ca.certificate, other_ca.key, other_ca.directory).client_context
        client = data_channel.DataChannelClient(connect_timeout_s=5, io_timeout_s=5, tls=context)
    try:
        assert client.why_unreachable("localhost", cluster.data_port) != ""
        with pytest.raises(wire.TransportError):
            client.call("localhost", cluster.data_port, data_channel.Method.RUN_STEP, b"", [],
                        buffers.BufferPool(0), 1 << 20)
    finally:
        client.close()
    for unix in ("0", "1"):  # a member is served over TLS, or over the Unix socket without it
        monkeypatch.setenv(ports.LOCAL_SOCKETS_ENV, unix)
        member = data_channel.DataChannelClient(connect_timeout_s=5, io_timeout_s=5, tls=own.client_context)
        try:
            assert member.why_unreachable("localhost", cluster.data_port) == ""
        finally:
            member.close()
    np.testing.assert_allclose(cluster_processes.train_three_steps(cluster.target("worker")), -2.0)


def _server_process(env: dict[str, str], host: str = "localhost") -> subprocess.CompletedProcess[str]:
    port = ports.free_ports(1)[0]
    env = dict(env, TF_CONFIG=json.dumps({"cluster": {"worker": [f"{host}:{port}"]},
                                          "task": {"type": "worker", "index": 0}}))
    return subprocess.run([sys.executable, "-m", "tensorgrid", "server"], env=env, capture_output=True, text=True,
                          timeout=60)


def test_a_task_beyond_this_machine_without_certificates_or_opt_out_does_not_start():
    """On loopback such a task takes its user's CA (test_hand_started_tls.py); elsewhere it needs certificates."""
    env = {k: v for k, v in cluster_processes.task_environment().items()
           if k not in (tls.TLS_DIR_ENV, tls.INSECURE_ENV)}
    result = _server_process(env, host="worker-0.example.com")
    assert result.returncode == 2
    assert tls.TLS_DIR_ENV in result.stderr and f"{tls.INSECURE_ENV}=1" in result.stderr, result.stderr
    assert "`tensorgrid certs" in result.stderr and "worker-0.example.com" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def test_a_task_with_missing_certificate_files_names_them(tmp_path):
    env = dict(cluster_processes.task_environment(), **{tls.TLS_DIR_ENV: str(tmp_path)})
    result = _server_process(env)
    assert result.returncode != 0
    assert "ca.crt" in result.stderr and str(tmp_path) in result.stderr, result.stderr


def test_a_bad_opt_out_value_is_named():
    with pytest.raises(ValueError, match="TENSORGRID_INSECURE='yes'"):
        tls.from_env({tls.INSECURE_ENV: "yes"})


def test_the_explicit_opt_out_runs_without_tls_and_warns(tmp_path, monkeypatch):
    monkeypatch.delenv(tls.TLS_DIR_ENV)
    monkeypatch.setenv(tls.INSECURE_ENV, "1")
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}) as c:
        c.task("ps").wait_for_output("WITHOUT TLS", timeout=30)
        # This process, told so too, trains with it in plaintext.
        np.testing.assert_allclose(cluster_processes.train_three_steps(c.target("worker")), -2.0)


def test_tensorgrid_local_makes_certificates_per_task_and_removes_them(tmp_path):
    program = "import os; print('TLS_DIR=' + os.environ['TENSORGRID_TLS_DIR'])"
    result = subprocess.run([sys.executable, "-m", "tensorgrid", "local", "--ps", "1", "--workers", "1", "--",
                             sys.executable, "-c", program], env=cluster_processes.task_environment(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    directories = {line.split("TLS_DIR=", 1)[1].strip() for line in result.stdout.splitlines() if "TLS_DIR=" in line}
    assert len(directories) == 2, result.stdout  # one per task
    assert os.environ.get(tls.TLS_DIR_ENV) not in directories  # made for this run, not inherited
    assert not any(os.path.exists(d) for d in directories), "the run's certificates must be removed at exit"


def test_a_client_refuses_a_task_of_the_job_whose_certificate_names_another_address(tmp_path, monkeypatch):
    """Each replica of an operator's job shows a certificate naming only its own Service: a member's
    key cannot serve for another replica's address, on gRPC or the data channel (a client checks
    the name it dialed), while the same key serves its own name."""
    authority = certificates.new_authority("a job's CA")
    member = str(tmp_path / "member")
    certificates.write_task_directory(member, authority, "job-worker-1", ["job-worker-1.team.svc"])
    client = tls.load(certificates.write_task_directory(str(tmp_path / "client"), authority, "job-worker-0",
                                                        ["job-worker-0.team.svc"]))
    data_port = ports.free_ports(1)[0]
    monkeypatch.setenv(ports.LOCAL_SOCKETS_ENV, "0")  # TCP and TLS, as between pods
    with LocalCluster(tmp_path, {"ps": 1}, start=False,
                      extra_env={tls.TLS_DIR_ENV: member, ports.DATA_PORT_ENV: str(data_port),
                                 ports.LOCAL_SOCKETS_ENV: "0"}) as cluster:
        task = cluster.task("ps")
        task.start(wait=False)
        task.wait_listening()
        # Dialed as localhost (another replica's address, for this key): refused.
        with pytest.raises(grpc.RpcError) as refused:
            _get_status(task.address, client.grpc_channel())
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        # What a tensorgrid client's error says then (gRPC itself says only that it failed to connect).
        problem = tls.handshake_problem(task.address, client)
        assert problem.endswith("that task's certificate does not name localhost"), problem
        other_ca = tls.load(certificates.write_task_directory(str(tmp_path / "other"),
                                                              certificates.new_authority("another CA"), "o"))
        assert "not of one CA (this process trusts 'CN=another CA'" in tls.handshake_problem(task.address, other_ca)
        channel = data_channel.DataChannelClient(connect_timeout_s=5, io_timeout_s=5, tls=client.client_context)
        try:
            assert "Hostname mismatch" in channel.why_unreachable("localhost", data_port)
        finally:
            channel.close()
        # Dialed by the name its certificate carries: answered.
        port = task.address.rsplit(":", 1)[1]
        own_name = grpc.secure_channel(f"localhost:{port}", client.grpc_channel(),
                                       options=[("grpc.ssl_target_name_override", "job-worker-1.team.svc")])
        try:
            assert own_name.unary_unary("/tensorgrid.v1.Worker/GetStatus")(b"", timeout=5) is not None
        finally:
            own_name.close()
