"""Scale benchmark of the operator: 100 TrainingJobs of 1 PS + 4 workers applied at once.

Measures, on a real control plane (hack/controlplane.sh) with the operator as a
separate process:

- time from the first job created to all 500 pods (and 500 Services) existing;
- time until every job is Running once the "kubelet" (this script) marks all pods
  Running;
- the operator's resident memory (VmRSS) idle, at the end, and its peak (VmHWM).

Usage:
    .venv/bin/python bench/operator_scale.py [--jobs 100] [--workers 4]
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


def job_manifest(name: str, workers: int) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "tensorgrid", "image": "tensorgrid:bench"}]}}
    return {"apiVersion": "tensorgrid.io/v1", "kind": "TrainingJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": {"PS": {"replicas": 1, "template": template},
                                      "Worker": {"replicas": workers, "template": template}}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    bin_dir = pathlib.Path(subprocess.run([str(ROOT / "hack/build-kubernetes.sh"), "--print-bin-dir"],
                                          capture_output=True, text=True, check=True).stdout.strip())
    state_dir = None
    kubeconfig = os.environ.get("TENSORGRID_KUBECONFIG")
    results: dict[str, Any] = {"jobs": args.jobs, "pods_per_job": 1 + args.workers}
    if not kubeconfig:
        state_dir = tempfile.mkdtemp(prefix="tensorgrid-bench-")
        started = time.monotonic()
        up = subprocess.run([str(ROOT / "hack/controlplane.sh"), "up", state_dir], capture_output=True, text=True)
        if up.returncode != 0:
            raise SystemExit(up.stderr)
        kubeconfig = up.stdout.strip().splitlines()[-1]
        results["controlplane_start_s"] = round(time.monotonic() - started, 1)
    operator = None
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
        namespace = f"scale-{int(time.time())}"
        core.create_namespace({"metadata": {"name": namespace}})

        operator = subprocess.Popen(
            [sys.executable, "-m", "tensorgrid_operator", "--standalone", "-n", namespace, "--metrics-port", "off",
             "--liveness-port", "off", "--kubeconfig", kubeconfig],
            stdout=subprocess.DEVNULL, stderr=open(pathlib.Path(tempfile.gettempdir()) / "operator-scale.log", "w"))
        time.sleep(3)
        results["operator_rss_idle_mib"] = round(rss_kib(operator.pid)["VmRSS"] / 1024, 1)

        def count(kind: str) -> int:
            fn = core.list_namespaced_pod if kind == "pods" else core.list_namespaced_service
            response = fn(namespace, label_selector="tensorgrid.io/job-name", _preload_content=False)
            return len(json.loads(response.data)["items"])

        expected = args.jobs * (1 + args.workers)
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: custom.create_namespaced_custom_object(
                "tensorgrid.io", "v1", namespace, "trainingjobs", job_manifest(f"job-{i:03d}", args.workers)),
                range(args.jobs)))
        results["apply_all_jobs_s"] = round(time.monotonic() - t0, 2)
        t_pods = wait_for(lambda: count("pods") >= expected, 600, "all pods")
        results["time_to_all_pods_created_s"] = round(t_pods - t0, 2)
        t_svcs = wait_for(lambda: count("services") >= expected, 600, "all services")
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
            return sum(1 for j in items if (j.get("status") or {}).get("state") == "Running") == args.jobs

        t_running = wait_for(all_running, 600, "all jobs Running")
        results["time_from_pods_running_to_all_jobs_running_s"] = round(t_running - t1, 2)
        memory = rss_kib(operator.pid)
        results["operator_rss_end_mib"] = round(memory["VmRSS"] / 1024, 1)
        results["operator_rss_peak_mib"] = round(memory["VmHWM"] / 1024, 1)
        core.delete_namespace(namespace)
    finally:
        if operator is not None:
            operator.terminate()
            operator.wait(30)
        if state_dir is not None:
            subprocess.run([str(ROOT / "hack/controlplane.sh"), "down", state_dir], capture_output=True)
            shutil.rmtree(state_dir, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
