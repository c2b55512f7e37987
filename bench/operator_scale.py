"""Scale benchmark of the operator on KWOK nodes: many TrainingJobs at once, and one very large job beside a small one.

Runs on a real control plane (hack/controlplane.sh) with KWOK nodes (hack/tools.sh
--with-kwok, stages in hack/kwok-stages.yaml): the scheduler binds every pod to a node
and KWOK runs it, as kubelets would, so "Running" means what it means on a cluster. The
operator runs as a separate process. Figures:

- ``--jobs N`` (default 100; the issue's target is 1,000): N jobs of 1 PS + ``--workers``
  workers applied at once; time from the first create until every pod runs (seen by a watch
  of the namespace's pods, not by LISTs of them all) and until every job reads Running; the
  operator's CPU seconds and peak RSS (VmHWM); the event loop's lag
  (``tensorgrid_operator_event_loop_lag_*``: max, and p99 from the histogram's buckets);
  reconciles and the mean reconcile time; the machine's load average before and after; the
  CPU seconds each control-plane component (etcd, kube-apiserver, controller-manager,
  scheduler) and KWOK spent meanwhile, so the operator's share of the 2 cores is plain.
- ``--big-job W`` (default 0: skipped): one job of 1 PS + W workers, then at once a job of
  1 PS + 4 workers: how long the small job's pods wait to exist and to run while the big
  job's are made, and the big job's own time to Running. A job over the replica cap
  (spec.MAX_REPLICAS) is refused by the API server; ``--big-job`` over it reports the refusal.

Usage:
    .venv/bin/python bench/operator_scale.py --jobs 100
    .venv/bin/python bench/operator_scale.py --jobs 1000 --big-job 1999
    .venv/bin/python bench/operator_scale.py --jobs 1000 --operator-arg=--api-workers=32
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
import threading
import time
import urllib.request
from typing import Any, Callable, Iterator, Optional, Sequence

import kubernetes
import urllib3

ROOT = pathlib.Path(__file__).resolve().parents[1]
POLL_SECONDS = 2.0  # between LISTs of thousands of pods: each LIST loads the 2 cores too
KWOK_NODES = 20
TAINT = {"key": "tensorgrid.io/kwok-node", "value": "simulated", "effect": "NoSchedule"}


def proc_status(pid: int) -> dict[str, int]:
    fields = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, every: float = POLL_SECONDS) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise SystemExit(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)
    return time.monotonic()


def scrape(port: int) -> dict[str, float]:
    """Every unlabelled sample of the operator's /metrics, and the histogram buckets as name{le}."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    samples = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith("tensorgrid_operator_"):
            continue
        name, _, value = line.rpartition(" ")
        samples[name] = float(value)
    return samples


def lag_percentile(samples: dict[str, float], q: float) -> Optional[float]:
    """The upper bound of the bucket holding the q-quantile of the event loop's lag."""
    prefix = "tensorgrid_operator_event_loop_lag_seconds_bucket{le=\""
    buckets = sorted((float(k[len(prefix):-2]), v) for k, v in samples.items() if k.startswith(prefix))
    total = samples.get("tensorgrid_operator_event_loop_lag_seconds_count", 0.0)
    for bound, count in buckets:
        if count >= q * total:
            return bound
    return None


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def job_manifest(name: str, workers: int) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "tensorgrid", "image": "tensorgrid:bench"}],
                         "tolerations": [{**TAINT, "operator": "Equal"}]}}
    return {"apiVersion": "tensorgrid.io/v1", "kind": "TrainingJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": {"PS": {"replicas": 1, "template": template},
                                      "Worker": {"replicas": workers, "template": template}}}}


def component_pids(kubeconfig: str) -> dict[str, int]:
    """The control plane's processes, from the PID files hack/controlplane.sh keeps beside the kubeconfig."""
    pids = {}
    for pid_file in sorted((pathlib.Path(kubeconfig).parent / "run").glob("*.pid")):
        pid = int(pid_file.read_text().strip() or 0)
        if pid and pathlib.Path(f"/proc/{pid}").exists():
            pids[pid_file.stem] = pid
    return pids


def _paged(list_page: Callable[..., dict[str, Any]], limit: int = 500) -> list[dict[str, Any]]:
    """Every item of a LIST read in pages of ``limit``, each page asked again (up to 5 times,
    2 s apart) when the API server drops or refuses it: a loaded control plane closes a
    LIST of 1,000 jobs now and then, which must not end a 20-minute measurement."""
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        for attempt in range(5):
            try:
                page = list_page(limit=limit, **({"_continue": token} if token else {}))
                break
            except (urllib3.exceptions.HTTPError, kubernetes.client.ApiException) as e:
                retriable = not isinstance(e, kubernetes.client.ApiException) or e.status in (429, 500, 503, 504)
                if attempt == 4 or not retriable:
                    raise
                say(f"a LIST failed ({type(e).__name__}: {str(e)[:120]}); asking again in 2 s")
                time.sleep(2)
        items += page["items"]
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


class Cluster:
    """The API clients and kubeconfig of the control plane under test."""

    def __init__(self, kubeconfig: str) -> None:
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        configuration.connection_pool_maxsize = 32
        self.kubeconfig = kubeconfig
        self.api = kubernetes.client.ApiClient(configuration)
        self.core = kubernetes.client.CoreV1Api(self.api)
        self.custom = kubernetes.client.CustomObjectsApi(self.api)
        self.processes = component_pids(kubeconfig)
        """Name -> pid of every process of the cluster this machine runs (KWOK's once started)."""

    def cpu_seconds(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in self.processes.items() if pathlib.Path(f"/proc/{pid}").exists()}

    def pods(self, namespace: str, job: Optional[str] = None) -> list[dict[str, Any]]:
        selector = f"tensorgrid.io/job-name={job}" if job else "tensorgrid.io/job-name"
        return _paged(lambda **page: json.loads(self.core.list_namespaced_pod(
            namespace, label_selector=selector, _preload_content=False, **page).data))

    def running_pods(self, namespace: str, job: Optional[str] = None) -> int:
        return sum(1 for p in self.pods(namespace, job) if (p.get("status") or {}).get("phase") == "Running"
                   and not p["metadata"].get("deletionTimestamp"))

    def job_states(self, namespace: str) -> dict[str, str]:
        items = _paged(lambda **page: self.custom.list_namespaced_custom_object(
            "tensorgrid.io", "v1", namespace, "trainingjobs", **page))
        return {j["metadata"]["name"]: (j.get("status") or {}).get("state", "") for j in items}

    def create_jobs(self, namespace: str, manifests: list[dict[str, Any]]) -> None:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda m: self.custom.create_namespaced_custom_object(
                "tensorgrid.io", "v1", namespace, "trainingjobs", m), manifests))


class PodWatch(threading.Thread):
    """The phase of every pod in a namespace, kept by one LIST and then a watch.

    Polling with a LIST of every pod every ``POLL_SECONDS`` had the API server encode, and
    this process decode, about 30 MB each time at 5,000 pods: load on the 2 cores that users'
    monitoring does not add (smaller than feared, bench/README.md). A watch costs one encoding
    per change, which the API server shares with the operator's own watch.
    """

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        super().__init__(name=f"pod-watch-{namespace}", daemon=True)
        self.cluster, self.namespace = cluster, namespace
        self.phases: dict[str, str] = {}
        """Pod name -> phase ("" while it is being deleted)."""
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.failure: Optional[BaseException] = None

    def running(self) -> int:
        if self.failure is not None:
            raise SystemExit(f"the pod watch of {self.namespace} failed: {self.failure!r}")
        with self.lock:
            return sum(1 for phase in self.phases.values() if phase == "Running")

    def run(self) -> None:
        try:
            while not self.stopped.is_set():
                self._list_and_watch()
        except BaseException as e:  # noqa: BLE001 - said by running(), in the measuring thread
            self.failure = e

    def _list_and_watch(self) -> None:
        page = json.loads(self.cluster.core.list_namespaced_pod(self.namespace, _preload_content=False).data)
        with self.lock:
            self.phases = {p["metadata"]["name"]: _phase(p) for p in page["items"]}
        version = page["metadata"]["resourceVersion"]
        while not self.stopped.is_set():
            response: Any = self.cluster.core.list_namespaced_pod(
                self.namespace, watch=True, resource_version=version, allow_watch_bookmarks=True,
                timeout_seconds=60, _preload_content=False)
            try:
                for event in _json_lines(response):
                    kind, obj = event["type"], event["object"]
                    if kind == "ERROR":  # 410 Gone: list again
                        return
                    version = obj["metadata"]["resourceVersion"]
                    if kind == "BOOKMARK":
                        continue
                    with self.lock:
                        if kind == "DELETED":
                            self.phases.pop(obj["metadata"]["name"], None)
                        else:
                            self.phases[obj["metadata"]["name"]] = _phase(obj)
            except urllib3.exceptions.HTTPError:
                return  # the connection dropped: list again
            finally:
                response.release_conn()


def _phase(pod: dict[str, Any]) -> str:
    return "" if pod["metadata"].get("deletionTimestamp") else (pod.get("status") or {}).get("phase", "")


def _json_lines(response: Any) -> Iterator[dict[str, Any]]:
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):  # each chunk as it comes, as the client's own watch
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                yield json.loads(line)


class Operator:
    """The operator as its own process, watching one namespace."""

    def __init__(self, cluster: Cluster, namespace: str, probe: list[str], extra: Sequence[str] = ()) -> None:
        """``probe``: the arguments of bench/memory_probe.py to start the operator through, if any;
        ``extra``: more of the operator's flags (``--operator-arg``)."""
        self.metrics_port = free_port()
        self.log = open(pathlib.Path(tempfile.gettempdir()) / f"operator-{namespace}.log", "w")
        start = [str(ROOT / "bench/memory_probe.py"), *probe, "--"] if probe else ["-m", "tensorgrid_operator"]
        self.process = subprocess.Popen(
            [sys.executable, *start, "--standalone", "-n", namespace, "--metrics-port",
             str(self.metrics_port), "--liveness-port", "off", "--kubeconfig", cluster.kubeconfig,
             "--progress-interval-seconds", "0", *extra], stdout=subprocess.DEVNULL, stderr=self.log)
        # Under tracemalloc (--memory-profile --tracemalloc) its imports alone take a minute or more.
        wait_for(self._answers, 600 if probe else 60, "the operator's metrics", every=0.2)
        self.cpu_at_start = cpu_seconds(self.process.pid)

    def _answers(self) -> bool:
        try:
            scrape(self.metrics_port)
            return True
        except OSError:
            return False

    def figures(self) -> dict[str, Any]:
        samples = scrape(self.metrics_port)
        memory = proc_status(self.process.pid)
        count = samples.get("tensorgrid_operator_reconcile_duration_seconds_count", 0.0)
        p99 = lag_percentile(samples, 0.99)
        return {
            "operator_cpu_s": round(cpu_seconds(self.process.pid) - self.cpu_at_start, 1),
            "operator_rss_peak_mib": round(memory["VmHWM"] / 1024, 1),
            "operator_rss_end_mib": round(memory["VmRSS"] / 1024, 1),
            "event_loop_lag_max_s": round(samples.get("tensorgrid_operator_event_loop_lag_max_seconds", 0.0), 3),
            "event_loop_lag_p99_s_at_most": p99,
            "reconciles": int(count),
            "reconcile_ms_mean": round(1000 * samples.get("tensorgrid_operator_reconcile_duration_seconds_sum", 0.0)
                                       / max(count, 1), 1),
            "consistent_reads": int(samples.get("tensorgrid_operator_consistent_reads_total", 0.0)),
        }

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)
        self.log.close()


def fresh_namespace(cluster: Cluster, name: str) -> str:
    namespace = f"{name}-{int(time.time())}"
    cluster.core.create_namespace({"metadata": {"name": namespace}})
    return namespace


def say(message: str) -> None:
    print(f"[operator_scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def drop_namespace(cluster: Cluster, namespace: str) -> None:
    """Delete its jobs (while the operator runs: it removes its finalizer from each), then the namespace;
    wait until it is gone, so its pods' deletion does not load the next measurement."""
    def deleted() -> bool:
        try:
            cluster.custom.delete_collection_namespaced_custom_object("tensorgrid.io", "v1", namespace,
                                                                      "trainingjobs")
        except kubernetes.client.exceptions.ApiException as e:
            # 1,000 deletions may outlast the request's timeout (504): the jobs it had not reached
            # by then are not deleted (seen at 2026-11-23 16:49: 473 of 1,000), so ask again.
            if e.status != 504:
                raise
        return not cluster.job_states(namespace)

    wait_for(deleted, 1800, f"the jobs of {namespace} to be deleted", every=5)
    cluster.core.delete_namespace(namespace)

    def gone() -> bool:
        try:
            cluster.core.read_namespace(namespace)
            return False
        except kubernetes.client.exceptions.ApiException as e:
            return e.status == 404

    wait_for(gone, 1800, f"namespace {namespace} to be deleted", every=5)


def many_jobs(cluster: Cluster, jobs: int, workers: int, probe: list[str], extra: Sequence[str]) -> dict[str, Any]:
    """``jobs`` jobs of 1 PS + ``workers`` workers applied at once: the figures of the module docstring."""
    results: dict[str, Any] = {"jobs": jobs, "pods": jobs * (1 + workers), "load_before": os.getloadavg()}
    namespace = fresh_namespace(cluster, f"scale-{jobs}")
    operator = Operator(cluster, namespace, probe, extra)
    pods = PodWatch(cluster, namespace)
    pods.start()
    try:
        say(f"applying {jobs} jobs of 1 PS + {workers} workers")
        cpu_before = cluster.cpu_seconds()
        t0 = time.monotonic()
        cluster.create_jobs(namespace, [job_manifest(f"job-{i:04d}", workers) for i in range(jobs)])
        results["apply_s"] = round(time.monotonic() - t0, 1)
        say(f"applied in {results['apply_s']} s")
        t_pods = wait_for(lambda: pods.running() >= results["pods"], 1800, "all pods Running", every=0.5)
        results["all_pods_running_s"] = round(t_pods - t0, 1)
        say(f"all {results['pods']} pods Running after {results['all_pods_running_s']} s")
        t_jobs = wait_for(lambda: list(cluster.job_states(namespace).values()).count("Running") == jobs, 1800,
                          "all jobs Running")
        results["all_jobs_running_s"] = round(t_jobs - t0, 1)
        results["load_after"] = os.getloadavg()
        cpu_after = cluster.cpu_seconds()
        results["cluster_cpu_s"] = {name: round(cpu_after[name] - cpu_before[name], 1)
                                    for name in cpu_before if name in cpu_after}
        results.update(operator.figures())
    finally:
        pods.stopped.set()
        try:
            drop_namespace(cluster, namespace)  # while the operator runs: it removes its finalizers
        finally:
            operator.stop()
    return results


def big_and_small(cluster: Cluster, big_workers: int, probe: list[str], extra: Sequence[str]) -> dict[str, Any]:
    """A job of 1 PS + ``big_workers`` workers, then at once one of 1 PS + 4: how long the small one waits."""
    results: dict[str, Any] = {"big_job_workers": big_workers, "load_before": os.getloadavg()}
    namespace = fresh_namespace(cluster, "big-small")
    operator = Operator(cluster, namespace, probe, extra)
    try:
        t0 = time.monotonic()
        try:
            cluster.create_jobs(namespace, [job_manifest("big", big_workers)])
        except kubernetes.client.exceptions.ApiException as e:
            results["big_job_refused"] = json.loads(e.body).get("message") if e.body else str(e)
            return results
        cluster.create_jobs(namespace, [job_manifest("small", 4)])
        t_small = time.monotonic()
        t_exist = wait_for(lambda: len(cluster.pods(namespace, "small")) >= 5, 1800, "the small job's pods", 0.5)
        results["small_pods_created_s"] = round(t_exist - t_small, 1)
        t_run = wait_for(lambda: cluster.running_pods(namespace, "small") >= 5, 1800, "the small job's pods running",
                         0.5)
        results["small_pods_running_s"] = round(t_run - t_small, 1)
        t_state = wait_for(lambda: cluster.job_states(namespace).get("small") == "Running", 1800,
                           "the small job Running", 0.5)
        results["small_job_running_s"] = round(t_state - t_small, 1)
        t_big = wait_for(lambda: cluster.job_states(namespace).get("big") == "Running", 1800, "the big job Running")
        results["big_job_running_s"] = round(t_big - t0, 1)
        results["load_after"] = os.getloadavg()
        results.update(operator.figures())
    finally:
        try:
            drop_namespace(cluster, namespace)  # while the operator runs: it removes its finalizers
        finally:
            operator.stop()
    return results


def start_kwok(cluster: Cluster, nodes: int) -> subprocess.Popen[bytes]:
    """kwok managing ``nodes`` tainted nodes (the same setup as tests/operator/support/kwok_nodes.py)."""
    bin_dir = subprocess.run([str(ROOT / "hack/tools.sh"), "--print-bin-dir"], capture_output=True, text=True,
                             check=True).stdout.strip()
    kwok = pathlib.Path(bin_dir) / "kwok"
    if not kwok.exists():
        raise SystemExit(f"no kwok in {bin_dir}: build it with `hack/tools.sh --with-kwok` (`make tools`)")
    process = subprocess.Popen(
        [str(kwok), "--kubeconfig", cluster.kubeconfig, "--config", str(ROOT / "hack/kwok-stages.yaml"),
         "--manage-all-nodes=false", "--manage-nodes-with-label-selector=tensorgrid.io/kwok-node=managed",
         "--cidr=10.128.0.0/12", "--node-ip=10.127.0.1", "--server-address="],
        stdout=subprocess.DEVNULL, stderr=open(pathlib.Path(tempfile.gettempdir()) / "kwok-bench.log", "w"))
    cluster.processes["kwok"] = process.pid
    for i in range(nodes):
        name = f"bench-kwok-{i}"
        cluster.core.create_node({"metadata": {"name": name, "labels": {"tensorgrid.io/kwok-node": "managed",
                                                                        "kubernetes.io/hostname": name}},
                                  "spec": {"taints": [TAINT]}})
    return process


def _lists_jobs(cluster: Cluster) -> bool:
    try:
        cluster.custom.list_cluster_custom_object("tensorgrid.io", "v1", "trainingjobs")
        return True
    except kubernetes.client.exceptions.ApiException:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100, help="jobs of 1 PS + --workers workers applied at once")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--big-job", type=int, default=0, help="workers of the big job beside a small one (0: skip)")
    parser.add_argument("--operator-arg", action="append", default=[], metavar="FLAG",
                        help="a flag for the operator, e.g. --operator-arg=--api-workers=32 (repeatable)")
    parser.add_argument("--memory-profile", type=pathlib.Path, default=None, metavar="DIR",
                        help="start the operator through bench/memory_probe.py, which writes where its memory is "
                             "at each new peak into DIR/many-jobs and DIR/big-job")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES",
                        help="with --memory-profile: trace Python's allocations with this many frames (slower)")
    args = parser.parse_args()

    def probe(run: str) -> list[str]:
        if args.memory_profile is None:
            return []
        # Each report holds the interpreter (seconds under tracemalloc): one per 25 MiB of growth.
        return [str(args.memory_profile / run), "--tracemalloc", str(args.tracemalloc),
                "--step-mib", "25"]
    state_dir = None
    kubeconfig = os.environ.get("TENSORGRID_KUBECONFIG")
    if not kubeconfig:
        state_dir = tempfile.mkdtemp(prefix="tensorgrid-bench-")
        up = subprocess.run([str(ROOT / "hack/controlplane.sh"), "up", state_dir], capture_output=True, text=True)
        if up.returncode != 0:
            raise SystemExit(up.stderr)
        kubeconfig = up.stdout.strip().splitlines()[-1]
    cluster = Cluster(kubeconfig)
    kwok = None
    runs: dict[str, Any] = {}
    try:
        say(f"control plane at {kubeconfig}")
        bin_dir = subprocess.run([str(ROOT / "hack/build-kubernetes.sh"), "--print-bin-dir"], capture_output=True,
                                 text=True, check=True).stdout.strip()
        kubectl = [str(pathlib.Path(bin_dir) / "kubectl"), "--kubeconfig", kubeconfig]
        subprocess.run(kubectl + ["apply", "--server-side", "--force-conflicts", "-f",
                                  str(ROOT / "crds/trainingjobs.tensorgrid.io.yaml")], check=True, capture_output=True)
        # Not `kubectl wait --for=condition=Established`: it fails at once while the new CRD has no conditions.
        wait_for(lambda: subprocess.run(kubectl + ["get", "crd", "trainingjobs.tensorgrid.io", "-o",
                                                   'jsonpath={.status.conditions[?(@.type=="Established")].status}'],
                                        capture_output=True, text=True).stdout == "True", 60,
                 "the TrainingJob CRD to be Established")
        # A new CRD's storage answers 429 "storage is (re)initializing" for a moment after Established.
        wait_for(lambda: _lists_jobs(cluster), 120, "the TrainingJob storage", every=1)
        kwok = start_kwok(cluster, KWOK_NODES)
        if args.jobs:
            runs["many_jobs"] = many_jobs(cluster, args.jobs, args.workers, probe("many-jobs"), args.operator_arg)
        if args.big_job:
            runs["big_and_small"] = big_and_small(cluster, args.big_job, probe("big-job"), args.operator_arg)
    finally:
        for i in range(KWOK_NODES):
            try:
                cluster.core.delete_node(f"bench-kwok-{i}")
            except kubernetes.client.exceptions.ApiException:
                pass
        if kwok is not None:
            kwok.terminate()
            kwok.wait(30)
        if state_dir is not None:
            subprocess.run([str(ROOT / "hack/controlplane.sh"), "down", state_dir], capture_output=True)
            shutil.rmtree(state_dir, ignore_errors=True)
    print(json.dumps({"cores": os.cpu_count(), **runs}, indent=2))


if __name__ == "__main__":
    main()
