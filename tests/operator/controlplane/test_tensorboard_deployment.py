"""spec.tensorboard on a real API server: the CRD's rules, and the TensorBoard's Deployment, Service
and NetworkPolicy made by the operator, validated by the API server and garbage-collected with the job."""

from __future__ import annotations

from typing import Any, Callable

import kubernetes
import pytest
from kubernetes.client import exceptions

from operator_cluster import Namespace, Operator, job_manifest, wait_for

pytestmark = pytest.mark.controlplane


def _with_tensorboard(name: str, **board: Any) -> dict[str, Any]:
    job = job_manifest(name, ps=0, workers=1)
    pod_spec = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    pod_spec["containers"][0]["volumeMounts"] = [{"name": "logs", "mountPath": "/logs"}]
    pod_spec["volumes"] = [{"name": "logs", "persistentVolumeClaim": {"claimName": f"{name}-logs"}}]
    job["spec"]["tensorboard"] = {"enabled": True, "logDir": "/logs/run", **board}
    return job


def _read(read: Callable[[str, str], Any], namespace: Namespace, name: str) -> Any:
    try:
        return namespace.cp.api.sanitize_for_serialization(read(name, namespace.name))
    except exceptions.ApiException as e:
        if e.status == 404:
            return None
        raise


def test_the_tensorboard_is_made_for_the_job_and_goes_with_it(operator: Operator, namespace: Namespace) -> None:
    apps = kubernetes.client.AppsV1Api(namespace.cp.api)
    job = namespace.apply(_with_tensorboard("boarded"))
    name = "boarded-tensorboard"
    wait_for(lambda: _read(apps.read_namespaced_deployment, namespace, name) is not None
             and _read(namespace.cp.core.read_namespaced_service, namespace, name) is not None
             and _read(namespace.cp.networking.read_namespaced_network_policy, namespace, name) is not None,
             60, "the TensorBoard's Deployment, Service and NetworkPolicy")
    deployment = _read(apps.read_namespaced_deployment, namespace, name)
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    board = deployment["spec"]["template"]["spec"]["containers"][0]
    assert board["command"][:3] == ["tensorboard", "--logdir", "/logs/run"]
    assert {"name": "logs", "mountPath": "/logs", "readOnly": True} in board["volumeMounts"]
    namespace.wait_pods("boarded", {"boarded-worker-0"})  # the TensorBoard's pod is no replica

    namespace.cp.custom.delete_namespaced_custom_object("tensorgrid.io", "v1", namespace.name, "trainingjobs",
                                                        "boarded", propagation_policy="Foreground")
    wait_for(lambda: _read(apps.read_namespaced_deployment, namespace, name) is None
             and _read(namespace.cp.core.read_namespaced_service, namespace, name) is None, 60,
             "garbage collection of the TensorBoard")


@pytest.mark.parametrize("board, message", [
    ({"logDir": None}, "spec.tensorboard.logDir is required when enabled"),
    ({"logDir": "logs"}, "should match '^/'"),
])
def test_the_api_server_refuses_a_tensorboard_without_an_absolute_log_directory(
        namespace: Namespace, board: dict[str, Any], message: str) -> None:
    job = _with_tensorboard("refused")
    job["spec"]["tensorboard"] = {k: v for k, v in {**job["spec"]["tensorboard"], **board}.items() if v is not None}
    with pytest.raises(exceptions.ApiException) as refused:
        namespace.apply(job)
    assert refused.value.status == 422 and message in str(refused.value.body)
