"""``tensorgrid certs``: the certificates of a cluster across machines, from its spec or
TF_CONFIG, one directory per task for ``TENSORGRID_TLS_DIR``; tasks started by hand with them
train (real processes, real TLS), and bad input gets a clear error, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509

import hand_started
from tensorgrid import cli
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc.transport import tls


def _certs(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tensorgrid", "certs", *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_tasks_started_by_hand_with_its_directories_train(tmp_path: Path) -> None:
    ps_port, worker_port = ports.free_ports(2)
    state_home = tmp_path / "state"
    env = hand_started.environment(str(tmp_path), str(state_home))
    made = _certs("--cluster", hand_started.cluster_json(ps_port, worker_port), "--out", str(tmp_path / "certs"),
                  env=env)
    assert made.returncode == 0, made.stderr
    for job in ("ps", "worker"):
        assert f"{tls.TLS_DIR_ENV}={tmp_path / 'certs' / f'{job}-0'}" in made.stdout, made.stdout
    with_dir = {job: dict(env, **{tls.TLS_DIR_ENV: str(tmp_path / "certs" / f"{job}-0")}) for job in ("ps", "worker")}
    _, worker_log = hand_started.train_one_step(str(tmp_path), with_dir["ps"], with_dir["worker"], ps_port,
                                                worker_port)
    assert "value 3.0" in worker_log, worker_log
    assert not state_home.exists()  # the given certificates, not the user's CA


def test_each_task_gets_a_certificate_of_one_ca_naming_its_host_from_tf_config(tmp_path: Path) -> None:
    cluster = {"ps": ["10.0.0.1:2222"], "worker": ["w0.example.com:2222", "[fd00::2]:2222"]}
    env = hand_started.environment(str(tmp_path), str(tmp_path / "state"),
                                   {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "ps", "index": 0}})})
    made = _certs("--out", str(tmp_path / "certs"), env=env)
    assert made.returncode == 0, made.stderr
    assert "scp -rp" in made.stdout and f"w0.example.com: {tls.TLS_DIR_ENV}=$HOME/tensorgrid-tls-worker-0" in (
        made.stdout), made.stdout
    out = tmp_path / "certs"
    authority = x509.load_pem_x509_certificate((out / "ca.crt").read_bytes())
    assert sorted(os.listdir(out)) == ["ca.crt", "ps-0", "worker-0", "worker-1"]  # no CA key kept
    for directory, host in (("ps-0", "10.0.0.1"), ("worker-0", "w0.example.com"), ("worker-1", "fd00::2")):
        task = out / directory
        assert (task / "ca.crt").read_bytes() == (out / "ca.crt").read_bytes()
        assert os.stat(task / "tls.key").st_mode & 0o077 == 0
        certificate = x509.load_pem_x509_certificate((task / "tls.crt").read_bytes())
        certificate.verify_directly_issued_by(authority)
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        written = [str(n) for n in names.get_values_for_type(x509.DNSName)] + [
            str(a) for a in names.get_values_for_type(x509.IPAddress)]
        assert host in written and "localhost" in written, written
        assert not any(h in written for h in ("10.0.0.1", "w0.example.com", "fd00::2") if h != host), written
        tls.load(str(task))  # usable as TENSORGRID_TLS_DIR


@pytest.mark.parametrize("args,environ,error", [
    (["--cluster", '{"ps": ["h:1"'], {}, "--cluster is not valid JSON"),
    (["--cluster", "{}"], {}, "--cluster has no task"),
    (["--cluster", '{"ps": []}'], {}, "--cluster has no task"),
    (["--cluster", '{"ps": ["nohost"]}'], {}, "Address of /job:ps/task:0: 'nohost' is not 'host:port'"),
    (["--cluster", '["h:1"]'], {}, "ClusterSpec takes a dict of job name"),
    ([], {}, "give the cluster: --cluster"),
    ([], {"TF_CONFIG": '{"cluster": '}, "TF_CONFIG is not valid JSON"),
    ([], {"TF_CONFIG": '{"task": {"type": "ps", "index": 0}}'}, "TF_CONFIG's cluster has no task"),
    (["--cluster", '{"ps": ["h:1"]}', "--days", "0"], {}, "--days 0: the certificates must be valid"),
])
def test_bad_input_is_named(args: list[str], environ: dict[str, str], error: str, tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["certs", *args, "--out", str(tmp_path / "out")]) == 2
    assert error in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_output_directory_in_use_is_written_only_with_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                                ) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    cluster = ["--cluster", '{"ps": ["h:1"]}', "--out", str(out)]
    assert cli.main(["certs", *cluster]) == 2
    assert "is not empty: name a new directory, or pass --force" in capsys.readouterr().err
    assert sorted(os.listdir(out)) == ["notes.txt"]
    (out / "ps-0").mkdir(mode=0o755)
    (out / "ps-0" / "tls.key").write_text("old")
    os.chmod(out / "ps-0" / "tls.key", 0o644)
    assert cli.main(["certs", *cluster, "--force"]) == 0
    assert sorted(os.listdir(out)) == ["ca.crt", "notes.txt", "ps-0"]
    assert os.stat(out / "ps-0" / "tls.key").st_mode & 0o777 == 0o600  # a key replaced is private too
    tls.load(str(out / "ps-0"))
    (tmp_path / "file").write_text("")
    assert cli.main(["certs", "--cluster", '{"ps": ["h:1"]}', "--out", str(tmp_path / "file")]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
