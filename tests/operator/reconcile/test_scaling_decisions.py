"""Scaling a running job's workers, decided without a cluster (operator_sim.Sim): new workers take the
next indexes with a TF_CONFIG of the new count, scaling down removes the highest indexes gracefully and
not as failures, no other pod is touched, a Kueue-queued job keeps its group's size, and the spec's
bounds are checked."""

from __future__ import annotations

import json
from typing import Any, Optional

import pytest

from operator_sim import Sim, make_job, started
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.resources import kueue
from tensorgrid_operator.resources import podgroups


def _scale(sim: Sim, workers: int) -> None:
    sim.job["spec"]["replicaSpecs"]["Worker"]["replicas"] = workers
    sim.job["metadata"]["generation"] += 1


def _uids(sim: Sim) -> dict[str, str]:
    return {name: pod["metadata"]["uid"] for name, pod in sim.pods.items()}


def _workers_of(pod: dict[str, Any]) -> list[str]:
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    return list(json.loads(env["TF_CONFIG"])["cluster"]["worker"])


def test_scaling_up_adds_the_next_indexes_and_restarts_no_other_pod() -> None:
    sim = started(make_job(ps=1, workers=2))
    before = _uids(sim)
    assert (sim.status["workerReplicas"], sim.status["desiredWorkerReplicas"]) == (2, 2)
    assert sim.status["workerSelector"] == "tensorgrid.io/job-name=mnist,tensorgrid.io/replica-type=worker"
    _scale(sim, 4)
    plan = sim.step()
    assert sorted(p.name for p in plan.create_pods) == ["mnist-worker-2", "mnist-worker-3"]
    assert plan.delete_pods == [] and {n: u for n, u in _uids(sim).items() if n in before} == before
    assert _workers_of(sim.pods["mnist-worker-3"]) == [f"mnist-worker-{i}.team.svc:2222" for i in range(4)]
    assert len(_workers_of(sim.pods["mnist-worker-0"])) == 2  # the running pods keep their TF_CONFIG
    assert (sim.status["workerReplicas"], sim.status["desiredWorkerReplicas"], sim.status["workers"]) == (4, 4, "2/4")
    scaled = [e for e in sim.events if e.reason == "ScaledUp"]
    assert len(scaled) == 1 and scaled[0].message.startswith(
        "workers 2 -> 4: creating mnist-worker-2, mnist-worker-3, which join the running job")
    sim.run_all()
    sim.settle()
    assert sim.status["state"] == "Running" and sim.status["workers"] == "4/4"


def test_scaling_down_removes_the_highest_indexes_gracefully_and_not_as_failures() -> None:
    sim = started(make_job(ps=1, workers=4))
    before = _uids(sim)
    _scale(sim, 1)
    plan = sim.step()
    assert sorted(name for name, _ in plan.delete_pods) == ["mnist-worker-1", "mnist-worker-2", "mnist-worker-3"]
    assert plan.force_delete_pods == []  # deleted with the pod's grace period: the program gets SIGTERM
    assert sorted(plan.delete_services) == ["mnist-worker-1", "mnist-worker-2", "mnist-worker-3"]
    assert _uids(sim) == {n: before[n] for n in ("mnist-ps-0", "mnist-worker-0")}
    scaled = [e for e in sim.events if e.reason == "ScaledDown"]
    assert len(scaled) == 1 and scaled[0].message.startswith(
        "workers 4 -> 1: deleting mnist-worker-1, mnist-worker-2, mnist-worker-3 (the highest indexes)")
    assert "DeletedStale" not in sim.event_reasons()
    sim.settle()
    status = sim.status
    assert status["state"] == "Running" and status["restarts"] == 0 and status["finishedReplicas"] == []
    assert (status["workerReplicas"], status["desiredWorkerReplicas"], status["workers"]) == (1, 1, "1/1")


def test_a_removed_worker_that_ends_while_it_terminates_is_not_judged() -> None:
    sim = started(make_job(ps=1, workers=3))
    _scale(sim, 2)
    plan = sim.plan()  # the deletion is asked, the pod terminates and ends with SIGTERM's 143
    sim.apply(plan, deletes=False)
    pod = sim.pods["mnist-worker-2"]
    pod["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:30Z"
    sim.set_phase("mnist-worker-2", "Failed", 143)
    sim.step()
    assert sim.status["restarts"] == 0 and sim.status["finishedReplicas"] == []
    assert sim.status["workerReplicas"] == 2  # a removed worker counts until it ends or is gone
    del sim.pods["mnist-worker-2"]
    sim.settle()
    assert sim.status["state"] == "Running" and sim.status["restarts"] == 0


def test_a_worker_index_scaled_away_and_back_is_a_new_worker() -> None:
    sim = started(make_job(ps=1, workers=2, success_policy="AllWorkers"))
    sim.set_phase("mnist-worker-1", "Succeeded", 0)
    sim.step()
    assert [r["indexes"] for r in sim.status["finishedReplicas"]] == ["1"]
    _scale(sim, 1)
    sim.settle()
    assert sim.status["finishedReplicas"] == [] and "mnist-worker-1" not in sim.pods
    _scale(sim, 2)
    plan = sim.step()
    assert [p.name for p in plan.create_pods] == ["mnist-worker-1"]


def test_a_job_queued_in_kueue_keeps_the_size_of_its_pod_group() -> None:
    job = make_job(ps=1, workers=2)
    job["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: "team-queue"}
    sim = Sim(job)
    sim.step()
    assert {p["metadata"]["annotations"][kueue.POD_GROUP_TOTAL_COUNT_ANNOTATION] for p in sim.pods.values()} == {"3"}
    _scale(sim, 4)
    plan = sim.step()
    assert plan.create_pods == [] and plan.delete_pods == []
    held = [e for e in sim.events if e.reason == "ScalingHeld"]
    assert len(held) == 1 and held[0].type == "Warning" and (
        "workers 2 -> 4 not done: the job is queued in Kueue (kueue.x-k8s.io/queue-name=team-queue), whose pod "
        "group was admitted for 3 pods: it keeps 2 workers, not the 4 asked for" in held[0].message)
    assert (sim.status["workerReplicas"], sim.status["desiredWorkerReplicas"]) == (2, 4)
    sim.job["spec"]["suspend"] = True  # the group made again, at the new size
    sim.settle()
    sim.job["spec"]["suspend"] = False
    sim.step()
    assert sorted(sim.pods) == ["mnist-ps-0"] + [f"mnist-worker-{i}" for i in range(4)]
    assert {p["metadata"]["annotations"][kueue.POD_GROUP_TOTAL_COUNT_ANNOTATION] for p in sim.pods.values()} == {"5"}


@pytest.mark.parametrize("worker, message", [
    ({"replicas": 5, "minReplicas": 1, "maxReplicas": 4},
     "spec.replicaSpecs.Worker.replicas: 5 is more than maxReplicas 4"),
    ({"replicas": 1, "minReplicas": 2}, "spec.replicaSpecs.Worker.replicas: 1 is less than minReplicas 2"),
    ({"replicas": 2, "minReplicas": 3, "maxReplicas": 2}, "spec.replicaSpecs.Worker: maxReplicas 2 is less than "
                                                         "minReplicas 3"),
    ({"replicas": 2, "minReplicas": -1}, "spec.replicaSpecs.Worker.minReplicas: must be >= 0, got -1"),
])
def test_worker_bounds_are_checked(worker: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as refused:
        spec_lib.parse_spec({"replicaSpecs": {"Worker": {"template": {}, **worker}}})
    assert str(refused.value) == message


def test_only_workers_take_bounds() -> None:
    with pytest.raises(ValueError, match=r"^spec.replicaSpecs.PS: minReplicas and maxReplicas bound the scaling of "
                                         r"workers; only spec.replicaSpecs.Worker takes them$"):
        spec_lib.parse_spec({"replicaSpecs": {"PS": {"template": {}, "maxReplicas": 2},
                                              "Worker": {"template": {}}}})
    parsed = spec_lib.parse_spec({"replicaSpecs": {"Worker": {"template": {}, "replicas": 3, "minReplicas": 1,
                                                              "maxReplicas": 8}}, "synchronous": True})
    worker = parsed.replica_specs[spec_lib.ReplicaType.WORKER]
    assert (worker.min_replicas, worker.max_replicas, parsed.synchronous) == (1, 8, True)


def test_the_gang_of_a_scalable_job_counts_its_workers_at_min_replicas() -> None:
    def spec(worker: dict[str, Any], policy: Optional[dict[str, Any]] = None) -> spec_lib.JobSpec:
        return spec_lib.parse_spec({"replicaSpecs": {"PS": {"replicas": 2}, "Worker": worker},
                                    "runPolicy": {"schedulingPolicy": policy or {}}})

    assert podgroups.min_member(spec({"replicas": 4})) == 6  # not scalable below: every replica
    assert podgroups.min_member(spec({"replicas": 4, "minReplicas": 1, "maxReplicas": 8})) == 3
    assert podgroups.min_member(spec({"replicas": 4, "minReplicas": 1}, {"minAvailable": 5})) == 5
