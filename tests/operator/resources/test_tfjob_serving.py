"""The pure half of serving Kubeflow's TFJob (api/tfjob_serving.py): the TrainingJob that runs a TFJob,
the TFJob status as Kubeflow writes it, its TTL, and whose CRD it is."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from tensorgrid_operator.api import tfjob_conversion
from tensorgrid_operator.api import tfjob_serving

NOW = datetime.datetime(2030, 1, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)
LATER = NOW + datetime.timedelta(seconds=30)


def tfjob(run_policy: dict[str, Any] | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    container = {"name": "tensorflow", "image": "tf"}
    job: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": {"name": "mnist", "namespace": "team", "uid": "u-1", "resourceVersion": "7"},
        "spec": {"tfReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": {"containers": [container]}}},
            "ps": {"replicas": 1, "template": {"spec": {"containers": [container]}}},
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [container]}}}}}}
    if run_policy is not None:
        job["spec"]["runPolicy"] = run_policy
    if status is not None:
        job["status"] = status
    return job


def test_the_training_job_is_owned_by_the_tfjob_keeps_tfjobs_defaults_and_leaves_the_ttl_to_it() -> None:
    job, _ = tfjob_serving.training_job_for(tfjob({"ttlSecondsAfterFinished": 60, "backoffLimit": 2}))
    assert job["metadata"]["name"] == "mnist" and job["metadata"]["namespace"] == "team"
    assert job["metadata"]["labels"] == {tfjob_serving.LABEL_TFJOB: "mnist"}
    assert job["metadata"]["ownerReferences"] == [{"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "mnist",
                                                   "uid": "u-1", "controller": True}]
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "None", "backoffLimit": 2}
    assert {r: s["restartPolicy"] for r, s in job["spec"]["replicaSpecs"].items()} == {
        "Chief": "Never", "PS": "Never", "Worker": "Never"}


def test_a_tfjob_that_cannot_run_names_the_field() -> None:
    bad = tfjob()
    bad["spec"]["tfReplicaSpecs"]["Launcher"] = bad["spec"]["tfReplicaSpecs"].pop("Worker")
    with pytest.raises(tfjob_conversion.ConversionError, match="spec.tfReplicaSpecs.Launcher: unknown replica type"):
        tfjob_serving.training_job_for(bad)


def running_status() -> dict[str, Any]:
    return {"startTime": "2030-01-01T11:59:00Z",
            "conditions": [{"type": "Created", "status": "True"},
                           {"type": "Running", "status": "True", "message": "4 replicas are running"}],
            "replicaStatuses": {"Chief": {"active": 1, "running": 1, "succeeded": 0, "failed": 0},
                                "PS": {"active": 1, "running": 1}, "Worker": {"active": 2, "running": 2}}}


def test_a_running_job_is_created_and_running_under_the_tfjobs_own_role_keys() -> None:
    status = tfjob_serving.kubeflow_status(tfjob(), running_status(), NOW)
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Created", "True", "TFJobCreated"), ("Running", "True", "TFJobRunning")]
    assert status["conditions"][0]["message"] == "TFJob team/mnist is created."
    assert status["conditions"][1]["message"] == "TFJob team/mnist is running. 4 replicas are running"
    assert status["replicaStatuses"] == {
        "Master": {"active": 1, "succeeded": 0, "failed": 0,
                   "selector": "tensorgrid.io/job-name=mnist,tensorgrid.io/replica-type=chief"},
        "ps": {"active": 1, "succeeded": 0, "failed": 0,
               "selector": "tensorgrid.io/job-name=mnist,tensorgrid.io/replica-type=ps"},
        "Worker": {"active": 2, "succeeded": 0, "failed": 0,
                   "selector": "tensorgrid.io/job-name=mnist,tensorgrid.io/replica-type=worker"}}
    assert status["startTime"] == "2030-01-01T11:59:00Z" and "completionTime" not in status


def test_the_end_turns_running_false_and_moves_only_the_conditions_that_flipped() -> None:
    first = tfjob_serving.kubeflow_status(tfjob(), running_status(), NOW)
    ended = running_status()
    ended["conditions"][1]["status"] = "False"
    ended["conditions"].append({"type": "Succeeded", "status": "True", "message": "the chief succeeded"})
    ended["completionTime"] = "2030-01-01T12:00:30Z"
    status = tfjob_serving.kubeflow_status(tfjob(status=first), ended, LATER)
    by_type = {c["type"]: c for c in status["conditions"]}
    assert [c["type"] for c in status["conditions"]] == ["Created", "Running", "Succeeded"]
    assert by_type["Created"]["lastTransitionTime"] == "2030-01-01T12:00:00Z"
    assert by_type["Running"]["status"] == "False" and by_type["Running"]["reason"] == "TFJobSucceeded"
    assert by_type["Running"]["lastTransitionTime"] == "2030-01-01T12:00:30Z"
    assert by_type["Succeeded"]["message"] == "TFJob team/mnist successfully completed. the chief succeeded"
    assert status["completionTime"] == "2030-01-01T12:00:30Z"
    assert tfjob_serving.finished(status)


def test_the_ttl_counts_from_completion() -> None:
    done = {"completionTime": "2030-01-01T12:00:00Z", "conditions": [{"type": "Failed", "status": "True"}]}
    assert tfjob_serving.ttl_remaining(tfjob({"ttlSecondsAfterFinished": 60}, done), LATER) == 30.0
    assert tfjob_serving.ttl_remaining(tfjob({"ttlSecondsAfterFinished": 10}, done), LATER) == -20.0
    assert tfjob_serving.ttl_remaining(tfjob({}, done), LATER) is None
    assert tfjob_serving.ttl_remaining(tfjob({"ttlSecondsAfterFinished": 60}, running_status()), LATER) is None


def test_only_the_charts_crd_is_served() -> None:
    ours = {"metadata": {"annotations": {tfjob_serving.INSTALLED_BY_ANNOTATION: tfjob_serving.INSTALLED_BY}}}
    assert tfjob_serving.crd_owner_problem(ours) is None
    kubeflows = {"metadata": {"labels": {"app.kubernetes.io/managed-by": "Helm"}}}
    problem = tfjob_serving.crd_owner_problem(kubeflows)
    assert problem is not None and "not installed by tensorgrid's chart" in problem and "'Helm'" in problem
    missing = tfjob_serving.crd_owner_problem(None)
    assert missing is not None and "kubeflowTFJob.enabled=true" in missing


def test_pods_are_sent_with_their_quantities_as_strings() -> None:
    from tensorgrid_operator.cluster import kube

    pod = {"spec": {"containers": [{"name": "tensorflow", "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "2"},
                                                                        "requests": {"memory": 0.5}}}]}}
    sent = kube.quantities_as_strings(pod)
    assert sent["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1", "cpu": "2"},
                                                          "requests": {"memory": "0.5"}}
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1, "the job's template is left as it is"
    plain = {"spec": {"containers": [{"name": "tensorflow"}]}}
    assert kube.quantities_as_strings(plain) is plain
