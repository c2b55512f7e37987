"""The chart README's upgrade step brings an older TrainingJob CRD up to date on a real API server.

`helm upgrade` never touches the chart's crds/, so the README tells users to apply them
first. This puts back an older TrainingJob CRD (today's without spec.runPolicy.schedulingPolicy),
runs the README's very command, and checks the field is then served.
"""

from __future__ import annotations

import json
import re
import shlex

import pytest
import yaml

from chart_support import CHART, ROOT
from kube_controlplane import ControlPlane, wait_crds_established, wait_for

pytestmark = pytest.mark.controlplane

CRD = "trainingjobs.tensorgrid.io"


def upgrade_command() -> list[str]:
    """The `kubectl apply` line of the README's "Upgrading" section, without the `$ kubectl`."""
    readme = (CHART / "README.md").read_text()
    section = readme.split("## Upgrading", 1)[1]
    (line,) = [m for m in re.findall(r"^\$ (kubectl .*)$", section, re.MULTILINE)]
    words = shlex.split(line)
    assert words[:2] == ["kubectl", "apply"] and "--server-side" in words, line
    return words[1:]


def _has_scheduling_policy(cp: ControlPlane) -> bool:
    crd = json.loads(cp.kubectl("get", "crd", CRD, "-o", "json").stdout)
    run_policy = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["runPolicy"]
    return "schedulingPolicy" in run_policy["properties"]


def test_the_documented_upgrade_step_updates_an_older_crd(controlplane: ControlPlane) -> None:
    cp = controlplane
    command = upgrade_command()
    older = yaml.safe_load((ROOT / "crds" / f"{CRD}.yaml").read_text())
    spec_schema = older["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    del spec_schema["properties"]["spec"]["properties"]["runPolicy"]["properties"]["schedulingPolicy"]
    spec_schema["x-kubernetes-validations"] = [r for r in spec_schema["x-kubernetes-validations"]
                                               if "schedulingPolicy" not in r["rule"]]
    try:
        cp.kubectl("replace", "-f", "-", stdin=json.dumps(older))
        wait_for(lambda: not _has_scheduling_policy(cp), 30, "the older CRD to be served")
        # From the repository root, where the README's relative path points.
        result = cp.kubectl(*command[:-1], str(ROOT / command[-1]))
        assert f"customresourcedefinition.apiextensions.k8s.io/{CRD} serverside-applied" in result.stdout
        wait_for(lambda: _has_scheduling_policy(cp), 30, "the upgraded CRD to be served")
    finally:
        cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
        wait_crds_established(cp, CRD)
