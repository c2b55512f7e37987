"""Where a task listens: loopback for a task addressed as localhost (``tensorgrid local``,
tests), every interface for a task with a real name (a pod), ``TENSORGRID_BIND_ADDRESS``
over both. Nothing outside the machine reaches a loopback cluster."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

import tensorgrid as tf
from tensorgrid.distributed.rpc import ports


@pytest.mark.parametrize("address, env, expected", [
    ("localhost:2222", "", "127.0.0.1"),
    ("127.0.0.1:2222", "", "127.0.0.1"),
    ("[::1]:2222", "", "::1"),
    ("digits-ps-0.team.svc:2222", "", ""),
    ("10.244.0.7:2222", "", ""),
    ("localhost:2222", "0.0.0.0", ""),
    ("digits-ps-0.team.svc:2222", "10.0.0.5", "10.0.0.5"),
])
def test_listen_host(monkeypatch, address, env, expected):
    monkeypatch.setenv(ports.BIND_ADDRESS_ENV, env)
    assert ports.listen_host(address) == expected


def _external_ipv4() -> str:
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True)
    addresses = [line.split()[3].split("/")[0] for line in out.stdout.splitlines() if len(line.split()) > 3]
    if not addresses:
        message = "this machine has no non-loopback IPv4 address to try from"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI machines have one: {message}")
        pytest.skip(message)
    return addresses[0]


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def test_a_loopback_task_is_not_reachable_from_other_interfaces(monkeypatch):
    monkeypatch.delenv(ports.BIND_ADDRESS_ENV, raising=False)
    external = _external_ipv4()
    port = ports.free_ports(1)[0]
    server = tf.train.Server({"ps": [f"localhost:{port}"]}, job_name="ps", task_index=0)
    try:
        data_port = server._serving.transport.data_server.port
        assert _reachable("127.0.0.1", port) and _reachable("127.0.0.1", data_port)
        assert not _reachable(external, port), f"gRPC port {port} answers on {external}"
        assert not _reachable(external, data_port), f"data port {data_port} answers on {external}"
    finally:
        server.stop()


def test_a_loopback_tasks_metrics_are_not_reachable_from_other_interfaces(monkeypatch):
    monkeypatch.delenv(ports.BIND_ADDRESS_ENV, raising=False)
    external = _external_ipv4()
    port, metrics_port = ports.free_ports(2)
    server = tf.train.Server({"ps": [f"localhost:{port}"]}, job_name="ps", task_index=0, metrics_port=metrics_port)
    try:
        assert _reachable("127.0.0.1", metrics_port)
        assert not _reachable(external, metrics_port), f"metrics port {metrics_port} answers on {external}"
    finally:
        server.stop()


def test_a_task_named_by_its_address_listens_on_every_interface(monkeypatch):
    monkeypatch.delenv(ports.BIND_ADDRESS_ENV, raising=False)
    external = _external_ipv4()
    port = ports.free_ports(1)[0]
    server = tf.train.Server({"ps": [f"{external}:{port}"]}, job_name="ps", task_index=0)
    try:
        assert _reachable(external, port) and _reachable("127.0.0.1", port)
    finally:
        server.stop()
