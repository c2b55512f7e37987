"""A clean uninstall: the post-delete hook strips kopf's finalizer from every TrainingJob.

The hook's RBAC is derived from the code (the kube.py calls that uninstall.py makes)
and compared both ways with what the chart grants; then the hook's command runs
against a real API server as the hook's ServiceAccount, with exactly that RBAC, and
jobs and their namespace delete without any operator.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from chart_support import FULLNAME, RELEASE_NAMESPACE, by_kind, is_hook, render
from kube_controlplane import ControlPlane, wait_for
from test_rbac import OPERATOR, Triple, _api_attributes, _request_of, _triple, granted

HOOK = f"{FULLNAME}-uninstall"
FINALIZER = "tensorgrid.io/operator"


def kube_method_calls() -> dict[str, set[Triple]]:
    """For each method of kube.Kube, the API requests it makes."""
    import kubernetes

    from tensorgrid_operator.api import spec as spec_lib

    tree = ast.parse((OPERATOR / "cluster" / "kube.py").read_text())
    apis = _api_attributes(tree)
    (kube_class,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Kube"]
    calls: dict[str, set[Triple]] = {}
    for method in kube_class.body:
        if isinstance(method, ast.FunctionDef):
            calls[method.name] = {
                _triple(*_request_of(getattr(kubernetes.client, apis[node.value.attr]), node.attr),
                        (spec_lib.GROUP, spec_lib.PLURAL))
                for node in ast.walk(method)
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"
                and node.value.attr in apis}
    return calls


def uninstall_needs() -> set[Triple]:
    """What `--remove-finalizers` asks of the API server: the Kube methods uninstall.py calls."""
    methods = kube_method_calls()
    tree = ast.parse((OPERATOR / "cluster" / "uninstall.py").read_text())
    used = {node.func.attr for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in methods}
    assert used >= {"list_jobs", "remove_finalizer"}, used
    return set().union(*(methods[m] for m in used))


def hooks(values: dict[str, object]) -> list[dict[str, object]]:
    return [m for m in render(values, hooks=True) if is_hook(m)]


def test_the_hook_runs_after_the_release_is_gone() -> None:
    rendered = hooks({})
    assert sorted(m["kind"] for m in rendered) == ["ClusterRole", "ClusterRoleBinding", "Job", "ServiceAccount"]
    for manifest in rendered:
        annotations = manifest["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "post-delete"
        assert annotations["helm.sh/hook-delete-policy"] == ("before-hook-creation,hook-succeeded,hook-failed"
                                                              if manifest["kind"] == "Job"
                                                              else "before-hook-creation,hook-succeeded")
    weights = {m["kind"]: int(m["metadata"]["annotations"]["helm.sh/hook-weight"]) for m in rendered}
    assert weights["ServiceAccount"] < weights["ClusterRoleBinding"] < weights["Job"]
    (job,) = by_kind(rendered, "Job")
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == HOOK and pod["restartPolicy"] == "Never"
    container = pod["containers"][0]
    assert container["image"] == "tensorgrid-operator:0.1.0" and container["args"] == ["--remove-finalizers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert by_kind(hooks({"watchNamespaces": ["a", "b"]}), "Job")[0]["spec"]["template"]["spec"]["containers"][0][
        "args"] == ["--remove-finalizers", "--namespace=a", "--namespace=b"]
    assert hooks({"uninstall": {"removeFinalizers": False}}) == []
    # Without chart-made RBAC or ServiceAccount, the hook runs as the account the user manages.
    own = hooks({"rbac": {"create": False}, "serviceAccount": {"create": False, "name": "mine"}})
    assert [m["kind"] for m in own] == ["Job"]
    assert own[0]["spec"]["template"]["spec"]["serviceAccountName"] == "mine"


@pytest.mark.parametrize("namespaces", [[], ["tg-team-a", "tg-team-b"]])
def test_the_hook_rbac_is_exactly_what_remove_finalizers_uses(namespaces: list[str]) -> None:
    rendered = hooks({"watchNamespaces": namespaces})
    needed = uninstall_needs()
    assert needed == {("tensorgrid.io", "trainingjobs", "list"), ("tensorgrid.io", "trainingjobs", "patch")}
    roles = by_kind(rendered, "Role") + by_kind(rendered, "ClusterRole")
    assert [r["kind"] for r in roles] == (["Role", "Role"] if namespaces else ["ClusterRole"])
    for role in roles:
        assert granted([role]) == needed, role
    if namespaces:
        assert sorted(r["metadata"]["namespace"] for r in roles) == namespaces


def _token_kubeconfig(cp: ControlPlane, account: str, path: pathlib.Path) -> None:
    token = cp.kubectl("-n", RELEASE_NAMESPACE, "create", "token", account, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(pathlib.Path(cp.kubeconfig).read_text())
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
        "users": [{"name": "hook", "user": {"token": token}}],
        "contexts": [{"name": "hook", "context": {"cluster": admin["clusters"][0]["name"], "user": "hook"}}],
        "current-context": "hook",
    }))


def _job(name: str, finalizers: list[str]) -> str:
    template = {"spec": {"containers": [{"name": "tensorgrid", "image": "tensorgrid:test"}]}}
    return json.dumps({"apiVersion": "tensorgrid.io/v1", "kind": "TrainingJob",
                       "metadata": {"name": name, "finalizers": finalizers},
                       "spec": {"replicaSpecs": {"Worker": {"replicas": 1, "template": template}}}})


def _finalizers(cp: ControlPlane, namespace: str, name: str) -> list[str]:
    out = cp.kubectl("-n", namespace, "get", "tj", name, "-o", "jsonpath={.metadata.finalizers}").stdout
    return list(json.loads(out)) if out else []


@pytest.mark.controlplane
@pytest.mark.parametrize("watch", ["all-namespaces", "given-namespaces"])
def test_the_hook_frees_every_job_under_its_own_rbac(controlplane: ControlPlane, tmp_path: pathlib.Path,
                                                      watch: str) -> None:
    """As after `helm uninstall`: no operator, jobs holding its finalizer; the hook's command frees them."""
    cp = controlplane
    watched, other = f"chart-uninstall-{watch}", f"chart-unwatched-{watch}"
    for namespace in (RELEASE_NAMESPACE, watched, other):
        if cp.kubectl("get", "namespace", namespace, check=False).returncode != 0:
            cp.kubectl("create", "namespace", namespace)
    values = {"watchNamespaces": [watched]} if watch == "given-namespaces" else {}
    if watch == "all-namespaces":
        cp.wait_until_no_training_jobs()
    rendered = hooks(values)
    cp.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([m for m in rendered if m["kind"] != "Job"]))
    kubeconfig = tmp_path / "hook.kubeconfig"
    _token_kubeconfig(cp, HOOK, kubeconfig)
    cp.kubectl("-n", watched, "apply", "-f", "-", stdin=_job("only-ours", [FINALIZER]))
    cp.kubectl("-n", watched, "apply", "-f", "-", stdin=_job("shared", ["example.com/keep", FINALIZER]))
    cp.kubectl("-n", other, "apply", "-f", "-", stdin=_job("elsewhere", [FINALIZER]))

    (job,) = by_kind(rendered, "Job")
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    result = subprocess.run([sys.executable, "-m", "tensorgrid_operator", *args, f"--kubeconfig={kubeconfig}"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "none carries it now" in result.stdout, result.stdout
    assert _finalizers(cp, watched, "only-ours") == []
    assert _finalizers(cp, watched, "shared") == ["example.com/keep"], "other finalizers stay"
    assert _finalizers(cp, other, "elsewhere") == ([FINALIZER] if watch == "given-namespaces" else [])

    cp.kubectl("-n", watched, "patch", "tj", "shared", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    cp.kubectl("delete", "namespace", watched, "--wait=false")
    wait_for(lambda: cp.kubectl("get", "namespace", watched, check=False).returncode != 0, 60,
             f"namespace {watched} to be deleted, its jobs with it")
    cp.kubectl("-n", other, "patch", "tj", "elsewhere", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    cp.kubectl("delete", "namespace", other, "--wait=false")
    cp.kubectl("delete", "-f", "-", "--ignore-not-found", stdin=yaml.safe_dump_all(
        [m for m in rendered if m["kind"] != "Job"]))
