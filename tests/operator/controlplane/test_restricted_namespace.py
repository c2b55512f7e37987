"""A namespace that enforces Pod Security's ``restricted`` level admits the operator's pods as they are; a
template that asks for root is refused there, and the job says so."""

from __future__ import annotations

import pytest

from operator_cluster import ControlPlane, Namespace, Operator, job_manifest

pytestmark = pytest.mark.controlplane

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}


def test_restricted_namespace_admits_the_training_pods(controlplane: ControlPlane, operator: Operator,
                                                       namespace: Namespace) -> None:
    controlplane.core.patch_namespace(namespace.name, {"metadata": {"labels": RESTRICTED}})
    namespace.apply(job_manifest("mnist", ps=1, workers=2))
    pods = namespace.wait_pods("mnist", {"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"})
    for pod in pods.values():
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        assert pod["spec"]["containers"][0]["securityContext"]["capabilities"]["drop"] == ["ALL"]

    # The same namespace refuses a pod whose template runs as root: the admission is real.
    root = job_manifest("as-root", ps=0, workers=1)
    root["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["securityContext"] = {"runAsNonRoot": False}
    namespace.apply(root)
    status = namespace.wait_state("as-root", "FailedCreate")
    assert "violates PodSecurity" in namespace.condition("as-root", "Running")["message"], status
