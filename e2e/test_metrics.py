"""Metrics as users collect them: a real Prometheus (Debian's package) scrapes the training pods
and the operator the way the chart's PodMonitor selects them, and answers queries through its
HTTP API; and the runtime's own metrics show that tensors travelled between pods on the data
channel's declared port, not on the gRPC fallback."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from typing import Any, Iterator

import pytest
import yaml

from cluster_support import PROGRESS, KUBECONFIG, Namespace, example, kubectl, wait_for

JOB_TIMEOUT = 900
# The pod network of e2e/kind-config.yaml, reached from this machine through the node.
POD_SUBNET = "10.244.0.0/16"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape_config(name: str, keep: list[dict[str, Any]]) -> dict[str, Any]:
    """Pods on the container port named "metrics", selected like the chart's PodMonitor / ServiceMonitor."""
    return {
        "job_name": name,
        "scrape_interval": "2s",
        "kubernetes_sd_configs": [{"role": "pod", "kubeconfig_file": KUBECONFIG}],
        "relabel_configs": keep + [
            {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": "metrics", "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "Running", "action": "keep"},
            {"regex": "__meta_kubernetes_pod_label_(tensorgrid_io_.+)", "action": "labelmap"},
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        ],
    }


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, promql: str) -> float:
        """The sum of an instant query's samples (0 when it has none)."""
        with urllib.request.urlopen(f"{self.url}/api/v1/query?query={urllib.parse.quote(promql)}", timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return sum(float(sample["value"][1]) for sample in body["data"]["result"])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed (e2e/cluster.sh up installs Debian's package)")
    node_ip = kubectl("get", "nodes", "-o", "jsonpath={.items[0].status.addresses[?(@.type=='InternalIP')].address}"
                      ).stdout.strip()
    # This machine reaches pod IPs through the kind node (a container on Docker's network).
    subprocess.run(["ip", "route", "replace", POD_SUBNET, "via", node_ip], check=True)
    directory = tmp_path_factory.mktemp("prometheus")
    config = {"global": {"scrape_interval": "2s"}, "scrape_configs": [
        _scrape_config("tensorgrid-training", [
            {"source_labels": ["__meta_kubernetes_pod_labelpresent_tensorgrid_io_job_name"], "regex": "true",
             "action": "keep"}]),
        _scrape_config("tensorgrid-operator", [
            {"source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name"], "regex": "tensorgrid-operator",
             "action": "keep"}]),
    ]}
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = _free_port()
    log = open(directory / "prometheus.log", "wb")
    process = subprocess.Popen([binary, f"--config.file={directory / 'prometheus.yml'}",
                                f"--storage.tsdb.path={directory / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=log, stderr=subprocess.STDOUT)
    prom = Prometheus(f"http://127.0.0.1:{port}")

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"{prom.url}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        wait_for("Prometheus to be ready", ready, 60, interval=0.5)
        yield prom
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
        print((directory / "prometheus.log").read_text()[-3000:])
        subprocess.run(["ip", "route", "del", POD_SUBNET], check=False)


def test_prometheus_scrapes_training_pods_and_the_operator(ns: Namespace, prometheus: Prometheus) -> None:
    ns.apply(example("async", steps=2500, log_every=100))
    ns.wait_log("digits-async-worker-0", PROGRESS, timeout=300)
    selector = f'namespace="{ns.name}",tensorgrid_io_job_name="digits-async"'
    wait_for("Prometheus to have the PS's steps and RPC bytes", lambda:
             prometheus.query(f'tensorgrid_steps_total{{{selector},tensorgrid_io_replica_type="ps"}}') > 0
             and prometheus.query(f"tensorgrid_rpc_bytes_total{{{selector}}}") > 0, 180)
    # The data channel carried the steps between pods: its calls counted, no fallback to gRPC.
    wait_for("steps on the data channel", lambda:
             prometheus.query(f"tensorgrid_data_channel_calls_total{{{selector}}}") > 0, 120)
    assert prometheus.query(f"tensorgrid_data_channel_fallbacks_total{{{selector}}}") == 0
    job = ns.wait_state("digits-async", ("Succeeded", "Failed"), JOB_TIMEOUT)
    assert job["status"]["state"] == "Succeeded", job["status"]
    wait_for("the operator's succeeded-jobs counter", lambda: prometheus.query(
        f'tensorgrid_operator_jobs_succeeded_total{{namespace="{ns.name}"}}') >= 1, 60)
    assert prometheus.query("tensorgrid_operator_jobs_created_total") >= 1


def test_data_channel_port_is_declared_on_pods_and_services(ns: Namespace) -> None:
    ns.apply(example("async", steps=300))
    ns.wait_running("digits-async-ps-0")
    pod = ns.pod("digits-async-ps-0")
    container = pod.spec.containers[0]
    assert {(p.name, p.container_port) for p in container.ports} >= {("tensorgrid", 2222), ("tensorgrid-data", 2223)}
    assert {e.name: e.value for e in container.env}["TENSORGRID_DATA_PORT"] == "2223"
    service = ns.core.read_namespaced_service("digits-async-ps-0", ns.name)
    assert {(p.name, p.port) for p in service.spec.ports} >= {("tensorgrid-data", 2223)}
    job = ns.wait_state("digits-async", ("Succeeded", "Failed"), JOB_TIMEOUT)
    assert job["status"]["state"] == "Succeeded", job["status"]
