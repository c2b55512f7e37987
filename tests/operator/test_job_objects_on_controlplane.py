"""A job's NetworkPolicy, PS PodDisruptionBudget and pod defaults, created on a real API server.

The API server validates both objects; garbage collection deletes them with the job.
Enforcement of the NetworkPolicy is the CNI's business (the e2e node's ptp CNI does not
enforce it: docs/operator.md, "NetworkPolicy").
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import exceptions

from operator_cluster import PROMETHEUS_PEERS, Namespace, Operator, job_manifest, wait_for


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
    assert budget is not None and budget["spec"]["maxUnavailable"] == 0
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
