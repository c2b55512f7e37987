"""The chart makes a ServiceMonitor, PodMonitor or PrometheusRule only where the API server serves that kind.

Their CRDs belong to the Prometheus operator: an install that asks for them on a cluster without it
would fail ("no matches for kind ServiceMonitor") and leave nothing. So each is made only when
``.Capabilities.APIVersions`` has ``monitoring.coreos.com/v1/<Kind>``, NOTES.txt names those it left
out, and a `helm upgrade` after the Prometheus operator's install makes them. On the control plane,
the same install is first made without the kinds, then with a ServiceMonitor CRD that the test
installs (a stand-in with the Prometheus operator's group and kind) and removes.
"""

from __future__ import annotations

import json

import pytest

from chart_support import CHART, RELEASE_NAMESPACE, VALUE_SETS, render, run_helm
from kube_controlplane import ControlPlane, wait_crds_established, wait_for

MONITORING_KINDS = ["PodMonitor", "PrometheusRule", "ServiceMonitor"]
STAND_IN_CRD = "servicemonitors.monitoring.coreos.com"


def _monitoring_kinds(manifests: list[dict[str, object]]) -> list[str]:
    return sorted(str(m["kind"]) for m in manifests if m["kind"] in MONITORING_KINDS)


def test_each_monitoring_object_is_made_only_where_its_kind_is_served() -> None:
    values = VALUE_SETS["monitoring"]
    assert _monitoring_kinds(render(values)) == MONITORING_KINDS
    assert _monitoring_kinds(render(values, prometheus_operator=False)) == []
    only_service_monitors = render(values, "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor",
                                   prometheus_operator=False)
    assert _monitoring_kinds(only_service_monitors) == ["ServiceMonitor"]
    # The rest of the chart does not depend on them.
    rest = [m["kind"] for m in render(values) if m["kind"] not in MONITORING_KINDS]
    assert rest == [m["kind"] for m in render(values, prometheus_operator=False)]


def _stand_in_service_monitor_crd() -> str:
    return json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": STAND_IN_CRD},
        "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                 "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors",
                           "singular": "servicemonitor"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    })


@pytest.mark.controlplane
def test_an_install_without_the_prometheus_operator_succeeds_and_says_what_it_left_out(
        controlplane: ControlPlane) -> None:
    cp = controlplane
    if cp.kubectl("get", "namespace", RELEASE_NAMESPACE, check=False).returncode != 0:
        cp.kubectl("create", "namespace", RELEASE_NAMESPACE)
    metrics = VALUE_SETS["monitoring"]["metrics"]
    settings = [f"--set=metrics.{kind}.enabled=true" for kind in metrics if metrics[kind].get("enabled")]

    def install() -> str:
        # Without the TrainingJob CRD, which the harness installed and owns (test_crd_upgrade.py installs the chart's).
        return run_helm("install", "tg", str(CHART), "--dry-run=server", "--namespace", RELEASE_NAMESPACE,
                        "--set", "crds.install=false", *settings, "--kubeconfig", cp.kubeconfig).stdout

    notes = install()
    assert "WARNING: this cluster serves no monitoring.coreos.com/v1 PodMonitor, PrometheusRule, ServiceMonitor" \
        in notes, notes
    assert "kind: ServiceMonitor" not in notes
    try:
        cp.kubectl("apply", "-f", "-", stdin=_stand_in_service_monitor_crd())
        wait_crds_established(cp, STAND_IN_CRD)
        notes = install()
        assert "kind: ServiceMonitor" in notes, notes
        assert "serves no monitoring.coreos.com/v1 PodMonitor, PrometheusRule (the Prometheus" in notes, notes
    finally:
        cp.kubectl("delete", "crd", STAND_IN_CRD, "--ignore-not-found", "--wait=true")
        wait_for(lambda: cp.kubectl("get", "crd", STAND_IN_CRD, check=False).returncode != 0, 60,
                 f"crd/{STAND_IN_CRD} to be deleted")
