"""The chart's ``leaderElection``, its default: the operator elects its active replica on a Lease, with exactly the
RBAC it needs.

By default the Deployment runs ``--leader-election=<fullname>`` in the release's namespace instead of kopf
peering: no peering object and no kopf.dev permission, and a Role there grants what ``cluster/leader_lease.py``
calls on Leases (derived from its code, compared both ways). kopf peering stays an option
(``leaderElection.enabled: false``, ``peering.enabled: true``). On the control plane, an elector with
the chart's ServiceAccount token creates, renews and releases the Lease under exactly that Role.
"""

from __future__ import annotations

import ast
import pathlib
from typing import Any

import kubernetes
import pytest
import yaml

from chart_support import FULLNAME, RELEASE_NAMESPACE, VALUE_SETS, by_kind, one, render
from test_chart_image_registry import release_notes
from kube_controlplane import ControlPlane
from test_rbac import (OPERATOR, Triple, _compare, _request_of, _triple, granted, kopf_needs, operator_api_calls,
                       operator_cluster_roles, owner_reference_needs)
from test_uninstall import _token_kubeconfig

ROLE = f"{FULLNAME}-leader-election"


def lease_needs() -> set[Triple]:
    """What leader_lease.py asks of the API server: each CoordinationV1Api method it calls on ``self._leases``."""
    tree = ast.parse((OPERATOR / "cluster" / "leader_lease.py").read_text())
    methods = {node.attr for node in ast.walk(tree)
               if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
               and node.value.attr == "_leases"}
    assert methods == {"read_namespaced_lease", "create_namespaced_lease", "replace_namespaced_lease"}, methods
    triples = {_triple(*_request_of(kubernetes.client.CoordinationV1Api, m), ("", "")) for m in methods}
    return {t for t in triples if t is not None}


def test_the_operator_elects_on_a_lease_instead_of_kopf_peering() -> None:
    manifests = render(VALUE_SETS["leader-election"])
    deployment = one(manifests, "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {"--leader-election=tensorgrid-operator", f"--leader-election-namespace={RELEASE_NAMESPACE}",
            "--lease-duration-seconds=20"} <= set(args)
    assert not any(a.startswith(("--peering", "--standalone")) for a in args)
    assert deployment["spec"]["replicas"] == 2 and "strategy" not in deployment["spec"]
    assert not by_kind(manifests, "ClusterKopfPeering")
    needed = operator_api_calls() | owner_reference_needs() | kopf_needs(False, peering=False)
    _compare(granted(operator_cluster_roles(manifests)), needed, "ClusterRole")
    role = one(manifests, "Role")
    assert (role["metadata"]["name"], role["metadata"]["namespace"]) == (ROLE, RELEASE_NAMESPACE)
    _compare(granted([role]), lease_needs(), "the leader-election Role")
    assert [r.get("resourceNames") for r in role["rules"]] == [None, ["tensorgrid-operator"]]
    binding = one(manifests, "RoleBinding")
    assert binding["roleRef"]["name"] == ROLE and binding["subjects"][0]["name"] == FULLNAME


def _election_args(manifests: list[dict[str, Any]]) -> list[str]:
    args = one(manifests, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    return [a for a in args if a.startswith(("--leader-election", "--lease-duration", "--peering", "--standalone"))]


def _kopf_peering_objects(manifests: list[dict[str, Any]]) -> list[str]:
    """What the chart makes for kopf's peering: its objects, and RBAC rules on kopf.dev."""
    objects = [m["kind"] for m in manifests if m["kind"] in ("ClusterKopfPeering", "KopfPeering")]
    rules = [rule for role in by_kind(manifests, "ClusterRole") + by_kind(manifests, "Role") for rule in role["rules"]
             if "kopf.dev" in rule.get("apiGroups", [])]
    return objects + [f"rule on {rule['resources']}" for rule in rules]


@pytest.mark.parametrize("watch_namespaces", [[], ["tg-team-a"]])
def test_the_default_elects_on_a_lease_named_after_the_release_and_makes_nothing_of_kopf_peering(
        watch_namespaces: list[str]) -> None:
    manifests = render({"watchNamespaces": watch_namespaces})
    assert _election_args(manifests) == [f"--leader-election={FULLNAME}",
                                         f"--leader-election-namespace={RELEASE_NAMESPACE}",
                                         "--lease-duration-seconds=15"]
    role = [r for r in by_kind(manifests, "Role") if r["metadata"]["name"] == ROLE]
    assert len(role) == 1 and role[0]["metadata"]["namespace"] == RELEASE_NAMESPACE
    _compare(granted(role), lease_needs(), "the leader-election Role")
    assert [r.get("resourceNames") for r in role[0]["rules"]] == [None, [FULLNAME]]
    assert [b["roleRef"]["name"] for b in by_kind(manifests, "RoleBinding")
            if b["metadata"]["namespace"] == RELEASE_NAMESPACE] == [ROLE]
    assert _kopf_peering_objects(manifests) == []
    # peering.enabled alone changes nothing (the Lease wins; NOTES.txt says so): kopf peering needs the Lease off.
    assert _election_args(render({"watchNamespaces": watch_namespaces, "peering": {"enabled": True}})) == \
        _election_args(manifests)
    peering = render({"watchNamespaces": watch_namespaces, "leaderElection": {"enabled": False},
                      "peering": {"enabled": True}})
    assert _election_args(peering) == ["--peering=tensorgrid-operator"]
    assert _kopf_peering_objects(peering) and not [r for r in by_kind(peering, "Role")
                                                    if r["metadata"]["name"] == ROLE]
    assert _election_args(render({"leaderElection": {"leaseName": "ours"}}))[0] == "--leader-election=ours"


def test_the_notes_name_the_lease_and_say_when_peering_is_ignored(tmp_path: pathlib.Path) -> None:
    notes = release_notes({}, tmp_path / "default")
    assert f"kubectl -n {RELEASE_NAMESPACE} get lease {FULLNAME}" in notes
    assert "peering.enabled is ignored" not in notes
    assert "peering.enabled is ignored" in release_notes({"peering": {"enabled": True}}, tmp_path / "both")
    peering = release_notes({"peering": {"enabled": True}, "leaderElection": {"enabled": False}}, tmp_path / "kopf")
    assert "get lease" not in peering and "peering.enabled is ignored" not in peering


@pytest.mark.controlplane
def test_the_charts_role_lets_the_operator_hold_and_release_its_lease(controlplane: ControlPlane,
                                                                      tmp_path: pathlib.Path) -> None:
    from tensorgrid_operator.cluster import kube
    from tensorgrid_operator.cluster import leader_lease

    cp = controlplane
    if cp.kubectl("get", "namespace", RELEASE_NAMESPACE, check=False).returncode != 0:
        cp.kubectl("create", "namespace", RELEASE_NAMESPACE)
    objects = [m for m in render(VALUE_SETS["leader-election"])
               if m["kind"] in ("ServiceAccount", "Role", "RoleBinding")]
    cp.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objects))
    kubeconfig = tmp_path / "operator.kubeconfig"
    _token_kubeconfig(cp, FULLNAME, kubeconfig)
    elector = leader_lease.LeaseElector(kube.load_config(str(kubeconfig)), RELEASE_NAMESPACE, "tensorgrid-operator",
                                        "replica-a", 20)
    try:
        assert elector.attempt().reason == "created the Lease"
        assert elector.attempt().reason == "renewed the Lease"
        assert elector.release() is None
        holder = cp.kubectl("get", "lease", "tensorgrid-operator", "-n", RELEASE_NAMESPACE, "-o",
                            "jsonpath={.spec.holderIdentity}").stdout
        assert holder == ""
        other = leader_lease.LeaseElector(kube.load_config(str(kubeconfig)), RELEASE_NAMESPACE, "someone-elses",
                                          "replica-a", 20)
        try:
            with pytest.raises(kubernetes.client.exceptions.ApiException) as refused:
                other.attempt()  # get and update are granted on the chart's Lease only
            assert refused.value.status == 403
        finally:
            other.close()
    finally:
        elector.close()
        cp.kubectl("delete", "lease", "tensorgrid-operator", "someone-elses", "-n", RELEASE_NAMESPACE,
                   "--ignore-not-found")
        cp.kubectl("delete", "-f", "-", "--ignore-not-found", stdin=yaml.safe_dump_all(objects))


@pytest.mark.controlplane
def test_an_upgrade_that_changes_how_replicas_elect_replaces_them_at_once(controlplane: ControlPlane) -> None:
    """A release whose pods elect with kopf peering (the chart's default before the Lease), upgraded to the Lease:
    old and new pods would not see each other, so that upgrade uses the Recreate strategy; the next one, or one
    that keeps the election, rolls as usual. The chart reads the running Deployment (``lookup``, which
    ``helm template --dry-run=server`` answers from the API server, as an upgrade does)."""
    cp = controlplane
    if cp.kubectl("get", "namespace", RELEASE_NAMESPACE, check=False).returncode != 0:
        cp.kubectl("create", "namespace", RELEASE_NAMESPACE)

    def strategy(values: dict[str, Any]) -> Any:
        deployment = one(render(values, "--dry-run=server", "--kubeconfig", cp.kubeconfig), "Deployment")
        return deployment["spec"].get("strategy")

    def running(values: dict[str, Any]) -> None:
        cp.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(one(render(values), "Deployment")))

    recreate = {"type": "Recreate"}
    try:
        assert strategy({}) is None  # a first install: nothing runs yet
        running(VALUE_SETS["kopf-peering"])
        assert strategy({}) == recreate
        assert strategy(VALUE_SETS["kopf-peering"]) is None
        running({})
        assert strategy({}) is None
        assert strategy({"leaderElection": {"leaseName": "another-lease"}}) == recreate
        assert strategy(VALUE_SETS["kopf-peering"]) == recreate
    finally:
        cp.kubectl("delete", "deployment", FULLNAME, "-n", RELEASE_NAMESPACE, "--ignore-not-found")
