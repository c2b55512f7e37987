"""Metrics as users collect them: a real Prometheus (Debian's package) scrapes the training pods
and the operator the way the chart's PodMonitor selects them, and answers queries through its
HTTP API; and the runtime's own metrics show that tensors travelled between pods on the data
channel's declared port, not on the gRPC fallback."""

from __future__ import annotations

import json
import pathlib
import shutil
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
from typing import Any, Iterator

import kubernetes
import pytest
import yaml

from cluster_support import OPERATOR_NAMESPACE, PROGRESS, REPO, Namespace, example, pod_network_routed, wait_for

JOB_TIMEOUT = 900


def _chart_rules(directory: pathlib.Path) -> pathlib.Path:
    """The rule groups of the chart's PrometheusRule (metrics.prometheusRule.enabled), as a rules file."""
    helm = pathlib.Path(subprocess.run([str(REPO / "hack" / "tools.sh"), "--print-bin-dir"], check=True,
                                       capture_output=True, text=True).stdout.strip()) / "helm"
    rendered = subprocess.run([str(helm), "template", "tensorgrid", str(REPO / "charts" / "tensorgrid-operator"),
                               "-n", OPERATOR_NAMESPACE, "--set", "metrics.prometheusRule.enabled=true",
                               "--api-versions", "monitoring.coreos.com/v1/PrometheusRule",
                               "-s", "templates/prometheusrule.yaml"], check=True, capture_output=True, text=True)
    rule = next(doc for doc in yaml.safe_load_all(rendered.stdout) if doc)
    path = directory / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# What the chart's PodMonitor (training pods) and ServiceMonitor (the operator) select: pods by
# label, scraped on their container port named "metrics".
SCRAPED = {
    "tensorgrid-training": "tensorgrid.io/job-name",
    "tensorgrid-operator": "app.kubernetes.io/name=tensorgrid-operator",
}
POD_LABELS = ("tensorgrid.io/job-name", "tensorgrid.io/replica-type", "tensorgrid.io/replica-index")


def _targets(core: kubernetes.client.CoreV1Api, selector: str) -> list[dict[str, Any]]:
    """Prometheus file_sd target groups: running pods of ``selector``, their "metrics" port."""
    groups = []
    for pod in core.list_pod_for_all_namespaces(label_selector=selector).items:
        if pod.status.phase != "Running" or not pod.status.pod_ip or pod.metadata.deletion_timestamp:
            continue
        for container in pod.spec.containers:
            for port in container.ports or []:
                if port.name == "metrics":
                    labels = {"namespace": pod.metadata.namespace, "pod": pod.metadata.name}
                    labels.update({k.replace(".", "_").replace("/", "_").replace("-", "_"): v
                                   for k, v in (pod.metadata.labels or {}).items() if k in POD_LABELS})
                    groups.append({"targets": [f"{pod.status.pod_ip}:{port.container_port}"], "labels": labels})
    return groups


class _TargetWriter(threading.Thread):
    """Keeps Prometheus's file_sd files in step with the cluster's pods, every second.

    Debian's Prometheus is built without kubernetes_sd_configs, so this stands in for the
    Prometheus Operator's translation of the chart's PodMonitor: the same selection, written
    as file_sd target groups that Prometheus watches.
    """

    def __init__(self, api: kubernetes.client.ApiClient, directory: pathlib.Path) -> None:
        super().__init__(daemon=True)
        self.core = kubernetes.client.CoreV1Api(api)
        self.directory = directory
        self.stopped = threading.Event()
        self.write()

    def write(self) -> None:
        for job, selector in SCRAPED.items():
            path = self.directory / f"{job}.json"
            path.with_suffix(".tmp").write_text(json.dumps(_targets(self.core, selector)))
            path.with_suffix(".tmp").replace(path)

    def run(self) -> None:
        while not self.stopped.wait(1.0):
            try:
                self.write()
            except (kubernetes.client.ApiException, OSError) as e:
                print(f"refreshing Prometheus targets failed: {e}")


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, promql: str) -> float:
        """The sum of an instant query's samples (0 when it has none)."""
        with urllib.request.urlopen(f"{self.url}/api/v1/query?query={urllib.parse.quote(promql)}", timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return sum(float(sample["value"][1]) for sample in body["data"]["result"])

    def rules(self) -> list[dict[str, Any]]:
        """Every rule Prometheus loaded, with its health and last error."""
        with urllib.request.urlopen(f"{self.url}/api/v1/rules", timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return [rule for group in body["data"]["groups"] for rule in group["rules"]]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory, api: kubernetes.client.ApiClient) -> Iterator[Prometheus]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed (e2e/cluster.sh up installs Debian's package)")
    # This machine reaches pod IPs through their kind nodes (containers on Docker's network).
    with pod_network_routed():
        directory = tmp_path_factory.mktemp("prometheus")
        writer = _TargetWriter(api, directory)
        writer.start()
        config = {"global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
                  "rule_files": [str(_chart_rules(directory))], "scrape_configs": [
            {"job_name": job, "scrape_interval": "2s",
             "file_sd_configs": [{"files": [str(directory / f"{job}.json")], "refresh_interval": "2s"}]}
            for job in SCRAPED]}
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
            writer.stopped.set()
            process.terminate()
            process.wait(timeout=30)
            log.close()
            print((directory / "prometheus.log").read_text()[-3000:])


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
    # The job's namespace is job_namespace: the target's own "namespace" (the operator's, as a
    # ServiceMonitor gives it) leaves it alone.
    wait_for("the operator's succeeded-jobs counter", lambda: prometheus.query(
        f'tensorgrid_operator_jobs_succeeded_total{{job_namespace="{ns.name}"}}') >= 1, 60)
    assert prometheus.query("max(tensorgrid_operator_active)") == 1
    # The chart's alerts, evaluated on these series: each one without error, and no operator missing.
    rules = prometheus.rules()
    assert len(rules) == 8 and all(r["health"] == "ok" for r in rules), rules
    assert prometheus.query('count(ALERTS{alertname="TensorgridOperatorNotActive"})') == 0
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
