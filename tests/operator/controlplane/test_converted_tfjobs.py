"""Kubeflow's example TFJobs, converted by ``tensorgrid-operator convert-tfjob``, on a real API server: the
CRD's schema and CEL rules accept every one, and the operator makes the pods the TFJob had."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest
import yaml

from operator_cluster import ControlPlane, Namespace, Operator

pytestmark = pytest.mark.controlplane

ROOT = pathlib.Path(__file__).resolve().parents[3]
KUBEFLOW_EXAMPLES = ROOT / "tests" / "operator" / "data" / "kubeflow_tfjob"


def convert(path: pathlib.Path, namespace: str) -> dict[str, Any]:
    """What the command prints for ``path``, moved to ``namespace``."""
    out = subprocess.run([sys.executable, "-m", "tensorgrid_operator", "convert-tfjob", "-f", str(path)],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    job: dict[str, Any] = yaml.safe_load(out)
    job["metadata"]["namespace"] = namespace
    return job


def test_every_converted_example_is_accepted(controlplane: ControlPlane, namespace: Namespace) -> None:
    tfjobs = sorted(p for p in KUBEFLOW_EXAMPLES.glob("*.yaml") if yaml.safe_load(p.read_text())["kind"] == "TFJob")
    assert len(tfjobs) == 4
    for path in tfjobs:
        # strict: a field the schema does not know is an error, not silently pruned
        controlplane.kubectl("create", "--dry-run=server", "--validate=strict", "-f", "-",
                             stdin=json.dumps(convert(path, namespace.name)))


def test_converted_dist_mnist_runs_as_the_tfjob(operator: Operator, namespace: Namespace) -> None:
    job = convert(KUBEFLOW_EXAMPLES / "dist-mnist_tf_job_mnist.yaml", namespace.name)
    namespace.apply(job)
    name = "dist-mnist-for-e2e-test"
    # The session's operator may start with this test (the first of its folder to ask for it), while the previous
    # test's namespace is deleted: that once stopped it acting on any job (kopf's index readiness waited for the
    # watchers of that namespace forever; controller/index_readiness.py). 120 s is a ceiling for a loaded machine.
    pods = namespace.wait_pods(name, {f"{name}-chief-0", f"{name}-ps-0", f"{name}-worker-0", f"{name}-worker-1"},
                               timeout=120)
    for pod_name, pod in pods.items():
        (container,) = pod["spec"]["containers"]
        assert container["name"] == "tensorflow" and pod["spec"]["restartPolicy"] == "Never"
        config = json.loads(next(e["value"] for e in container["env"] if e["name"] == "TF_CONFIG"))
        assert f"{name}-{config['task']['type']}-{config['task']['index']}" == pod_name
        assert config["cluster"]["chief"] == [f"{name}-chief-0.{namespace.name}.svc:2222"]
    stored = namespace.job(name)
    assert stored is not None and stored["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
