"""Tasks started by hand on one machine speak mutual TLS with no set-up: each process takes a
certificate of its user's CA, kept in the user's state directory (``user_authority``).
Processes of one user train together, a process of another CA is refused by the handshake,
and a cluster reaching beyond this machine still refuses to start without certificates,
naming ``tensorgrid certs``. Real processes, real TLS; each with a fresh ``HOME`` or
``XDG_STATE_HOME``."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

import hand_started
import tensorgrid as tf
from tensorgrid.distributed.rpc import certificates
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc import user_authority
from tensorgrid.distributed.rpc.transport import tls


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_ps_and_a_worker_started_by_hand_train_over_the_users_ca(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = hand_started.environment(str(home))  # no XDG_STATE_HOME: ~/.local/state
    ps_log, worker_log = hand_started.train_one_step(str(tmp_path), env, env, *ports.free_ports(2))
    assert "value 3.0" in worker_log, worker_log
    state = home / ".local" / "state" / "tensorgrid"
    assert _mode(state) == 0o700
    assert _mode(state / "ca.key") == 0o600
    assert sorted(p.name for p in state.iterdir()) == ["ca.crt", "ca.key", "ca.lock"]
    for log in (ps_log, worker_log):
        # Said once per process, naming where the CA is; and both started (concurrently) on one CA.
        assert log.count(f"use mutual TLS with this user's CA in {state}") == 1, log
        assert "TLS certificates valid until" in log, log


def test_tasks_started_at_once_for_the_first_time_agree_on_one_ca(tmp_path: Path) -> None:
    state_home = tmp_path / "state"
    go = tmp_path / "go"
    program = f"""
import hashlib, os, pathlib, time
from tensorgrid.distributed.rpc import user_authority
pathlib.Path({str(tmp_path)!r}, f"ready-{{os.getpid()}}").touch()
while not os.path.exists({str(go)!r}):
    time.sleep(0.002)
authority, where = user_authority.user_authority()
print("ca", hashlib.sha256(authority.certificate_pem).hexdigest(), where, flush=True)
"""
    env = hand_started.environment(str(tmp_path), str(state_home))
    processes = [subprocess.Popen([sys.executable, "-c", program], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < len(processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    go.touch()  # all at once, each making the CA if it finds none
    answers = [p.communicate(timeout=120) for p in processes]
    assert all(p.returncode == 0 for p in processes), answers
    lines = {out.strip() for out, _ in answers}
    ca_file = (state_home / "tensorgrid" / "ca.crt").read_bytes()
    assert lines == {f"ca {hashlib.sha256(ca_file).hexdigest()} {state_home / 'tensorgrid'}"}, answers
    assert sum("made this user's tensorgrid CA" in err for _, err in answers) == 1, answers


def test_a_process_of_another_ca_is_refused_and_one_of_the_same_user_is_served(tmp_path: Path) -> None:
    ps_port, worker_port = ports.free_ports(2)
    cluster = hand_started.cluster_json(ps_port, worker_port)
    user = hand_started.environment(str(tmp_path), str(tmp_path / "user"))
    ps = hand_started.start(hand_started.PS_PROGRAM, [cluster], user, str(tmp_path / "ps.log"))
    try:
        target = f"grpc://localhost:{ps_port}"
        # Another user: another state directory, so another CA.
        other = hand_started.environment(str(tmp_path), str(tmp_path / "other"))
        refused = subprocess.run([sys.executable, "-c", hand_started.CLIENT_PROGRAM, target, "5000"], env=other,
                                 capture_output=True, text=True, timeout=120)
        assert refused.stdout.startswith("error DeadlineExceededError"), refused.stdout + refused.stderr[-3000:]
        assert f"the TLS handshake with localhost:{ps_port} fails" in refused.stdout, refused.stdout
        assert "not of one CA" in refused.stdout and "tensorgrid CA of uid" in refused.stdout, refused.stdout
        # The same user's program, no task itself, is served.
        served = subprocess.run([sys.executable, "-c", hand_started.CLIENT_PROGRAM, target, "60000"], env=user,
                                capture_output=True, text=True, timeout=120)
        assert served.stdout.strip() == "value 5.0", served.stdout + served.stderr[-3000:]
    finally:
        hand_started.stop(ps)
    assert (tmp_path / "other" / "tensorgrid" / "ca.crt").read_bytes() != (
        tmp_path / "user" / "tensorgrid" / "ca.crt").read_bytes()


@pytest.mark.parametrize("cluster", [
    {"ps": ["10.255.255.1:2222"], "worker": ["localhost:0"]},  # one task elsewhere is enough
    {"ps": ["127.example.com:2222"], "worker": ["localhost:0"]},  # names are not resolved
    {"ps": ["ps.example.com:2222"], "worker": ["worker.example.com:0"]},
])
def test_a_cluster_beyond_this_machine_without_certificates_refuses_naming_tensorgrid_certs(
        cluster: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tls.TLS_DIR_ENV, raising=False)
    monkeypatch.delenv(tls.INSECURE_ENV, raising=False)
    with pytest.raises(tls.InsecureNotAllowedError) as refused:
        tf.train.Server(cluster, job_name="worker", task_index=0)
    message = str(refused.value)
    assert "tensorgrid certs" in message and tls.TLS_DIR_ENV in message and f"{tls.INSECURE_ENV}=1" in message
    assert repr(cluster["ps"][0]) in message, message
    assert "localhost" not in message.split("not on this machine")[0], message  # only the others are named
    with pytest.raises(tls.InsecureNotAllowedError, match="tensorgrid certs"):
        with tf.Session(f"grpc://{cluster['ps'][0]}") as sess:  # a client dialing there, too
            sess.run(tf.constant(1.0))
    assert tls.process_directory() is None  # nothing made


@pytest.mark.parametrize("host,local", [
    ("localhost", True), ("LocalHost", True), ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True),
    ("[::1]", True), ("127.example.com", False), ("localhost.example.com", False), ("10.0.0.1", False),
    ("0.0.0.0", False), ("::ffff:127.0.0.1", False), ("ip6-localhost", False), ("fd00::1", False),
])
def test_this_machine_is_localhost_and_loopback_addresses_as_written(host: str, local: bool) -> None:
    assert user_authority.is_this_machine(host) is local


def test_the_state_directory_follows_xdg_state_home_when_absolute() -> None:
    assert user_authority.state_directory({"XDG_STATE_HOME": "/s", "HOME": "/h"}) == "/s/tensorgrid"
    assert user_authority.state_directory({"XDG_STATE_HOME": "relative", "HOME": "/h"}) == "/h/.local/state/tensorgrid"
    assert user_authority.state_directory({"HOME": "/h"}) == "/h/.local/state/tensorgrid"


def test_a_ca_key_readable_by_others_is_refused_not_used(tmp_path: Path) -> None:
    directory = tmp_path / "tensorgrid"
    user_authority.user_authority(str(directory))
    os.chmod(directory / "ca.key", 0o644)
    with pytest.raises(ValueError, match=r"ca\.key.*mode 0644.*readable by it only \(0600\).*remove"):
        user_authority.user_authority(str(directory))


def test_an_open_state_directory_is_closed_and_the_same_ca_kept(tmp_path: Path) -> None:
    directory = tmp_path / "tensorgrid"
    first, _ = user_authority.user_authority(str(directory))
    os.chmod(directory, 0o755)
    again, _ = user_authority.user_authority(str(directory))
    assert _mode(directory) == 0o700 and again.certificate == first.certificate


@pytest.mark.parametrize("damage", ["no key", "other key", "not pem"])
def test_a_damaged_ca_is_named_not_replaced(tmp_path: Path, damage: str) -> None:
    directory = tmp_path / "tensorgrid"
    user_authority.user_authority(str(directory))
    key = directory / "ca.key"
    if damage == "no key":
        key.unlink()
    elif damage == "other key":
        other = certificates.new_authority("another")
        key.write_bytes(other.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
    else:
        key.write_bytes(b"not a key")
    before = (directory / "ca.crt").read_bytes()
    with pytest.raises(ValueError, match=f"remove '{directory}' to make a new CA"):
        user_authority.user_authority(str(directory))
    assert (directory / "ca.crt").read_bytes() == before
