"""The operator against a real API server, scheduler and garbage collector; the tests play the kubelet."""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any

import pytest

from operator_cluster import ControlPlane, Namespace, Operator, job_manifest, wait_for

pytestmark = pytest.mark.controlplane

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_job_lifecycle(operator: Operator, namespace: Namespace) -> None:
    """2 PS + 3 workers: pods, Services, TF_CONFIG, stuck report, Running, success, cleanup, metrics."""
    succeeded_before = operator.metric("tensorgrid_operator_jobs_succeeded_total", job_namespace=namespace.name)
    namespace.apply(job_manifest("mnist", ps=2, workers=3))
    names = {"mnist-ps-0", "mnist-ps-1", "mnist-worker-0", "mnist-worker-1", "mnist-worker-2"}
    pods = namespace.wait_pods("mnist", names)
    assert set(namespace.services("mnist")) == names
    service = namespace.services("mnist")["mnist-ps-1"]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    for name, pod in pods.items():
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        config = json.loads(env["TF_CONFIG"])
        assert config["cluster"]["ps"] == [f"mnist-ps-{i}.{namespace.name}.svc:2222" for i in range(2)]
        assert config["cluster"]["worker"] == [f"mnist-worker-{i}.{namespace.name}.svc:2222" for i in range(3)]
        assert f"mnist-{config['task']['type']}-{config['task']['index']}" == name
        owner = pod["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "TrainingJob" and owner["controller"] is True
    assert pods["mnist-worker-0"]["metadata"]["labels"]["tensorgrid.io/job-role"] == "chief"
    # Kubernetes' recommended labels, as stored (tests/operator/resources/test_recommended_labels.py).
    assert {p["metadata"]["labels"]["app.kubernetes.io/component"] for p in pods.values()} == {"ps", "worker"}
    assert service["metadata"]["labels"]["app.kubernetes.io/instance"] == "mnist"
    assert service["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "tensorgrid-operator"

    # No nodes in this cluster: the scheduler says so, and the job must too.
    namespace.wait_state("mnist", "Unschedulable")
    assert "no nodes available" in namespace.condition("mnist", "Running")["message"]
    wait_for(lambda: any(e["reason"] == "Unschedulable" and e["type"] == "Warning"
                         for e in namespace.events("mnist")), 10, "the Unschedulable warning")

    namespace.run_all("mnist")
    status = namespace.wait_state("mnist", "Running")
    assert status["workers"] == "3/3" and status["ps"] == "2/2"

    namespace.set_phase("mnist-worker-0", "Succeeded", 0)
    status = namespace.wait_state("mnist", "Succeeded")
    assert status["completionTime"]
    namespace.wait_pods("mnist", {"mnist-worker-0"})  # cleanPodPolicy Running: PS and workers stopped
    wait_for(lambda: operator.metric("tensorgrid_operator_jobs_succeeded_total", job_namespace=namespace.name)
             == succeeded_before + 1, 10, "the succeeded counter")
    wanted = {"CreatedPods", "CreatedServices", "Running", "JobSucceeded", "CleanedUp"}
    wait_for(lambda: wanted <= {e["reason"] for e in namespace.events("mnist")}, 10, f"events {sorted(wanted)}",
             lambda: sorted({e["reason"] for e in namespace.events("mnist")}))
    assert operator.metric("tensorgrid_operator_time_to_all_pods_running_seconds_count") >= 1


# restartPolicy x (retryable 137, permanent 1): all eight jobs at once, to keep the suite quick.
CASES = [
    ("never", "Never", 137, False), ("never", "Never", 1, False),
    ("onfailure", "OnFailure", 137, True), ("onfailure", "OnFailure", 1, True),
    ("always", "Always", 137, True), ("always", "Always", 1, True),
    ("exitcode", "ExitCode", 137, True), ("exitcode", "ExitCode", 1, False),
]


def test_worker_failure_under_each_restart_policy(operator: Operator, namespace: Namespace) -> None:
    jobs = {f"{short}-{code}": (policy, code, retried) for short, policy, code, retried in CASES}
    for name, (policy, _, _) in jobs.items():
        namespace.apply(job_manifest(name, ps=1, workers=2, policy=policy))
    for name in jobs:
        namespace.wait_pods(name, {f"{name}-ps-0", f"{name}-worker-0", f"{name}-worker-1"})
        namespace.run_all(name)
    for name in jobs:
        namespace.wait_state(name, "Running")
    old_uids = {}
    for name, (_, code, _) in jobs.items():
        old_uids[name] = namespace.pods(name)[f"{name}-worker-1"]["metadata"]["uid"]
        namespace.set_phase(f"{name}-worker-1", "Failed", code, "OOMKilled" if code == 137 else "Error")
    for name, (policy, code, retried) in jobs.items():
        if retried:
            wait_for(lambda: namespace.pods(name).get(f"{name}-worker-1", {}).get("metadata", {}).get("uid")
                     not in (None, old_uids[name]), 20, f"{name}: worker-1 recreated")
            status = namespace.status(name)
            assert status["restarts"] == 1 and status["replicaStatuses"]["Worker"]["restarts"] == 1, status
            assert status["state"] in ("Restarting", "Unschedulable"), status
        else:
            namespace.wait_state(name, "Failed")
            message = namespace.condition(name, "Failed")["message"]
            assert f"exit code {code}" in message and policy in message


def test_backoff_limit_and_ps_restart(operator: Operator, namespace: Namespace) -> None:
    """A crashed PS is recreated alone; a worker failing with it is collateral; the next PS crash is over budget."""
    namespace.apply(job_manifest("budget", ps=1, workers=2, policy="OnFailure", run_policy={"backoffLimit": 1}))
    names = {"budget-ps-0", "budget-worker-0", "budget-worker-1"}
    first = namespace.wait_pods("budget", names)
    namespace.run_all("budget")
    namespace.wait_state("budget", "Running")
    namespace.set_phase("budget-ps-0", "Failed", 137, "OOMKilled")
    wait_for(lambda: namespace.pods("budget").get("budget-ps-0", first["budget-ps-0"])["metadata"]["uid"]
             != first["budget-ps-0"]["metadata"]["uid"], 20, "the PS recreated")
    pods = namespace.pods("budget")
    assert all(pods[w]["metadata"]["uid"] == first[w]["metadata"]["uid"] for w in ("budget-worker-0", "budget-worker-1"))
    status = namespace.status("budget")
    assert status["replicaStatuses"]["PS"]["restarts"] == 1
    assert "recreated alone" in namespace.condition("budget", "Restarting")["message"]
    assert status["parameterServerLoss"]["replicas"] == ["budget-ps-0"]

    namespace.set_phase("budget-worker-1", "Failed", 1)  # its PS had just gone: collateral, not counted
    wait_for(lambda: namespace.pods("budget").get("budget-worker-1", first["budget-worker-1"])["metadata"]["uid"]
             != first["budget-worker-1"]["metadata"]["uid"], 20, "the collateral worker recreated")
    assert namespace.status("budget")["restarts"] == 1
    namespace.run_all("budget")
    namespace.wait_state("budget", "Running")
    namespace.set_phase("budget-ps-0", "Failed", 137)
    namespace.wait_state("budget", "Failed")
    assert namespace.condition("budget", "Failed")["reason"] == "BackoffLimitExceeded"
    assert namespace.status("budget")["restarts"] == 1


def test_a_quota_that_forbids_the_pods_is_reported(operator: Operator, namespace: Namespace) -> None:
    """A real ResourceQuota refuses every pod: events, status and `kubectl describe` say why; later it works."""
    cp = namespace.cp
    cp.core.create_namespaced_resource_quota(namespace.name, {"metadata": {"name": "no-pods"},
                                                              "spec": {"hard": {"pods": "0"}}})
    wait_for(lambda: (cp.core.read_namespaced_resource_quota("no-pods", namespace.name).status.hard or {})
             .get("pods") == "0", 30, "the quota controller to compute the quota")
    namespace.apply(job_manifest("quota", ps=1, workers=2))
    status = namespace.wait_state("quota", "FailedCreate")
    running = namespace.condition("quota", "Running")
    assert running["status"] == "False" and running["reason"] == "FailedCreate", running
    assert "exceeded quota: no-pods" in running["message"] and "next attempt at" in running["message"], running
    assert all(r["active"] == 0 for r in status["replicaStatuses"].values()), status
    assert {e["replica"] for e in status["replicaBackoff"]} == {"ps-0", "worker-0", "worker-1"}, status
    wait_for(lambda: any(e["reason"] == "FailedCreatePod" and e["type"] == "Warning"
                         and "exceeded quota: no-pods" in e["message"] for e in namespace.events("quota")),
             10, "the FailedCreatePod warning", lambda: namespace.events("quota"))
    assert namespace.pods("quota") == {}
    assert set(namespace.services("quota")) == {"quota-ps-0", "quota-worker-0", "quota-worker-1"}
    described = cp.kubectl("-n", namespace.name, "describe", "tj", "quota").stdout
    assert "FailedCreatePod" in described and "exceeded quota: no-pods" in described, described
    assert "FailedCreate" in cp.kubectl("-n", namespace.name, "get", "tj", "quota").stdout

    cp.core.delete_namespaced_resource_quota("no-pods", namespace.name)
    namespace.wait_pods("quota", {"quota-ps-0", "quota-worker-0", "quota-worker-1"}, timeout=30)
    namespace.run_all("quota")
    namespace.wait_state("quota", "Running")
    assert namespace.status("quota")["restarts"] == 0


def test_deadline_fires_on_its_own(operator: Operator, namespace: Namespace) -> None:
    namespace.apply(job_manifest("deadline", run_policy={"activeDeadlineSeconds": 3}))
    namespace.wait_pods("deadline", {"deadline-ps-0", "deadline-worker-0", "deadline-worker-1"})
    namespace.run_all("deadline")
    # The job's own times, not the test's polling: on a loaded machine the job may be Running for
    # less than one poll before the deadline ends it.
    namespace.wait_state("deadline", "Failed", timeout=40)
    assert namespace.condition("deadline", "Failed")["reason"] == "DeadlineExceeded"
    status = namespace.status("deadline")
    ran = (datetime.datetime.fromisoformat(status["completionTime"].replace("Z", "+00:00"))
           - datetime.datetime.fromisoformat(status["startTime"].replace("Z", "+00:00"))).total_seconds()
    assert 3 <= ran < 20, f"the deadline fired {ran:.0f}s after the job started (3s asked; resync is 30s)"
    namespace.wait_pods("deadline", set())


def test_ttl_fires_on_its_own(operator: Operator, namespace: Namespace) -> None:
    namespace.apply(job_manifest("ttl", workers=1, run_policy={"ttlSecondsAfterFinished": 2}))
    namespace.wait_pods("ttl", {"ttl-ps-0", "ttl-worker-0"})
    namespace.run_all("ttl")
    namespace.wait_state("ttl", "Running")
    namespace.set_phase("ttl-worker-0", "Succeeded", 0)
    namespace.wait_state("ttl", "Succeeded")
    finished = time.monotonic()
    wait_for(lambda: namespace.job("ttl") is None, 15, "the TTL to delete the job")
    assert time.monotonic() - finished < 6
    # the garbage collector removes what the job owned
    wait_for(lambda: not namespace.pods("ttl") and not namespace.services("ttl"), 30, "garbage collection")


def test_deleted_completed_pod_is_not_recreated(operator: Operator, namespace: Namespace) -> None:
    namespace.apply(job_manifest("keep", workers=3))
    namespace.wait_pods("keep", {"keep-ps-0", "keep-worker-0", "keep-worker-1", "keep-worker-2"})
    namespace.run_all("keep")
    namespace.wait_state("keep", "Running")
    namespace.set_phase("keep-worker-2", "Succeeded", 0)
    wait_for(lambda: namespace.status("keep").get("replicaStatuses", {}).get("Worker", {}).get("succeeded") == 1,
             10, "worker-2 recorded")
    namespace.cp.core.delete_namespaced_pod("keep-worker-2", namespace.name)
    wait_for(lambda: "keep-worker-2" not in namespace.pods("keep"), 10, "the pod gone")
    time.sleep(2)  # the deletion event has been reconciled by now
    assert "keep-worker-2" not in namespace.pods("keep")
    records = namespace.status("keep")["finishedReplicas"]
    assert [(r["type"], r["indexes"], r["outcome"]) for r in records] == [("Worker", "2", "Succeeded")]
    assert namespace.status("keep")["state"] == "Running"


def test_suspend_and_resume(operator: Operator, namespace: Namespace) -> None:
    namespace.apply(job_manifest("pause"))
    names = {"pause-ps-0", "pause-worker-0", "pause-worker-1"}
    namespace.wait_pods("pause", names)
    patch = {"spec": {"runPolicy": {"suspend": True}}}
    namespace.cp.custom.patch_namespaced_custom_object("tensorgrid.io", "v1", namespace.name, "trainingjobs",
                                                       "pause", patch)
    namespace.wait_state("pause", "Suspended")
    namespace.wait_pods("pause", set())
    patch["spec"]["runPolicy"]["suspend"] = False
    namespace.cp.custom.patch_namespaced_custom_object("tensorgrid.io", "v1", namespace.name, "trainingjobs",
                                                       "pause", patch)
    namespace.wait_pods("pause", names)
    assert namespace.condition("pause", "Suspended")["status"] == "False"
    assert namespace.status("pause")["restarts"] == 0


def test_liveness_endpoint(operator: Operator) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{operator.liveness_port}/healthz", timeout=5) as response:
        assert response.status == 200


INVALID = [
    ("bad-policy", {"Worker": {"replicas": 1, "restartPolicy": "Sometimes"}}, "spec.replicaSpecs.Worker.restartPolicy"),
    ("no-workers", {"PS": {"replicas": 1}}, "Worker or Chief"),
    ("neg-replicas", {"Worker": {"replicas": -1}}, "spec.replicaSpecs.Worker.replicas"),
    ("two-chiefs", {"Chief": {"replicas": 2}}, "spec.replicaSpecs.Chief.replicas"),
    ("x" * 54, {"Worker": {"replicas": 100}}, "metadata.name is too long"),
    ("1-digit-first", {"Worker": {"replicas": 1}}, "DNS-1035"),
]


@pytest.mark.parametrize("name, replica_specs, field", INVALID, ids=[case[0][:12] for case in INVALID])
def test_invalid_manifests_are_rejected(controlplane: ControlPlane, name: str, replica_specs: dict[str, Any],
                                        field: str) -> None:
    for entry in replica_specs.values():
        entry["template"] = {"spec": {"containers": [{"name": "tensorgrid", "image": "tensorgrid:test"}]}}
    manifest = {"apiVersion": "tensorgrid.io/v1", "kind": "TrainingJob",
                "metadata": {"name": name, "namespace": "default"}, "spec": {"replicaSpecs": replica_specs}}
    result = controlplane.kubectl("apply", "-f", "-", stdin=json.dumps(manifest), check=False)
    assert result.returncode != 0, result.stdout
    assert field in result.stderr, result.stderr


def test_explain(controlplane: ControlPlane) -> None:
    out = controlplane.kubectl("explain", "tj.spec.runPolicy.cleanPodPolicy").stdout
    assert "parameter servers" in out and "Running" in out


def test_killed_operator_restarts_without_duplicates(controlplane: ControlPlane, namespace: Namespace,
                                                     tmp_path: pathlib.Path) -> None:
    """SIGKILL a separate operator process while it creates pods for 20 jobs; a new one finishes the work."""
    # This operator watches a namespace the in-process one (tg-*) does not.
    ns = "kill-" + namespace.name[3:][-40:]
    controlplane.core.create_namespace({"metadata": {"name": ns}})
    other = Namespace(controlplane, ns)
    env = dict(os.environ, KUBECONFIG=controlplane.kubeconfig)
    command = [sys.executable, "-m", "tensorgrid_operator", "--standalone", "-n", ns, "--metrics-port", "off",
               "--liveness-port", "off"]
    log = open(tmp_path / "operator.log", "w")
    try:
        first = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        jobs = [f"job{i}" for i in range(20)]
        for name in jobs:
            other.apply(job_manifest(name, ps=1, workers=4))
        wait_for(lambda: len(other.pods()) >= 5, 60, "the first pods")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        partial = len(other.pods())
        second = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: len(other.pods()) == 100, 90, "all 100 pods", lambda: len(other.pods()))
            time.sleep(2)
            pods = other.pods()
            assert len(pods) == 100, f"{len(pods)} pods after the restart (killed at {partial})"
            for name in jobs:
                mine = {n for n, p in pods.items() if p["metadata"]["labels"]["tensorgrid.io/job-name"] == name}
                assert mine == {f"{name}-ps-0"} | {f"{name}-worker-{i}" for i in range(4)}
                wait_for(lambda: other.status(name).get("restarts") == 0 and other.status(name).get("state"),
                         30, f"{name} status")
            assert len(other.services()) == 100
            assert partial < 100, "the operator was not killed mid-way; nothing was tested"
        finally:
            second.terminate()
            second.wait(30)
    finally:
        log.close()
        # The jobs keep the stopped operator's finalizer: freed, so the namespace goes (the control plane
        # is shared with the chart's tests, whose operators watch every namespace).
        subprocess.run([sys.executable, "-m", "tensorgrid_operator", "--remove-finalizers", "-n", ns], env=env,
                       capture_output=True, timeout=120)
        controlplane.core.delete_namespace(ns)


def test_remove_finalizers_once_the_operator_is_gone(controlplane: ControlPlane, namespace: Namespace,
                                                     tmp_path: pathlib.Path) -> None:
    """`--remove-finalizers` frees the jobs of a stopped operator, and says so when one still runs."""
    ns = "fin-" + namespace.name[3:][-40:]  # a namespace the in-process operator (tg-*) does not watch
    controlplane.core.create_namespace({"metadata": {"name": ns}})
    other = Namespace(controlplane, ns)
    env = dict(os.environ, KUBECONFIG=controlplane.kubeconfig)
    remove = [sys.executable, "-m", "tensorgrid_operator", "--remove-finalizers", "-n", ns]
    with open(tmp_path / "operator.log", "w") as log:
        running = subprocess.Popen([sys.executable, "-m", "tensorgrid_operator", "--standalone", "-n", ns,
                                    "--metrics-port", "off", "--liveness-port", "off"],
                                   env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        for name in ("first", "second"):
            other.apply(job_manifest(name, workers=1))
        wait_for(lambda: all("tensorgrid.io/operator" in ((other.job(n) or {})["metadata"].get("finalizers") or [])
                             for n in ("first", "second")), 60, "the operator's finalizer on both jobs")
        refused = subprocess.run(remove, env=env, capture_output=True, text=True, timeout=120)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "still runs" in refused.stdout, refused.stdout
    finally:
        running.terminate()
        running.wait(30)
    freed = subprocess.run(remove, env=env, capture_output=True, text=True, timeout=120)
    assert freed.returncode == 0, freed.stdout + freed.stderr
    for name in ("first", "second"):
        assert not (other.job(name) or {})["metadata"].get("finalizers")
    controlplane.core.delete_namespace(ns)
    wait_for(lambda: ns not in {n.metadata.name for n in controlplane.core.list_namespace().items}, 60,
             f"namespace {ns} deleted with its jobs, no operator running")


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_example_manifests_are_valid(controlplane: ControlPlane, path: pathlib.Path) -> None:
    result = controlplane.kubectl("apply", "--dry-run=server", "-n", "default", "-f", str(path), check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("ps, workers, wanted", [
    (1, 5000, ["5000", "less than or equal to 2000"]),      # one type over the cap: the schema names the value
    (1000, 1001, ["at most 2000 replicas in all"]),         # the types together over it: the CEL rule
])
def test_the_api_server_refuses_a_job_over_the_replica_cap(operator: Operator, namespace: Namespace, ps: int,
                                                           workers: int, wanted: list[str]) -> None:
    from kubernetes.client import exceptions

    with pytest.raises(exceptions.ApiException) as refused:
        namespace.apply(job_manifest("huge", ps=ps, workers=workers))
    assert refused.value.status == 422
    body = json.loads(refused.value.body)["message"]
    assert all(text in body for text in wanted), body
    # At the cap the API server accepts it; with this test's long namespace name every pod's TF_CONFIG
    # would pass what one environment variable holds, so the operator fails it without making a pod.
    namespace.apply(job_manifest("largest", ps=1, workers=1999))
    namespace.wait_state("largest", "Failed")
    message = namespace.condition("largest", "Failed")["message"]
    assert "TF_CONFIG for 2000 replicas" in message and "over the 131072 bytes" in message, message
    assert namespace.pods("largest") == {}
