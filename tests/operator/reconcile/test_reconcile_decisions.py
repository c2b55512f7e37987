"""The reconciler's decisions, table by table, without a cluster (see operator_sim.Sim)."""

from __future__ import annotations

import copy
from typing import Any, Optional

import pytest

from operator_sim import Sim, make_job, started
from tensorgrid_operator.api import conditions
from tensorgrid_operator.api import exitcodes
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import finished_replicas
from tensorgrid_operator.reconcile import jobstatus
from tensorgrid_operator.reconcile import policies
from tensorgrid_operator.reconcile import plans


FIRST_DELAY = policies.RetryDelay().initial_seconds  # before a failed replica is created again



# --- ExitCode table ------------------------------------------------------------------

@pytest.mark.parametrize("code, verdict", [
    (0, "Succeeded"),
    (1, "Permanent"), (2, "Permanent"), (126, "Permanent"), (127, "Permanent"), (128, "Permanent"),
    (129, "Retryable"), (130, "Retryable"), (137, "Retryable"), (143, "Retryable"), (255, "Retryable"),
    (132, "Permanent"), (134, "Permanent"), (135, "Permanent"), (136, "Permanent"), (139, "Permanent"),
    (159, "Permanent"), (-1, "Permanent"), (256, "Permanent"),
    (None, "Retryable"),
])
def test_exit_code_table(code: Optional[int], verdict: str) -> None:
    assert exitcodes.classify(code).value == verdict


# --- disruptions: pods the cluster stopped ----------------------------------------------

@pytest.mark.parametrize("replica, code, pod_reason, condition", [
    ("mnist-ps-0", 0, "Evicted", None),              # node-pressure eviction, the PS exited 0 on SIGTERM
    ("mnist-ps-0", 143, "Terminated", None),         # graceful node shutdown
    ("mnist-worker-1", 0, "", "TerminationByKubelet"),  # any pod marked DisruptionTarget
    ("mnist-ps-0", None, "Evicted", None),           # evicted before its container ran
])
def test_disrupted_replica_is_recreated_without_counting(replica: str, code: Optional[int], pod_reason: str,
                                                        condition: Optional[str]) -> None:
    sim = started(make_job(ps=1, workers=2, policy="ExitCode", run_policy={"backoffLimit": 0}))
    old_uid = sim.pods[replica]["metadata"]["uid"]
    sim.set_phase(replica, "Failed", code)
    status = sim.pods[replica]["status"]
    if pod_reason:
        status.update(reason=pod_reason, message="The node was low on resource: memory.")
    if condition:
        status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": condition,
                                 "message": "the node is shutting down"}]
    plan = sim.step()
    assert (replica, old_uid) in plan.delete_pods
    assert "ReplicaDisrupted" in sim.event_reasons()
    assert sim.status["restarts"] == 0, "a disruption is not counted against backoffLimit"
    assert sim.status["state"] not in ("Failed", "Succeeded")
    sim.step()
    assert sim.pods[replica]["metadata"]["uid"] != old_uid, "recreated"
    sim.run_all()
    sim.step()
    assert sim.status["state"] == "Running"


def test_disrupted_replica_under_never_is_not_recreated() -> None:
    sim = started(make_job(ps=1, workers=2, policy="Never"))
    sim.set_phase("mnist-worker-1", "Failed", 143)
    sim.pods["mnist-worker-1"]["status"].update(reason="Evicted", message="low on memory")
    sim.step()
    assert sim.status["state"] == "Failed"


# --- sidecars: the main container decides ---------------------------------------------------

def with_sidecar(job: dict[str, Any], main_first: bool = False, main_name: str = "tensorgrid") -> dict[str, Any]:
    """Every replica gets an istio-proxy container beside its main one."""
    for entry in job["spec"]["replicaSpecs"].values():
        containers = entry["template"]["spec"]["containers"]
        containers[0]["name"] = main_name
        sidecar = {"name": "istio-proxy", "image": "istio/proxyv2"}
        entry["template"]["spec"]["containers"] = containers + [sidecar] if main_first else [sidecar] + containers
    return job


def main_exited(sim: Sim, name: str, code: Optional[int], main: str = "tensorgrid") -> None:
    """The kubelet's report: the pod Running, the sidecar running, the main container as given."""
    main_state: dict[str, Any] = {"running": {}} if code is None else {"terminated": {
        "exitCode": code, "reason": "Completed" if code == 0 else "Error"}}
    sim.pods[name]["status"] = {"phase": "Running", "containerStatuses": [
        {"name": "istio-proxy", "state": {"running": {}}}, {"name": main, "state": main_state}]}


@pytest.mark.parametrize("replica, code, state", [
    ("mnist-worker-0", 0, "Succeeded"),     # the chief finished: the job succeeds
    ("mnist-worker-1", 1, "Failed"),        # permanent under ExitCode: the job fails
    ("mnist-worker-1", 137, "Restarting"),  # retryable: the pod is replaced
    ("mnist-worker-1", None, "Running"),    # the main container runs on: nothing to decide
])
def test_a_sidecar_does_not_keep_a_finished_replica_running(replica: str, code: Optional[int], state: str) -> None:
    sim = started(with_sidecar(make_job(ps=1, workers=2)))
    uid = sim.pods[replica]["metadata"]["uid"]
    main_exited(sim, replica, code)
    plan = sim.step()
    assert sim.status["state"] == state
    # A finished job's cleanPodPolicy Running stops the pod too: its sidecar still runs.
    assert ((replica, uid) in plan.delete_pods) is (state != "Running")
    if state == "Succeeded":
        assert sim.pods == {}
        assert sim.status["finishedReplicas"][0]["exitCode"] == 0
    if state == "Restarting":
        sim.step(FIRST_DELAY)
        assert sim.pods[replica]["metadata"]["uid"] != uid


def test_a_finished_pod_whose_phase_lags_its_container_is_kept_by_clean_pod_policy_running() -> None:
    # The kubelet reports the container's exit before the pod's phase: a job finishing then
    # must not delete that pod (its log is what users read) as if a sidecar kept it running.
    sim = started(make_job(ps=1, workers=2))
    uids = {name: pod["metadata"]["uid"] for name, pod in sim.pods.items()}
    for name in ("mnist-worker-0", "mnist-worker-1"):
        sim.pods[name]["status"] = {"phase": "Running", "containerStatuses": [
            {"name": "tensorgrid", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}
    plan = sim.step()
    assert sim.status["state"] == "Succeeded"
    assert not any(name.startswith("mnist-worker") for name, _ in plan.delete_pods)
    assert ("mnist-ps-0", uids["mnist-ps-0"]) in plan.delete_pods  # still running: cleaned up


def test_the_sidecar_ending_first_decides_nothing() -> None:
    sim = started(with_sidecar(make_job(ps=1, workers=2)))
    sim.pods["mnist-worker-0"]["status"] = {"phase": "Running", "containerStatuses": [
        {"name": "istio-proxy", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "tensorgrid", "state": {"running": {}}}]}
    plan = sim.step()
    assert sim.status["state"] == "Running" and not plan.has_actions


def test_without_a_container_named_tensorgrid_the_first_is_the_main_one() -> None:
    sim = started(with_sidecar(make_job(ps=1, workers=2), main_first=True, main_name="trainer"))
    main_exited(sim, "mnist-worker-0", 0, main="trainer")
    sim.step()
    assert sim.status["state"] == "Succeeded"


# --- one failure under each restart policy ----------------------------------------------

@pytest.mark.parametrize("policy, code, restarted, state", [
    ("Never", 137, False, "Failed"),
    ("Never", 1, False, "Failed"),
    ("OnFailure", 1, True, "Restarting"),
    ("OnFailure", 137, True, "Restarting"),
    ("Always", 1, True, "Restarting"),
    ("Always", 143, True, "Restarting"),
    ("ExitCode", 137, True, "Restarting"),
    ("ExitCode", 143, True, "Restarting"),
    ("ExitCode", 130, True, "Restarting"),
    ("ExitCode", 1, False, "Failed"),
    ("ExitCode", 127, False, "Failed"),
    ("ExitCode", 139, False, "Failed"),
])
def test_worker_failure_under_each_policy(policy: str, code: int, restarted: bool, state: str) -> None:
    sim = started(make_job(ps=1, workers=2, policy=policy))
    old_uid = sim.pods["mnist-worker-1"]["metadata"]["uid"]
    sim.set_phase("mnist-worker-1", "Failed", code)
    plan = sim.step()
    assert sim.status["state"] == state
    assert sim.status["replicaStatuses"]["Worker"]["restarts"] == (1 if restarted else 0)
    assert sim.status["restarts"] == (1 if restarted else 0)
    assert (("mnist-worker-1", old_uid) in plan.delete_pods) is restarted
    if restarted:
        assert plans.Transition("restarted", "Error", "Worker") in plan.transitions
        sim.step(FIRST_DELAY)  # the replacement, after the retry delay
        assert sim.pods["mnist-worker-1"]["metadata"]["uid"] != old_uid
        sim.run_all()
        sim.step()
        assert sim.status["state"] == "Running"
        assert not conditions.is_true(sim.status["conditions"], "Restarting")
    else:
        assert sim.condition("Failed")["reason"] == "ReplicaFailed"
        assert f"exit code {code}" in sim.condition("Failed")["message"]
        assert plans.Transition("failed", "ReplicaFailed") in plan.transitions
        # cleanPodPolicy Running (default): the PS and the other worker stop.
        assert set(sim.pods) == {"mnist-worker-1"}


@pytest.mark.parametrize("policy, restarted", [("Always", True), ("OnFailure", False), ("Never", False),
                                               ("ExitCode", False)])
def test_exit_zero_of_a_non_deciding_replica(policy: str, restarted: bool) -> None:
    sim = started(make_job(ps=1, workers=2, policy=policy))
    sim.set_phase("mnist-worker-1", "Succeeded", 0)
    sim.step()
    finished = set(finished_replicas.expand(sim.status["finishedReplicas"]))
    assert ("worker-1" in finished) is (not restarted)
    assert sim.status["restarts"] == (1 if restarted else 0)
    assert sim.status["state"] in ("Restarting", "Running")


def test_always_does_not_rerun_the_chief_that_ends_the_job() -> None:
    sim = started(make_job(ps=1, workers=2, policy="Always"))
    sim.set_phase("mnist-worker-0", "Succeeded", 0)
    sim.step()
    assert sim.status["state"] == "Succeeded"
    assert sim.status["restarts"] == 0


# --- backoffLimit bounds every retry -------------------------------------------------------

def test_backoff_limit_exhausted() -> None:
    sim = started(make_job(ps=1, workers=2, policy="OnFailure", run_policy={"backoffLimit": 2}))
    for attempt in range(3):
        sim.set_phase("mnist-worker-1", "Failed", 137)
        sim.step()
        if attempt < 2:
            sim.step(FIRST_DELAY * 2 ** attempt)
            sim.run_all()
            sim.step()
    assert sim.status["state"] == "Failed"
    assert sim.condition("Failed")["reason"] == "BackoffLimitExceeded"
    assert sim.status["restarts"] == 2
    assert "backoffLimit" in sim.condition("Failed")["message"]


def test_ps_restarts_count_against_the_same_budget() -> None:
    sim = started(make_job(ps=1, workers=2, policy="OnFailure", run_policy={"backoffLimit": 1}))
    sim.set_phase("mnist-ps-0", "Failed", 137)
    sim.step()
    sim.step(FIRST_DELAY)
    sim.run_all()
    sim.step()
    sim.set_phase("mnist-worker-1", "Failed", 1)
    sim.step(policies.PS_COLLATERAL_SECONDS + 1)  # long after the PS came back: the worker's own failure
    assert sim.condition("Failed")["reason"] == "BackoffLimitExceeded"


def test_backoff_limit_zero_means_no_retry() -> None:
    sim = started(make_job(ps=1, workers=1, policy="OnFailure", run_policy={"backoffLimit": 0}))
    sim.set_phase("mnist-worker-0", "Failed", 137)
    sim.step()
    assert sim.condition("Failed")["reason"] == "BackoffLimitExceeded"


def test_a_repeated_reconcile_does_not_count_a_failure_twice() -> None:
    """Crash after the status PATCH, before the pod DELETE: the next reconcile only deletes."""
    sim = started(make_job(ps=1, workers=2, policy="OnFailure"))
    sim.set_phase("mnist-worker-1", "Failed", 137)
    first = sim.plan()
    sim.apply(first, deletes=False, creates=False)
    second = sim.step()
    assert sim.status["restarts"] == 1
    assert second.delete_pods == first.delete_pods
    assert [t for t in second.transitions if t.name == "restarted"] == []
    sim.step()
    assert sim.status["restartedPods"] == []


# --- a growing delay before a failed replica runs again ------------------------------------------

def backoff(sim: Sim, replica: str) -> dict[str, Any]:
    return {e["replica"]: e for e in sim.status["replicaBackoff"]}[replica]


def test_a_failed_replica_waits_longer_after_each_failure() -> None:
    """Admission failures (no exit code) in a row: 10 s, 20 s, 40 s, ... up to 300 s, not six retries in a second."""
    sim = started(make_job(ps=1, workers=2, policy="OnFailure", run_policy={"backoffLimit": 100}))
    waited = []
    for attempt in range(1, 8):
        uid = sim.pods["mnist-worker-1"]["metadata"]["uid"]
        sim.set_phase("mnist-worker-1", "Failed")
        sim.pods["mnist-worker-1"]["status"].update(reason="OutOfcpu", message="Node didn't have enough resource")
        plan = sim.step()
        entry = backoff(sim, "worker-1")
        assert entry["attempts"] == attempt and entry["reason"] == "ReplicaRestarting"
        delay = (conditions.parse_time(entry["nextRetryTime"]) - sim.now).total_seconds()
        waited.append(delay)
        assert plan.requeue_after == pytest.approx(delay)
        assert sim.condition("Restarting")["status"] == "True"
        assert f"next attempt in {delay:.0f}s, at {entry['nextRetryTime']}" in sim.condition("Restarting")["message"]
        plan = sim.step(delay - 1)
        assert "mnist-worker-1" not in sim.pods and plan.requeue_after == pytest.approx(1)
        assert sim.status["state"] == "Restarting"
        sim.step(1)
        assert sim.pods["mnist-worker-1"]["metadata"]["uid"] != uid, "recreated when the delay is over"
    assert waited == [10, 20, 40, 80, 160, 300, 300]
    assert sim.status["restarts"] == 7


def test_the_delay_starts_over_after_a_quiet_spell() -> None:
    sim = started(make_job(ps=1, workers=2, policy="OnFailure"))
    for _ in range(3):
        sim.set_phase("mnist-worker-1", "Failed", 137)
        sim.step()
        sim.step((conditions.parse_time(backoff(sim, "worker-1")["nextRetryTime"]) - sim.now).total_seconds())
        sim.run_all()
    assert backoff(sim, "worker-1")["attempts"] == 3
    sim.step(599)
    assert backoff(sim, "worker-1")["attempts"] == 3, "a failure now would wait 80 s"
    sim.step(1)  # ten minutes (2 x the longest delay) without a failure: forgotten
    assert sim.status["replicaBackoff"] == []
    sim.set_phase("mnist-worker-1", "Failed", 137)
    sim.step()
    assert backoff(sim, "worker-1")["attempts"] == 1


def test_the_delays_are_configurable() -> None:
    sim = Sim(make_job(ps=1, workers=1, policy="OnFailure"), retry_delay=policies.RetryDelay(1, 4))
    sim.step()
    waited = []
    for _ in range(4):
        sim.run_all()
        sim.step()
        sim.set_phase("mnist-worker-0", "Failed", 137)
        plan = sim.step()
        assert plan.requeue_after is not None
        waited.append(plan.requeue_after)
        sim.step(plan.requeue_after)
    assert waited == [1, 2, 4, 4]


def test_disruptions_and_vanished_pods_are_recreated_at_once() -> None:
    sim = started(make_job(ps=1, workers=2))
    del sim.pods["mnist-worker-1"]
    assert [p.name for p in sim.step().create_pods] == ["mnist-worker-1"]
    sim.run_all()
    sim.step()
    sim.set_phase("mnist-worker-0", "Failed", 143)
    sim.pods["mnist-worker-0"]["status"].update(reason="Evicted", message="low on memory")
    sim.step()
    assert [p.name for p in sim.step().create_pods] == ["mnist-worker-0"]
    assert sim.status["replicaBackoff"] == []


# --- PS failure: the PS is recreated alone; workers failing with it are collateral ------------

def test_a_crashed_ps_is_recreated_alone_and_counted() -> None:
    sim = started(make_job(ps=2, workers=3, policy="ExitCode"))
    workers = {n: p["metadata"]["uid"] for n, p in sim.pods.items() if "worker" in n}
    sim.set_phase("mnist-ps-1", "Failed", 137)
    plan = sim.step()
    assert [n for n, _ in plan.delete_pods] == ["mnist-ps-1"]
    restarting = sim.condition("Restarting")
    assert restarting["reason"] == "ReplicaRestarting" and "recreated alone" in restarting["message"]
    assert sim.status["replicaStatuses"]["PS"]["restarts"] == 1 and sim.status["restarts"] == 1
    assert sim.status["parameterServerLoss"] == {"replicas": ["mnist-ps-1"], "lastSeenDown": "2030-01-01T00:00:00Z"}
    assert sim.step(FIRST_DELAY - 1).create_pods == [], "while the PS waits, every replica does"
    plan = sim.step(1)
    assert [p.name for p in plan.create_pods] == ["mnist-ps-1"]
    assert {n: p["metadata"]["uid"] for n, p in sim.pods.items() if "worker" in n} == workers
    sim.run_all()
    sim.step()
    assert sim.status["state"] == "Running"


@pytest.mark.parametrize("how", ["crashed", "deleted", "evicted"])
def test_workers_failing_with_their_ps_are_collateral_however_the_ps_was_lost(how: str) -> None:
    """Exit 1 is permanent under ExitCode, but not when the worker's PS had just gone."""
    sim = started(make_job(ps=1, workers=3, policy="ExitCode"))
    if how == "crashed":
        sim.set_phase("mnist-ps-0", "Failed", 137)
    elif how == "deleted":
        del sim.pods["mnist-ps-0"]
    else:
        sim.set_phase("mnist-ps-0", "Failed", 143)
        sim.pods["mnist-ps-0"]["status"].update(reason="Evicted", message="low on memory")
    sim.step()
    restarts = sim.status["restarts"]
    sim.set_phase("mnist-worker-1", "Failed", 1)
    sim.step(30)
    sim.set_phase("mnist-worker-2", "Failed", 1)
    sim.step(30)
    assert sim.status["restarts"] == restarts == (1 if how == "crashed" else 0)
    assert sim.status["finishedReplicas"] == [] and sim.status["state"] != "Failed"
    assert sum("collateral" in e.message for e in sim.events if e.reason == "ReplicaRestarting") == 2
    sim.step(FIRST_DELAY * 4)
    assert set(sim.pods) == {"mnist-ps-0", "mnist-worker-0", "mnist-worker-1", "mnist-worker-2"}


def test_a_worker_failing_long_after_the_ps_came_back_is_judged_as_usual() -> None:
    sim = started(make_job(ps=1, workers=2, policy="ExitCode"))
    del sim.pods["mnist-ps-0"]
    sim.step()
    sim.run_all()
    sim.step()
    sim.set_phase("mnist-worker-1", "Failed", 1)
    sim.step(policies.PS_COLLATERAL_SECONDS + 1)
    assert sim.status["state"] == "Failed"


def test_a_worker_failing_while_the_job_first_starts_is_not_collateral() -> None:
    sim = Sim(make_job(ps=1, workers=2, policy="ExitCode"))
    sim.step()
    sim.set_phase("mnist-worker-1", "Failed", 1)  # the PS is still Pending: no loss, the program failed
    sim.step()
    assert sim.status["state"] == "Failed" and "parameterServerLoss" not in sim.status


def epochs(sim: Sim) -> dict[str, str]:
    return {name: pod["metadata"]["labels"][spec_lib.LABEL_RESTART_EPOCH] for name, pod in sim.pods.items()}


def test_pods_of_an_earlier_restart_epoch_are_deleted_but_finished_ones() -> None:
    """A job an earlier operator restarted whole (status.restartEpoch 1) whose deletions were lost."""
    sim = started(make_job(ps=1, workers=3, policy="OnFailure"))
    sim.set_phase("mnist-worker-2", "Succeeded", 0)
    sim.step()
    sim.job["status"]["restartEpoch"] = 1
    plan = sim.step()
    assert {name for name, _ in plan.delete_pods} == {"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"}
    assert "DeletedPods" in [e.reason for e in plan.events]
    sim.step(FIRST_DELAY)
    assert epochs(sim) == {"mnist-ps-0": "1", "mnist-worker-0": "1", "mnist-worker-1": "1", "mnist-worker-2": "0"}
    sim.run_all()
    sim.step()
    assert sim.status["state"] == "Running"
    sim.settle()


def test_pods_without_an_epoch_label_are_of_epoch_zero() -> None:
    """Pods made before the label existed are not mistaken for an old run."""
    sim = started(make_job(ps=1, workers=1))
    for pod in sim.pods.values():
        del pod["metadata"]["labels"][spec_lib.LABEL_RESTART_EPOCH]
    plan = sim.step()
    assert not plan.has_actions


def test_ps_failure_under_never_fails_the_job() -> None:
    sim = started(make_job(ps=1, workers=2, policy="Never"))
    sim.set_phase("mnist-ps-0", "Failed", 137)
    sim.step()
    assert sim.status["state"] == "Failed"


# --- success policies and cleanup ------------------------------------------------------------

@pytest.mark.parametrize("clean, left", [
    ("Running", {"mnist-worker-0", "mnist-worker-2"}),
    ("All", set()),
    ("None", {"mnist-ps-0", "mnist-worker-0", "mnist-worker-1", "mnist-worker-2"}),
])
def test_chief_success_and_clean_pod_policy(clean: str, left: set[str]) -> None:
    sim = started(make_job(ps=1, workers=3, run_policy={"cleanPodPolicy": clean}))
    sim.set_phase("mnist-worker-2", "Succeeded", 0)
    sim.step()
    assert sim.status["state"] == "Running"
    sim.set_phase("mnist-worker-0", "Succeeded", 0)
    plan = sim.step()
    assert sim.status["state"] == "Succeeded"
    assert sim.condition("Succeeded")["message"] == "worker-0 succeeded"
    assert sim.status["completionTime"] == conditions.format_time(sim.now)
    assert plan.transitions == [plans.Transition("succeeded")]
    assert set(sim.pods) == left
    assert set(sim.services) == (left if clean != "None" else {
        "mnist-ps-0", "mnist-worker-0", "mnist-worker-1", "mnist-worker-2"})
    sim.settle()


def test_the_chief_decides_when_there_is_one() -> None:
    sim = started(make_job(ps=1, workers=2, chief=1))
    assert sim.pods["mnist-chief-0"]["metadata"]["labels"][spec_lib.LABEL_JOB_ROLE] == "chief"
    sim.set_phase("mnist-worker-0", "Succeeded", 0)
    sim.step()
    assert sim.status["state"] == "Running"
    sim.set_phase("mnist-chief-0", "Succeeded", 0)
    sim.step()
    assert sim.condition("Succeeded")["message"] == "chief-0 succeeded"


def test_all_workers_policy() -> None:
    sim = started(make_job(ps=1, workers=2, evaluators=1, success_policy="AllWorkers"))
    sim.set_phase("mnist-worker-0", "Succeeded", 0)
    sim.step()
    assert sim.status["state"] == "Running"
    sim.set_phase("mnist-worker-1", "Succeeded", 0)
    sim.step()
    assert sim.status["state"] == "Succeeded"
    assert "all 2 chief and worker replicas" in sim.condition("Succeeded")["message"]


def test_ps_and_evaluator_never_decide_success() -> None:
    sim = started(make_job(ps=1, workers=1, evaluators=1))
    sim.set_phase("mnist-ps-0", "Succeeded", 0)
    sim.set_phase("mnist-evaluator-0", "Succeeded", 0)
    sim.step()
    assert sim.status["state"] == "Running"


def test_evaluator_failure_does_not_fail_the_job() -> None:
    sim = started(make_job(ps=1, workers=1, evaluators=1, policy="Never"))
    sim.set_phase("mnist-evaluator-0", "Failed", 1)
    sim.step()
    assert sim.status["state"] == "Running"
    assert sim.status["replicaStatuses"]["Evaluator"]["failed"] == 1
    assert "ReplicaFailed" in sim.event_reasons()


# --- durable record of finished replicas ----------------------------------------------------

def test_a_deleted_completed_pod_is_not_recreated() -> None:
    sim = started(make_job(ps=1, workers=3))
    sim.set_phase("mnist-worker-2", "Succeeded", 0)
    sim.step()
    del sim.pods["mnist-worker-2"]  # garbage-collected, or deleted by hand
    plan = sim.step()
    assert plan.create_pods == []
    assert sim.status["replicaStatuses"]["Worker"]["succeeded"] == 1
    record = sim.status["finishedReplicas"][0]
    assert (record["type"], record["indexes"], record["outcome"], record["exitCode"]) == ("Worker", "2", "Succeeded", 0)


def test_a_vanished_running_pod_is_recreated_without_a_retry() -> None:
    sim = started(make_job(ps=1, workers=2))
    del sim.pods["mnist-worker-1"]
    plan = sim.step()
    assert [p.name for p in plan.create_pods] == ["mnist-worker-1"]
    assert sim.status["restarts"] == 0


def test_terminating_pods_are_neither_failures_nor_replaced_yet() -> None:
    sim = started(make_job(ps=1, workers=2, policy="Never"))
    pod = sim.pods["mnist-worker-1"]
    pod["metadata"]["deletionTimestamp"] = conditions.format_time(sim.now)
    sim.set_phase("mnist-worker-1", "Failed", 143)
    plan = sim.step()
    assert sim.status["state"] != "Failed"
    assert plan.create_pods == [] and plan.delete_pods == []


# --- idempotence ----------------------------------------------------------------------------

def test_reconcile_reaches_a_fixed_point() -> None:
    sim = Sim(make_job(ps=2, workers=3))
    first = sim.step()
    assert len(first.create_pods) == 5 and len(first.create_services) == 5
    assert first.transitions == [plans.Transition("created")]
    again = sim.step()
    assert not again.has_actions and again.status is None and again.events == []


def test_objects_of_an_earlier_job_with_the_same_name_block_creation() -> None:
    sim = Sim(make_job(ps=1, workers=1))
    old = Sim(make_job(ps=1, workers=1))
    old.step()
    sim.pods["mnist-ps-0"] = old.pods["mnist-ps-0"]
    plan = sim.step()
    assert [p.name for p in plan.create_pods] == ["mnist-worker-0"]
    assert plan.delete_pods == []


def test_missing_services_are_recreated() -> None:
    sim = started(make_job(ps=1, workers=1))
    del sim.services["mnist-ps-0"]
    plan = sim.step()
    assert [s["metadata"]["name"] for s in plan.create_services] == ["mnist-ps-0"]
    assert plan.create_pods == []


# --- time: deadline and TTL ---------------------------------------------------------------------

def test_active_deadline() -> None:
    sim = Sim(make_job(ps=1, workers=2, run_policy={"activeDeadlineSeconds": 30, "cleanPodPolicy": "None"}))
    plan = sim.step()
    assert plan.requeue_after == pytest.approx(30)
    sim.run_all()
    plan = sim.step(10)
    assert plan.requeue_after == pytest.approx(20)
    plan = sim.step(20)
    assert sim.condition("Failed")["reason"] == "DeadlineExceeded"
    assert sim.pods == {}  # running pods stop whatever cleanPodPolicy says
    assert plans.Transition("failed", "DeadlineExceeded") in plan.transitions


def test_ttl_after_finished() -> None:
    sim = started(make_job(ps=1, workers=1, run_policy={"ttlSecondsAfterFinished": 60}))
    sim.set_phase("mnist-worker-0", "Succeeded", 0)
    plan = sim.step()
    assert plan.requeue_after == pytest.approx(60) and not plan.delete_job
    plan = sim.step(59)
    assert plan.requeue_after == pytest.approx(1) and not plan.delete_job
    plan = sim.step(1)
    assert plan.delete_job
    assert "TTLExpired" in [e.reason for e in plan.events]


# --- suspend and resume ---------------------------------------------------------------------------

def test_suspend_and_resume() -> None:
    sim = started(make_job(ps=1, workers=2, run_policy={"activeDeadlineSeconds": 100}))
    sim.set_phase("mnist-worker-1", "Succeeded", 0)
    sim.step(50)
    sim.job["spec"]["runPolicy"]["suspend"] = True
    plan = sim.step()
    assert sim.status["state"] == "Suspended"
    assert set(sim.pods) == {"mnist-worker-1"}  # the finished one stays
    assert set(sim.services) == {"mnist-worker-1"}
    assert plan.requeue_after is None
    sim.step(500)  # no deadline while suspended
    assert sim.status["state"] == "Suspended"
    sim.job["spec"]["runPolicy"]["suspend"] = False
    plan = sim.step()
    assert {p.name for p in plan.create_pods} == {"mnist-ps-0", "mnist-worker-0"}
    assert sim.condition("Suspended")["status"] == "False"
    assert sim.status["startTime"] == conditions.format_time(sim.now)
    assert sim.status["restarts"] == 0
    assert plan.requeue_after == pytest.approx(100)


# --- stuck pods ----------------------------------------------------------------------------------

@pytest.mark.parametrize("pod_status, reason", [
    ({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                          "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]},
     "Unschedulable"),
    ({"phase": "Pending", "containerStatuses": [{"name": "tensorgrid", "state": {"waiting": {
        "reason": "ImagePullBackOff", "message": "Back-off pulling image \"tensorgrid:typo\""}}}]},
     "ImagePullBackOff"),
    ({"phase": "Pending", "containerStatuses": [{"name": "tensorgrid", "state": {"waiting": {
        "reason": "ErrImagePull", "message": "not found"}}}]},
     "ErrImagePull"),
])
def test_stuck_pods_are_surfaced(pod_status: dict[str, Any], reason: str) -> None:
    sim = Sim(make_job(ps=1, workers=2))
    sim.step()
    sim.run_all()
    sim.pods["mnist-worker-1"]["status"] = pod_status
    plan = sim.step()
    assert sim.status["state"] == reason
    running = sim.condition("Running")
    assert running["status"] == "False" and running["reason"] == reason
    assert "mnist-worker-1" in running["message"]
    assert [e.type for e in plan.events if e.reason == reason] == ["Warning"]
    assert sim.step().events == []  # said once, not on every reconcile
    sim.set_phase("mnist-worker-1", "Running")
    sim.step()
    assert sim.status["state"] == "Running"


@pytest.mark.parametrize("group_fields, policy, said", [
    ({}, None, None),
    ({"labels": {"scheduling.x-k8s.io/pod-group": "mnist"}}, None,
     "the job is gang scheduled: its PodGroup mnist has pods placed only when 3 of them (minMember) fit together"),
    ({"annotations": {"scheduling.k8s.io/group-name": "mnist"}}, {"minAvailable": 2},
     "the job is gang scheduled: its PodGroup mnist has pods placed only when 2 of them (minMember) fit together"),
])
def test_unschedulable_gang_pods_say_the_group_waits_whole(group_fields: dict[str, Any],
                                                           policy: Optional[dict[str, Any]], said: Optional[str]) -> None:
    job = make_job(ps=1, workers=2)
    if policy:
        job["spec"].setdefault("runPolicy", {})["schedulingPolicy"] = policy
    sim = Sim(job)
    sim.step()
    for pod in sim.pods.values():
        for field, values in group_fields.items():
            pod["metadata"].setdefault(field, {}).update(values)
        pod["status"] = {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/2 nodes are available: 2 rejected due to timeout after waiting 5s at plugin Coscheduling."}]}
    sim.step()
    message = sim.condition("Running")["message"]
    assert sim.status["state"] == "Unschedulable"
    assert "at plugin Coscheduling" in message
    assert (said in message) if said else ("gang" not in message), message


# --- the API server refuses to create (quota, admission, outage) ----------------------------------------

QUOTA = ('pods "{}" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0')


def refuse_pods(sim: Sim, names: list[str], code: Optional[int] = 403) -> None:
    for name in names:
        sim.refuse["Pod", name] = (code, QUOTA.format(name))


def test_a_quota_that_forbids_the_pods_is_reported_and_retried_later() -> None:
    sim = Sim(make_job(ps=1, workers=2))
    names = ["mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
    refuse_pods(sim, names)
    sim.step()
    assert sim.pods == {} and len(sim.services) == 3
    assert sim.status["state"] == "FailedCreate"
    running = sim.condition("Running")
    assert (running["status"], running["reason"]) == ("False", "FailedCreate")
    assert "exceeded quota: no-pods" in running["message"] and "mnist-worker-1" in running["message"]
    assert sim.condition("Created")["status"] == "False"
    assert {t: c["active"] for t, c in sim.status["replicaStatuses"].items()} == {"PS": 0, "Worker": 0}
    warnings = [e for e in sim.events if e.reason == "FailedCreatePod"]
    assert len(warnings) == 1 and warnings[0].type == "Warning"
    assert "exceeded quota" in warnings[0].message and all(n in warnings[0].message for n in names)
    assert "CreatedPods" not in sim.event_reasons() and "CreatedServices" in sim.event_reasons()
    assert sim.outcome is not None and sim.outcome.requeue_after == pytest.approx(10)
    assert sim.outcome.transitions == []
    assert [(e["replica"], e["attempts"], e["reason"]) for e in sim.status["replicaBackoff"]] == [
        ("ps-0", 1, "FailedCreate"), ("worker-0", 1, "FailedCreate"), ("worker-1", 1, "FailedCreate")]

    quiet = sim.step(5)  # waiting: nothing is tried, nothing is written
    assert not quiet.has_actions and quiet.status is None and quiet.requeue_after == pytest.approx(5)
    retried = sim.step(5)
    assert len(retried.create_pods) == 3 and sim.pods == {} and retried.status is None
    assert [e["attempts"] for e in sim.status["replicaBackoff"]] == [2, 2, 2]
    assert sim.outcome.requeue_after == pytest.approx(20)

    sim.refuse.clear()  # the quota is raised
    retry = sim.step(20)
    assert set(sim.pods) == set(names)
    assert retry.status is None, "a retry does not flip the status before its outcome is known"
    sim.step()  # the new pods are seen
    assert sim.condition("Created")["status"] == "True" and sim.plans[-1].transitions == [plans.Transition("created")]
    assert sim.condition("Running")["reason"] == "PodsPending"
    assert sim.status["state"] == "Created"
    assert sim.status["replicaStatuses"]["Worker"]["active"] == 2
    sim.run_all()
    sim.step()
    assert sim.status["state"] == "Running"


def test_only_the_pods_that_exist_are_counted_and_announced() -> None:
    sim = Sim(make_job(ps=1, workers=2))
    refuse_pods(sim, ["mnist-worker-1"], code=None)  # e.g. the connection dropped
    sim.step()
    created = [e.message for e in sim.events if e.reason == "CreatedPods"]
    assert created == ["created pods mnist-ps-0, mnist-worker-0"]
    assert sim.status["replicaStatuses"]["Worker"]["active"] == 1
    assert sim.condition("Created")["message"] == "created 2 pods and their headless services"
    assert sim.status["state"] == "FailedCreate"
    sim.step(10)  # refused again
    assert sim.status["replicaStatuses"]["Worker"]["active"] == 1, "the pod that exists still counts"
    assert [e["attempts"] for e in sim.status["replicaBackoff"]] == [2]
    sim.refuse.clear()
    assert sim.step(19).create_pods == []
    assert [p.name for p in sim.step(1).create_pods] == ["mnist-worker-1"]
    sim.step()
    assert sim.status["replicaStatuses"]["Worker"]["active"] == 2


@pytest.mark.parametrize("code", [403, 429, 500, 503])
def test_transient_refusals_do_not_fail_the_job(code: int) -> None:
    sim = Sim(make_job(ps=1, workers=1))
    refuse_pods(sim, ["mnist-worker-0"], code=code)
    sim.step()
    assert sim.status["state"] == "FailedCreate" and not conditions.is_true(sim.status["conditions"], "Failed")
    assert sim.status["restarts"] == 0, "a refused creation is not a retry of backoffLimit"


def test_a_refused_service_is_retried_later() -> None:
    sim = Sim(make_job(ps=1, workers=1))
    sim.refuse["Service", "mnist-ps-0"] = (403, 'services "mnist-ps-0" is forbidden: exceeded quota')
    sim.step()
    assert [e.reason for e in sim.events if e.type == "Warning"] == ["FailedCreateService"]
    assert set(sim.services) == {"mnist-worker-0"}
    sim.refuse.clear()
    assert sim.step(9).create_services == []
    sim.step(1)
    assert set(sim.services) == {"mnist-ps-0", "mnist-worker-0"}


def test_a_replica_whose_pod_and_service_are_refused_waits_once() -> None:
    sim = Sim(make_job(ps=1, workers=1))
    sim.refuse["Service", "mnist-worker-0"] = (403, "exceeded quota: services")
    refuse_pods(sim, ["mnist-worker-0"])
    sim.step()
    assert [(e["replica"], e["attempts"]) for e in sim.status["replicaBackoff"]] == [("worker-0", 1)]
    assert sorted(e.reason for e in sim.events if e.type == "Warning") == ["FailedCreatePod", "FailedCreateService"]


# --- bad input -------------------------------------------------------------------------------------

def test_invalid_spec_fails_the_job_with_the_field_named() -> None:
    job = make_job(ps=1, workers=1)
    job["spec"]["replicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes"
    sim = Sim(job)
    sim.step()
    assert sim.condition("Failed")["reason"] == "InvalidSpec"
    assert "spec.replicaSpecs.Worker.restartPolicy" in sim.condition("Failed")["message"]


def test_a_rejected_pod_fails_the_job() -> None:
    sim = Sim(make_job(ps=1, workers=1))
    sim.refuse["Pod", "mnist-ps-0"] = (422, 'Pod "mnist-ps-0" is invalid: spec.containers[0].image: Required value')
    sim.step()
    assert sim.status["state"] == "Failed"
    assert sim.condition("Failed")["reason"] == "PodTemplateRejected"
    assert "image: Required value" in sim.condition("Failed")["message"]
    assert sim.outcome is not None and sim.outcome.requeue_after == 0 and "failed" in [t.name for t in sim.outcome.transitions]
    assert [e.type for e in sim.events if e.reason == "PodTemplateRejected"] == ["Warning"]
    sim.step()
    assert sim.pods == {}, "the finished job cleans up the pod that was created"


def test_a_job_being_deleted_is_left_to_garbage_collection() -> None:
    job = make_job(ps=1, workers=1)
    job["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    plan = Sim(job).step()
    assert not plan.has_actions and plan.status is None


def test_status_counts_and_printer_fields() -> None:
    sim = Sim(make_job(ps=2, workers=3))
    sim.step()
    assert (sim.status["state"], sim.status["workers"], sim.status["ps"]) == ("Created", "0/3", "0/2")
    sim.set_phase("mnist-ps-0", "Running")
    sim.set_phase("mnist-worker-0", "Running")
    sim.step()
    assert (sim.status["workers"], sim.status["ps"]) == ("1/3", "1/2")
    assert sim.status["replicaStatuses"]["Worker"] == {"active": 3, "running": 1, "succeeded": 0, "failed": 0,
                                                       "restarts": 0}
    assert sim.status["observedGeneration"] == 1
    sim.run_all()
    plan = sim.step(12)
    assert plan.all_running_seconds == pytest.approx(12)
    assert sim.status["allPodsRunningTime"] == conditions.format_time(sim.now)


# --- which status changes may wait (running_operator.phase_counts_wait) --------------------------


def test_only_the_counts_of_pods_by_phase_may_wait_to_be_written() -> None:
    sim = Sim(make_job(ps=1, workers=2))
    sim.step()
    created = copy.deepcopy(sim.status)
    sim.set_phase("mnist-ps-0", "Running")
    one_running = sim.plan().status
    assert one_running is not None and jobstatus.only_phase_counts_changed(created, one_running)
    assert not jobstatus.only_phase_counts_changed(created, created), "no change: nothing to write"
    restarted = copy.deepcopy(one_running)
    restarted["replicaStatuses"]["Worker"]["restarts"] = 1  # a later pass counts on from the written one
    assert not jobstatus.only_phase_counts_changed(created, restarted)
    running = copy.deepcopy(one_running)
    running["state"] = "Running"
    assert not jobstatus.only_phase_counts_changed(created, running)
    sim.set_phase("mnist-worker-0", "Running")
    sim.set_phase("mnist-worker-1", "Running")
    assert not jobstatus.only_phase_counts_changed(created, sim.plan().status), "the job Running: said at once"


def test_a_pending_message_that_only_counts_running_pods_may_wait_too() -> None:
    def status(running: int, reason: str = jobstatus.PODS_PENDING) -> dict:
        message = f"{running} of 3 unfinished replicas are running"
        return {"state": "Created", "workers": f"{running}/3",
                "replicaStatuses": {"Worker": {"active": 3, "running": running, "restarts": 0}},
                "conditions": [{"type": conditions.RUNNING, "status": "False", "reason": reason, "message": message,
                                "lastTransitionTime": "2030-01-01T00:00:00Z"}]}

    assert jobstatus.only_phase_counts_changed(status(1), status(2))
    assert jobstatus.only_phase_counts_changed(status(1, jobstatus.PODS_NOT_RUNNING),
                                               status(2, jobstatus.PODS_NOT_RUNNING))
    assert not jobstatus.only_phase_counts_changed(status(1), status(2, jobstatus.PODS_NOT_RUNNING)), "a new reason"
    stuck = status(1, "Unschedulable")
    assert not jobstatus.only_phase_counts_changed(stuck, status(2, "Unschedulable")), "a stuck pod's message"
