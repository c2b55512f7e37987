"""Kubernetes' conventions on what a job shows: conditions in metav1.Condition's shape, each with the
``observedGeneration`` of the spec it was decided from, and events reported by
``tensorgrid-operator`` (kubectl describe's "From") with the operator's pod as the instance."""

from __future__ import annotations

import pytest

from operator_cluster import Namespace, Operator, job_manifest, wait_for
from tensorgrid_operator.controller import registrations

pytestmark = pytest.mark.controlplane


def _observed_generations(namespace: Namespace) -> set[int]:
    return {c.get("observedGeneration", -1) for c in namespace.status("mnist").get("conditions") or []}


def test_conditions_carry_the_generation_and_events_the_operators_name(operator: Operator,
                                                                        namespace: Namespace) -> None:
    namespace.apply(job_manifest("mnist", ps=1, workers=1))
    namespace.wait_pods("mnist", {"mnist-ps-0", "mnist-worker-0"})
    namespace.run_all("mnist")
    namespace.wait_state("mnist", "Running")
    job = namespace.job("mnist")
    assert job is not None
    generation = job["metadata"]["generation"]
    wait_for(lambda: _observed_generations(namespace) == {generation}, 10, "conditions at the job's generation",
             lambda: namespace.status("mnist").get("conditions"))
    for condition in namespace.status("mnist")["conditions"]:
        assert set(condition) <= {"type", "status", "observedGeneration", "lastTransitionTime", "reason", "message"}

    # A spec change: the conditions written next were decided from the new generation.
    namespace.cp.custom.patch_namespaced_custom_object(
        "tensorgrid.io", "v1", namespace.name, "trainingjobs", "mnist",
        {"spec": {"runPolicy": {"activeDeadlineSeconds": 3600}}})
    wait_for(lambda: _observed_generations(namespace) == {generation + 1}, 15,
             "conditions at the changed spec's generation", lambda: namespace.status("mnist").get("conditions"))

    events = namespace.events("mnist")
    assert events
    for event in events:
        assert event["source"]["component"] == registrations.EVENT_REPORTER
        assert event["reportingComponent"] == registrations.EVENT_REPORTER
        assert event["reportingInstance"]
        assert event["metadata"]["name"].startswith(f"{registrations.EVENT_REPORTER}-")
