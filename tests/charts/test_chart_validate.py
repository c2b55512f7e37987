"""Every manifest the chart renders validates against the Kubernetes 1.34 API server itself.

`kubectl apply --dry-run=server --validate=strict`: the API server of the test control
plane (hack/build-kubernetes.sh's 1.34 release) checks each object against its
OpenAPI schema, rejects unknown or duplicate fields, and runs its validation and
admission, without storing anything. The chart's CRDs are installed first, so its
custom resources (the kopf peering objects) validate against them too.

ServiceMonitor, PodMonitor and PrometheusRule (monitoring.coreos.com/v1) are the exception:
their CRDs belong to the Prometheus operator, which no registry here ships, so the API
server cannot know them. They are checked by test_chart_render.py (selector, port and
namespace wiring) and test_prometheus_rules.py (promtool) instead, and listed here so that
nothing else is ever skipped.
"""

from __future__ import annotations

import pytest
import yaml

from chart_support import CHART, RELEASE_NAMESPACE, VALUE_SETS, render, run_helm
from kube_controlplane import ControlPlane

pytestmark = pytest.mark.controlplane

NOT_SERVED_HERE = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}


def _ensure_namespaces(cp: ControlPlane, names: set[str]) -> None:
    for name in sorted(names):
        if cp.kubectl("get", "namespace", name, check=False).returncode != 0:
            cp.kubectl("create", "namespace", name)


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_rendered_manifests_validate_on_the_api_server(controlplane: ControlPlane, name: str) -> None:
    manifests = render(VALUE_SETS[name], "--include-crds", hooks=True)
    assert any(m["kind"] == "CustomResourceDefinition" for m in manifests)
    checked = [m for m in manifests if m["kind"] not in NOT_SERVED_HERE]
    skipped = [m for m in manifests if m["kind"] in NOT_SERVED_HERE]
    monitoring = VALUE_SETS[name].get("metrics", {})
    assert bool(skipped) == any(monitoring.get(k, {}).get("enabled") for k in ("serviceMonitor", "podMonitor",
                                                                             "prometheusRule"))
    _ensure_namespaces(controlplane, {m["metadata"]["namespace"] for m in checked if "namespace" in m["metadata"]})
    result = controlplane.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-",
                                  stdin=yaml.safe_dump_all(checked), check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(server dry run)") == len(checked), result.stdout


def test_install_notes_render(controlplane: ControlPlane) -> None:
    """What a user sees after `helm install`, rendered against the real API server."""
    _ensure_namespaces(controlplane, {RELEASE_NAMESPACE})
    # Without the TrainingJob CRD, which the harness installed and owns (test_crd_upgrade.py installs the chart's).
    result = run_helm("install", "tg", str(CHART), "--dry-run=server", "--namespace", RELEASE_NAMESPACE,
                      "--set", "crds.install=false", "--kubeconfig", controlplane.kubeconfig)
    assert "It reconciles TrainingJobs (tensorgrid.io/v1, short name tj) in all namespaces." in result.stdout
    assert "service tg-tensorgrid-operator-metrics, port 8080" in result.stdout
    assert "crds.install is false: this release installs no TrainingJob CRD" in result.stdout
