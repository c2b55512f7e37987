"""``kubectl scale tj/NAME --replicas=N`` on a real API server: the CRD's scale subresource sets the
worker count within minReplicas and maxReplicas, the operator adds the next indexes or removes the
highest, no other pod is restarted, removals are not failures, and ``kubectl get tj`` shows the
current and desired workers. The tests play the kubelet; the refusals need no operator (the API
server's schema and CEL rules give them)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from operator_cluster import Namespace, Operator, job_manifest, wait_for

pytestmark = pytest.mark.controlplane


def _scalable(name: str, workers: int, **bounds: int) -> dict[str, Any]:
    manifest = job_manifest(name, ps=1, workers=workers)
    manifest["spec"]["replicaSpecs"]["Worker"].update(bounds)
    return manifest


def _uids(namespace: Namespace, job: str) -> dict[str, str]:
    return {name: pod["metadata"]["uid"] for name, pod in namespace.pods(job).items()}


def _scale(namespace: Namespace, job: str, replicas: int) -> Any:
    return namespace.cp.kubectl("scale", f"tj/{job}", "-n", namespace.name, f"--replicas={replicas}", check=False)


def test_kubectl_scale_adds_and_removes_workers_without_restarting_others(
        operator: Operator, namespace: Namespace) -> None:
    namespace.apply(_scalable("elastic", 2, minReplicas=1, maxReplicas=4))
    namespace.wait_pods("elastic", {"elastic-ps-0", "elastic-worker-0", "elastic-worker-1"})
    namespace.run_all("elastic")
    status = namespace.wait_state("elastic", "Running")
    assert (status["workerReplicas"], status["desiredWorkerReplicas"]) == (2, 2)
    before = _uids(namespace, "elastic")

    scaled = _scale(namespace, "elastic", 4)
    assert scaled.returncode == 0, scaled.stderr
    pods = namespace.wait_pods("elastic", set(before) | {"elastic-worker-2", "elastic-worker-3"})
    assert {n: u for n, u in _uids(namespace, "elastic").items() if n in before} == before
    env = {e["name"]: e.get("value") for e in pods["elastic-worker-3"]["spec"]["containers"][0]["env"]}
    config = json.loads(env["TF_CONFIG"])
    assert config["task"] == {"type": "worker", "index": 3}
    assert config["cluster"]["worker"] == [f"elastic-worker-{i}.{namespace.name}.svc:2222" for i in range(4)]
    assert {"elastic-worker-2", "elastic-worker-3"} <= set(namespace.services("elastic"))
    namespace.run_all("elastic")
    wait_for(lambda: namespace.status("elastic").get("workers") == "4/4", 30, "4 workers running",
             lambda: namespace.status("elastic"))
    scale = namespace.cp.custom.get_namespaced_custom_object_scale("tensorgrid.io", "v1", namespace.name,
                                                                  "trainingjobs", "elastic")
    assert scale["spec"]["replicas"] == 4 and scale["status"]["replicas"] == 4, scale
    assert scale["status"]["selector"] == "tensorgrid.io/job-name=elastic,tensorgrid.io/replica-type=worker"
    table = namespace.cp.kubectl("get", "tj", "elastic", "-n", namespace.name).stdout.split("\n")
    columns = _columns(table[0], table[1])
    assert (columns["CURRENT"], columns["DESIRED"]) == ("4", "4"), table

    scaled = _scale(namespace, "elastic", 1)
    assert scaled.returncode == 0, scaled.stderr
    namespace.wait_pods("elastic", {"elastic-ps-0", "elastic-worker-0"})
    assert _uids(namespace, "elastic") == {n: before[n] for n in ("elastic-ps-0", "elastic-worker-0")}
    wait_for(lambda: set(namespace.services("elastic")) == {"elastic-ps-0", "elastic-worker-0"}, 30,
             "the removed workers' Services deleted", lambda: sorted(namespace.services("elastic")))
    status = namespace.wait_state("elastic", "Running")
    wait_for(lambda: namespace.status("elastic").get("workerReplicas") == 1, 30, "1 current worker",
             lambda: namespace.status("elastic"))
    status = namespace.status("elastic")
    assert status["restarts"] == 0 and status["finishedReplicas"] == [] and status["desiredWorkerReplicas"] == 1
    wanted = {"ScaledUp", "ScaledDown"}
    wait_for(lambda: wanted <= {e["reason"] for e in namespace.events("elastic")}, 10, f"events {sorted(wanted)}",
             lambda: sorted({e["reason"] for e in namespace.events("elastic")}))


@pytest.mark.parametrize("replicas, why", [
    (5, "spec.replicaSpecs.Worker.replicas: Invalid value: \"object\": replicas is more than maxReplicas"),
    (0, "spec.replicaSpecs.Worker.replicas: Invalid value: \"object\": replicas is less than minReplicas"),
])
def test_the_api_server_keeps_the_scale_within_the_bounds(namespace: Namespace, replicas: int, why: str) -> None:
    namespace.apply(_scalable("bounded", 2, minReplicas=1, maxReplicas=4))
    refused = _scale(namespace, "bounded", replicas)
    assert refused.returncode != 0 and why in refused.stderr, refused.stderr
    assert namespace.job("bounded")["spec"]["replicaSpecs"]["Worker"]["replicas"] == 2


@pytest.mark.parametrize("change, why", [
    ({"spec": {"replicaSpecs": {"Worker": {"replicas": 0}}}}, "needs at least one Worker or Chief replica"),
    ({"spec": {"replicaSpecs": {"PS": {"replicas": 2}}}},
     "spec.replicaSpecs is immutable (TF_CONFIG of running pods would disagree), but for "
     "spec.replicaSpecs.Worker.replicas, minReplicas and maxReplicas"),
    ({"spec": {"replicaSpecs": {"Worker": {"restartPolicy": "Never"}}}}, "spec.replicaSpecs is immutable"),
    ({"spec": {"replicaSpecs": {"PS": {"minReplicas": 1}}}}, "only spec.replicaSpecs.Worker takes them"),
    ({"spec": {"synchronous": True, "replicaSpecs": {"Worker": {"replicas": 3}}}},
     "spec.replicaSpecs.Worker.replicas cannot change: the job is synchronous (spec.synchronous), and "
     "SyncReplicasOptimizer fixed replicas_to_aggregate and total_num_replicas when the program started"),
])
def test_what_cannot_change_on_a_running_job_is_refused(namespace: Namespace, change: dict[str, Any],
                                                         why: str) -> None:
    namespace.apply(job_manifest("fixed", ps=1, workers=2))
    refused = namespace.cp.kubectl("patch", "tj", "fixed", "-n", namespace.name, "--type=merge", "-p",
                                   json.dumps(change), check=False)
    assert refused.returncode != 0 and why in refused.stderr, refused.stderr


def test_a_synchronous_job_refuses_kubectl_scale(namespace: Namespace) -> None:
    manifest = job_manifest("sync", ps=1, workers=2)
    manifest["spec"]["synchronous"] = True
    namespace.apply(manifest)
    refused = _scale(namespace, "sync", 3)
    assert refused.returncode != 0 and "the job is synchronous (spec.synchronous)" in refused.stderr, refused.stderr
    accepted = namespace.cp.kubectl("patch", "tj", "sync", "-n", namespace.name, "--type=merge", "-p",
                                    json.dumps({"spec": {"suspend": True}}), check=False)
    assert accepted.returncode == 0, accepted.stderr


def _columns(header: str, row: str) -> dict[str, str]:
    """A ``kubectl get`` row by column name, cut where the header's names start (a column with no
    value is blank there: STEP before the job reports progress)."""
    starts = [i for i in range(len(header)) if header[i] != " " and (i == 0 or header[i - 1] == " ")]
    ends = starts[1:] + [max(len(header), len(row))]
    return {header[a:b].strip(): row[a:b].strip() for a, b in zip(starts, ends)}
