"""Two operators in one process share nothing: each keeps its state in its own kopf memo
(controller.state.OperatorState), so each reconciles only its own namespaces, and stopping one
leaves the other running."""

from __future__ import annotations

import uuid

import pytest

from operator_cluster import (ControlPlane, Namespace, Operator, job_manifest, operator_settings, running_operator,
                              wait_for)

pytestmark = pytest.mark.controlplane


def test_a_second_operator_reconciles_its_own_namespaces_and_stops_without_touching_the_first(
        controlplane: ControlPlane, operator: Operator, namespace: Namespace) -> None:
    other_namespace = Namespace(controlplane, f"tgb-{uuid.uuid4().hex[:8]}")
    controlplane.core.create_namespace({"metadata": {"name": other_namespace.name}})
    try:
        with running_operator(operator_settings(controlplane, ("tgb-*",))) as second:
            assert second.state is not operator.state
            assert second.metrics_port != operator.metrics_port
            other_namespace.apply(job_manifest("mnist", ps=1, workers=1))
            other_namespace.wait_pods("mnist", {"mnist-ps-0", "mnist-worker-0"})
            key = (other_namespace.name, "mnist")
            assert second.state.running is not None and key in second.state.running.wakers
            assert operator.state.running is not None and key not in operator.state.running.wakers
            # Deleted while its operator runs, which removes the finalizer: the namespace can go.
            controlplane.custom.delete_namespaced_custom_object("tensorgrid.io", "v1", other_namespace.name,
                                                                "trainingjobs", "mnist")
            wait_for(lambda: other_namespace.job("mnist") is None, 30, "the second operator to let the job go")
        assert second.state.running is None and second.state.metrics_server is None
        # The first operator goes on: its API client and /metrics are its own.
        namespace.apply(job_manifest("cifar", ps=1, workers=1))
        namespace.wait_pods("cifar", {"cifar-ps-0", "cifar-worker-0"})
        wait_for(lambda: operator.metric("tensorgrid_operator_jobs_created_total", job_namespace=namespace.name) == 1.0,
                 30, "the first operator to count the job it created")
    finally:
        controlplane.core.delete_namespace(other_namespace.name)
