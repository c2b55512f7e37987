"""spec.replicaSpecs.<type>.podFailurePolicy on a real API server: the CRD's schema and CEL rules accept a
policy shaped like batch/v1 Job's and refuse what Kubernetes refuses for a Job; the operator fails a job
at once on a FailJob rule, naming the rule, with its event and its failed-jobs reason."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client import exceptions

from operator_cluster import Namespace, Operator, job_manifest, wait_for

pytestmark = pytest.mark.controlplane

GOOD_RULES = [
    {"action": "FailJob", "onExitCodes": {"containerName": "tensorgrid", "operator": "In", "values": [42]}},
    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
    {"action": "Retry", "onExitCodes": {"operator": "In", "values": [1, 3]}},
    {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0, 137]}},
]


def _with_rules(name: str, rules: list[dict[str, Any]], role: str = "Worker") -> dict[str, Any]:
    job = job_manifest(name, ps=1, workers=2)
    job["spec"]["replicaSpecs"][role]["podFailurePolicy"] = {"rules": rules}
    return job


def test_a_policy_shaped_like_a_jobs_is_accepted_with_defaults(namespace: Namespace) -> None:
    created = namespace.apply(_with_rules("good", GOOD_RULES, role="PS"))
    rules = created["spec"]["replicaSpecs"]["PS"]["podFailurePolicy"]["rules"]
    assert rules[1]["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}]  # the CRD's default


@pytest.mark.parametrize("rule, message", [
    ({"action": "Restart", "onExitCodes": {"operator": "In", "values": [1]}}, "Unsupported value: \"Restart\""),
    ({"action": "Count"}, "exactly one of onExitCodes and onPodConditions"),
    ({"action": "Count", "onExitCodes": {"operator": "In", "values": [1]},
      "onPodConditions": [{"type": "DisruptionTarget"}]}, "exactly one of onExitCodes and onPodConditions"),
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0, 1]}}, "must not contain 0 for the In"),
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1, 1]}}, "Duplicate value: 1"),
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3, 1]}}, "values must be ordered"),
    ({"action": "FailJob", "onExitCodes": {"operator": "In", "values": list(range(1, 257))}}, "must have at most 255"),
    ({"action": "FailJob", "onExitCodes": {"operator": "Equals", "values": [1]}}, "Unsupported value: \"Equals\""),
    ({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "Yes"}]},
     "Unsupported value: \"Yes\""),
])
def test_the_api_server_refuses_what_kubernetes_refuses_for_a_job(namespace: Namespace, rule: dict[str, Any],
                                                                  message: str) -> None:
    with pytest.raises(exceptions.ApiException) as refused:
        namespace.apply(_with_rules("refused", [rule]))
    assert refused.value.status == 422 and message in json.loads(refused.value.body)["message"], refused.value.body


def test_a_workers_policy_cannot_be_changed_on_a_running_job(namespace: Namespace) -> None:
    namespace.apply(_with_rules("fixed", GOOD_RULES[:1]))
    with pytest.raises(exceptions.ApiException) as refused:
        namespace.cp.custom.patch_namespaced_custom_object(
            "tensorgrid.io", "v1", namespace.name, "trainingjobs", "fixed",
            {"spec": {"replicaSpecs": {"Worker": {"podFailurePolicy": {"rules": GOOD_RULES[1:2]}}}}})
    assert refused.value.status == 422 and "spec.replicaSpecs is immutable" in str(refused.value.body)


def test_fail_job_fails_the_job_at_once_naming_the_rule(operator: Operator, namespace: Namespace) -> None:
    failed_before = operator.metric("tensorgrid_operator_jobs_failed_total", job_namespace=namespace.name,
                                    reason="PodFailurePolicy")
    namespace.apply(_with_rules("failjob", GOOD_RULES))
    namespace.wait_pods("failjob", {"failjob-ps-0", "failjob-worker-0", "failjob-worker-1"})
    namespace.run_all("failjob")
    namespace.wait_state("failjob", "Running")
    namespace.set_phase("failjob-worker-1", "Failed", 42)
    namespace.wait_state("failjob", "Failed")
    failed = namespace.condition("failjob", "Failed")
    assert failed["reason"] == "PodFailurePolicy"
    assert failed["message"] == ("PodFailurePolicy: rule 0 (FailJob on exit code 42 of container tensorgrid) "
                                 "matched worker-1")
    wait_for(lambda: any(e["reason"] == "PodFailurePolicy" and e["type"] == "Warning"
                         for e in namespace.events("failjob")), 10, "the PodFailurePolicy event")
    wait_for(lambda: operator.metric("tensorgrid_operator_jobs_failed_total", job_namespace=namespace.name,
                                     reason="PodFailurePolicy") == failed_before + 1, 10, "the failed counter")
