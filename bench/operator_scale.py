"""Scale benchmark of the operator: 100 TrainingJobs of 1 PS + 4 workers applied at once.

Measures, on a real control plane (hack/controlplane.sh) with the operator as a
separate process:

- time from the first job created to all 500 pods (and 500 Services) existing;
- time until every job is Running once the "kubelet" (this script) marks all pods
  Running;
- the operator's resident memory (VmRSS) idle, at the end, and its peak (VmHWM);
- reconcile time per job (the operator's tensorgrid_operator_reconcile_duration_seconds):
  over the whole run, and over an idle window of resyncs (--resync-seconds 10) once every
  job runs, when a reconcile only reads and decides; and how many reconciles listed pods
  instead of reading kopf's indexes (tensorgrid_operator_consistent_reads_total).

With several sizes (``--jobs 50,200``) each runs on a fresh namespace and operator, and
the table gives the idle reconcile time per job against the smallest size's: a ratio
near 1 means a job's reconcile does not grow with the number of jobs.

Usage:
    .venv/bin/python bench/operator_scale.py [--jobs 100] [--workers 4]
    .venv/bin/python bench/operator_scale.py --jobs 50,200
Set TENSORGRID_KUBECONFIG to use a running control plane (``make controlplane``);
otherwise one is started in a temporary directory and stopped at the end.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any, Callable

import kubernetes

ROOT = pathlib.Path(__file__).resolve().parents[1]


def rss_kib(pid: int) -> dict[str, int]:
    fields = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise SystemExit(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic()


def operator_metrics(port: int) -> dict[str, float]:
    """The operator's counters and histogram sums this benchmark reads (one sample each, no labels)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    wanted = ("tensorgrid_operator_reconcile_duration_seconds_sum", "tensorgrid_operator_reconcile_duration_seconds_count",
              "tensorgrid_operator_consistent_reads_total")
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in wanted:
            found[name] = float(value)
    return found


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


IDLE_WINDOW_SECONDS = 25.0  # two or three resyncs of every job at --resync-seconds 10


def job_manifest(name: str, workers: int) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "tensorgrid", "image": "tensorgrid:bench"}]}}
    return {"apiVersion": "tensorgrid.io/v1", "kind": "TrainingJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": {"PS": {"replicas": 1, "template": template},
                                      "Worker": {"replicas": workers, "template": template}}}}


def run_size(jobs: int, workers: int, kubeconfig: str, core: Any, custom: Any) -> dict[str, Any]:
    """One size: a fresh namespace and operator, ``jobs`` jobs applied at once; the figures of the docstring."""
    results: dict[str, Any] = {"jobs": jobs, "pods_per_job": 1 + workers}
    namespace = f"scale-{jobs}-{int(time.time())}"
    core.create_namespace({"metadata": {"name": namespace}})
    metrics_port = free_port()
    log = open(pathlib.Path(tempfile.gettempdir()) / f"operator-scale-{jobs}.log", "w")
    operator = subprocess.Popen(
        [sys.executable, "-m", "tensorgrid_operator", "--standalone", "-n", namespace, "--metrics-port",
         str(metrics_port), "--liveness-port", "off", "--kubeconfig", kubeconfig, "--resync-seconds", "10",
         "--progress-interval-seconds", "0"],
        stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_for(lambda: _answers(metrics_port), 60, "the operator's metrics")
        time.sleep(2)
        results["operator_rss_idle_mib"] = round(rss_kib(operator.pid)["VmRSS"] / 1024, 1)

        def count(kind: str) -> int:
            fn = core.list_namespaced_pod if kind == "pods" else core.list_namespaced_service
            response = fn(namespace, label_selector="tensorgrid.io/job-name", _preload_content=False)
            return len(json.loads(response.data)["items"])

        expected = jobs * (1 + workers)
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: custom.create_namespaced_custom_object(
                "tensorgrid.io", "v1", namespace, "trainingjobs", job_manifest(f"job-{i:04d}", workers)),
                range(jobs)))
        results["apply_all_jobs_s"] = round(time.monotonic() - t0, 2)
        t_pods = wait_for(lambda: count("pods") >= expected, 900, "all pods")
        results["time_to_all_pods_created_s"] = round(t_pods - t0, 2)
        t_svcs = wait_for(lambda: count("services") >= expected, 900, "all services")
        results["time_to_all_services_created_s"] = round(t_svcs - t0, 2)

        pods = core.list_namespaced_pod(namespace, label_selector="tensorgrid.io/job-name").items
        body = {"status": {"phase": "Running", "containerStatuses": [{
            "name": "tensorgrid", "image": "tensorgrid:bench", "imageID": "", "ready": True, "restartCount": 0,
            "started": True, "state": {"running": {"startedAt": "2030-01-01T00:00:00Z"}}}]}}
        t1 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda p: core.patch_namespaced_pod_status(p.metadata.name, namespace, body), pods))
        results["kubelet_patch_all_pods_s"] = round(time.monotonic() - t1, 2)

        def all_running() -> bool:
            items = custom.list_namespaced_custom_object("tensorgrid.io", "v1", namespace, "trainingjobs")["items"]
            return sum(1 for j in items if (j.get("status") or {}).get("state") == "Running") == jobs

        t_running = wait_for(all_running, 900, "all jobs Running")
        results["time_from_pods_running_to_all_jobs_running_s"] = round(t_running - t1, 2)
        busy = operator_metrics(metrics_port)
        count_key, sum_key = ("tensorgrid_operator_reconcile_duration_seconds_count",
                              "tensorgrid_operator_reconcile_duration_seconds_sum")
        results["reconciles_until_running"] = int(busy[count_key])
        results["reconcile_ms_mean_until_running"] = round(1000 * busy[sum_key] / max(busy[count_key], 1), 2)
        time.sleep(IDLE_WINDOW_SECONDS)
        idle = operator_metrics(metrics_port)
        idle_count = idle[count_key] - busy[count_key]
        results["idle_reconciles_per_job_per_minute"] = round(idle_count / jobs * 60 / IDLE_WINDOW_SECONDS, 2)
        results["idle_reconcile_ms_mean"] = round(1000 * (idle[sum_key] - busy[sum_key]) / max(idle_count, 1), 2)
        results["consistent_reads"] = int(idle["tensorgrid_operator_consistent_reads_total"])
        memory = rss_kib(operator.pid)
        results["operator_rss_end_mib"] = round(memory["VmRSS"] / 1024, 1)
        results["operator_rss_peak_mib"] = round(memory["VmHWM"] / 1024, 1)
    finally:
        operator.terminate()
        operator.wait(30)
        log.close()
        core.delete_namespace(namespace)
    return results


def _answers(port: int) -> bool:
    try:
        operator_metrics(port)
        return True
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="100", help="jobs applied at once; several sizes separated by commas")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    try:
        sizes = [int(n) for n in args.jobs.split(",")]
    except ValueError:
        raise SystemExit(f"--jobs {args.jobs!r}: expected a number of jobs, or several separated by commas")
    bin_dir = pathlib.Path(subprocess.run([str(ROOT / "hack/build-kubernetes.sh"), "--print-bin-dir"],
                                          capture_output=True, text=True, check=True).stdout.strip())
    state_dir = None
    kubeconfig = os.environ.get("TENSORGRID_KUBECONFIG")
    runs: list[dict[str, Any]] = []
    controlplane_start = None
    if not kubeconfig:
        state_dir = tempfile.mkdtemp(prefix="tensorgrid-bench-")
        started = time.monotonic()
        up = subprocess.run([str(ROOT / "hack/controlplane.sh"), "up", state_dir], capture_output=True, text=True)
        if up.returncode != 0:
            raise SystemExit(up.stderr)
        kubeconfig = up.stdout.strip().splitlines()[-1]
        controlplane_start = round(time.monotonic() - started, 1)
    try:
        kubectl = [str(bin_dir / "kubectl"), "--kubeconfig", kubeconfig]
        subprocess.run(kubectl + ["apply", "--server-side", "--force-conflicts", "-f",
                                  str(ROOT / "crds/trainingjobs.tensorgrid.io.yaml")], check=True, capture_output=True)
        subprocess.run(kubectl + ["wait", "--for=condition=Established", "crd/trainingjobs.tensorgrid.io"],
                       check=True, capture_output=True)
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        configuration.connection_pool_maxsize = 32
        api = kubernetes.client.ApiClient(configuration)
        core = kubernetes.client.CoreV1Api(api)
        custom = kubernetes.client.CustomObjectsApi(api)
        for jobs in sizes:
            runs.append(run_size(jobs, args.workers, kubeconfig, core, custom))
    finally:
        if state_dir is not None:
            subprocess.run([str(ROOT / "hack/controlplane.sh"), "down", state_dir], capture_output=True)
            shutil.rmtree(state_dir, ignore_errors=True)
    base = runs[0]["idle_reconcile_ms_mean"]
    print(f"{'jobs':>6} {'pods':>6} {'pods created s':>15} {'all Running s':>14} {'reconcile ms':>13} "
          f"{'idle reconcile ms':>18} {'vs smallest':>12} {'RSS MiB':>8}")
    for run in runs:
        print(f"{run['jobs']:>6} {run['jobs'] * run['pods_per_job']:>6} {run['time_to_all_pods_created_s']:>15} "
              f"{run['time_from_pods_running_to_all_jobs_running_s']:>14} {run['reconcile_ms_mean_until_running']:>13} "
              f"{run['idle_reconcile_ms_mean']:>18} {run['idle_reconcile_ms_mean'] / max(base, 1e-9):>12.2f} "
              f"{run['operator_rss_end_mib']:>8}")
    print(json.dumps({"controlplane_start_s": controlplane_start, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
