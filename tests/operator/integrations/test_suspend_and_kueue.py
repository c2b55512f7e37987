"""Pure tests of spec.suspend, spec.managedBy and the Kueue pod-group metadata (no cluster)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import yaml

from operator_sim import Sim, make_job, started
from tensorgrid_operator.api import conditions
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import plans
from tensorgrid_operator.resources import kueue
from tensorgrid_operator.resources import manifests

CRD = pathlib.Path(__file__).resolve().parents[3] / "crds" / "trainingjobs.tensorgrid.io.yaml"



def queued(job: dict[str, Any], queue: str = "team-a", **labels: str) -> dict[str, Any]:
    job["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: queue, **labels}
    return job


# --- spec.suspend -------------------------------------------------------------------------------

def test_spec_suspend_deletes_pods_clears_start_time_and_resumes() -> None:
    sim = started(make_job(ps=1, workers=2, run_policy={"activeDeadlineSeconds": 100}))
    sim.set_phase("mnist-worker-1", "Succeeded", 0)
    sim.step(50)
    sim.job["spec"]["suspend"] = True
    sim.step()
    assert sim.status["state"] == "Suspended"
    assert set(sim.pods) == {"mnist-worker-1"}  # the finished replica stays finished
    suspended = sim.condition("Suspended")
    assert suspended["status"] == "True" and suspended["message"] == "spec.suspend is true"
    assert "startTime" not in sim.status  # as a suspended Job's
    assert sim.condition("Running")["reason"] == "Suspended"
    plan = sim.step(500)  # no deadline while suspended, nothing created
    assert sim.status["state"] == "Suspended" and not plan.create_pods and plan.requeue_after is None
    sim.job["spec"]["suspend"] = False
    plan = sim.step()
    assert {p.name for p in plan.create_pods} == {"mnist-ps-0", "mnist-worker-0"}
    assert sim.status["startTime"] == conditions.format_time(sim.now)
    assert plan.requeue_after == pytest.approx(100)  # the deadline counts from the resume
    assert sim.condition("Suspended")["status"] == "False"
    assert "Resumed" in sim.event_reasons()
    assert sim.status["restarts"] == 0


def test_a_job_created_suspended_creates_nothing() -> None:
    job = make_job(ps=1, workers=2)
    job["spec"]["suspend"] = True
    sim = Sim(job)
    plan = sim.step()
    assert not plan.create_pods and not plan.create_services
    assert sim.status["state"] == "Suspended" and "startTime" not in sim.status
    assert conditions.get_condition(sim.status["conditions"], "Created") is None
    sim.job["spec"]["suspend"] = False
    plan = sim.step()
    assert len(plan.create_pods) == 3 and sim.status["startTime"] == conditions.format_time(sim.now)


def test_pods_failing_as_they_are_suspended_use_no_retry() -> None:
    """SIGTERM makes the runtime exit 143: a pod stopped by the suspension is not a failure."""
    sim = started(make_job(ps=1, workers=2, run_policy={"backoffLimit": 0}))
    sim.job["spec"]["suspend"] = True
    plan = sim.plan()
    sim.apply(plan, deletes=False)  # the deletions are graceful: the pods terminate first
    for name in plan.delete_pods:
        pod = sim.pods[name[0]]
        pod["metadata"]["deletionTimestamp"] = conditions.format_time(sim.now)
        pod["status"] = {"phase": "Failed", "containerStatuses": [
            {"name": "tensorgrid", "state": {"terminated": {"exitCode": 143, "reason": "Error"}}}]}
    sim.job["spec"]["suspend"] = False
    plan = sim.step()
    assert not plan.create_pods  # the replicas' old pods are still terminating
    assert sim.status["restarts"] == 0 and sim.status["finishedReplicas"] == []
    assert sim.status["state"] != "Failed"
    sim.pods.clear()
    plan = sim.step()
    assert len(plan.create_pods) == 3 and sim.status["restarts"] == 0


def test_either_suspend_field_suspends() -> None:
    both = spec_lib.parse_spec({"replicaSpecs": {"Worker": {}}, "suspend": False, "runPolicy": {"suspend": True}})
    assert both.suspended and both.suspended_by == "spec.runPolicy.suspend"
    assert spec_lib.parse_spec({"replicaSpecs": {"Worker": {}}, "suspend": True}).suspended_by == "spec.suspend"
    assert not spec_lib.parse_spec({"replicaSpecs": {"Worker": {}}}).suspended


def test_a_suspended_queued_job_says_kueue_will_not_resume_it() -> None:
    job = queued(make_job(ps=1, workers=1))
    job["spec"]["suspend"] = True
    sim = Sim(job)
    sim.step()
    message = sim.condition("Suspended")["message"]
    assert "Kueue does not resume TrainingJobs" in message and "team-a" in message


# --- spec.managedBy -----------------------------------------------------------------------------

@pytest.mark.parametrize("managed_by, here", [
    (None, True),
    (spec_lib.CONTROLLER_NAME, True),
    ("kueue.x-k8s.io/multikueue", False),
    ("example.com/other", False),
])
def test_managed_by_decides_who_reconciles(managed_by: Any, here: bool) -> None:
    raw: dict[str, Any] = {"replicaSpecs": {"Worker": {}}}
    if managed_by is not None:
        raw["managedBy"] = managed_by
    assert spec_lib.managed_here(raw) is here


def test_crd_suspend_and_managed_by() -> None:
    crd = yaml.safe_load(CRD.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["suspend"] == {**spec["properties"]["suspend"], "type": "boolean", "default": False}
    managed_by = spec["properties"]["managedBy"]
    assert managed_by["maxLength"] == spec_lib.MAX_MANAGED_BY_LENGTH
    immutable = {"rule": "self == oldSelf", "message": "spec.managedBy is immutable"}
    assert immutable in managed_by["x-kubernetes-validations"]
    assert any("has(self.managedBy) == has(oldSelf.managedBy)" in r["rule"] for r in spec["x-kubernetes-validations"])
    assert spec_lib.CONTROLLER_NAME in managed_by["description"]


# --- Kueue pod groups ---------------------------------------------------------------------------

def test_queued_job_pods_form_one_pod_group() -> None:
    job = queued(make_job(ps=2, workers=3, chief=1, evaluators=1), **{kueue.PRIORITY_CLASS_LABEL: "high"})
    job["spec"]["replicaSpecs"]["Worker"]["template"]["metadata"] = {
        "labels": {kueue.QUEUE_NAME_LABEL: "from-template", "app": "mnist"}}
    plan = Sim(job).step()
    assert len(plan.create_pods) == 7
    group = kueue.pod_group_name(job)
    for pod in (p.manifest() for p in plan.create_pods):
        labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
        assert labels[kueue.QUEUE_NAME_LABEL] == "team-a"  # the job's label wins over a template's
        assert labels[kueue.POD_GROUP_NAME_LABEL] == group
        assert labels[kueue.PRIORITY_CLASS_LABEL] == "high"
        assert annotations[kueue.POD_GROUP_TOTAL_COUNT_ANNOTATION] == "7"
        assert kueue.RETRIABLE_IN_GROUP_ANNOTATION not in annotations
    worker = next(p.manifest() for p in plan.create_pods if p.name == "mnist-worker-0")
    assert worker["metadata"]["labels"]["app"] == "mnist"
    # Services are not Kueue's business.
    assert all(kueue.POD_GROUP_NAME_LABEL not in s["metadata"]["labels"] for s in plan.create_services)


def test_unqueued_job_pods_carry_no_kueue_metadata() -> None:
    pod = manifests.build_pod(make_job(ps=1, workers=1), spec_lib.parse_spec(make_job(ps=1, workers=1)["spec"]),
                              spec_lib.ReplicaKey(spec_lib.ReplicaType.WORKER, 0))
    assert not any(k.startswith("kueue.x-k8s.io/") for k in pod["metadata"]["labels"])
    assert not any(k.startswith("kueue.x-k8s.io/") for k in pod["metadata"].get("annotations") or {})


def test_pod_group_name_is_a_label_value_unique_per_job() -> None:
    job = make_job(name="a" * 57)
    job["metadata"]["uid"] = "0123abcd-4567-89ef-0123-456789abcdef"
    name = kueue.pod_group_name(job)
    assert len(name) == 63 and name.endswith("-0123abcd") and name.startswith("a" * 54)
    short = make_job(name="mnist")
    short["metadata"]["uid"] = "ffee0011-2233-4455-6677-8899aabbccdd"
    assert kueue.pod_group_name(short) == "mnist-ffee0011"


def test_a_finished_queued_job_closes_its_pod_group_before_deleting_pods() -> None:
    sim = started(queued(make_job(ps=1, workers=2)))
    sim.set_phase("mnist-worker-0", "Succeeded", 0)
    uids = {name: pod["metadata"]["uid"] for name, pod in sim.pods.items()}
    plan = sim.step()
    assert sim.status["state"] == "Succeeded"
    closed = {name for name, _ in plan.close_group_pods}
    assert closed == {"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"}
    assert {name for name, _ in plan.delete_pods} == {"mnist-ps-0", "mnist-worker-1"}
    assert all(uid == uids[name] for name, uid in plan.close_group_pods)
    # Once the pods carry the annotation, the finished job asks nothing more of them.
    sim.pods["mnist-worker-0"]["metadata"].setdefault("annotations", {}).update(
        kueue.close_group_patch()["metadata"]["annotations"])
    assert sim.step().close_group_pods == []


def test_a_job_failing_its_deadline_closes_its_pod_group() -> None:
    sim = started(queued(make_job(ps=1, workers=1, run_policy={"activeDeadlineSeconds": 10})))
    plan = sim.step(10)
    assert sim.status["state"] == "Failed"
    assert {name for name, _ in plan.close_group_pods} == {"mnist-ps-0", "mnist-worker-0"}


def test_unqueued_finished_job_patches_no_pod() -> None:
    sim = started(make_job(ps=1, workers=1))
    sim.set_phase("mnist-worker-0", "Succeeded", 0)
    plan = sim.step()
    assert sim.status["state"] == "Succeeded" and plan.close_group_pods == []


def test_close_group_is_an_action() -> None:
    assert plans.Plan(close_group_pods=[("p", "u")]).has_actions


# --- pods waiting for admission -----------------------------------------------------------------

def _gate_all(sim: Sim) -> None:
    """What Kueue's webhook does to each new pod of a queued job."""
    for pod in sim.pods.values():
        pod["spec"]["schedulingGates"] = [{"name": kueue.ADMISSION_GATE}]


def _admit_all(sim: Sim) -> None:
    """What Kueue does when it admits the group: the gates go."""
    for pod in sim.pods.values():
        pod["spec"].pop("schedulingGates", None)


def test_pods_held_by_kueue_s_gate_show_the_job_waiting_for_admission() -> None:
    sim = Sim(queued(make_job(ps=1, workers=2)))
    sim.step()
    _gate_all(sim)
    sim.step()
    assert sim.status["state"] == "SchedulingGated"
    running = sim.condition("Running")
    assert running["status"] == "False" and running["reason"] == "SchedulingGated"
    assert "mnist-ps-0, mnist-worker-0, mnist-worker-1" in running["message"]
    assert "Kueue removes kueue.x-k8s.io/admission" in running["message"]
    events = [e for e in sim.events if e.reason == "SchedulingGated"]
    assert len(events) == 1 and events[0].type == "Normal"
    sim.step()
    assert len([e for e in sim.events if e.reason == "SchedulingGated"]) == 1  # said once
    _admit_all(sim)
    sim.run_all()
    sim.step()
    assert sim.status["state"] == "Running"


def test_a_queued_job_s_active_clock_runs_only_while_kueue_admits_its_group() -> None:
    """Time waiting for quota is not active time, as for a Job that Kueue keeps suspended: startTime
    comes with the admission, goes with a preemption, and the deadline counts from the re-admission."""
    sim = Sim(queued(make_job(ps=1, workers=1, run_policy={"activeDeadlineSeconds": 100})))
    assert sim.step().create_pods and "startTime" not in sim.status
    _gate_all(sim)
    sim.step(500)  # five deadlines in the queue
    assert sim.status["state"] == "SchedulingGated" and "startTime" not in sim.status

    _admit_all(sim)
    plan = sim.step()
    assert sim.status["startTime"] == conditions.format_time(sim.now)
    assert plan.requeue_after == pytest.approx(100)
    sim.run_all()
    sim.step(60)
    assert sim.status["state"] == "Running"

    sim.pods.clear()  # preempted: Kueue deletes the group's pods
    assert {p.name for p in sim.step().create_pods} == {"mnist-ps-0", "mnist-worker-0"}
    assert "startTime" not in sim.status
    _gate_all(sim)
    sim.step(500)
    assert sim.status["state"] == "SchedulingGated" and "startTime" not in sim.status
    assert sim.status["restarts"] == 0

    _admit_all(sim)
    sim.step()
    readmitted = sim.now
    assert sim.status["startTime"] == conditions.format_time(readmitted)
    sim.run_all()
    sim.step(99)
    assert sim.status["state"] == "Running"
    sim.step(1)
    assert sim.status["state"] == "Failed" and sim.condition("Failed")["reason"] == "DeadlineExceeded"


def test_a_finished_replica_left_ungated_does_not_run_the_clock_of_a_preempted_job() -> None:
    sim = Sim(queued(make_job(ps=1, workers=2, run_policy={"activeDeadlineSeconds": 100})))
    sim.step()
    sim.run_all()
    sim.step()
    sim.set_phase("mnist-worker-1", "Succeeded", 0)  # stays, ungated (cleanPodPolicy keeps finished pods)
    sim.step()
    for name in ("mnist-ps-0", "mnist-worker-0"):  # preempted: Kueue deletes the running pods
        del sim.pods[name]
    sim.step()
    for name in ("mnist-ps-0", "mnist-worker-0"):
        sim.pods[name]["spec"]["schedulingGates"] = [{"name": kueue.ADMISSION_GATE}]
    sim.step(500)
    assert sim.status["state"] == "SchedulingGated" and "startTime" not in sim.status


def test_an_unqueued_job_s_clock_starts_with_its_first_pods_gated_or_not() -> None:
    sim = Sim(make_job(ps=1, workers=1, run_policy={"activeDeadlineSeconds": 100}))
    sim.step()
    assert sim.status["startTime"] == conditions.format_time(sim.now)
    _gate_all(sim)  # gated, but not queued in Kueue: the clock runs, as a Job's would
    sim.step(100)
    assert sim.status["state"] == "Failed"


def test_a_gate_on_a_running_pod_is_not_waiting() -> None:
    sim = started(make_job(ps=1, workers=1))
    sim.pods["mnist-ps-0"]["spec"]["schedulingGates"] = [{"name": "example.com/gate"}]
    sim.step()
    assert sim.status["state"] == "Running"
