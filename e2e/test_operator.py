"""The operator as users run it: started by hand with no flags, as docs/operator.md's
"Install and run" says; and two replicas from the chart, the active one killed mid-job."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Iterator

import pytest

from cluster_support import (PROGRESS, KUBECONFIG, OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE, REPO, Namespace, example, kubectl,
                      wait_for)

JOB_TIMEOUT = 900
HELM = pathlib.Path(subprocess.run([str(REPO / "hack" / "tools.sh"), "--print-bin-dir"], check=True,
                                   capture_output=True, text=True).stdout.strip()) / "helm"
RELEASE = "tensorgrid"


def _operator_pods() -> list[str]:
    out = kubectl("-n", OPERATOR_NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/name=tensorgrid-operator",
                  "--field-selector=status.phase=Running", "-o", "name").stdout
    return [line.split("/", 1)[1] for line in out.split()]


def _helm_replicas(count: int) -> None:
    subprocess.run([str(HELM), "--kubeconfig", KUBECONFIG, "upgrade", RELEASE, str(REPO / "charts" / "tensorgrid-operator"),
                    "-n", OPERATOR_NAMESPACE, "--reuse-values", "--set", f"replicas={count}", "--wait",
                    "--timeout", "5m"], check=True, capture_output=True, text=True)
    kubectl("-n", OPERATOR_NAMESPACE, "rollout", "status", f"deployment/{OPERATOR_DEPLOYMENT}", "--timeout=300s")
    wait_for(f"{count} operator pods running", lambda: len(_operator_pods()) == count, 180)


@pytest.fixture
def chart_operator_stopped() -> Iterator[None]:
    """No operator of the chart runs, as before `helm install`. The chart elects its active replica on a
    Lease (leaderElection, its default), so there is no kopf peering object either."""
    kubectl("-n", OPERATOR_NAMESPACE, "scale", f"deployment/{OPERATOR_DEPLOYMENT}", "--replicas=0")
    wait_for("the chart's operator to stop", lambda: not _operator_pods(), 120)
    yield
    kubectl("-n", OPERATOR_NAMESPACE, "scale", f"deployment/{OPERATOR_DEPLOYMENT}", "--replicas=1")
    wait_for("the chart's operator to run again", lambda: len(_operator_pods()) == 1, 180)


def test_operator_started_by_hand_with_no_flags_runs_jobs(ns: Namespace, chart_operator_stopped: None,
                                                         tmp_path: pathlib.Path) -> None:
    log_path = tmp_path / "operator.log"
    env = dict(os.environ, KUBECONFIG=KUBECONFIG)
    with open(log_path, "wb") as log:
        operator = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "tensorgrid-operator")],
                                    env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for("the operator to say how it runs", lambda: "running standalone" in log_path.read_text(), 60)
        assert "clusterkopfpeering/tensorgrid-operator does not exist" in log_path.read_text()
        ns.apply(example("async", steps=300))
        job = ns.wait_state("digits-async", ("Succeeded", "Failed"), JOB_TIMEOUT)
        assert job["status"]["state"] == "Succeeded", job["status"]
    finally:
        operator.terminate()
        operator.wait(timeout=60)
        print(log_path.read_text()[-5000:])


@pytest.fixture
def two_operator_replicas() -> Iterator[None]:
    _helm_replicas(2)
    yield
    _helm_replicas(1)


def test_killing_the_active_operator_replica_mid_job(ns: Namespace, two_operator_replicas: None) -> None:
    ns.apply(example("async", steps=3000, log_every=100))
    ns.wait_log("digits-async-worker-0", PROGRESS, timeout=300)
    pods_before = {p.metadata.name: p.metadata.uid for p in ns.pods()}
    assert len(pods_before) == 3, pods_before

    def active() -> str:
        """The replica holding the chart's Lease (named after the release, as its Deployment is): its
        identity begins with its pod's name."""
        replicas = _operator_pods()
        holder = kubectl("-n", OPERATOR_NAMESPACE, "get", "lease", OPERATOR_DEPLOYMENT, "-o",
                         "jsonpath={.spec.holderIdentity}", check=False).stdout.split("/")[0]
        return holder if len(replicas) == 2 and holder in replicas else ""

    victim = wait_for("one operator replica holding the Lease, the other standing by", active, 120)
    kubectl("-n", OPERATOR_NAMESPACE, "delete", "pod", victim, "--grace-period=0", "--force")

    job = ns.wait_state("digits-async", ("Succeeded", "Failed"), JOB_TIMEOUT)
    assert job["status"]["state"] == "Succeeded", job["status"]
    pods_after = {p.metadata.name: p.metadata.uid for p in ns.pods()}
    replaced = {name for name, uid in pods_after.items() if name in pods_before and pods_before[name] != uid}
    assert not replaced, f"pods created twice across the failover: {replaced}"
    assert job["status"].get("restarts", 0) == 0
