"""What the chart tests share: helm, rendering with value sets.

helm comes from hack/tools.sh (cached outside the repository, installed by `make test`).
Without it the tests skip, except under ``CI=true``, where they fail: CI must run them.

The control plane (``controlplane``) is the run's one, shared with the operator's tests
(kube_controlplane.py): its API server is the schema the rendered manifests are validated
against (``kubectl apply --dry-run=server --validate=strict``), and the operator runs against
it under exactly the chart's RBAC. The operator's tests run an operator of their own on it,
watching ``tg-*``: the chart's tests make their jobs in namespaces named ``chart-*``.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import tempfile
from typing import Any

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "tensorgrid-operator"
HACK = ROOT / "hack"
RELEASE = "tg"
RELEASE_NAMESPACE = "tensorgrid-system"
FULLNAME = "tg-tensorgrid-operator"
# The API server the chart is validated against (hack/build-kubernetes.sh's release).
KUBE_VERSION = "1.34.10"

# The value sets every rendering test runs with.
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "watch-namespaces": {"watchNamespaces": ["tg-team-a", "tg-team-b"]},
    "monitoring": {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
                               "podMonitor": {"enabled": True},
                               "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
                               "dashboard": {"enabled": True}}},
    "monitoring-watch-namespaces": {"watchNamespaces": ["tg-team-a"],
                                    "metrics": {"serviceMonitor": {"enabled": True, "scrapeTimeout": "10s"},
                                                "podMonitor": {"enabled": True},
                                                "dashboard": {"enabled": True, "namespace": "tg-grafana"}}},
    "replicas-2": {"replicas": 2},
    "leader-election": {"replicas": 2, "leaderElection": {"enabled": True, "leaseName": "tensorgrid-operator",
                                                          "leaseDurationSeconds": 20}},
    "kopf-peering": {"replicas": 2, "leaderElection": {"enabled": False}, "peering": {"enabled": True}},
    "gang-volcano": {"trainingPods": {"gangScheduler": "volcano"}},
    "gang-scheduler-plugins": {"trainingPods": {"gangScheduler": "scheduler-plugins",
                                                "gangSchedulerName": "coscheduler"}},
    "standalone-no-metrics": {"leaderElection": {"enabled": False}, "metrics": {"enabled": False}},
    "cert-manager": {"certificates": {"issuer": "cert-manager"}},
    "kubeflow-tfjob": {"kubeflowTFJob": {"enabled": True}},
    "cert-manager-cluster-issuer": {"certificates": {"issuer": "cert-manager", "certManager": {
        "issuerRef": {"kind": "ClusterIssuer", "name": "tensorgrid-ca"}, "duration": "720h", "renewBefore": "240h"}}},
    "scheduling": {"nodeSelector": {"kubernetes.io/os": "linux"},
                   "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "control",
                                    "effect": "NoSchedule"}],
                   "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                       {"weight": 1, "preference": {"matchExpressions": [
                           {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}}]}},
                   "imagePullSecrets": [{"name": "regcred"}],
                   "image": {"registry": "registry.example.com", "repository": "tensorgrid-operator", "tag": "0.1.0",
                             "pullPolicy": "Always"},
                   "podAnnotations": {"example.com/team": "ml"}, "podLabels": {"team": "ml"},
                   "priorityClassName": "system-cluster-critical",
                   "serviceAccount": {"name": "custom-sa", "annotations": {"example.com/role": "operator"}},
                   "operator": {"verbose": True, "extraArgs": ["--resync-seconds=30"]}},
}


def unavailable(why: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{why} (CI must run the chart tests: `make tools` installs what they need)", pytrace=False)
    pytest.skip(f"{why}: run `make tools` (helm) and `make kubernetes-binaries` (kubectl, control plane)")


def helm_path() -> pathlib.Path:
    bin_dir = subprocess.run([str(HACK / "tools.sh"), "--print-bin-dir"], capture_output=True, text=True,
                             check=True).stdout.strip()
    helm = pathlib.Path(bin_dir) / "helm"
    if not helm.exists():
        unavailable(f"no helm in {bin_dir}")
    return helm


def run_helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(helm_path()), *args], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stderr}")
    return result


def values_file(values: dict[str, Any], directory: pathlib.Path) -> pathlib.Path:
    path = directory / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


# The Prometheus operator's kinds, which the chart makes only where the API server serves them
# (test_monitoring_capabilities.py); rendering assumes a cluster that does, unless told otherwise.
PROMETHEUS_OPERATOR_KINDS = tuple(f"monitoring.coreos.com/v1/{kind}"
                                  for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule"))


def template(values: dict[str, Any], *extra: str, check: bool = True,
             prometheus_operator: bool = True) -> subprocess.CompletedProcess[str]:
    served = [arg for kind in PROMETHEUS_OPERATOR_KINDS for arg in ("--api-versions", kind)] if prometheus_operator else []
    with tempfile.TemporaryDirectory() as tmp:
        return run_helm("template", RELEASE, str(CHART), "--namespace", RELEASE_NAMESPACE,
                        "--kube-version", KUBE_VERSION, "-f", str(values_file(values, pathlib.Path(tmp))), *served,
                        *extra, check=check)


def render(values: dict[str, Any], *extra: str, hooks: bool = False,
           prometheus_operator: bool = True) -> list[dict[str, Any]]:
    """The manifests the chart renders with these values, parsed: the release's objects, and its hooks if asked;
    on a cluster serving the Prometheus operator's kinds unless ``prometheus_operator`` is false."""
    output = template(values, *extra, prometheus_operator=prometheus_operator).stdout
    manifests = [doc for doc in yaml.safe_load_all(output) if doc]
    return [m for m in manifests if hooks or not is_hook(m)]


def is_hook(manifest: dict[str, Any]) -> bool:
    """A Helm hook: created and deleted around an install or uninstall, not part of the release."""
    return "helm.sh/hook" in (manifest["metadata"].get("annotations") or {})


def by_kind(manifests: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == kind]


def one(manifests: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(manifests, kind)
    assert len(found) == 1, f"expected one {kind}, got {[m['metadata']['name'] for m in found]}"
    return found[0]

