"""`helm upgrade` brings the TrainingJob CRD up to date, and `helm uninstall` leaves it, on a real API server.

The CRD is a template of the release (`crds.install`), not in the chart's crds/ (which Helm never
upgrades), annotated `helm.sh/resource-policy: keep` (`crds.keep`). A release of an older chart got
its CRD from crds/, owned by no release; the chart README's "Upgrading" says how to hand it to the
release. The control-plane test runs the README's very commands from such a release with an older
CRD (today's without spec.runPolicy.schedulingPolicy), checks the field is then served, and that
uninstalling the release keeps the CRD and a job.
"""

from __future__ import annotations

import json
import pathlib
import re
import shlex
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from chart_support import CHART, ROOT, helm_path, render, run_helm
from kube_controlplane import ControlPlane, wait_crds_established, wait_for

CRD = "trainingjobs.tensorgrid.io"
# The README's commands name this release; the test's namespace is its own.
README_RELEASE = "tensorgrid"
README_NAMESPACE = "tensorgrid-system"
NAMESPACE = "chart-crd-upgrade"
# As test_uninstall_deadline.py: no kopf peering, so that this release's peering object cannot meet another
# test's (the older chart runs standalone, the upgraded one elects on a Lease in the release's own namespace),
# and no aggregation into the cluster's default roles.
ISOLATED = ("--set", "peering.enabled=false", "--set", "rbac.aggregateToDefaultRoles=false")
HELM_OWNERSHIP = ("meta.helm.sh/release-name", "meta.helm.sh/release-namespace")


def _crds(values: dict[str, Any]) -> dict[str, Any]:
    return {m["metadata"]["name"]: m for m in render(values) if m["kind"] == "CustomResourceDefinition"}


def test_the_trainingjob_crd_is_a_template_kept_on_uninstall() -> None:
    crd = _crds({})[CRD]
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert crd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert crd["spec"] == yaml.safe_load((ROOT / "crds" / f"{CRD}.yaml").read_text())["spec"]
    assert "annotations" not in _crds({"crds": {"keep": False}})[CRD]["metadata"]
    assert _crds({"crds": {"install": False}}) == {}
    # The TFJob CRD follows crds.keep too.
    tfjob = _crds({"kubeflowTFJob": {"enabled": True}, "crds": {"keep": False}})["tfjobs.kubeflow.org"]
    assert tfjob["metadata"]["annotations"] == {"tensorgrid.io/installed-by": "tensorgrid-operator"}


def _readme_commands() -> list[list[str]]:
    """The `$ kubectl` and `$ helm` lines of the README's "Upgrading" section, in order."""
    readme = (CHART / "README.md").read_text()
    section = readme.split("## Upgrading", 1)[1].split("\n## ", 1)[0]
    return [shlex.split(line) for line in re.findall(r"^\$ ((?:kubectl|helm) .*)$", section, re.MULTILINE)]


def _older_chart(directory: pathlib.Path) -> pathlib.Path:
    """This chart as it was before crds.install: the TrainingJob CRD in crds/, no template of it."""
    older = directory / "tensorgrid-operator"
    shutil.copytree(CHART, older, symlinks=False)
    (older / "templates" / "trainingjob-crd.yaml").unlink()
    shutil.move(older / "files" / f"{CRD}.yaml", older / "crds" / f"{CRD}.yaml")
    return older


def _older_crd() -> str:
    crd = yaml.safe_load((ROOT / "crds" / f"{CRD}.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    del schema["properties"]["spec"]["properties"]["runPolicy"]["properties"]["schedulingPolicy"]
    schema["x-kubernetes-validations"] = [r for r in schema["x-kubernetes-validations"]
                                          if "schedulingPolicy" not in r["rule"]]
    return json.dumps(crd)


def _served_crd(cp: ControlPlane) -> Any:
    return json.loads(cp.kubectl("get", "crd", CRD, "-o", "json").stdout)


def _has_scheduling_policy(cp: ControlPlane) -> bool:
    spec = _served_crd(cp)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return "schedulingPolicy" in spec["properties"]["runPolicy"]["properties"]


def _in_test_namespace(command: list[str]) -> list[str]:
    """A README command with the test's release namespace in place of the README's."""
    return [word.replace(README_NAMESPACE, NAMESPACE) for word in command]


@pytest.mark.controlplane
def test_the_documented_upgrade_from_an_older_chart_updates_the_crd_and_uninstall_keeps_it(
        controlplane: ControlPlane, tmp_path: pathlib.Path) -> None:
    cp = controlplane
    kubeconfig = ("--kubeconfig", cp.kubeconfig)
    commands = [_in_test_namespace(c) for c in _readme_commands()]
    assert [c[:2] for c in commands] == [["helm", "upgrade"], ["kubectl", "label"], ["kubectl", "annotate"]], commands
    upgrade, label, annotate = commands
    assert "--reset-then-reuse-values" in upgrade and f"meta.helm.sh/release-name={README_RELEASE}" in annotate
    try:
        # An older release: its CRD came from its crds/ (here, the older schema applied as it would be).
        cp.kubectl("replace", "-f", "-", stdin=_older_crd())
        wait_for(lambda: not _has_scheduling_policy(cp), 30, "the older CRD to be served")
        run_helm("install", README_RELEASE, str(_older_chart(tmp_path)), "--namespace", NAMESPACE,
                 "--create-namespace", *ISOLATED, *kubeconfig)
        refused = _from_the_repository(upgrade, kubeconfig)
        assert refused.returncode != 0 and "invalid ownership metadata" in refused.stderr, refused.stderr
        cp.kubectl(*label[1:])
        cp.kubectl(*annotate[1:])
        upgraded = _from_the_repository(upgrade, kubeconfig)
        assert upgraded.returncode == 0, upgraded.stderr
        wait_for(lambda: _has_scheduling_policy(cp), 30, "the upgraded CRD to be served")
        assert _served_crd(cp)["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"

        cp.kubectl("-n", NAMESPACE, "apply", "-f", "-", stdin=_job("survivor"))
        uninstalled = run_helm("uninstall", README_RELEASE, "--namespace", NAMESPACE, "--no-hooks", "--wait",
                               *kubeconfig)
        assert f"kept due to the resource policy:\n[CustomResourceDefinition] {CRD}" in uninstalled.stdout, (
            uninstalled.stdout)
        assert cp.kubectl("get", "crd", CRD, check=False).returncode == 0, "helm uninstall deleted the CRD"
        assert cp.kubectl("-n", NAMESPACE, "get", "tj", "survivor", check=False).returncode == 0
    finally:
        run_helm("uninstall", README_RELEASE, "--namespace", NAMESPACE, "--no-hooks", "--ignore-not-found",
                 *kubeconfig, check=False)
        # Back to the harness's CRD, owned by no release (test_chart_validate installs the chart beside it).
        cp.kubectl("label", "crd", CRD, "app.kubernetes.io/managed-by-", check=False)
        cp.kubectl("annotate", "crd", CRD, *(f"{key}-" for key in HELM_OWNERSHIP), "helm.sh/resource-policy-",
                   check=False)
        cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
        wait_crds_established(cp, CRD)
        wait_for(lambda: _has_scheduling_policy(cp), 30, "the repository's CRD to be served")
        cp.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)


def _from_the_repository(command: list[str], kubeconfig: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """A README helm command, run from the repository root, where its chart path points."""
    return subprocess.run([str(helm_path()), *command[1:], *kubeconfig], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def _job(name: str) -> str:
    template = {"spec": {"containers": [{"name": "tensorgrid", "image": "tensorgrid:test"}]}}
    return json.dumps({"apiVersion": "tensorgrid.io/v1", "kind": "TrainingJob", "metadata": {"name": name},
                       "spec": {"replicaSpecs": {"Worker": {"replicas": 1, "template": template}}}})
