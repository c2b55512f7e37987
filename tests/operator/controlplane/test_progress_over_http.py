"""status.progress on a real API server: the operator reads a real metrics endpoint over HTTP.

The tests play the kubelet: the pods get the IP 127.0.0.1, where the test serves a
task's metrics page on the port the job's template declares as ``metrics``.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

import metrics_pages
from operator_cluster import Namespace, Operator, free_port, job_manifest, wait_for

pytestmark = pytest.mark.controlplane


class TaskMetricsPage(metrics_pages.MetricsPage):
    """A task's /metrics page, as the runtime serves it: the global step and the StopAtStepHook's target."""

    def __init__(self) -> None:
        super().__init__()
        self.global_step = self.gauge("tensorgrid_global_step", "global step", ["task"])
        self.target_step = self.gauge("tensorgrid_target_step", "target step")
        self.summary_scalar = self.gauge("tensorgrid_summary_scalar", "scalar summaries", ["tag"])


@pytest.fixture
def metrics_page() -> Iterator[TaskMetricsPage]:
    with TaskMetricsPage() as page:
        yield page


def with_metrics_port(manifest: dict[str, Any], port: int) -> dict[str, Any]:
    for replica in manifest["spec"]["replicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["ports"] = [{"name": "metrics", "containerPort": port}]
    return manifest


def test_progress_is_read_into_the_status_and_shown_by_kubectl(operator: Operator, namespace: Namespace,
                                                               metrics_page: TaskMetricsPage) -> None:
    metrics_page.global_step.labels(task="/job:ps/replica:0/task:0").set(1200)
    metrics_page.target_step.set(5000)
    metrics_page.summary_scalar.labels(tag="loss").set(0.4321)
    namespace.apply(with_metrics_port(job_manifest("digits", ps=1, workers=2), metrics_page.port))
    pods = namespace.wait_pods("digits", {"digits-ps-0", "digits-worker-0", "digits-worker-1"})
    for name in pods:
        namespace.set_phase(name, "Running", pod_ip="127.0.0.1")
    namespace.wait_state("digits", "Running")
    wait_for(lambda: namespace.status("digits").get("progress", {}).get("globalStep") == 1200, 30,
             "the global step in status.progress", lambda: namespace.status("digits").get("progress"))
    assert namespace.status("digits")["progress"]["targetStep"] == 5000
    assert (namespace.status("digits")["progress"]["loss"], namespace.status("digits")["progress"]["lossTag"]) == (
        0.4321, "loss")

    metrics_page.global_step.labels(task="/job:ps/replica:0/task:0").set(1500)
    wait_for(lambda: namespace.status("digits").get("progress", {}).get("globalStep") == 1500, 30,
             "the new global step", lambda: namespace.status("digits").get("progress"))
    progress = namespace.status("digits")["progress"]
    assert progress["stepsPerSecond"] > 0 and progress["estimatedCompletionTime"] >= progress["lastUpdateTime"]
    table = namespace.cp.kubectl("get", "tj", "digits", "-n", namespace.name).stdout.splitlines()
    header, row = table[0].split(), table[1].split()
    assert header[:8] == ["NAME", "STATE", "WORKERS", "PS", "RESTARTS", "STEP", "STEPS/S", "LOSS"], table
    assert row[5] == "1500" and float(row[6]) > 0 and row[7] == "0.4321", table


def test_an_endpoint_out_of_reach_is_named_in_the_progress(operator: Operator, namespace: Namespace) -> None:
    namespace.apply(with_metrics_port(job_manifest("silent", ps=1, workers=1), free_port()))
    pods = namespace.wait_pods("silent", {"silent-ps-0", "silent-worker-0"})
    for name in pods:
        namespace.set_phase(name, "Running", pod_ip="127.0.0.1")
    namespace.wait_state("silent", "Running")
    wait_for(lambda: "silent-ps-0: could not read" in namespace.status("silent").get("progress", {}).get("message", ""),
             30, "the unreachable endpoint in status.progress.message", lambda: namespace.status("silent"))
    assert "globalStep" not in namespace.status("silent")["progress"]
