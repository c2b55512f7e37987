"""A leading operator that loses its Lease stops at once, before anyone else may lead.

An operator process runs with ``--leader-election`` on the real API server, leads and makes a job's
pods; then it loses the Lease in the two ways a holder does, and must exit (status 4, a log line
saying why, so that its pod restarts as a standby) within the renew deadline, writing nothing more
(the process is gone: it touches no job and no Lease after):

- another candidate wrote its own holderIdentity into the Lease (as it does once it has seen the
  Lease unrenewed for the lease duration): the holder reads that at its next renewal;
- its renewals cannot reach the API server: its connection hangs (a proxy between them stops relaying,
  as a network that drops packets does, with no reset), so no call returns an error. It must stop
  when the renew deadline passes, before the lease duration after which a standby takes over.

A slow API server (each answer late by more than a quarter of the renew deadline, as on a loaded
control plane) does not make the holder lose its Lease: each renewal is one call, given until the
deadline.

A Lease deleted under its holder is not lost: the holder creates it again at its next renewal (as
client-go's elector does), says so in its log, and goes on reconciling.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from typing import Any, Iterator

import pytest
import yaml

from operator_cluster import ControlPlane, Namespace, free_port, job_manifest, namespace_of_stopped_operators, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[3]
LEASE = "tensorgrid-operator-lost"
DURATION = 6  # seconds: the operator renews every 0.8 s and stops after 4 s without a renewal
RENEW_DEADLINE = DURATION * 2 / 3
LOST = "stopping at once, exit status 4: "


class FreezableProxy:
    """A TCP relay to the API server that the test can freeze: it then keeps every connection, old and
    new, open and relays nothing, so the operator's calls neither return nor fail. Or slow it down:
    each answer then comes ``delay`` seconds late, as from an API server on a loaded control plane."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._frozen, self._closed = threading.Event(), threading.Event()
        self._sockets: list[socket.socket] = []
        self.delay = 0.0
        threading.Thread(target=self._accept, name="proxy accept", daemon=True).start()

    def freeze(self) -> None:
        self._frozen.set()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for s in self._sockets:
            s.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
                upstream = socket.create_connection(self._target)
            except OSError:
                return
            self._sockets += [client, upstream]
            asked = threading.Event()  # a request went up since the last answer came down
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._relay, args=(source, sink, asked, source is upstream),
                                 name="proxy relay", daemon=True).start()

    def _relay(self, source: socket.socket, sink: socket.socket, asked: threading.Event, answers: bool) -> None:
        handshake = 2  # the server's TLS handshake flights pass at once: only the API server's answers are slow
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            while self._frozen.is_set() and not self._closed.is_set():
                self._closed.wait(0.05)  # hold what came in: nothing passes while frozen
            if not data or self._closed.is_set():
                return
            if not answers:
                asked.set()
            elif asked.is_set():
                asked.clear()
                if handshake:
                    handshake -= 1
                elif self.delay:
                    self._closed.wait(self.delay)  # the answer's first bytes come late
            try:
                sink.sendall(data)
            except OSError:
                return


def _kubeconfig_through(cp: ControlPlane, proxy: FreezableProxy, path: pathlib.Path) -> str:
    """The admin kubeconfig with the API server's address replaced by the proxy's (same certificates:
    the server's names 127.0.0.1)."""
    config = yaml.safe_load(pathlib.Path(cp.kubeconfig).read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def _api_server(cp: ControlPlane) -> tuple[str, int]:
    server = yaml.safe_load(pathlib.Path(cp.kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
    address = urllib.parse.urlsplit(server)
    assert address.hostname == "127.0.0.1" and address.port, server
    return address.hostname, address.port


class LeadingOperator:
    """An operator process in the election on ``LEASE``, watching one namespace, and its log."""

    def __init__(self, kubeconfig: str, namespace: str, log: pathlib.Path) -> None:
        self.log = log
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "runtime"), str(ROOT / "operator"), env.get("PYTHONPATH", "")])
        env["POD_ID"] = "lost-lease"
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tensorgrid_operator", "-n", namespace, "--kubeconfig", kubeconfig,
                 "--leader-election", LEASE, "--leader-election-namespace", namespace,
                 "--lease-duration-seconds", str(DURATION), "--metrics-port", "off",
                 "--liveness-port", str(free_port()), "--progress-interval-seconds", "0", "--resync-seconds", "5"],
                stdout=out, stderr=subprocess.STDOUT, env=env)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def leads(self) -> None:
        wait_for(lambda: "leading: created the Lease" in self.text(), 60, "the operator to lead", self.text)

    def seconds_to_exit(self, since: float, limit: float) -> float:
        """Seconds from ``since`` (monotonic) until the process exited; fails after ``limit`` seconds."""
        try:
            self.process.wait(limit)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the operator still runs {limit:.0f}s after it lost the Lease:\n{self.text()[-3000:]}")
        return time.monotonic() - since

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


@pytest.fixture
def namespace_of_its_own(controlplane: ControlPlane) -> Iterator[Namespace]:
    """Not tg-*, the in-process operator's: what the job gets here is this operator's doing."""
    with namespace_of_stopped_operators(controlplane, "lost-lease") as created:
        yield created


def _leases(cp: ControlPlane) -> Any:
    import kubernetes

    return kubernetes.client.CoordinationV1Api(cp.api)


def _lease(cp: ControlPlane, namespace: str) -> Any:
    return _leases(cp).read_namespaced_lease(LEASE, namespace).to_dict()


@pytest.mark.controlplane
def test_a_holder_that_finds_another_in_its_lease_stops_within_the_renew_deadline(
        controlplane: ControlPlane, namespace_of_its_own: Namespace, tmp_path: pathlib.Path) -> None:
    cp, ns = controlplane, namespace_of_its_own
    operator = LeadingOperator(cp.kubeconfig, ns.name, tmp_path / "operator.log")
    try:
        operator.leads()
        ns.apply(job_manifest("alpha", ps=1, workers=1))
        wait_for(lambda: set(ns.pods()) == {"alpha-ps-0", "alpha-worker-0"}, 60, "alpha's pods", operator.text)
        # Another candidate takes the Lease over, as it would once it saw it unrenewed for the lease duration.
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        taken = time.monotonic()
        _leases(cp).patch_namespaced_lease(LEASE, ns.name, {"spec": {
            "holderIdentity": "usurper", "acquireTime": now, "renewTime": now, "leaseTransitions": 1}})
        written = _lease(cp, ns.name)["metadata"]
        took = operator.seconds_to_exit(taken, 30)
        assert operator.process.returncode == 4, operator.text()[-3000:]
        assert took < RENEW_DEADLINE, f"stopped {took:.1f}s after losing the Lease: {operator.text()[-3000:]}"
        assert f"{LOST}the Lease {ns.name}/{LEASE} is no longer this replica's: usurper holds it" in operator.text()
        # It wrote nothing after: the Lease is still the usurper's, unchanged.
        after = _lease(cp, ns.name)
        assert after["spec"]["holder_identity"] == "usurper"
        assert after["metadata"]["resource_version"] == written["resource_version"]
    finally:
        operator.kill()


@pytest.mark.controlplane
def test_a_holder_whose_renewals_hang_stops_at_the_renew_deadline_before_the_lease_expires(
        controlplane: ControlPlane, namespace_of_its_own: Namespace, tmp_path: pathlib.Path) -> None:
    cp, ns = controlplane, namespace_of_its_own
    proxy = FreezableProxy(*_api_server(cp))
    operator = LeadingOperator(_kubeconfig_through(cp, proxy, tmp_path / "through-proxy.kubeconfig"), ns.name,
                               tmp_path / "operator.log")
    try:
        operator.leads()
        renewed = _lease(cp, ns.name)["spec"]["renew_time"]
        wait_for(lambda: _lease(cp, ns.name)["spec"]["renew_time"] != renewed, 10,
                 "a renewal through the proxy")
        cut = time.monotonic()
        proxy.freeze()
        took = operator.seconds_to_exit(cut, 30)
        assert operator.process.returncode == 4, operator.text()[-3000:]
        assert f"{LOST}the Lease {ns.name}/{LEASE} was not renewed for {RENEW_DEADLINE:.0f}s" in operator.text()
        # Within a renewal period of the deadline, and before a standby could take the Lease over.
        assert took < DURATION, f"stopped {took:.1f}s after its connection hung: {operator.text()[-3000:]}"
        assert _lease(cp, ns.name)["spec"]["holder_identity"].startswith("lost-lease/")
    finally:
        operator.kill()
        proxy.close()


@pytest.mark.controlplane
def test_a_holder_whose_lease_is_deleted_creates_it_again_and_goes_on_leading(
        controlplane: ControlPlane, namespace_of_its_own: Namespace, tmp_path: pathlib.Path) -> None:
    cp, ns = controlplane, namespace_of_its_own
    operator = LeadingOperator(cp.kubeconfig, ns.name, tmp_path / "operator.log")
    try:
        operator.leads()
        holder = _lease(cp, ns.name)["spec"]["holder_identity"]
        _leases(cp).delete_namespaced_lease(LEASE, ns.name)
        wait_for(lambda: f"the Lease {ns.name}/{LEASE} was not as this replica left it: created the Lease again "
                         "(it had been deleted), still leading" in operator.text(), 30, "the holder to create the Lease again",
                 operator.text)
        again = _lease(cp, ns.name)["spec"]
        assert again["holder_identity"] == holder and again["lease_transitions"] == 0
        # Still the active operator: a job applied after the deletion gets its pods.
        ns.apply(job_manifest("beta", ps=1, workers=1))
        wait_for(lambda: set(ns.pods()) == {"beta-ps-0", "beta-worker-0"}, 60, "beta's pods", operator.text)
        assert operator.process.poll() is None, operator.text()[-3000:]
        assert LOST not in operator.text()
    finally:
        operator.kill()


@pytest.mark.controlplane
def test_a_holder_renews_through_a_slow_api_server(controlplane: ControlPlane, namespace_of_its_own: Namespace,
                                                   tmp_path: pathlib.Path) -> None:
    cp, ns = controlplane, namespace_of_its_own
    proxy = FreezableProxy(*_api_server(cp))
    proxy.delay = RENEW_DEADLINE / 4 + 0.1  # > a quarter of the deadline, which each call had before
    operator = LeadingOperator(_kubeconfig_through(cp, proxy, tmp_path / "through-proxy.kubeconfig"), ns.name,
                               tmp_path / "operator.log")
    try:
        operator.leads()
        renewals = []
        for _ in range(3):  # three lease durations: renewed all along, never stopped
            seen = _lease(cp, ns.name)["spec"]["renew_time"]
            wait_for(lambda: _lease(cp, ns.name)["spec"]["renew_time"] != seen, DURATION,
                     "a renewal through the slow proxy", operator.text)
            renewals.append(seen)
            time.sleep(DURATION - RENEW_DEADLINE)
        assert operator.process.poll() is None, operator.text()[-3000:]
        assert LOST not in operator.text() and "could not renew" not in operator.text(), operator.text()[-3000:]
    finally:
        operator.kill()
        proxy.close()
