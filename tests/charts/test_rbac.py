"""The chart's RBAC grants exactly what the operator uses: read from the code, compared both ways.

The operator's own API calls are read from operator/tensorgrid_operator/cluster/kube.py (every
method of the kubernetes client it uses, mapped to a request through the client's
own request path and HTTP method); what the objects it creates demand from the
owner references resources/manifests.py puts on them (blockOwnerDeletion needs ``update`` on the
owner's finalizers where owner-reference permissions are enforced, as the test control
plane does); kopf's come from what the controller package asks of kopf (watched resources, daemons
and their finalizer, events, peering) and from what kopf does for every operator
(discovery of CRDs, and of namespaces when given some).
Then the operator runs against a real API server under exactly the chart's RBAC and
must work without a single permission error.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from typing import Any, Iterable, Optional

import pytest
import yaml

from chart_support import FULLNAME, RELEASE_NAMESPACE, ROOT, VALUE_SETS, by_kind, render
import built_tools
from kube_controlplane import ControlPlane, wait_crds_established, wait_for

OPERATOR = ROOT / "operator" / "tensorgrid_operator"
Triple = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)
# Resources that are not namespaced: granted by a ClusterRole even when the operator watches given namespaces.
CLUSTER_SCOPED = {"customresourcedefinitions", "namespaces", "clusterkopfpeerings"}


def _request_of(api_class: type, method: str) -> tuple[str, str]:
    """(HTTP method, path template) of one kubernetes client method, from the client's own source."""
    for name in (f"_{method}_serialize", f"{method}_with_http_info"):
        fn = getattr(api_class, name, None)
        if fn is None:
            continue
        source = inspect.getsource(fn)
        match = re.search(r"method='(\w+)',\s*resource_path='([^']+)'", source)
        if match:
            return match.group(1), match.group(2)
        match = re.search(r"call_api\(\s*'([^']+)',\s*'(\w+)'", source)  # older generated clients
        if match:
            return match.group(2), match.group(1)
    raise AssertionError(f"cannot find the request of {api_class.__name__}.{method}")


def _triple(http_method: str, path: str, custom: tuple[str, str]) -> Optional[Triple]:
    """(apiGroup, resource, verb) of a request; ``custom``: the (group, plural) of a custom object API's.
    ``None`` for discovery (``/apis/<group>/<version>``), which every authenticated client may read."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if not rest:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    group = custom[0] if group == "{group}" else group
    resource = custom[1] if rest[0] == "{plural}" else rest[0]
    named = len(rest) >= 2
    if len(rest) >= 3:
        resource += "/" + rest[2]
    verb = {"GET": "get" if named else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete" if named else "deletecollection"}[http_method]
    return group, resource, verb


def _api_attributes(tree: ast.Module) -> dict[str, str]:
    """self.<attribute> -> kubernetes.client API class name, from the assignments in kube.py."""
    found = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr.endswith("Api")):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                    found[target.attr] = node.value.func.attr
    return found


# The attribute of kube.Kube whose custom objects are a gang scheduler's PodGroups (podgroups.APIS).
POD_GROUPS_ATTRIBUTE = "_pod_groups"
# The attribute of kube.Kube whose custom objects are cert-manager's (cert_manager.PLURALS).
CERT_MANAGER_ATTRIBUTE = "_cert_manager"


def operator_api_calls(gang_scheduler: str = "none", certificate_issuer: str = "operator") -> set[Triple]:
    """What kube.py asks of the API server: every method of the client's API objects it names.

    Custom objects are TrainingJobs, except on the PodGroups' API object: the gang scheduler's
    podgroups when the chart sets one, else never called; and on cert-manager's: each of its
    resources the operator makes (cert_manager.PLURALS) in cert-manager's mode, else never called.
    """
    import kubernetes

    from tensorgrid_operator.resources import cert_manager
    from tensorgrid_operator.resources import podgroups
    from tensorgrid_operator.api import spec as spec_lib

    tree = ast.parse((OPERATOR / "cluster" / "kube.py").read_text())
    apis = _api_attributes(tree)
    assert set(apis.values()) >= {"CoreV1Api", "CustomObjectsApi"}, apis
    calls = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"
                and node.value.attr in apis):
            api_class = getattr(kubernetes.client, apis[node.value.attr])
            customs = [(spec_lib.GROUP, spec_lib.PLURAL)]
            if node.value.attr == POD_GROUPS_ATTRIBUTE:
                if gang_scheduler == podgroups.NONE:
                    continue
                customs = [(podgroups.APIS[gang_scheduler].group, podgroups.APIS[gang_scheduler].plural)]
            if node.value.attr == CERT_MANAGER_ATTRIBUTE:
                if certificate_issuer == cert_manager.OPERATOR:
                    continue
                customs = [(cert_manager.GROUP, plural) for plural in cert_manager.PLURALS.values()]
            calls |= {t for custom in customs if (t := _triple(*_request_of(api_class, node.attr), custom))}
    assert {POD_GROUPS_ATTRIBUTE, CERT_MANAGER_ATTRIBUTE} <= set(apis), f"kube.py lacks an API attribute: {apis}"
    return calls


def owner_reference_needs() -> set[Triple]:
    """What the owner references of the operator's pods and Services demand of its rights.

    The OwnerReferencesPermissionEnforcement admission plugin (OpenShift, hardened clusters)
    lets a creator set ``blockOwnerDeletion`` only if it may update the owner's finalizers.
    """
    from tensorgrid_operator.resources import manifests
    from tensorgrid_operator.api import spec as spec_lib

    reference = manifests.owner_reference({"metadata": {"name": "job", "uid": "uid"}})
    if reference.get("blockOwnerDeletion"):
        return {(spec_lib.GROUP, f"{spec_lib.PLURAL}/finalizers", "update")}
    return set()


def _constant(node: ast.expr) -> str:
    from tensorgrid_operator.api import spec as spec_lib

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "spec_lib":
        value = getattr(spec_lib, node.attr)
        assert isinstance(value, str)
        return value
    raise AssertionError(f"cannot evaluate {ast.dump(node)} in the controller package")


def _kopf_call(node: ast.AST, *path: str) -> bool:
    """Whether node is a call of kopf.<path...>."""
    if not isinstance(node, ast.Call):
        return False
    func: ast.expr = node.func
    for name in reversed(path):
        if not (isinstance(func, ast.Attribute) and func.attr == name):
            return False
        func = func.value
    return isinstance(func, ast.Name) and func.id == "kopf"


def _resource(call: ast.Call) -> tuple[str, str]:
    """(apiGroup, plural) of a kopf resource decorator: (group, version, plural) or ("v1", plural)."""
    args = [_constant(a) for a in call.args]
    if len(args) == 3:
        return args[0], args[2]
    assert len(args) == 2 and args[0] == "v1", f"unexpected kopf resource arguments {args}"
    return "", args[1]


# The controller module registered with kopf only by an operator that serves Kubeflow's TFJob (--serve-tfjob).
TFJOB_LOOP = "tfjob_loop.py"


def tfjob_needs() -> set[Triple]:
    """What serving TFJob adds (cluster/tfjob_calls.py; the chart's kubeflowTFJob.enabled): the CRD read once
    at start, the TFJobs read, their status written, a finished one deleted (its TTL), and the TrainingJob
    that runs each created. Its kopf watch and daemon are kopf_needs(serve_tfjob=True)'s."""
    return {("apiextensions.k8s.io", "customresourcedefinitions", "get"), ("kubeflow.org", "tfjobs", "get"),
            ("kubeflow.org", "tfjobs/status", "patch"), ("kubeflow.org", "tfjobs", "delete"),
            ("tensorgrid.io", "trainingjobs", "create")}


def kopf_needs(namespaced: bool, peering: bool, serve_tfjob: bool = False) -> set[Triple]:
    """What kopf does on the operator's behalf, for what the controller package asks of it."""
    modules = [path for path in sorted((OPERATOR / "controller").glob("*.py")) if serve_tfjob or path.name != TFJOB_LOOP]
    tree = ast.Module(body=[statement for path in modules for statement in ast.parse(path.read_text()).body],
                      type_ignores=[])
    needs: set[Triple] = set()
    finalizer = any(isinstance(n, ast.Attribute) and n.attr == "finalizer" for n in ast.walk(tree))
    for node in ast.walk(tree):
        if _kopf_call(node, "on", "event") or _kopf_call(node, "daemon"):
            assert isinstance(node, ast.Call)
            group, plural = _resource(node)
            needs |= {(group, plural, "list"), (group, plural, "watch")}  # kopf's watch: a list, then a watch
            if _kopf_call(node, "daemon"):
                # Daemons need a finalizer, which kopf adds and removes with patches.
                assert finalizer, "the controller has a daemon but sets no finalizer"
                needs.add((group, plural, "patch"))
        if _kopf_call(node, "event"):
            needs.add(("", "events", "create"))
        if _kopf_call(node, "run"):
            assert isinstance(node, ast.Call)
            assert "peering_name" in {k.arg for k in node.keywords}, "kopf.run without peering_name"
    if peering:
        plural = "kopfpeerings" if namespaced else "clusterkopfpeerings"
        needs |= {("kopf.dev", plural, verb) for verb in ("list", "watch", "patch")}  # keep-alives are patches
    # kopf discovers resources: it watches CRDs always, namespaces when given namespaces.
    needs |= {("apiextensions.k8s.io", "customresourcedefinitions", verb) for verb in ("list", "watch")}
    if namespaced:
        needs |= {("", "namespaces", verb) for verb in ("list", "watch")}
    return needs


def granted(roles: Iterable[dict[str, Any]]) -> set[Triple]:
    return {(group, resource, verb)
            for role in roles for rule in role["rules"]
            for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]}


def test_the_code_scan_sees_the_calls() -> None:
    calls = operator_api_calls()
    assert {("", "pods", "create"), ("", "services", "delete"), ("tensorgrid.io", "trainingjobs", "get"),
            ("tensorgrid.io", "trainingjobs/status", "patch")} <= calls, calls
    assert not [c for c in calls if c[1] == "podgroups"]
    for gang, group in (("volcano", "scheduling.volcano.sh"), ("scheduler-plugins", "scheduling.x-k8s.io")):
        assert operator_api_calls(gang) - calls == {(group, "podgroups", verb) for verb in ("create", "get", "patch")}
    assert operator_api_calls(certificate_issuer="cert-manager") - calls == {
        ("cert-manager.io", resource, verb) for resource in ("issuers", "certificates") for verb in ("create", "get")}
    assert ("", "events", "create") in kopf_needs(namespaced=False, peering=True)
    assert owner_reference_needs() == {("tensorgrid.io", "trainingjobs/finalizers", "update")}


def operator_cluster_roles(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ClusterRoles bound to the operator (not those aggregated into the default user roles)."""
    return [r for r in by_kind(manifests, "ClusterRole")
            if not any(k.startswith("rbac.authorization.k8s.io/aggregate-to-") for k in r["metadata"]["labels"])]


def _compare(granted_set: set[Triple], needed: set[Triple], what: str) -> None:
    extra, missing = granted_set - needed, needed - granted_set
    assert not extra and not missing, (f"{what}: granted but never used: {sorted(extra)}; "
                                       f"used but not granted: {sorted(missing)}")


@pytest.mark.parametrize("name", ["defaults", "standalone-no-metrics", "replicas-2", "kopf-peering", "gang-volcano",
                                  "gang-scheduler-plugins", "cert-manager", "cert-manager-cluster-issuer",
                                  "kubeflow-tfjob"])
def test_cluster_role_is_exactly_what_the_operator_uses(name: str) -> None:
    values = VALUE_SETS[name]
    manifests = render(values)
    lease = values.get("leaderElection", {}).get("enabled", True)
    peering = values.get("peering", {}).get("enabled", False) and not lease
    # The only Role is the Lease's, in the release's namespace (test_chart_leader_election.py checks its rules).
    assert [(r["metadata"]["namespace"], r["metadata"]["name"]) for r in by_kind(manifests, "Role")] == (
        [(RELEASE_NAMESPACE, f"{FULLNAME}-leader-election")] if lease else [])
    gang = values.get("trainingPods", {}).get("gangScheduler", "none")
    issuer = values.get("certificates", {}).get("issuer", "operator")
    serve_tfjob = values.get("kubeflowTFJob", {}).get("enabled", False)
    needed = (operator_api_calls(gang, issuer) | owner_reference_needs() | kopf_needs(False, peering, serve_tfjob)
              | (tfjob_needs() if serve_tfjob else set()))
    _compare(granted(operator_cluster_roles(manifests)), needed, "ClusterRole")


@pytest.mark.parametrize("peering", [True, False])
def test_roles_per_namespace_are_exactly_what_the_operator_uses(peering: bool) -> None:
    manifests = render({"watchNamespaces": ["tg-team-a", "tg-team-b"], "peering": {"enabled": peering},
                        "leaderElection": {"enabled": not peering}})
    needed = operator_api_calls() | owner_reference_needs() | kopf_needs(True, peering)
    cluster_needed = {t for t in needed if t[1] in CLUSTER_SCOPED}
    _compare(granted(operator_cluster_roles(manifests)), cluster_needed, "ClusterRole")
    roles = [r for r in by_kind(manifests, "Role") if r["metadata"]["namespace"] != RELEASE_NAMESPACE]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["tg-team-a", "tg-team-b"]
    for role in roles:
        _compare(granted([role]), needed - cluster_needed, f"Role in {role['metadata']['namespace']}")


def test_aggregated_roles_let_edit_manage_and_view_read_trainingjobs() -> None:
    manifests = render({})
    roles = {r["metadata"]["name"]: r for r in by_kind(manifests, "ClusterRole")}
    edit, view = roles[f"{FULLNAME}-edit"], roles[f"{FULLNAME}-view"]
    assert {k: v for k, v in edit["metadata"]["labels"].items() if k.startswith("rbac.")} == {
        "rbac.authorization.k8s.io/aggregate-to-admin": "true", "rbac.authorization.k8s.io/aggregate-to-edit": "true"}
    assert {k: v for k, v in view["metadata"]["labels"].items() if k.startswith("rbac.")} == {
        "rbac.authorization.k8s.io/aggregate-to-view": "true"}
    assert ("tensorgrid.io", "trainingjobs", "create") in granted([edit])
    assert not {t for t in granted([edit]) | granted([view]) if t[1] == "trainingjobs/status" and t[2] != "get"
                and t[2] not in ("list", "watch")}, "users never write the status"
    assert {t[2] for t in granted([view])} == {"get", "list", "watch"}
    assert not [r for r in by_kind(render({"rbac": {"aggregateToDefaultRoles": False}}), "ClusterRole")
                if r["metadata"]["name"].endswith(("-edit", "-view"))]


@pytest.mark.controlplane
def test_aggregated_roles_reach_the_default_roles_on_a_real_api_server(controlplane: ControlPlane) -> None:
    cp = controlplane
    if cp.kubectl("get", "namespace", RELEASE_NAMESPACE, check=False).returncode != 0:
        cp.kubectl("create", "namespace", RELEASE_NAMESPACE)
    roles = [r for r in by_kind(render({}), "ClusterRole") if r["metadata"]["name"].endswith(("-edit", "-view"))]
    cp.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(roles))

    def can(role: str, verb: str) -> bool:
        rules = json.loads(cp.kubectl("get", "clusterrole", role, "-o", "json").stdout).get("rules") or []
        return any("tensorgrid.io" in r.get("apiGroups", []) and "trainingjobs" in r.get("resources", [])
                   and verb in r.get("verbs", []) for r in rules)

    wait_for(lambda: can("edit", "create") and can("admin", "delete") and can("view", "list"), 30,
             "the aggregation controller to add TrainingJobs to edit, admin and view")
    assert not can("view", "create")


# --- the operator under exactly the chart's RBAC, on a real API server -----------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy_operator(args: list[str], log_path: pathlib.Path, attempts: int = 3) -> subprocess.Popen[bytes]:
    """The operator with ``args`` in its own process, once its /healthz answers. A port found free
    can be taken by another process before the operator binds it (it happened while a CI run's
    tests ran beside these): the operator then exits naming the address, and starts again on others."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    for attempt in range(attempts):
        metrics_port, liveness_port = _free_port(), _free_port()
        with open(log_path, "w") as log_file:
            process = subprocess.Popen([sys.executable, "-m", "tensorgrid_operator", *args,
                                        f"--metrics-port={metrics_port}", f"--liveness-port={liveness_port}"],
                                       stdout=log_file, stderr=subprocess.STDOUT, env=env)

        def healthy() -> bool:
            if process.poll() is not None:
                return True  # said below
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{liveness_port}/healthz", timeout=2) as response:
                    return bool(response.status == 200)
            except OSError:
                return False

        wait_for(healthy, 60, "the operator's /healthz")
        if process.poll() is None:
            return process
        log = log_path.read_text()
        if "address already in use" not in log.lower() or attempt == attempts - 1:
            raise AssertionError(f"the operator exited with {process.returncode}: {log[-3000:]}")
    raise AssertionError(f"no ports the operator could bind in {attempts} attempts")


def _service_account_kubeconfig(cp: ControlPlane, path: pathlib.Path) -> None:
    """A kubeconfig with a token of the chart's ServiceAccount: the operator is that account, nothing more."""
    token = cp.kubectl("-n", RELEASE_NAMESPACE, "create", "token", FULLNAME, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(pathlib.Path(cp.kubeconfig).read_text())
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": admin["clusters"][0]["name"], "user": "operator"}}],
        "current-context": "operator",
    }))


def _finish_as_kubelet(cp: ControlPlane, namespace: str, pod: str) -> None:
    status = {"status": {"phase": "Succeeded", "containerStatuses": [{
        "name": "tensorgrid", "image": "tensorgrid:test", "imageID": "", "ready": False, "restartCount": 0,
        "started": False, "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                                   "startedAt": "2030-01-01T00:00:00Z",
                                                   "finishedAt": "2030-01-01T00:00:01Z"}}}]}}
    cp.kubectl("-n", namespace, "patch", "pod", pod, "--subresource=status", "--type=merge", "-p", json.dumps(status))


def _job(name: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "tensorgrid", "image": "tensorgrid:test",
                                          "command": ["tensorgrid", "server"]}]}}
    return {"apiVersion": "tensorgrid.io/v1", "kind": "TrainingJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": {"PS": {"replicas": 1, "template": template},
                                      "Worker": {"replicas": 1, "template": template}},
                     "runPolicy": {"ttlSecondsAfterFinished": 0}}}


def _names(cp: ControlPlane, namespace: str, kinds: str) -> set[str]:
    out = cp.kubectl("-n", namespace, "get", kinds, "-l", "tensorgrid.io/job-name=rbac", "-o", "name").stdout
    return set(out.split())


def _cert_manager_crds() -> pathlib.Path:
    """cert-manager's CRDs as hack/tools.sh --with-cert-manager copies them (skips, or fails under CI=true, without)."""
    return built_tools.built("--with-cert-manager", "cert-manager-crds")[0]


CERT_MANAGER_CRDS = ("issuers.cert-manager.io", "certificates.cert-manager.io")


@pytest.mark.controlplane
@pytest.mark.parametrize("watch", ["all-namespaces", "given-namespaces-kopf-peering", "given-namespaces-volcano",
                                   "given-namespaces-cert-manager"])
def test_operator_works_under_the_chart_rbac(controlplane: ControlPlane, tmp_path: pathlib.Path, watch: str) -> None:
    """A job's whole life (pods, Services, status, events, cleanup, TTL deletion) with no permission error;
    with a gang scheduler, its PodGroup too (Volcano's CRD, from tests/operator/support/crds); in cert-manager's mode,
    its Issuers and Certificates (cert-manager's CRDs, removed again at the end; no controller is needed to
    make them)."""
    cp = controlplane
    job_namespace = f"chart-rbac-{watch}"
    values: dict[str, Any] = {"watchNamespaces": [job_namespace]} if watch != "all-namespaces" else {}
    kopf_peering = watch.endswith("-kopf-peering")  # the others elect on the chart's default Lease
    if kopf_peering:
        values.update(leaderElection={"enabled": False}, peering={"enabled": True})
    gang = watch.endswith("-volcano")
    if gang:
        values["trainingPods"] = {"gangScheduler": "volcano"}
        cp.kubectl("apply", "--server-side", "--force-conflicts", "-f",
                   str(ROOT / "tests" / "operator" / "support" / "crds" / "scheduling.volcano.sh_podgroups.yaml"))
        wait_crds_established(cp, "podgroups.scheduling.volcano.sh")
    cert_manager = watch.endswith("-cert-manager")
    if cert_manager:
        values["certificates"] = {"issuer": "cert-manager"}
        crds = _cert_manager_crds()
        for name in CERT_MANAGER_CRDS:
            cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crds / f"cert-manager.io_{name.split('.')[0]}.yaml"))
        wait_crds_established(cp, *CERT_MANAGER_CRDS)
    for namespace in (RELEASE_NAMESPACE, job_namespace):
        if cp.kubectl("get", "namespace", namespace, check=False).returncode != 0:
            cp.kubectl("create", "namespace", namespace)
    if watch == "all-namespaces":
        cp.wait_until_no_training_jobs()
    manifests = render(values)
    # Everything but the Deployment and its Service: there are no nodes, the operator runs here.
    installed = [m for m in manifests if m["kind"] not in ("Deployment", "Service")]
    cp.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(installed))
    kubeconfig = tmp_path / "operator.kubeconfig"
    _service_account_kubeconfig(cp, kubeconfig)

    (deployment,) = by_kind(manifests, "Deployment")
    chart_args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    args = [a for a in chart_args if not a.startswith(("--metrics-port=", "--liveness-port="))]
    args.append(f"--kubeconfig={kubeconfig}")
    log_path = tmp_path / "operator.log"
    process = _healthy_operator(args, log_path)
    try:
        cp.kubectl("-n", job_namespace, "apply", "-f", "-", stdin=json.dumps(_job("rbac")))
        wait_for(lambda: _names(cp, job_namespace, "pods,services") == {
            "pod/rbac-ps-0", "pod/rbac-worker-0", "service/rbac-ps-0", "service/rbac-worker-0"}, 60,
            "the job's pods and Services", lambda: _names(cp, job_namespace, "pods,services"))
        kinds = "networkpolicies,poddisruptionbudgets"
        assert _names(cp, job_namespace, kinds) == {"networkpolicy.networking.k8s.io/rbac",
                                                    "poddisruptionbudget.policy/rbac-ps"}
        if gang:
            assert _names(cp, job_namespace, "podgroups.scheduling.volcano.sh") == {
                "podgroup.scheduling.volcano.sh/rbac"}
        if cert_manager:
            assert _names(cp, job_namespace, "issuers.cert-manager.io,certificates.cert-manager.io") == {
                "issuer.cert-manager.io/rbac-selfsigned", "issuer.cert-manager.io/rbac-ca",
                "certificate.cert-manager.io/rbac-ca", "certificate.cert-manager.io/rbac-ps-0-tls",
                "certificate.cert-manager.io/rbac-worker-0-tls"}
        _finish_as_kubelet(cp, job_namespace, "rbac-worker-0")
        # Succeeded (status patch, events), PS pod deleted, then deleted by its TTL of 0 (finalizer removed).
        wait_for(lambda: cp.kubectl("-n", job_namespace, "get", "tj", "rbac", check=False).returncode != 0, 60,
                 "the job to succeed and be deleted by its TTL",
                 lambda: cp.kubectl("-n", job_namespace, "get", "tj", "rbac", "-o", "yaml", check=False).stdout)
        def reasons() -> set[str]:
            return set(cp.kubectl("-n", job_namespace, "get", "events", "-o",
                                  "jsonpath={.items[*].reason}").stdout.split())

        # kopf posts events from a queue of its own: they may land just after the job is gone.
        wait_for(lambda: {"CreatedPods", "JobSucceeded"} <= reasons(), 10, "the job's events", reasons)
        if kopf_peering:
            peering = cp.kubectl("get", "-n", job_namespace, "kopfpeering", "tensorgrid-operator", "-o", "json").stdout
            assert json.loads(peering).get("status"), f"no keep-alive in the peering object: {peering}"
        else:
            holder = cp.kubectl("get", "lease", FULLNAME, "-n", RELEASE_NAMESPACE, "-o",
                                "jsonpath={.spec.holderIdentity}").stdout
            assert holder and "leading: " in log_path.read_text(), f"the operator did not lead on the chart's Lease: {holder!r}"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        cp.kubectl("delete", "namespace", job_namespace, "--wait=false", check=False)
        if cert_manager:
            cp.kubectl("delete", "crd", "--ignore-not-found", *CERT_MANAGER_CRDS, check=False)
    output = log_path.read_text()
    # 403 as a status, not as the milliseconds of a log line's time stamp ("12:00:01,403").
    denied = [line for line in output.splitlines()
              if re.search(r"forbidden|Forbidden|(?<![,\d])403(?!\d)|permission", line)]
    assert not denied, "permission errors under the chart's RBAC:\n" + "\n".join(denied[:20])
    assert process.returncode == 0, output[-3000:]
