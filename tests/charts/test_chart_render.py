"""The chart lints and renders with every value set, and renders what the values say."""

from __future__ import annotations

import filecmp
import json
import pathlib
import re
from typing import Any

import pytest

from chart_support import (CHART, FULLNAME, RELEASE_NAMESPACE, ROOT, VALUE_SETS, by_kind, one, render, run_helm,
                           template, values_file)

TRAININGJOB_CRD = "trainingjobs.tensorgrid.io.yaml"


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_helm_lint(name: str, tmp_path: pathlib.Path) -> None:
    result = run_helm("lint", "--strict", str(CHART), "--kube-version", "1.34.10", "--namespace", RELEASE_NAMESPACE,
                      "-f", str(values_file(VALUE_SETS[name], tmp_path)))
    assert "0 chart(s) failed" in result.stdout, result.stdout


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_object_is_labelled_and_placed(name: str) -> None:
    for manifest in render(VALUE_SETS[name], hooks=True):
        meta = manifest["metadata"]
        assert meta["labels"]["app.kubernetes.io/instance"] == "tg", meta
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "Helm", meta
        cluster_scoped = manifest["kind"] in ("ClusterRole", "ClusterRoleBinding", "ClusterKopfPeering",
                                              "CustomResourceDefinition")
        assert ("namespace" in meta) != cluster_scoped, f"{manifest['kind']} {meta['name']}: namespace {meta}"


def test_defaults() -> None:
    manifests = render({})
    kinds = sorted(m["kind"] for m in manifests)
    assert kinds == ["ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding",
                     "CustomResourceDefinition", "Deployment", "Role", "RoleBinding", "Service",
                     "ServiceAccount"]  # the operator's, and edit and view (aggregated); the TrainingJob CRD; the
    # Lease's Role (test_chart_leader_election.py); nothing of kopf peering
    deployment = one(manifests, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == "tensorgrid-operator:0.1.0"
    assert container["args"] == ["--metrics-port=8080", "--liveness-port=8081", f"--leader-election={FULLNAME}",
                                 f"--leader-election-namespace={RELEASE_NAMESPACE}", "--lease-duration-seconds=15",
                                 "--resync-seconds=60", "--api-workers=16", "--progress-interval-seconds=30",
                                 "--stuck-terminating-seconds=300", OPERATOR_AS_METRICS_PEER,
                                 "--ps-anti-affinity=off", "--node-lost-toleration-seconds=30", "--gang-scheduler=none",
                                 "--certificate-issuer=operator"]
    assert deployment["spec"]["replicas"] == 1
    assert "strategy" not in deployment["spec"]  # RollingUpdate: the Lease keeps old and new apart
    assert pod["serviceAccountName"] == FULLNAME
    service = one(manifests, "Service")
    assert service["metadata"]["name"] == f"{FULLNAME}-metrics"
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


OPERATOR_AS_METRICS_PEER = "--network-policy-metrics-from=" + json.dumps([{
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": RELEASE_NAMESPACE}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/instance": "tg", "app.kubernetes.io/name": "tensorgrid-operator"}}}],
    separators=(",", ":"))


def test_network_policy_and_training_pod_values_reach_the_operator() -> None:
    def args(values: dict[str, object]) -> list[str]:
        return list(one(render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])

    prometheus = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                  "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    flag = next(a for a in args({"networkPolicy": {"prometheus": prometheus}})
                if a.startswith("--network-policy-metrics-from="))
    peers = json.loads(flag.split("=", 1)[1])
    assert peers[1] == prometheus and len(peers) == 2
    only_namespace = {"namespaceSelector": prometheus["namespaceSelector"]}
    flag = next(a for a in args({"networkPolicy": {"prometheus": only_namespace}})
                if a.startswith("--network-policy-metrics-from="))
    assert json.loads(flag.split("=", 1)[1])[1] == only_namespace
    outside = {"ipBlock": {"cidr": "192.0.2.0/24"}}
    flag = next(a for a in args({"networkPolicy": {"extraMetricsPeers": [outside]}})
                if a.startswith("--network-policy-metrics-from="))
    assert json.loads(flag.split("=", 1)[1])[1:] == [outside]
    off = args({"networkPolicy": {"enabled": False}, "trainingPods": {"psDisruptionBudget": False,
                                                                      "psAntiAffinity": "required"}})
    assert "--no-network-policy" in off and "--no-ps-disruption-budget" in off and "--ps-anti-affinity=required" in off
    assert not [a for a in off if a.startswith("--network-policy-metrics-from")]
    default = args({})
    assert "--no-spread-pods" not in default and "--node-lost-toleration-seconds=30" in default
    placement = args({"trainingPods": {"spreadOverNodes": False, "nodeLostTolerationSeconds": "off"}})
    assert "--no-spread-pods" in placement and "--node-lost-toleration-seconds=off" in placement


def test_gang_scheduler_values_reach_the_operator_and_a_bad_one_is_named() -> None:
    def args(values: dict[str, object]) -> list[str]:
        return list(one(render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])

    plugins = args(VALUE_SETS["gang-scheduler-plugins"])
    assert "--gang-scheduler=scheduler-plugins" in plugins and "--gang-scheduler-name=coscheduler" in plugins
    volcano = args(VALUE_SETS["gang-volcano"])
    assert "--gang-scheduler=volcano" in volcano and not [a for a in volcano if a.startswith("--gang-scheduler-name")]
    failed = template({"trainingPods": {"gangScheduler": "kueue"}}, check=False)
    assert failed.returncode != 0
    # values.schema.json answers first, naming the value and the valid ones
    assert "at '/trainingPods/gangScheduler': value must be one of 'none', 'volcano', 'scheduler-plugins'" in failed.stderr


def test_certificate_values_reach_the_operator_and_a_bad_one_is_named() -> None:
    from tensorgrid_operator.resources import cert_manager
    from tensorgrid_operator import cli

    def args(values: dict[str, object]) -> list[str]:
        return list(one(render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])

    default = args({})
    assert "--certificate-issuer=operator" in default and not [a for a in default if a.startswith("--cert-manager")]
    assert cli.parse_args(default).certificates == cert_manager.CertManagerSettings()
    per_job = cli.parse_args(args(VALUE_SETS["cert-manager"])).certificates
    assert per_job == cert_manager.CertManagerSettings(cert_manager.CERT_MANAGER)  # the chart's defaults are the CLI's
    shared = cli.parse_args(args(VALUE_SETS["cert-manager-cluster-issuer"])).certificates
    assert shared == cert_manager.CertManagerSettings(
        cert_manager.CERT_MANAGER, cert_manager.IssuerRef("ClusterIssuer", "tensorgrid-ca"), "720h", "240h")
    failed = template({"certificates": {"issuer": "vault"}}, check=False)
    assert failed.returncode != 0
    assert "at '/certificates/issuer': value must be one of 'operator', 'cert-manager'" in failed.stderr
    failed = template({"certificates": {"issuer": "cert-manager", "certManager": {"issuerRef": {"name": "x"}}}},
                      check=False)
    assert failed.returncode != 0 and "at '/certificates/certManager/issuerRef': missing property 'kind'" in failed.stderr


def test_pod_is_hardened_and_probed() -> None:
    pod = one(render({}), "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the image's user (docker/operator.Dockerfile)
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = pod["containers"][0]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    # A writable /tmp under the read-only root file system.
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "liveness"}
    assert {"name": "liveness", "containerPort": 8081, "protocol": "TCP"} in container["ports"]
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    assert container["resources"]["limits"] == {"memory": "1Gi"}


def test_watch_namespaces_give_roles_per_namespace_and_peerings_with_kopf_peering() -> None:
    manifests = render(VALUE_SETS["watch-namespaces"])
    args = one(manifests, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=tg-team-a" in args and "--namespace=tg-team-b" in args
    for kind in ("Role", "RoleBinding"):
        placed = sorted((m["metadata"]["namespace"], m["metadata"]["name"]) for m in by_kind(manifests, kind))
        # the Lease's Role is in the release's namespace, whatever is watched
        assert placed == [("tensorgrid-system", f"{FULLNAME}-leader-election"), ("tg-team-a", FULLNAME),
                          ("tg-team-b", FULLNAME)]
    assert not by_kind(manifests, "KopfPeering") and not by_kind(manifests, "ClusterKopfPeering")
    binding = [b for b in by_kind(manifests, "RoleBinding") if b["metadata"]["namespace"] == "tg-team-a"][0]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": RELEASE_NAMESPACE}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": FULLNAME}
    peering = render({**VALUE_SETS["watch-namespaces"], "leaderElection": {"enabled": False},
                      "peering": {"enabled": True}})
    for kind in ("Role", "RoleBinding", "KopfPeering"):
        assert sorted(m["metadata"]["namespace"] for m in by_kind(peering, kind)) == ["tg-team-a", "tg-team-b"]
    assert not by_kind(peering, "ClusterKopfPeering")


def test_replicas_need_peering_or_leader_election() -> None:
    assert one(render({"replicas": 2}), "Deployment")["spec"]["replicas"] == 2  # the default Lease elects
    failed = template({"replicas": 2, "leaderElection": {"enabled": False}}, check=False)
    assert failed.returncode != 0 and "replicas > 1 needs leaderElection.enabled or peering.enabled" in failed.stderr
    peering = render(VALUE_SETS["kopf-peering"])
    assert one(peering, "Deployment")["spec"]["replicas"] == 2


def test_replicas_get_a_disruption_budget_and_spread_over_nodes() -> None:
    single = render({})
    assert not by_kind(single, "PodDisruptionBudget")
    assert "affinity" not in one(single, "Deployment")["spec"]["template"]["spec"]
    manifests = render(VALUE_SETS["replicas-2"])
    deployment = one(manifests, "Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    budget = one(manifests, "PodDisruptionBudget")
    assert budget["spec"] == {"minAvailable": 1, "selector": {"matchLabels": selector}}
    anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert anti == {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
        "labelSelector": {"matchLabels": selector}, "topologyKey": "kubernetes.io/hostname"}}]}
    required = render({"replicas": 3, "highAvailability": {"podAntiAffinity": "required"},
                       "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                           "nodeSelectorTerms": [{"matchExpressions": [
                               {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}})
    affinity = one(required, "Deployment")["spec"]["template"]["spec"]["affinity"]
    assert set(affinity) == {"nodeAffinity", "podAntiAffinity"}
    assert affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == \
        "kubernetes.io/hostname"
    own = {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {
        "labelSelector": {"matchLabels": {"team": "ml"}}, "topologyKey": "topology.kubernetes.io/zone"}}]}
    kept = render({"replicas": 2, "affinity": {"podAntiAffinity": own}})
    assert one(kept, "Deployment")["spec"]["template"]["spec"]["affinity"] == {"podAntiAffinity": own}
    off = render({"replicas": 2, "highAvailability": {"podDisruptionBudget": False, "podAntiAffinity": "off"}})
    assert not by_kind(off, "PodDisruptionBudget")
    assert "affinity" not in one(off, "Deployment")["spec"]["template"]["spec"]
    failed = template({"replicas": 2, "highAvailability": {"podAntiAffinity": "always"}}, check=False)
    assert failed.returncode != 0
    assert "at '/highAvailability/podAntiAffinity': value must be one of 'off', 'preferred', 'required'" in failed.stderr


def test_standalone_recreates_and_drops_metrics() -> None:
    manifests = render(VALUE_SETS["standalone-no-metrics"])
    deployment = one(manifests, "Deployment")
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert "--standalone" in container["args"] and "--metrics-port=off" in container["args"]
    assert [p["name"] for p in container["ports"]] == ["liveness"]
    assert not by_kind(manifests, "Service") and not by_kind(manifests, "ClusterKopfPeering")
    rules = [r for role in by_kind(manifests, "ClusterRole") for r in role["rules"]]
    assert not [r for r in rules if r["apiGroups"] == ["kopf.dev"]]


def test_namespace_patterns_are_refused() -> None:
    failed = template({"watchNamespaces": ["team-*"]}, check=False)
    assert failed.returncode != 0 and "exact namespace names" in failed.stderr


def test_scheduling_and_image_values_reach_the_pod() -> None:
    values = VALUE_SETS["scheduling"]
    pod_template = one(render(values), "Deployment")["spec"]["template"]
    pod = pod_template["spec"]
    for key in ("nodeSelector", "tolerations", "affinity", "imagePullSecrets", "priorityClassName"):
        assert pod[key] == values[key], key
    container = pod["containers"][0]
    assert container["image"] == "registry.example.com/tensorgrid-operator:0.1.0"
    assert container["imagePullPolicy"] == "Always"
    assert container["args"][-2:] == ["--verbose", "--resync-seconds=30"]
    assert pod["serviceAccountName"] == "custom-sa"
    assert pod_template["metadata"]["annotations"] == {"example.com/team": "ml"}
    assert pod_template["metadata"]["labels"]["team"] == "ml"


def test_monitoring_objects() -> None:
    manifests = render(VALUE_SETS["monitoring"])
    monitor = one(manifests, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    service = one(manifests, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [RELEASE_NAMESPACE]}
    pod_monitor = one(manifests, "PodMonitor")
    # The operator labels every training pod with tensorgrid.io/job-name and names the runtime's port "metrics".
    assert pod_monitor["spec"]["selector"] == {"matchExpressions": [
        {"key": "tensorgrid.io/job-name", "operator": "Exists"}]}
    assert pod_monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    assert pod_monitor["spec"]["namespaceSelector"] == {"any": True}
    dashboard = one(manifests, "ConfigMap")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["tensorgrid.json"]) == json.loads(
        (CHART / "dashboards" / "tensorgrid.json").read_text())

    scoped = render(VALUE_SETS["monitoring-watch-namespaces"])
    assert one(scoped, "PodMonitor")["spec"]["namespaceSelector"] == {"matchNames": ["tg-team-a"]}
    assert one(scoped, "ServiceMonitor")["spec"]["endpoints"][0]["scrapeTimeout"] == "10s"
    assert one(scoped, "ConfigMap")["metadata"]["namespace"] == "tg-grafana"


def test_pod_monitor_matches_the_operators_pod_contract() -> None:
    """The PodMonitor selects the label and scrapes the port the operator puts on every training pod."""
    from tensorgrid_operator.api import spec as spec_lib

    pod_monitor = one(render(VALUE_SETS["monitoring"]), "PodMonitor")["spec"]
    assert pod_monitor["selector"]["matchExpressions"][0]["key"] == spec_lib.LABEL_JOB_NAME
    assert pod_monitor["podMetricsEndpoints"][0]["port"] == spec_lib.METRICS_PORT_NAME
    assert set(pod_monitor["podTargetLabels"]) == {
        spec_lib.LABEL_JOB_NAME, spec_lib.LABEL_REPLICA_TYPE, spec_lib.LABEL_REPLICA_INDEX}


def _dashboard_metric_names() -> set[str]:
    dashboard = json.loads((CHART / "dashboards" / "tensorgrid.json").read_text())
    names = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            # Series names only: drop the label names of `by (...)` and of `{...}` selectors.
            expr = re.sub(r"\{[^}]*\}", "", re.sub(r"\bby\s*\([^)]*\)", "", target["expr"]))
            names.update(re.findall(r"\b(tensorgrid_[a-z_]+)\b", expr))
    return names


def test_dashboard_shows_jobs_by_phase_steps_and_rpc_throughput() -> None:
    dashboard = json.loads((CHART / "dashboards" / "tensorgrid.json").read_text())
    exprs = {panel["title"]: panel["targets"][0]["expr"] for panel in dashboard["panels"]}
    assert exprs["TrainingJobs by phase"] == "sum by (phase) (tensorgrid_operator_jobs)"
    assert "rate(tensorgrid_steps_total" in exprs["Training steps per second"]
    assert "rate(tensorgrid_rpc_bytes_total" in exprs["RPC throughput"]
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])


def test_dashboard_metrics_exist_in_the_code() -> None:
    """Every series the dashboard queries is exported by the operator or the runtime, with the labels it uses."""
    from tensorgrid import monitoring as runtime_metrics
    from tensorgrid_operator import metrics as operator_metrics

    exported: set[str] = set()
    suffixes = {"counter": ["_total"], "gauge": [""], "histogram": ["_bucket", "_sum", "_count"]}
    for registry in (runtime_metrics.REGISTRY, operator_metrics.REGISTRY):
        for family in registry.collect():
            exported |= {family.name + suffix for suffix in suffixes.get(family.type, [""])}
    for name in ("tensorgrid_operator_jobs", "tensorgrid_steps_total", "tensorgrid_rpc_bytes_total"):
        assert name in exported, f"{name} is not exported; exported: {sorted(exported)}"
    assert _dashboard_metric_names() <= exported, _dashboard_metric_names() - exported
    # The labels the panels group by.
    assert "phase" in operator_metrics.JOBS._labelnames
    assert {"method", "direction"} <= set(runtime_metrics.RPC_BYTES._labelnames)


def test_chart_crds_are_the_crds_of_the_repository() -> None:
    """One source of truth: the chart's CRDs are crds/ (symbolic links), so they cannot drift: the
    TrainingJob CRD in files/ (a template of the release, test_crd_upgrade.py), kopf's in crds/."""
    source = sorted(p.name for p in (ROOT / "crds").glob("*.yaml"))
    chart = {name: CHART / "crds" / name for name in sorted(p.name for p in (CHART / "crds").glob("*.yaml"))}
    chart[TRAININGJOB_CRD] = CHART / "files" / TRAININGJOB_CRD
    assert sorted(chart) == source, f"the chart has {sorted(chart)}, crds/ has {source}"
    for name, path in chart.items():
        assert path.is_symlink() and filecmp.cmp(ROOT / "crds" / name, path, shallow=False), (
            f"{path.relative_to(ROOT)} differs from crds/{name}: `ln -sf ../../../crds/{name} {path.relative_to(ROOT)}`")


def _documented(lines: list[str], i: int) -> bool:
    """A comment right above the key; a nested key may share it with the siblings above, or its parent's."""
    indent = len(lines[i]) - len(lines[i].lstrip())
    for j in range(i - 1, -1, -1):
        line = lines[j]
        if not line.strip():
            return False
        if line.strip().startswith("#"):
            return True
        line_indent = len(line) - len(line.lstrip())
        if line_indent > indent or (line_indent == indent and indent > 0):
            continue  # inside a sibling's block, or a sibling of a nested key
        if line_indent < indent:
            return _documented(lines, j)
        return False
    return False


def test_values_are_documented_inline() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    undocumented = [line.strip() for i, line in enumerate(lines)
                    if re.match(r"^\s*[A-Za-z][A-Za-z0-9]*:", line) and not _documented(lines, i)]
    assert not undocumented, f"values without a comment: {undocumented}"


def test_values_name_the_required_settings() -> None:
    values_text = (CHART / "values.yaml").read_text()
    for key in ("image:", "replicas:", "watchNamespaces:", "resources:", "metrics:", "nodeSelector:",
                "tolerations:", "affinity:"):
        assert re.search(rf"^{key}", values_text, re.M), key


def test_packaged_chart_holds_the_crds(tmp_path: pathlib.Path) -> None:
    """`helm package` resolves the links: the published chart carries the CRDs' content."""
    run_helm("package", str(CHART), "--destination", str(tmp_path))
    import tarfile

    (archive,) = tmp_path.glob("tensorgrid-operator-*.tgz")
    with tarfile.open(archive) as tar:
        member = tar.getmember(f"tensorgrid-operator/files/{TRAININGJOB_CRD}")
        assert member.isfile()
        data = tar.extractfile(member)
        assert data is not None and data.read() == (ROOT / "crds" / TRAININGJOB_CRD).read_bytes()




def test_kubeflow_tfjob_ships_the_tfjob_crd_as_the_operators_own_and_turns_serving_on() -> None:
    def tfjob_crds(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [m for m in manifests if m["kind"] == "CustomResourceDefinition" and m["spec"]["group"] == "kubeflow.org"]

    assert not tfjob_crds(render({})), "off by default"
    manifests = render(VALUE_SETS["kubeflow-tfjob"])
    (crd,) = tfjob_crds(manifests)
    assert crd["metadata"]["name"] == "tfjobs.kubeflow.org"
    assert crd["metadata"]["annotations"] == {"tensorgrid.io/installed-by": "tensorgrid-operator",
                                              "helm.sh/resource-policy": "keep"}
    assert "--serve-tfjob" in one(manifests, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--serve-tfjob" not in one(render({}), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
