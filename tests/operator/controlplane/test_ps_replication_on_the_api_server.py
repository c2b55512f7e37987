"""spec.replicaSpecs.PS.replication on a real API server: the CRD's rules, the PS pods' environment, and the
standby's Deployment, Service, NetworkPolicy and certificate made by the operator and accepted by the API server."""

from __future__ import annotations

from typing import Any, Callable

import kubernetes
import pytest
from kubernetes.client import exceptions

from operator_cluster import Namespace, Operator, job_manifest, wait_for

pytestmark = pytest.mark.controlplane


def _replicated(name: str, ps: int, **replication: Any) -> dict[str, Any]:
    job = job_manifest(name, ps=ps, workers=1)
    job["spec"]["replicaSpecs"]["PS"]["replication"] = replication
    return job


def _read(read: Callable[[str, str], Any], namespace: Namespace, name: str) -> Any:
    try:
        return namespace.cp.api.sanitize_for_serialization(read(name, namespace.name))
    except exceptions.ApiException as e:
        if e.status == 404:
            return None
        raise


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env", [])}


def test_a_standby_is_made_for_the_ps_and_the_ps_is_told_its_address(operator: Operator,
                                                                      namespace: Namespace) -> None:
    apps = kubernetes.client.AppsV1Api(namespace.cp.api)
    job = namespace.apply(_replicated("standby", 1, enabled=True, standby=True))
    assert job["spec"]["replicaSpecs"]["PS"]["replication"]["maxLagSeconds"] == 1  # the CRD's default
    name = "standby-ps-0-standby"
    pods = namespace.wait_pods("standby", {"standby-ps-0", "standby-worker-0"}, 60)  # the standby is no replica
    env = _env(pods["standby-ps-0"])
    assert env["TENSORGRID_PS_REPLICATION"] == "1"
    assert env["TENSORGRID_PS_REPLICA_ADDRESS"] == f"{name}.{namespace.name}.svc:2222"
    assert "TENSORGRID_PS_REPLICATION" not in _env(pods["standby-worker-0"])
    wait_for(lambda: _read(apps.read_namespaced_deployment, namespace, name) is not None
             and _read(namespace.cp.core.read_namespaced_service, namespace, name) is not None
             and _read(namespace.cp.networking.read_namespaced_network_policy, namespace, name) is not None
             and _read(namespace.cp.core.read_namespaced_secret, namespace, f"{name}-tls") is not None,
             60, "the standby's Deployment, Service, NetworkPolicy and certificate")
    deployment = _read(apps.read_namespaced_deployment, namespace, name)
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["tensorgrid", "ps-standby"]
    service = _read(namespace.cp.core.read_namespaced_service, namespace, name)
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert namespace.services("standby").keys() == {"standby-ps-0", "standby-worker-0"}
    assert any(e["reason"] == "CreatedPSStandby" for e in namespace.events("standby"))


def test_a_ring_of_ps_needs_no_standby(operator: Operator, namespace: Namespace) -> None:
    apps = kubernetes.client.AppsV1Api(namespace.cp.api)
    namespace.apply(_replicated("ring", 2, enabled=True, maxLagSeconds=2.5))
    pods = namespace.wait_pods("ring", {"ring-ps-0", "ring-ps-1", "ring-worker-0"}, 60)
    for ps in ("ring-ps-0", "ring-ps-1"):
        env = _env(pods[ps])
        assert env["TENSORGRID_PS_REPLICATION"] == "1" and env["TENSORGRID_PS_REPLICA_MAX_LAG_S"] == "2.5"
        assert "TENSORGRID_PS_REPLICA_ADDRESS" not in env
    assert _read(apps.read_namespaced_deployment, namespace, "ring-ps-0-standby") is None


@pytest.mark.parametrize("replicas, where, replication, message", [
    (1, "PS", {"enabled": True}, "with fewer than two PS replicas the replica needs a standby"),
    (2, "PS", {"standby": True}, "standby true needs enabled true"),
    (2, "PS", {"enabled": True, "maxLagSeconds": 0}, "maxLagSeconds"),
    (1, "Worker", {"enabled": True}, "only spec.replicaSpecs.PS takes it"),
])
def test_the_api_server_refuses_replication_that_cannot_work(namespace: Namespace, replicas: int, where: str,
                                                              replication: dict[str, Any], message: str) -> None:
    job = job_manifest("refused", ps=replicas, workers=1)
    job["spec"]["replicaSpecs"][where]["replication"] = replication
    with pytest.raises(exceptions.ApiException) as refused:
        namespace.apply(job)
    assert refused.value.status == 422 and message in str(refused.value.body)


def test_replication_cannot_be_changed_on_a_running_job(namespace: Namespace) -> None:
    namespace.apply(_replicated("fixed", 2, enabled=True))
    with pytest.raises(exceptions.ApiException) as refused:
        namespace.cp.custom.patch_namespaced_custom_object(
            "tensorgrid.io", "v1", namespace.name, "trainingjobs", "fixed",
            {"spec": {"replicaSpecs": {"PS": {"replication": {"enabled": False}}}}})
    assert refused.value.status == 422 and "spec.replicaSpecs is immutable" in str(refused.value.body)
