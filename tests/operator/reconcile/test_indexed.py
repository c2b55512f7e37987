"""The projections kopf's indexes keep: a reconcile reads the same from them as from the whole objects."""

from __future__ import annotations

import copy
import datetime
from typing import Any

from operator_sim import make_job
from tensorgrid_operator.api import spec as spec_lib
from tensorgrid_operator.reconcile import indexed
from tensorgrid_operator.reconcile import observed
from tensorgrid_operator.reconcile import podview
from tensorgrid_operator.reconcile import progress
from tensorgrid_operator.reconcile import reconcile
from tensorgrid_operator.resources import kueue
from tensorgrid_operator.resources import manifests

RT = spec_lib.ReplicaType
NOW = datetime.datetime(2026, 11, 23, 12, 0, tzinfo=datetime.timezone.utc)
MANAGED_FIELDS = [{"manager": "kubelet", "operation": "Update", "subresource": "status",
                   "fieldsV1": {"f:status": {f"f:field{i}": {} for i in range(40)}}}]


def as_the_api_returns(job: dict[str, Any], rtype: RT, index: int, status: dict[str, Any]) -> dict[str, Any]:
    """A pod the operator built, as a watch delivers it: uid, owner, managedFields, a sidecar, a status."""
    pod = manifests.build_pod(job, spec_lib.parse_spec(job["spec"]), spec_lib.ReplicaKey(rtype, index))
    pod = copy.deepcopy(pod)
    pod["metadata"].update(uid=f"pod-{rtype.value}-{index}", resourceVersion="7", managedFields=MANAGED_FIELDS,
                           creationTimestamp="2026-11-23T11:00:00Z")
    pod["spec"]["containers"].insert(0, {"name": "proxy", "image": "envoy:1", "args": ["--big"] * 50})
    pod["spec"]["nodeName"] = "kwok-node-3"
    pod["status"] = status
    return pod


def statuses() -> list[dict[str, Any]]:
    running = {"running": {"startedAt": "2026-11-23T11:00:05Z"}}
    return [
        {},
        {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                             "message": "0/20 nodes are available", "lastTransitionTime": "x"}]},
        {"phase": "Pending", "initContainerStatuses": [{"name": "init", "image": "i", "state": {
            "waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}}]},
        {"phase": "Running", "podIP": "10.0.0.7", "hostIP": "172.18.0.2",
         "containerStatuses": [{"name": "proxy", "image": "envoy:1", "restartCount": 0, "state": running},
                               {"name": "tensorgrid", "image": "t", "imageID": "sha256:1", "ready": True,
                                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]},
        {"phase": "Running", "podIP": "fd00::7",
         "containerStatuses": [{"name": "tensorgrid", "state": running, "lastState": {"terminated": {"exitCode": 1}}}]},
        {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."},
        {"phase": "Running", "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "Preemption"}]},
        {"phase": "Failed", "containerStatuses": [{"name": "tensorgrid", "state": {
            "terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "x"}}}]},
    ]


def queued_job() -> dict[str, Any]:
    job = make_job(ps=1, workers=2, chief=1)
    job["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: "team-queue"}
    return job


def test_a_pod_reads_the_same_projected_as_whole() -> None:
    job = queued_job()
    for status in statuses():
        for rtype, index in ((RT.PS, 0), (RT.WORKER, 1), (RT.CHIEF, 0)):
            whole = as_the_api_returns(job, rtype, index, status)
            whole["metadata"]["deletionTimestamp"] = "2026-11-23T11:30:00Z" if status.get("reason") else None
            slim = indexed.pod(whole)
            assert podview.view_pod(slim) == podview.view_pod(whole)
            assert podview.owned_by(slim, job["metadata"]["uid"]) and podview.owned_by(whole, job["metadata"]["uid"])
            assert kueue.needs_group_closed(job, slim) == kueue.needs_group_closed(job, whole)


def test_a_plan_is_the_same_from_projections() -> None:
    job = queued_job()
    job["status"] = {"state": "Running", "conditions": []}
    for status in statuses():
        pods = [as_the_api_returns(job, t, i, status) for t, i in ((RT.PS, 0), (RT.WORKER, 0), (RT.WORKER, 1))]
        services = [{"metadata": {**p["metadata"], "managedFields": MANAGED_FIELDS},
                     "spec": {"clusterIP": "None", "ports": [{"port": 2222}]}} for p in pods]
        slim_pods, slim_services = [indexed.pod(p) for p in pods], [indexed.service(s) for s in services]
        assert reconcile.reconcile(job, slim_pods, slim_services, NOW) == reconcile.reconcile(job, pods, services, NOW)
        job_spec = spec_lib.parse_spec(job["spec"])
        assert progress.scrape_targets(job_spec, slim_pods) == progress.scrape_targets(job_spec, pods)
        expected = observed.Expectations(pods=frozenset({"mnist-ps-0"}), services=frozenset({"mnist-worker-0"}),
                                         deleted_pods=frozenset({"pod-Worker-1"}))
        assert observed.caught_up(expected, slim_pods, slim_services) == observed.caught_up(expected, pods, services)


def test_the_projection_drops_what_no_decision_reads() -> None:
    job = queued_job()
    whole = as_the_api_returns(job, RT.WORKER, 0, statuses()[3])
    slim = indexed.pod(whole)
    assert "managedFields" not in slim["metadata"] and "resourceVersion" not in slim["metadata"]
    assert slim["spec"]["containers"] == [{"name": "proxy"}, {"name": "tensorgrid"}]  # no env: no TF_CONFIG
    assert "hostIP" not in slim["status"]
    assert all(set(cs) == {"name", "state"} for cs in slim["status"]["containerStatuses"])
    assert len(repr(slim)) * 3 < len(repr(whole))


def test_absent_fields_stay_absent() -> None:
    assert indexed.pod({"metadata": {"name": "p"}}) == {"metadata": {"name": "p"}, "spec": {}, "status": {}}
    assert indexed.service({}) == {"metadata": {}}
