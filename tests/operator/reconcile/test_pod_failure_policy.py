"""spec.replicaSpecs.<type>.podFailurePolicy: the rules' decision as a table, their validation, and what a
reconcile pass does with each action (status, events, the metrics' reasons), without a cluster."""

from __future__ import annotations

from typing import Any, Optional

import pytest

import operator_sim
from operator_sim import Sim, make_job
from tensorgrid_operator.api import pod_failure_policy as pfp
from tensorgrid_operator.api import spec as spec_lib

TEMPLATE_CONTAINERS = ["tensorflow", "sidecar", "init"]


def policy(*rules: dict[str, Any]) -> pfp.PodFailurePolicy:
    return pfp.parse({"rules": list(rules)}, "podFailurePolicy", TEMPLATE_CONTAINERS)


def exits(action: str, operator: str, values: list[int], container: Optional[str] = None) -> dict[str, Any]:
    on: dict[str, Any] = {"operator": operator, "values": values}
    if container is not None:
        on["containerName"] = container
    return {"action": action, "onExitCodes": on}


def on_condition(action: str, ctype: str, status: str = "True") -> dict[str, Any]:
    return {"action": action, "onPodConditions": [{"type": ctype, "status": status}]}


# --- the decision: first matching rule wins ----------------------------------------------------

FAIL_42 = exits("FailJob", "In", [42], "tensorflow")
IGNORE_DISRUPTED = on_condition("Ignore", "DisruptionTarget")
RETRY_1_3 = exits("Retry", "In", [1, 3])
COUNT_NOT_IN = exits("Count", "NotIn", [1, 2, 42])


@pytest.mark.parametrize("rules, exit_codes, conditions, expected", [
    # onExitCodes In, with and without containerName
    ([FAIL_42], [("tensorflow", 42)], [], "rule 0 (FailJob on exit code 42 of container tensorflow)"),
    ([FAIL_42], [("sidecar", 42)], [], None),  # another container's code
    ([RETRY_1_3], [("sidecar", 3)], [], "rule 0 (Retry on exit code 3 of container sidecar)"),
    ([RETRY_1_3], [("tensorflow", 2)], [], None),
    # exit code 0 never matches, not even NotIn
    ([COUNT_NOT_IN], [("tensorflow", 0)], [], None),
    ([COUNT_NOT_IN], [("tensorflow", 137)], [], "rule 0 (Count on exit code 137 of container tensorflow)"),
    ([COUNT_NOT_IN], [("tensorflow", 42)], [], None),
    # an init container's code counts too; the first container whose code matches is named
    ([RETRY_1_3], [("init", 0), ("tensorflow", 1)], [], "rule 0 (Retry on exit code 1 of container tensorflow)"),
    # onPodConditions: type and status must both match
    ([IGNORE_DISRUPTED], [], [("DisruptionTarget", "True")], "rule 0 (Ignore on pod condition DisruptionTarget=True)"),
    ([IGNORE_DISRUPTED], [], [("DisruptionTarget", "False")], None),
    ([on_condition("Count", "ConfigIssue", "Unknown")], [], [("ConfigIssue", "Unknown")],
     "rule 0 (Count on pod condition ConfigIssue=Unknown)"),
    # the first matching rule wins, whatever follows
    ([IGNORE_DISRUPTED, FAIL_42], [("tensorflow", 42)], [("DisruptionTarget", "True")],
     "rule 0 (Ignore on pod condition DisruptionTarget=True)"),
    ([RETRY_1_3, FAIL_42], [("tensorflow", 42)], [], "rule 1 (FailJob on exit code 42 of container tensorflow)"),
    ([], [("tensorflow", 42)], [], None),
])
def test_first_matching_rule_decides(rules: list[dict[str, Any]], exit_codes: list[tuple[str, int]],
                                     conditions: list[tuple[str, str]], expected: Optional[str]) -> None:
    match = pfp.first_match(policy(*rules), pfp.FailedPod("worker-1", exit_codes, conditions))
    if expected is None:
        assert match is None
    else:
        assert match is not None and match.message == f"PodFailurePolicy: {expected} matched worker-1"


# --- validation: what Kubernetes refuses for a Job, refused with the value and what is valid --------

@pytest.mark.parametrize("rule, message", [
    ({"action": "Restart", "onExitCodes": {"operator": "In", "values": [1]}},
     "rules[0].action: unsupported value 'Restart'; valid: FailJob, Ignore, Count, Retry"),
    ({"action": "Count"}, "rules[0]: give exactly one of onExitCodes and onPodConditions (a non-empty list); got neither"),
    ({"action": "Count", "onExitCodes": {"operator": "In", "values": [1]},
      "onPodConditions": [{"type": "DisruptionTarget"}]}, "got both"),
    ({"action": "Count", "onPodConditions": []}, "got neither"),
    (exits("FailJob", "Equals", [1]), "onExitCodes.operator: unsupported value 'Equals'; valid: In, NotIn"),
    (exits("FailJob", "In", [0, 1]), "onExitCodes.values[0]: 0 is not valid for the In operator"),
    (exits("FailJob", "In", [1, 1]), "onExitCodes.values[1]: 1 is a duplicate"),
    (exits("FailJob", "In", [3, 1]), "onExitCodes.values: [3, 1] must be in ascending order"),
    (exits("FailJob", "In", []), "onExitCodes.values: [] is not a list of 1 to 255 exit codes"),
    (exits("FailJob", "In", list(range(1, 257))), "is not a list of 1 to 255 exit codes"),
    (exits("FailJob", "In", [2 ** 31]), "values[0]: 2147483648 is not an exit code (a 32-bit integer)"),
    (exits("FailJob", "In", [1], "tensorgrid"),
     "containerName: 'tensorgrid' is not a container of the template; valid: tensorflow, sidecar, init"),
    (on_condition("Ignore", "DisruptionTarget", "Yes"), "status: unsupported value 'Yes'; valid: True, False, Unknown"),
    ({"action": "Ignore", "onPodConditions": [{"status": "True"}]}, "onPodConditions[0].type: None is not a pod "
                                                                     "condition type"),
    ({"action": "Ignore", "onExitCode": {}}, "rules[0]: unknown field 'onExitCode'; valid: action, onExitCodes"),
])
def test_invalid_rules_are_refused_naming_the_value(rule: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as refused:
        policy(rule)
    assert message in str(refused.value)
    assert str(refused.value).startswith("podFailurePolicy.rules[0]")


def test_notin_may_list_zero_and_rules_are_bounded() -> None:
    assert policy(exits("Count", "NotIn", [0, 1])).rules[0].on_exit_codes == pfp.OnExitCodes(
        pfp.Operator.NOT_IN, (0, 1))
    with pytest.raises(ValueError, match=r"podFailurePolicy.rules: 21 rules; at most 20"):
        policy(*[IGNORE_DISRUPTED] * 21)


def test_the_spec_parser_checks_container_names_against_the_template() -> None:
    job = make_job(ps=1, workers=1)
    job["spec"]["replicaSpecs"]["Worker"]["podFailurePolicy"] = {"rules": [exits("FailJob", "In", [42], "trainer")]}
    with pytest.raises(ValueError) as refused:
        spec_lib.parse_spec(job["spec"])
    assert str(refused.value) == ("spec.replicaSpecs.Worker.podFailurePolicy.rules[0].onExitCodes.containerName: "
                                  "'trainer' is not a container of the template; valid: tensorgrid")


# --- what a reconcile pass does with each action --------------------------------------------------

def started(rules: list[dict[str, Any]], restart_policy: str = "ExitCode", backoff_limit: int = 6,
            evaluators: int = 0) -> Sim:
    job = make_job(ps=1, workers=2, evaluators=evaluators, policy=restart_policy,
                   run_policy={"backoffLimit": backoff_limit})
    for entry in job["spec"]["replicaSpecs"].values():
        entry["podFailurePolicy"] = {"rules": rules}
    return operator_sim.started(job)


def restart_reasons(sim: Sim) -> list[str]:
    return [t.reason for plan in sim.plans for t in plan.transitions if t.name == "restarted"]


def test_fail_job_fails_the_whole_job_at_once_naming_the_rule() -> None:
    # An evaluator's failure never fails a job by itself; a FailJob rule does, and stops the running pods.
    sim = started([exits("FailJob", "In", [42])], evaluators=1)
    sim.set_phase("mnist-evaluator-0", "Failed", 42)
    plan = sim.step()
    failed = sim.condition("Failed")
    assert failed["status"] == "True" and failed["reason"] == "PodFailurePolicy"
    assert failed["message"] == ("PodFailurePolicy: rule 0 (FailJob on exit code 42 of container tensorgrid) "
                                 "matched evaluator-0")
    assert {name for name, _ in plan.delete_pods} >= {"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"}
    assert [t for t in plan.transitions if t.name == "failed"][0].reason == "PodFailurePolicy"
    assert sim.events[-1].reason in ("DeletedPods", "CleanedUp") and "PodFailurePolicy" in sim.event_reasons()


def test_ignore_recreates_without_counting_even_a_permanent_code_under_never() -> None:
    sim = started([exits("Ignore", "In", [1])], restart_policy="Never", backoff_limit=0)
    old_uid = sim.pods["mnist-worker-1"]["metadata"]["uid"]
    sim.set_phase("mnist-worker-1", "Failed", 1)
    plan = sim.step()
    assert ("mnist-worker-1", old_uid) in plan.delete_pods
    assert sim.status["restarts"] == 0 and sim.status["state"] != "Failed"
    assert sim.condition("Restarting")["reason"] == "PodFailurePolicy"
    event = [e for e in sim.events if e.reason == "PodFailurePolicy"][-1]
    assert event.type == "Normal" and "rule 0 (Ignore on exit code 1 of container tensorgrid) matched worker-1" \
        in event.message and "not counted against backoffLimit" in event.message
    assert restart_reasons(sim) == ["PodFailurePolicy"]
    sim.step(60)
    assert sim.pods["mnist-worker-1"]["metadata"]["uid"] != old_uid


def test_retry_restarts_a_code_the_table_calls_permanent_and_counts_it() -> None:
    sim = started([exits("Retry", "In", [3])], backoff_limit=1)
    sim.set_phase("mnist-worker-1", "Failed", 3)
    sim.step()
    assert sim.status["restarts"] == 1 and sim.status["state"] != "Failed"
    assert "rule 0 (Retry on exit code 3" in sim.condition("Restarting")["message"]
    assert restart_reasons(sim) == ["PodFailurePolicy"]
    sim.step(60)
    sim.run_all()
    sim.set_phase("mnist-worker-1", "Failed", 3)
    sim.step()
    failed = sim.condition("Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and "Retry on exit code 3" in failed["message"]


def test_without_a_rule_the_table_decides_as_before() -> None:
    sim = started([exits("Retry", "In", [3])])
    sim.set_phase("mnist-worker-1", "Failed", 1)
    sim.step()
    failed = sim.condition("Failed")
    assert failed["reason"] == "ReplicaFailed" and "exit code 1 is permanent" in failed["message"]


def test_count_takes_a_disruption_out_of_the_free_recreation() -> None:
    # Without a rule a DisruptionTarget pod is recreated uncounted; Count makes it a failure like any other.
    sim = started([on_condition("Count", "DisruptionTarget")])
    sim.set_phase("mnist-worker-1", "Failed", 137)
    sim.pods["mnist-worker-1"]["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True"}]
    sim.step()
    assert sim.status["restarts"] == 1
    assert "ReplicaDisrupted" not in sim.event_reasons()
    message = sim.condition("Restarting")["message"]
    assert "rule 0 (Count on pod condition DisruptionTarget=True) matched worker-1: counted; exit code 137 is " \
           "retryable" in message
