"""A job's NetworkPolicy, PS PodDisruptionBudget and pod defaults, created on a real API server.

The API server validates both objects; garbage collection deletes them with the job.
Enforcement of the NetworkPolicy is the CNI's business (the e2e node's ptp CNI does not
enforce it: docs/operator.md, "NetworkPolicy").
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import exceptions

from operator_cluster import PROMETHEUS_PEERS, Namespace, Operator, job_manifest, wait_for

pytestmark = pytest.mark.controlplane


def _network_policy(namespace: Namespace, name: str) -> Any:
    try:
        return namespace.cp.api.sanitize_for_serialization(
            namespace.cp.networking.read_namespaced_network_policy(name, namespace.name))
    except exceptions.ApiException as e:
        if e.status == 404:
            return None
        raise


def _budget(namespace: Namespace, name: str) -> Any:
    try:
        return namespace.cp.api.sanitize_for_serialization(
            namespace.cp.policy.read_namespaced_pod_disruption_budget(name, namespace.name))
    except exceptions.ApiException as e:
        if e.status == 404:
            return None
        raise


def test_a_job_gets_its_network_policy_and_ps_budget_and_loses_them_with_the_job(
        operator: Operator, namespace: Namespace) -> None:
    job = namespace.apply(job_manifest("fenced", ps=2, workers=1))
    pods = namespace.wait_pods("fenced", {"fenced-ps-0", "fenced-ps-1", "fenced-worker-0"})
    policy = _network_policy(namespace, "fenced")
    assert policy is not None, "no NetworkPolicy"
    own = {"podSelector": {"matchLabels": {"tensorgrid.io/job-name": "fenced"}}}
    assert policy["spec"]["podSelector"] == own["podSelector"]
    assert policy["spec"]["ingress"] == [
        {"from": [own]},
        {"from": list(PROMETHEUS_PEERS), "ports": [{"port": "metrics", "protocol": "TCP"}]}]
    assert policy["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    budget = _budget(namespace, "fenced-ps")
    assert budget is not None and budget["spec"]["minAvailable"] == 2
    assert budget["spec"]["selector"]["matchLabels"] == {"tensorgrid.io/job-name": "fenced",
                                                         "tensorgrid.io/replica-type": "ps"}
    for name, pod in pods.items():
        assert pod["spec"]["automountServiceAccountToken"] is False, name
    anti = pods["fenced-ps-1"]["spec"]["affinity"]["podAntiAffinity"]
    assert anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["topologyKey"] == \
        "kubernetes.io/hostname"
    assert "affinity" not in pods["fenced-worker-0"]["spec"]

    namespace.cp.custom.delete_namespaced_custom_object("tensorgrid.io", "v1", namespace.name, "trainingjobs", "fenced",
                                                        propagation_policy="Foreground")
    wait_for(lambda: _network_policy(namespace, "fenced") is None and _budget(namespace, "fenced-ps") is None, 60,
             "garbage collection of the NetworkPolicy and the budget")


def test_a_job_without_parameter_servers_gets_no_budget(operator: Operator, namespace: Namespace) -> None:
    namespace.apply(job_manifest("solo", ps=0, workers=1))
    namespace.wait_pods("solo", {"solo-worker-0"})
    wait_for(lambda: _network_policy(namespace, "solo") is not None, 10, "the NetworkPolicy")
    assert _budget(namespace, "solo-ps") is None


def test_a_deleted_network_policy_or_budget_is_created_again_with_an_event(
        operator: Operator, namespace: Namespace) -> None:
    job = namespace.apply(job_manifest("guarded", ps=1, workers=1))
    namespace.wait_pods("guarded", {"guarded-ps-0", "guarded-worker-0"})
    wait_for(lambda: _network_policy(namespace, "guarded") is not None and _budget(namespace, "guarded-ps") is not None,
             10, "the NetworkPolicy and the budget")
    first_policy = _network_policy(namespace, "guarded")["metadata"]["uid"]
    first_budget = _budget(namespace, "guarded-ps")["metadata"]["uid"]

    namespace.cp.networking.delete_namespaced_network_policy("guarded", namespace.name)
    wait_for(lambda: (_network_policy(namespace, "guarded") or {"metadata": {"uid": first_policy}})["metadata"]["uid"]
             != first_policy, 30, "the NetworkPolicy to be created again")
    namespace.cp.policy.delete_namespaced_pod_disruption_budget("guarded-ps", namespace.name)
    wait_for(lambda: (_budget(namespace, "guarded-ps") or {"metadata": {"uid": first_budget}})["metadata"]["uid"]
             != first_budget, 30, "the PodDisruptionBudget to be created again")
    policy = _network_policy(namespace, "guarded")
    assert policy["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert policy["metadata"]["labels"] == {"tensorgrid.io/job-name": "guarded"}

    def reasons() -> list[str]:
        return [e["reason"] for e in namespace.events("guarded")]

    wait_for(lambda: {"RecreatedNetworkPolicy", "RecreatedPodDisruptionBudget"} <= set(reasons()), 10,
             "the events saying so", reasons)
    messages = [e["message"] for e in namespace.events("guarded") if e["reason"] == "RecreatedNetworkPolicy"]
    assert messages and "NetworkPolicy guarded of the job was deleted" in messages[0]
    # Deleted again: created once more (the operator keeps noticing, not only once).
    second_policy = policy["metadata"]["uid"]
    namespace.cp.networking.delete_namespaced_network_policy("guarded", namespace.name)
    wait_for(lambda: (_network_policy(namespace, "guarded") or {"metadata": {"uid": second_policy}})["metadata"]["uid"]
             != second_policy, 30, "the NetworkPolicy to be created a second time")
