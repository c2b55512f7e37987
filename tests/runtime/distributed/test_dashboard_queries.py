"""The chart's Grafana dashboard asks Prometheus what the tasks export: every panel's PromQL parses
(``promtool check rules``), and the training panels return data from a Prometheus scraping a local
job's metrics port, as the e2e suite's Prometheus scrapes the pods (the same target labels), but
without a cluster.

Grafana's variables are replaced as Grafana does before it sends a query: ``$namespace`` by its
"All" value, ``$__rate_interval`` by a duration. The operator's panel (``tensorgrid_operator_*``)
is parsed only: it needs a running operator, whose metrics e2e/test_metrics.py checks.
Without promtool or prometheus (Debian's prometheus package, ``make tools``) the test is skipped,
except in CI.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from typing import Any, Iterator

import pytest
import yaml

import tensorgrid as tf
from cluster_processes import BackgroundTraining, LocalCluster
from tensorgrid.distributed.rpc import ports

pytestmark = pytest.mark.timeout(240)

ROOT = pathlib.Path(__file__).resolve().parents[3]
DASHBOARDS = sorted((ROOT / "charts" / "tensorgrid-operator" / "dashboards").glob("*.json"))
GRAFANA_INTERVALS = ("$__rate_interval", "$__interval", "$__range")
NAMESPACE = "local"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (Debian's prometheus package; `make tools` installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])


def dashboard_queries(dashboard: dict[str, Any], interval: str) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target, with Grafana's variables replaced; a variable the
    dashboard does not define fails, naming it."""
    values = {v["name"]: v.get("allValue") or ".*" for v in (dashboard.get("templating") or {}).get("list") or []}
    queries = []
    for panel in _panels(dashboard.get("panels") or []):
        for target in panel.get("targets") or []:
            expr = str(target.get("expr") or "")
            for name in GRAFANA_INTERVALS:
                expr = expr.replace(name, interval)
            expr = re.sub(r"\$\{?(\w+)\}?", lambda m: values.get(m.group(1)) or f"<undefined ${m.group(1)}>", expr)
            assert "<undefined" not in expr, f"panel {panel.get('title')!r}: {expr}"
            if expr:
                queries.append((str(panel.get("title")), expr))
    return queries


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_dashboard_query_parses(path: pathlib.Path, tmp_path: pathlib.Path) -> None:
    promtool = _tool("promtool")
    queries = dashboard_queries(json.loads(path.read_text()), "1m")
    assert queries, f"{path.name} has no PromQL"
    rules = {"groups": [{"name": path.stem, "rules": [{"record": f"dashboard:query_{i}", "expr": expr}
                                                        for i, (_, expr) in enumerate(queries)]}]}
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    result = subprocess.run([promtool, "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True)
    assert result.returncode == 0, f"{result.stdout}{result.stderr}\nqueries: {queries}"


class _Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def samples(self, promql: str) -> list[Any]:
        with urllib.request.urlopen(f"{self.url}/api/v1/query?query={urllib.parse.quote(promql)}", timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return list(body["data"]["result"])


@pytest.fixture
def prometheus_scraping(tmp_path: pathlib.Path) -> Iterator[tuple[_Prometheus, int]]:
    """A Prometheus scraping one metrics port every second, with the pod labels e2e's gives a worker;
    yields it and the port."""
    binary = _tool("prometheus")
    metrics_port, web_port = ports.free_ports(2)
    labels = {"namespace": NAMESPACE, "pod": "local-worker-0", "tensorgrid_io_job_name": "local",
              "tensorgrid_io_replica_type": "worker", "tensorgrid_io_replica_index": "0"}
    config = {"global": {"scrape_interval": "1s"}, "scrape_configs": [
        {"job_name": "training-pods", "scrape_interval": "1s",
         "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"], "labels": labels}]}]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = open(tmp_path / "prometheus.log", "wb")
    process = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                                f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{web_port}"],
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        yield _Prometheus(f"http://127.0.0.1:{web_port}"), metrics_port
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def test_the_training_panels_show_a_local_jobs_metrics(prometheus_scraping: tuple[_Prometheus, int],
                                                       tmp_path: pathlib.Path) -> None:
    prometheus, metrics_port = prometheus_scraping
    queries = [(title, expr) for path in DASHBOARDS
               for title, expr in dashboard_queries(json.loads(path.read_text()), "10s")
               if "tensorgrid_operator_" not in expr]
    assert queries, "no panel of the dashboards reads the tasks' metrics"
    with LocalCluster(str(tmp_path), {"ps": 1, "worker": 1}, start=False) as cluster:
        cluster.task("ps").start()
        server = tf.train.Server(cluster.cluster, "worker", 0, metrics_port=metrics_port)
        training = BackgroundTraining(server.target)
        try:
            empty = list(queries)
            deadline = time.monotonic() + 120
            while empty and time.monotonic() < deadline:
                training.advance(5)
                empty = [(title, expr) for title, expr in empty
                         if not any(float(s["value"][1]) > 0 for s in prometheus.samples(expr))]
                time.sleep(1)
        finally:
            training.close()
            server.stop()
    assert not empty, f"panels without data from a training job: {empty}"
