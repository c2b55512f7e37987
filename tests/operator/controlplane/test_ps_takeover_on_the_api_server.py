"""A PS's standby takes over when the PS's pod is lost, on a real API server and controller manager:
the operator patches the standby's pod into ``ps-0`` (the PS's headless Service's EndpointSlice then
holds the standby's address), makes no new PS pod, tells the standby through its annotation, records
it, and the standby's ReplicaSet starts a new standby. Without a running standby the PS pod is made
again. The standby that took over is read as the PS: its metrics page says it loaded the replica.
The test plays the kubelet (pod phases and IPs) and, in the last test, the tasks' metrics pages."""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest

import metrics_pages
from operator_cluster import Namespace, Operator, job_manifest, wait_for

pytestmark = pytest.mark.controlplane
STANDBY_OF = "tensorgrid.io/ps-standby-of"


def _standby_job(name: str, metrics_port: int = 0) -> dict[str, Any]:
    job = job_manifest(name, ps=1, workers=1)
    job["spec"]["replicaSpecs"]["PS"]["replication"] = {"enabled": True, "standby": True}
    for replica in job["spec"]["replicaSpecs"].values():
        if metrics_port:
            replica["template"]["spec"]["containers"][0]["ports"] = [{"name": "metrics",
                                                                       "containerPort": metrics_port}]
    return job


def _standby_pods(namespace: Namespace, job: str) -> dict[str, dict[str, Any]]:
    items = namespace.cp.api.sanitize_for_serialization(namespace.cp.core.list_namespaced_pod(
        namespace.name, label_selector=f"{STANDBY_OF}={job}").items)
    return {p["metadata"]["name"]: p for p in items}


def _run_standby(namespace: Namespace, pod: str, ip: str) -> None:
    """What the standby's kubelet reports: it runs, at ``ip``."""
    namespace.cp.core.patch_namespaced_pod_status(pod, namespace.name, {"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "containerStatuses": [{
            "name": "ps-standby", "image": "tensorgrid:test", "imageID": "", "ready": True, "restartCount": 0,
            "started": True, "state": {"running": {"startedAt": "2030-01-01T00:00:00Z"}}}]}})


def _running_job(namespace: Namespace, name: str, metrics_port: int = 0) -> str:
    """The job's pods running and its standby's pod made (Pending); the standby pod's name. With a
    ``metrics_port``, the pods run at 127.0.0.1, where the test serves their metrics page."""
    namespace.apply(_standby_job(name, metrics_port))
    for pod in namespace.wait_pods(name, {f"{name}-ps-0", f"{name}-worker-0"}, 60):
        namespace.set_phase(pod, "Running", pod_ip="127.0.0.1" if metrics_port else None)
    wait_for(lambda: namespace.status(name).get("allPodsRunningTime"), 30, "the job's pods all running")
    wait_for(lambda: len(_standby_pods(namespace, name)) == 1, 60, "the standby's pod (its ReplicaSet's)",
             lambda: sorted(_standby_pods(namespace, name)))
    return next(iter(_standby_pods(namespace, name)))


def _endpoint_ips(namespace: Namespace, service: str) -> set[str]:
    discovery = kubernetes.client.DiscoveryV1Api(namespace.cp.api)
    slices = discovery.list_namespaced_endpoint_slice(namespace.name,
                                                      label_selector=f"kubernetes.io/service-name={service}").items
    return {address for s in slices for e in s.endpoints or [] for address in e.addresses}


def test_a_running_standby_becomes_the_ps_when_the_ps_pod_is_lost(operator: Operator, namespace: Namespace) -> None:
    standby = _running_job(namespace, "takeover")
    _run_standby(namespace, standby, "10.9.0.7")
    job_uid = namespace.job("takeover")["metadata"]["uid"]  # type: ignore[index]
    namespace.cp.core.delete_namespaced_pod("takeover-ps-0", namespace.name, grace_period_seconds=0)

    def taken_over() -> bool:
        pod = namespace.pods("takeover").get(standby)
        return pod is not None and pod["metadata"]["labels"].get("tensorgrid.io/replica-type") == "ps"

    wait_for(taken_over, 30, "the standby's pod patched into ps-0",
             lambda: (sorted(namespace.pods("takeover")), [e["message"] for e in namespace.events("takeover")]))
    pod = namespace.pods("takeover")[standby]
    assert pod["metadata"]["annotations"]["tensorgrid.io/take-over"] == "/job:ps/replica:0/task:0"
    assert STANDBY_OF not in pod["metadata"]["labels"]
    owner = [r for r in pod["metadata"]["ownerReferences"] if r.get("controller")]
    assert [(r["kind"], r["uid"]) for r in owner] == [("TrainingJob", job_uid)]
    # The PS's name now leads to the standby; its ReplicaSet made a new standby.
    wait_for(lambda: _endpoint_ips(namespace, "takeover-ps-0") == {"10.9.0.7"}, 30,
             "the PS's Service selecting the standby", lambda: _endpoint_ips(namespace, "takeover-ps-0"))
    wait_for(lambda: len(_standby_pods(namespace, "takeover")) == 1, 30, "a new standby",
             lambda: sorted(_standby_pods(namespace, "takeover")))
    assert standby not in _standby_pods(namespace, "takeover")
    wait_for(lambda: namespace.status("takeover").get("parameterServerTakeovers"), 30, "the takeover recorded")
    record = namespace.status("takeover")["parameterServerTakeovers"]
    assert [(r["replica"], r["pod"], r["podUID"], r["count"]) for r in record] == [
        ("ps-0", standby, pod["metadata"]["uid"], 1)]
    assert any(e["reason"] == "PSTakenOverByStandby" for e in namespace.events("takeover"))
    # No second ps:0: the standby counts as the PS's pod, and the job stays Running with its PS up.
    wait_for(lambda: namespace.status("takeover").get("ps") == "1/1", 30, "the PS counted",
             lambda: namespace.status("takeover"))
    assert set(namespace.pods("takeover")) == {standby, "takeover-worker-0"}
    assert namespace.status("takeover")["state"] == "Running"


def test_without_a_running_standby_the_ps_pod_is_made_again(operator: Operator, namespace: Namespace) -> None:
    standby = _running_job(namespace, "remade")  # its pod stays Pending
    old_uid = namespace.pods("remade")["remade-ps-0"]["metadata"]["uid"]
    namespace.cp.core.delete_namespaced_pod("remade-ps-0", namespace.name, grace_period_seconds=0)
    wait_for(lambda: namespace.pods("remade").get("remade-ps-0", {}).get("metadata", {}).get("uid")
             not in (None, old_uid), 30, "the PS pod made again", lambda: sorted(namespace.pods("remade")))
    assert standby in _standby_pods(namespace, "remade")
    assert not namespace.status("remade").get("parameterServerTakeovers")


def test_the_standby_that_took_over_is_read_as_the_ps_that_loaded_the_replica(operator: Operator,
                                                                              namespace: Namespace) -> None:
    with metrics_pages.MetricsPage() as page:
        started = page.gauge("tensorgrid_ps_started_from_replica", "1: loaded its live replica", ["task"])
        started.labels(task="/job:ps/replica:0/task:0").set(0)  # the first PS started empty
        standby = _running_job(namespace, "readback", page.port)
        first = namespace.pods("readback")["readback-ps-0"]["metadata"]["uid"]
        wait_for(lambda: [s["podUID"] for s in namespace.status("readback").get("parameterServerStarts") or []]
                 == [first], 30, "the first PS pod read", lambda: namespace.status("readback"))
        _run_standby(namespace, standby, "127.0.0.1")
        namespace.cp.core.delete_namespaced_pod("readback-ps-0", namespace.name, grace_period_seconds=0)
        started.labels(task="/job:ps/replica:0/task:0").set(1)  # what the standby says once it took over

        def source() -> list[tuple[str, str]]:
            return [(s["pod"], s["source"]) for s in namespace.status("readback").get("parameterServerStarts") or []]
        wait_for(lambda: source() == [(standby, "LiveReplica")], 30, "the standby read as the PS",
                 lambda: namespace.status("readback"))
        condition = namespace.condition("readback", "PSStateRecovered")
        assert (condition["status"], condition["reason"]) == ("True", "LoadedLiveReplica"), condition
