"""Kubeflow TFJobs served by the operator itself (``--serve-tfjob``), on a real API server: Kubeflow's own
example manifests, applied unchanged as TFJobs, get their pods and a status shaped as Kubeflow writes it;
an operator asked to serve TFJob under a CRD that is not the chart's refuses to start, saying why.

The operator runs as ``tensorgrid-operator`` does, in a process of its own (its TFJob handlers are
registered only in an operator that serves TFJob), watching one namespace that is not ``tg-*``, so the
session's operator leaves it alone. The chart's TFJob CRD is installed for the module and removed after.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import uuid
from typing import Any, Iterator

import pytest
import yaml

from kube_controlplane import ControlPlane, wait_crds_established, wait_for
from operator_cluster import Namespace, created_namespace

pytestmark = pytest.mark.controlplane

ROOT = pathlib.Path(__file__).resolve().parents[3]
KUBEFLOW_EXAMPLES = ROOT / "tests" / "operator" / "data" / "kubeflow_tfjob"
TFJOB_CRD = ROOT / "charts" / "tensorgrid-operator" / "files" / "tfjobs.kubeflow.org.yaml"
CRD_NAME = "tfjobs.kubeflow.org"


def operator_process(cp: ControlPlane, namespace: str, log: pathlib.Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "runtime"), str(ROOT / "operator"), env.get("PYTHONPATH", "")])
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tensorgrid_operator", "--serve-tfjob", "--standalone", "-n", namespace,
             "--kubeconfig", cp.kubeconfig, "--metrics-port", "off", "--liveness-port", "off",
             "--resync-seconds", "5", "--progress-interval-seconds", "0", "--retry-delay-seconds", "1",
             "--max-retry-delay-seconds", "2"], stdout=out, stderr=subprocess.STDOUT, env=env)


def apply_crd(cp: ControlPlane, crd: dict[str, Any]) -> None:
    cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps(crd))
    wait_crds_established(cp, CRD_NAME)


@pytest.fixture(scope="module")
def tfjob_crd(controlplane: ControlPlane) -> Iterator[dict[str, Any]]:
    crd: dict[str, Any] = yaml.safe_load(TFJOB_CRD.read_text())
    yield crd
    # TFJobs a failed test left keep the operator's finalizer, which no operator removes once it stopped.
    left = controlplane.kubectl("get", "tfjobs", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace} "
                                "{.metadata.name}{\"\\n\"}{end}", check=False).stdout.split("\n")
    for namespace, name in (line.split() for line in left if line.strip()):
        controlplane.kubectl("patch", "tfjob", name, "-n", namespace, "--type=merge",
                             "-p", '{"metadata":{"finalizers":null}}', check=False)
    controlplane.kubectl("delete", "crd", CRD_NAME, "--ignore-not-found", "--wait=true")


def test_it_refuses_to_serve_tfjob_under_another_controllers_crd(controlplane: ControlPlane,
                                                                  tfjob_crd: dict[str, Any],
                                                                  tmp_path: pathlib.Path) -> None:
    kubeflows = json.loads(json.dumps(tfjob_crd))
    del kubeflows["metadata"]["annotations"]["tensorgrid.io/installed-by"]  # as Kubeflow's chart installs it
    apply_crd(controlplane, kubeflows)
    process = operator_process(controlplane, "default", tmp_path / "operator.log")
    try:
        assert process.wait(timeout=60) == 3
    finally:
        process.kill()
    log = (tmp_path / "operator.log").read_text()
    assert "refusing to serve TFJob (--serve-tfjob)" in log and "not installed by tensorgrid's chart" in log, log


def kubelet_reports(namespace: Namespace, pod: str, phase: str, exit_code: int | None = None) -> None:
    """What the kubelet would say of the pod's container, ``tensorflow`` (Kubeflow's name)."""
    if exit_code is None:
        state: dict[str, Any] = {"running": {"startedAt": "2030-01-01T00:00:00Z"}}
    else:
        state = {"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                                "startedAt": "2030-01-01T00:00:00Z", "finishedAt": "2030-01-01T00:00:01Z"}}
    namespace.cp.core.patch_namespaced_pod_status(pod, namespace.name, {"status": {"phase": phase, "containerStatuses": [{
        "name": "tensorflow", "image": "tf", "imageID": "", "ready": exit_code is None, "restartCount": 0,
        "started": exit_code is None, "state": state}]}})


def test_kubeflows_examples_applied_as_tfjobs_run_with_kubeflows_status(controlplane: ControlPlane,
                                                                          tfjob_crd: dict[str, Any],
                                                                          tmp_path: pathlib.Path) -> None:
    apply_crd(controlplane, tfjob_crd)
    examples = sorted(p for p in KUBEFLOW_EXAMPLES.glob("*.yaml") if yaml.safe_load(p.read_text())["kind"] == "TFJob")
    assert len(examples) == 4
    with created_namespace(controlplane, f"tfjob-{uuid.uuid4().hex[:8]}") as namespace:
        process = operator_process(controlplane, namespace.name, tmp_path / "operator.log")
        try:
            for path in examples:  # as a user would: kubectl apply of Kubeflow's file, moved to the test's namespace
                tfjob = yaml.safe_load(path.read_text())
                tfjob["metadata"]["namespace"] = namespace.name
                controlplane.kubectl("apply", "-f", "-", stdin=json.dumps(tfjob))
            expected = {}
            for path in examples:
                tfjob = yaml.safe_load(path.read_text())
                name = tfjob["metadata"]["name"]
                expected[name] = {f"{name}-{role.lower()}-{i}" for role, spec in tfjob["spec"]["tfReplicaSpecs"].items()
                                  for i in range(spec.get("replicas", 1))}
            for name, pods in expected.items():
                namespace.wait_pods(name, pods, timeout=60)
            dist = "dist-mnist-for-e2e-test"
            for pod in expected[dist]:
                kubelet_reports(namespace, pod, "Running")
            wait_for(lambda: condition(controlplane, namespace, dist, "Running") == "True", 60,
                     "the TFJob to be Running", lambda: tfjob_status(controlplane, namespace, dist))
            kubelet_reports(namespace, f"{dist}-chief-0", "Succeeded", exit_code=0)
            wait_for(lambda: condition(controlplane, namespace, dist, "Succeeded") == "True", 60,
                     "the TFJob to succeed", lambda: tfjob_status(controlplane, namespace, dist))
            status = tfjob_status(controlplane, namespace, dist)
            pods_after = namespace.pods(dist)
            simple = tfjob_status(controlplane, namespace, "tfjob-simple")
            # runPolicy.ttlSecondsAfterFinished, set on the finished TFJob: it goes, and its TrainingJob with it.
            controlplane.custom.patch_namespaced_custom_object("kubeflow.org", "v1", namespace.name, "tfjobs", dist, {
                "spec": {"runPolicy": {"ttlSecondsAfterFinished": 1}}})
            wait_for(lambda: not tfjob_exists(controlplane, namespace, dist) and namespace.job(dist) is None, 60,
                     "the TFJob and its TrainingJob to be deleted after their TTL")
            # Deleted while the operator runs: it lets them go (the finalizer of its loops), and the pods with them.
            controlplane.kubectl("delete", "tfjobs", "--all", "-n", namespace.name, "--wait=true", "--timeout=60s")
        except AssertionError as e:
            raise AssertionError(f"{e}\noperator log:\n{(tmp_path / 'operator.log').read_text()[-5000:]}") from None
        finally:
            process.terminate()
            process.wait(timeout=60)
        log = (tmp_path / "operator.log").read_text()
        assert status["startTime"] and status["completionTime"], status
        conditions = {c["type"]: c for c in status["conditions"]}
        assert [c["type"] for c in status["conditions"]] == ["Created", "Running", "Succeeded"], status
        assert conditions["Created"]["reason"] == "TFJobCreated" and conditions["Succeeded"]["reason"] == "TFJobSucceeded"
        assert conditions["Running"]["status"] == "False" and conditions["Succeeded"]["status"] == "True"
        assert conditions["Succeeded"]["message"].startswith(f"TFJob {namespace.name}/{dist} successfully completed.")
        assert all(c["lastTransitionTime"] and c["lastUpdateTime"] for c in status["conditions"])
        assert {role: {k: v for k, v in counts.items() if k != "selector"}
                for role, counts in status["replicaStatuses"].items()} == {
            "Chief": {"active": 0, "succeeded": 1, "failed": 0},
            "PS": {"active": 1, "succeeded": 0, "failed": 0},
            "Worker": {"active": 2, "succeeded": 0, "failed": 0}}, (status, log[-3000:])
        # TFJob's default cleanPodPolicy is None: the pods that still run are left running.
        assert len(pods_after) == 4 and not any(p["metadata"].get("deletionTimestamp") for p in pods_after.values())
        assert [c["type"] for c in simple["conditions"]] == ["Created"], simple


def tfjob_status(cp: ControlPlane, namespace: Namespace, name: str) -> dict[str, Any]:
    tfjob = cp.custom.get_namespaced_custom_object("kubeflow.org", "v1", namespace.name, "tfjobs", name)
    return dict(tfjob.get("status") or {})


def tfjob_exists(cp: ControlPlane, namespace: Namespace, name: str) -> bool:
    return name in {t["metadata"]["name"] for t in cp.custom.list_namespaced_custom_object(
        "kubeflow.org", "v1", namespace.name, "tfjobs")["items"]}


def condition(cp: ControlPlane, namespace: Namespace, name: str, ctype: str) -> str:
    return next((c["status"] for c in tfjob_status(cp, namespace, name).get("conditions") or [] if c["type"] == ctype), "")
