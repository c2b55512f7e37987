"""Leader election on a coordination.k8s.io Lease (``--leader-election``): only the holder reconciles.

The rule (``cluster.leader_lease.verdict``) is checked as a table; then operator processes share a
Lease on the real API server: the first leads and makes a job's pods, the second stands by and says
why in its log and its metrics (``tensorgrid_operator_active`` 0, ``tensorgrid_operator_lease_holder_info``
naming the holder) and makes nothing; stopped (SIGTERM), the leader releases the Lease and the standby
takes over at once. A Lease left unrenewed (a killed holder) is taken over once the standby has seen it
unchanged for the lease duration: two electors on the API server, the standby's clock the test's. The
operators watch a namespace of their own (not tg-*, the in-process operator's), so what they make is theirs.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Iterator, Optional

import pytest
from prometheus_client.parser import text_string_to_metric_families

from operator_cluster import ControlPlane, Namespace, free_port, job_manifest, namespace_of_stopped_operators, wait_for
from tensorgrid_operator.cluster import leader_lease

ROOT = pathlib.Path(__file__).resolve().parents[3]
NOW = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
LEASE = "tensorgrid-operator-test"
DURATION = 4


@pytest.mark.parametrize("spec, unchanged_for, lead, holder, transitions", [
    (None, 0, True, "me", 0),  # no Lease yet: create it
    ({"holderIdentity": "me", "leaseDurationSeconds": 15, "leaseTransitions": 2}, 0, True, "me", 2),  # renew
    ({"holderIdentity": "other", "leaseDurationSeconds": 15, "leaseTransitions": 2}, 14.9, False, "other", None),
    ({"holderIdentity": "other", "leaseDurationSeconds": 15, "leaseTransitions": 2}, 15, True, "me", 3),  # expired
    ({"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 2}, 0, True, "me", 3),  # released
])
def test_the_lease_rule(spec: Optional[dict[str, object]], unchanged_for: float, lead: bool, holder: str,
                        transitions: Optional[int]) -> None:
    decided = leader_lease.verdict(spec, "me", 15, unchanged_for, NOW)
    assert (decided.lead, decided.holder) == (lead, holder), decided.reason
    if transitions is None:
        assert decided.write is None and "other holds it" in decided.reason
    else:
        assert decided.write is not None
        assert decided.write["holderIdentity"] == "me" and decided.write["leaseTransitions"] == transitions
        assert decided.write["renewTime"] == "2030-01-01T00:00:00.000000Z"


class Replica:
    """One operator process taking part in the election, its log and /metrics."""

    def __init__(self, cp: ControlPlane, namespace: str, name: str, log_dir: pathlib.Path) -> None:
        self.name = name
        self.metrics_port = free_port()
        self.log = log_dir / f"{name}.log"
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "runtime"), str(ROOT / "operator"),
                                             env.get("PYTHONPATH", "")])
        env["POD_ID"] = name  # the identity's first part, as the chart's pods set it
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tensorgrid_operator", "-n", namespace, "--kubeconfig", cp.kubeconfig,
                 "--leader-election", LEASE, "--leader-election-namespace", namespace,
                 "--lease-duration-seconds", str(DURATION), "--metrics-port", str(self.metrics_port),
                 "--liveness-port", str(free_port()), "--progress-interval-seconds", "0",
                 "--resync-seconds", "5"], stdout=out, stderr=subprocess.STDOUT, env=env)

    def said(self, text: str) -> bool:
        return text in self.log.read_text(errors="replace")

    def metric(self, name: str, **labels: str) -> Optional[float]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2) as page:
                text = page.read().decode()
        except OSError:
            return None
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return float(sample.value)
        return None

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(30)


def _holder(cp: ControlPlane, namespace: str) -> str:
    out = cp.kubectl("get", "lease", LEASE, "-n", namespace, "-o", "jsonpath={.spec.holderIdentity}", check=False)
    return out.stdout.strip() if out.returncode == 0 else ""


@pytest.fixture
def lease_namespace(controlplane: ControlPlane, tmp_path: pathlib.Path) -> Iterator[Namespace]:
    with namespace_of_stopped_operators(controlplane, "lease") as created:
        yield created


@pytest.mark.controlplane
def test_a_standby_takes_an_unrenewed_lease_over_only_once_it_expired(controlplane: ControlPlane,
                                                                       lease_namespace: Namespace) -> None:
    """Two electors on the API server, the standby's clock driven by the test: no waiting."""
    from tensorgrid_operator.cluster import kube

    configuration = kube.load_config(controlplane.kubeconfig)
    now = [0.0]
    holder = leader_lease.LeaseElector(configuration, lease_namespace.name, LEASE, "holder", DURATION)
    standby = leader_lease.LeaseElector(configuration, lease_namespace.name, LEASE, "standby", DURATION,
                                        clock=lambda: now[0])
    try:
        assert holder.attempt().lead
        assert not standby.attempt().lead
        now[0] = DURATION - 0.5
        assert not standby.attempt().lead, "taken over before the Lease expired"
        assert holder.attempt().lead  # renewed: the standby's wait starts again
        now[0] = DURATION + 1
        assert not standby.attempt().lead
        now[0] = 2 * DURATION + 1
        took = standby.attempt()
        assert took.lead and "took it over from holder" in took.reason
        assert _holder(controlplane, lease_namespace.name) == "standby"
        lost = holder.attempt()
        assert not lost.lead and lost.holder == "standby"
        assert standby.release() is None and holder.release() == "nobody holds it"
        assert holder.attempt().lead, "a released Lease is taken at once"
    finally:
        holder.close()
        standby.close()


@pytest.mark.controlplane
def test_only_the_lease_holder_reconciles_and_a_standby_takes_over(controlplane: ControlPlane,
                                                                   lease_namespace: Namespace,
                                                                   tmp_path: pathlib.Path) -> None:
    cp, ns = controlplane, lease_namespace
    replicas = {name: Replica(cp, ns.name, name, tmp_path) for name in ("first", "second")}
    try:
        wait_for(lambda: _holder(cp, ns.name).split("/")[0] in replicas, 60, "a replica to hold the Lease",
                 lambda: {n: r.log.read_text() for n, r in replicas.items()})
        holder = _holder(cp, ns.name)
        leader = replicas[holder.split("/")[0]]
        (standby,) = [r for r in replicas.values() if r is not leader]
        wait_for(lambda: standby.said(f"standing by, not reconciling: the Lease {ns.name}/{LEASE}: {holder} holds it"),
                 60, "the standby to say why it is idle", lambda: standby.log.read_text())
        wait_for(lambda: standby.metric("tensorgrid_operator_lease_holder_info", holder=holder) == 1.0, 30,
                 "the standby's lease_holder_info to name the holder")
        assert standby.metric("tensorgrid_operator_active") == 0.0

        ns.apply(job_manifest("alpha", ps=1, workers=1))
        wait_for(lambda: set(ns.pods()) == {"alpha-ps-0", "alpha-worker-0"}, 60, "alpha's pods")
        wait_for(lambda: leader.metric("tensorgrid_operator_jobs_created_total", job_namespace=ns.name) == 1.0, 30,
                 "the holder to count the job it made")
        assert leader.metric("tensorgrid_operator_active") == 1.0
        assert standby.metric("tensorgrid_operator_jobs_created_total", job_namespace=ns.name) is None
        assert not standby.said("leading:")

        # Stopped, the holder releases the Lease: the standby takes over within a retry period or two, not
        # after the lease duration, and reconciles.
        assert leader.stop(signal.SIGTERM) == 0
        assert leader.said(f"released the Lease {ns.name}/{LEASE}")
        released = time.monotonic()
        wait_for(lambda: _holder(cp, ns.name).startswith(f"{standby.name}/"), 30, "the standby to take the Lease")
        assert time.monotonic() - released < DURATION, "the released Lease was waited out, not taken over"
        assert standby.said("leading: took it over: its last holder released it")
        ns.apply(job_manifest("beta", ps=1, workers=1))
        wait_for(lambda: {"beta-ps-0", "beta-worker-0"} <= set(ns.pods()), 90, "beta's pods, by the new holder",
                 lambda: standby.log.read_text())
        wait_for(lambda: standby.metric("tensorgrid_operator_active") == 1.0, 30, "the new holder to be active")
    finally:
        for replica in replicas.values():
            replica.stop(signal.SIGKILL)


def test_the_flags_name_the_lease_and_refuse_what_cannot_work(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from tensorgrid_operator import cli

    monkeypatch.setenv("POD_NAMESPACE", "tensorgrid-system")
    settings = cli.parse_args(["--leader-election", "tensorgrid-operator"])
    assert (settings.leader_election_lease, settings.leader_election_namespace) == ("tensorgrid-operator",
                                                                                  "tensorgrid-system")
    assert settings.peering is None and settings.lease_duration_seconds == 15  # kopf runs standalone
    assert cli.parse_args([]).leader_election_lease is None
    for argv, message in ((["--leader-election", "x", "--peering", "p"], "both elect the active replica"),
                          (["--lease-duration-seconds", "1"], "must be >= 2")):
        with pytest.raises(SystemExit):
            cli.parse_args(argv)
        assert message in capsys.readouterr().err
    monkeypatch.delenv("POD_NAMESPACE")
    with pytest.raises(SystemExit):
        cli.parse_args(["--leader-election", "x"])
    assert "needs --leader-election-namespace" in capsys.readouterr().err
