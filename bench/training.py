"""Training benchmark: between-graph PS training, tensorgrid vs TensorFlow's own runtime.

The same TF1 program (an MLP 784-H-H-10, batch 64, float32, plain SGD, synthetic
random data identical for both) runs as separate processes on 127.0.0.1 (parameter
servers and workers, ``replica_device_setter`` placing the variables on the PS
tasks, ``MonitoredTrainingSession`` on each worker), once on tensorgrid
(``import tensorgrid as tf``) and once on TensorFlow 2.21's ``tf.compat.v1``
distributed runtime (``tf.train.Server``), in the same run and interleaved
(tensorgrid, TensorFlow, tensorgrid, ...), so background load hits both alike.

Every worker runs steps continuously. Once all workers are warmed up, the parent
announces a common measuring window; each worker counts its steps in the window
and worker 0 also reads the global step at both ends. Reported, per case and
backend: the median over repetitions of global steps/s (``global_step``
increments: one per applied update in async mode, one per aggregated update in
sync mode), of worker steps/s (the sum of every worker's local steps/s, i.e.
batches per second) and per worker, the median step latency, the CPU time of all
the run's processes per worker step (from /proc, every thread), and the ratio
tensorgrid / TensorFlow of the worker steps/s.

Cases: ``base`` (H=512, 1 ps, 2 workers, async: the issue #6 target, ratio >= 1),
``hidden2048``, ``ps2`` (2 ps), ``sync`` (SyncReplicasOptimizer, 2 replicas), and
the scaling cases ``workers1`` and ``workers4``.

    .venv/bin/python bench/training.py                    # every case, table; JSON in bench/results/training.json
    .venv/bin/python bench/training.py --cases base --repeats 5
    .venv/bin/python bench/training.py --json             # JSON on stdout

OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, which this project's machines set for old
OpenBLAS builds, are unset in the benchmark's processes (numpy then picks the
processor's own kernels; the chosen one is reported); ``--keep-openblas-env``
keeps them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

import numpy as np

from tensorgrid.distributed.rpc import certificates
from tensorgrid.distributed.rpc import ports

BATCH = 64
INPUT = 784
CLASSES = 10
LEARNING_RATE = 0.01
WARMUP_STEPS = 30
DATA_BATCHES = 16
RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "training.json"


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    hidden: int = 512
    ps: int = 1
    workers: int = 2
    sync: bool = False

    def describe(self) -> str:
        mode = "sync" if self.sync else "async"
        return f"{self.name}: H={self.hidden}, {self.ps} ps, {self.workers} workers, {mode}"


CASES = {case.name: case for case in (
    Case("base"),
    Case("hidden2048", hidden=2048),
    Case("ps2", ps=2),
    Case("sync", sync=True),
    Case("workers1", workers=1),
    Case("workers4", workers=4),
)}
BACKENDS = ("tensorgrid", "tensorflow", "tensorflow-1thread")
PEERS = BACKENDS[1:]
"""TensorFlow at its two usual settings: its default thread pools, and one intra-op and one
inter-op thread per task (what a tuned user sets for several tasks on few cores). The ratio
is taken against whichever is faster in the run."""


# ----------------------------------------------------------------------------- one task (a child process)

def import_tf(backend: str) -> Any:
    if backend.startswith("tensorflow"):
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
        return tf
    import tensorgrid as tf

    return tf


def dense(tf: Any, inputs: Any, units: int, name: str, seed: int) -> Any:
    fan_in = int(inputs.shape[1])
    with tf.variable_scope(name):
        weights = tf.get_variable("weights", [fan_in, units], initializer=tf.truncated_normal_initializer(
            stddev=float(np.sqrt(2.0 / fan_in)), seed=seed))
        biases = tf.get_variable("biases", [units], initializer=tf.zeros_initializer())
        return tf.matmul(inputs, weights) + biases


def run_task(args: argparse.Namespace) -> int:
    tf = import_tf(args.backend)
    cluster_dict = json.loads(args.cluster)
    cluster = tf.train.ClusterSpec(cluster_dict)
    job, index = args.job, args.index
    filters = ["/job:ps", f"/job:{job}/task:{index}"]
    config = tf.ConfigProto(device_filters=filters)
    if args.backend == "tensorflow-1thread":
        config = tf.ConfigProto(device_filters=filters, intra_op_parallelism_threads=1,
                                inter_op_parallelism_threads=1)
    server = tf.train.Server(cluster, job_name=job, task_index=index, config=config)
    if job == "ps":
        server.join()
        return 0

    workers = len(cluster_dict["worker"])
    is_chief = index == 0
    rng = np.random.default_rng(1000 + index)
    images = rng.standard_normal((DATA_BATCHES, BATCH, INPUT), dtype=np.float32)
    labels = rng.integers(0, CLASSES, (DATA_BATCHES, BATCH), dtype=np.int64)

    with tf.device(tf.train.replica_device_setter(worker_device=f"/job:worker/task:{index}", cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, INPUT], name="images")
        y = tf.placeholder(tf.int64, [None], name="labels")
        hidden = tf.nn.relu(dense(tf, x, args.hidden, "hidden1", 1))
        hidden = tf.nn.relu(dense(tf, hidden, args.hidden, "hidden2", 2))
        logits = dense(tf, hidden, CLASSES, "softmax_linear", 3)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        global_step = tf.train.get_or_create_global_step()
        optimizer = tf.train.GradientDescentOptimizer(LEARNING_RATE)
        hooks = []
        if args.sync:
            optimizer = tf.train.SyncReplicasOptimizer(optimizer, replicas_to_aggregate=workers,
                                                       total_num_replicas=workers)
            hooks.append(optimizer.make_session_run_hook(is_chief))
        train_op = optimizer.minimize(loss, global_step=global_step)

    run_dir = pathlib.Path(args.run_dir)
    go_file = run_dir / "go"
    step_times: list[float] = []
    window: Optional[tuple[float, float]] = None
    counted = 0
    first_global = last_global = 0
    reported = False
    parent = os.getppid()
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks, config=config,
                                           log_step_count_steps=0) as sess:
        step = 0
        while True:
            feed = {x: images[step % DATA_BATCHES], y: labels[step % DATA_BATCHES]}
            started = time.perf_counter()
            _, global_value = sess.run([train_op, global_step], feed_dict=feed)
            finished = time.perf_counter()
            step += 1
            if step == WARMUP_STEPS:
                (run_dir / f"ready-{index}").write_text("ready")
            if window is None:
                if step >= WARMUP_STEPS and step % 5 == 0 and go_file.exists():
                    start_at, duration = json.loads(go_file.read_text())
                    window = (start_at, start_at + duration)
                continue
            wall = time.time()
            if reported:
                if os.getppid() != parent or wall > window[1] + 60:
                    os._exit(0)  # the parent is gone or forgot this task: never outlive the run
                continue
            if wall < window[0]:
                first_global = int(global_value)
                continue
            counted += 1
            step_times.append(finished - started)
            last_global = int(global_value)
            if wall >= window[1]:
                _report(run_dir, index, counted, step_times, first_global, last_global, window)
                # Keep stepping (uncounted) until the parent stops the run: in sync mode
                # the other workers' last steps need this worker's gradients.
                reported = True


def _report(run_dir: pathlib.Path, index: int, counted: int, step_times: list[float], first_global: int,
            last_global: int, window: tuple[float, float]) -> None:
    step_times.sort()
    result = {
        "index": index,
        "steps": counted,
        "seconds": window[1] - window[0],
        "step_p50_ms": step_times[len(step_times) // 2] * 1e3 if step_times else None,
        "global_steps": last_global - first_global, "first_global": first_global, "last_global": last_global,
        "blas": _blas_kernel(),
    }
    (run_dir / f"result-{index}.json.tmp").write_text(json.dumps(result))
    (run_dir / f"result-{index}.json.tmp").rename(run_dir / f"result-{index}.json")


def _blas_kernel() -> str:
    try:
        import threadpoolctl

        info = threadpoolctl.threadpool_info()
        return ", ".join(f"{i.get('internal_api')} {i.get('architecture')}" for i in info if i.get("user_api") == "blas")
    except Exception:  # noqa: BLE001 - only reported
        return "unknown"


# ----------------------------------------------------------------------------- one run of a case (the parent)

free_ports = ports.free_ports
"""Distinct free loopback ports for a case's tasks (the runtime's own helper)."""


def child_env(keep_openblas_env: bool) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2", TENSORGRID_PS_GRACE_SECONDS="1")
    if not keep_openblas_env:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    return env


class PortTakenError(RuntimeError):
    """A task could not listen on its port: another process (or another task's data
    channel, which binds a random port) took it between choosing and binding."""


def run_case(case: Case, backend: str, duration: float, keep_openblas_env: bool, tls: bool = True,
             job_env: Optional[dict[str, dict[str, str]]] = None) -> dict[str, Any]:
    """``run_case_once``, again on new ports if a port was taken meanwhile (up to 3 times)."""
    for attempt in range(3):
        try:
            return run_case_once(case, backend, duration, keep_openblas_env, tls=tls, job_env=job_env)
        except PortTakenError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def run_case_once(case: Case, backend: str, duration: float, keep_openblas_env: bool,
                  timeout: float = 300.0, tls: bool = True,
                  job_env: Optional[dict[str, dict[str, str]]] = None) -> dict[str, Any]:
    """Starts the cluster of ``case`` on ``backend``, measures one window, stops it; returns the figures.
    tensorgrid's tasks talk mutual TLS (this process's ``TENSORGRID_TLS_DIR``), or plaintext
    (``TENSORGRID_INSECURE=1``) when ``tls`` is false. ``job_env`` adds variables to one job's
    tasks (``{"ps": {"CUDA_VISIBLE_DEVICES": ""}}``: a PS without a GPU, bench/gpu.py)."""
    ports = free_ports(case.ps + case.workers)
    cluster = {"ps": [f"127.0.0.1:{p}" for p in ports[:case.ps]],
               "worker": [f"127.0.0.1:{p}" for p in ports[case.ps:]]}
    run_dir = pathlib.Path(tempfile.mkdtemp(prefix=f"tg-bench-{backend}-"))
    env = child_env(keep_openblas_env)
    if not tls:
        env.pop("TENSORGRID_TLS_DIR", None)
        env["TENSORGRID_INSECURE"] = "1"
    processes: list[subprocess.Popen[bytes]] = []
    tasks = [("ps", i) for i in range(case.ps)] + [("worker", i) for i in range(case.workers)]
    try:
        for job, index in tasks:
            log = open(run_dir / f"{job}-{index}.log", "wb")
            argv = [sys.executable, __file__, "task", "--backend", backend, "--job", job, "--index", str(index),
                    "--cluster", json.dumps(cluster), "--hidden", str(case.hidden), "--run-dir", str(run_dir)]
            if case.sync:
                argv.append("--sync")
            processes.append(subprocess.Popen(argv, env={**env, **(job_env or {}).get(job, {})}, stdout=log,
                                              stderr=subprocess.STDOUT,
                                              start_new_session=True))
            log.close()
        deadline = time.monotonic() + timeout
        _wait_files(run_dir, [f"ready-{i}" for i in range(case.workers)], deadline, processes, run_dir)
        start_at = time.time() + 0.5
        (run_dir / "go.tmp").write_text(json.dumps([start_at, duration]))
        (run_dir / "go.tmp").rename(run_dir / "go")
        time.sleep(max(0.0, start_at - time.time()))
        cpu_before = [_cpu_seconds(p.pid) for p in processes]
        time.sleep(max(0.0, start_at + duration - time.time()))
        cpu = [after - before for before, after in zip(cpu_before, (_cpu_seconds(p.pid) for p in processes))]
        _wait_files(run_dir, [f"result-{i}.json" for i in range(case.workers)], deadline, processes, run_dir)
        results = [json.loads((run_dir / f"result-{i}.json").read_text()) for i in range(case.workers)]
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        shutil.rmtree(run_dir, ignore_errors=True)
    per_worker = [r["steps"] / r["seconds"] for r in results]
    worker_steps = sum(r["steps"] for r in results)
    return {
        "backend": backend,
        "global_steps_per_s": results[0]["global_steps"] / results[0]["seconds"],
        "worker_steps_per_s": sum(per_worker),
        "per_worker_steps_per_s": per_worker,
        "step_p50_ms": statistics.median(r["step_p50_ms"] for r in results),
        # CPU time of every task in the window, per worker step (all threads; user + system).
        "cpu_ms_per_worker_step": {f"{job}{index}": seconds / max(1, worker_steps) * 1e3
                                   for (job, index), seconds in zip(tasks, cpu)},
        "blas": results[0]["blas"],
    }


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; 0 elsewhere or once it exited)."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_files(run_dir: pathlib.Path, names: list[str], deadline: float,
                processes: list[subprocess.Popen[bytes]], logs: pathlib.Path) -> None:
    while not all((run_dir / n).exists() for n in names):
        for process in processes:
            if process.poll() not in (None, 0):
                text = _logs(logs)
                if "already in use" in text:
                    raise PortTakenError(text)
                raise RuntimeError(f"a task exited early with {process.returncode}:\n{text}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster did not produce {names} in time:\n{_logs(logs)}")
        time.sleep(0.05)


def _logs(run_dir: pathlib.Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(run_dir.glob("*.log")))


# ----------------------------------------------------------------------------- report

def summarize(case: Case, runs: list[dict[str, Any]]) -> dict[str, Any]:
    by_backend: dict[str, Any] = {}
    for backend in BACKENDS:
        mine = [r for r in runs if r["backend"] == backend]
        if not mine:
            continue
        by_backend[backend] = {
            "global_steps_per_s": statistics.median(r["global_steps_per_s"] for r in mine),
            "worker_steps_per_s": statistics.median(r["worker_steps_per_s"] for r in mine),
            "per_worker_steps_per_s": statistics.median(
                statistics.mean(r["per_worker_steps_per_s"]) for r in mine),
            "step_p50_ms": statistics.median(r["step_p50_ms"] for r in mine),
            "cpu_ms_per_worker_step": statistics.median(sum(r["cpu_ms_per_worker_step"].values()) for r in mine),
            "runs": mine,
        }
    ratio = None
    peers = [b for b in PEERS if b in by_backend]
    if "tensorgrid" in by_backend and peers:
        best = max(peers, key=lambda b: by_backend[b]["worker_steps_per_s"])
        pairs = [a["worker_steps_per_s"] / b["worker_steps_per_s"]
                 for a, b in zip(by_backend["tensorgrid"]["runs"], by_backend[best]["runs"])]
        mine = sorted(r["worker_steps_per_s"] for r in by_backend["tensorgrid"]["runs"])
        theirs = sorted(r["worker_steps_per_s"] for r in by_backend[best]["runs"])
        ratio = {"against": best,
                 "of_medians": by_backend["tensorgrid"]["worker_steps_per_s"] / by_backend[best]["worker_steps_per_s"],
                 "median_of_paired_runs": statistics.median(pairs), "paired_runs": pairs,
                 "spread": {"tensorgrid": [mine[0], mine[-1]], best: [theirs[0], theirs[-1]]}}
    return {"case": dataclasses.asdict(case), "description": case.describe(), "backends": by_backend,
            "ratio_tensorgrid_vs_tensorflow": ratio}


def table(report: dict[str, Any]) -> str:
    lines = [
        "| case | backend | global steps/s | worker steps/s (sum, median) | min-max | per worker | step p50 ms "
        "| CPU ms per step | **tensorgrid / best TF** |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["cases"]:
        ratio = row["ratio_tensorgrid_vs_tensorflow"]
        for backend, figures in row["backends"].items():
            shown = f"**{ratio['of_medians']:.2f}** (vs {ratio['against']})" if ratio and backend == "tensorgrid" else ""
            spread = sorted(r["worker_steps_per_s"] for r in figures["runs"])
            lines.append(f"| {row['description']} | {backend} | {figures['global_steps_per_s']:.1f} | "
                         f"{figures['worker_steps_per_s']:.1f} | {spread[0]:.0f}-{spread[-1]:.0f} | "
                         f"{figures['per_worker_steps_per_s']:.1f} | "
                         f"{figures['step_p50_ms']:.2f} | {figures['cpu_ms_per_worker_step']:.2f} | {shown} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    task = sub.add_parser("task", help=argparse.SUPPRESS)
    task.add_argument("--backend", choices=BACKENDS, required=True)
    task.add_argument("--job", choices=("ps", "worker"), required=True)
    task.add_argument("--index", type=int, required=True)
    task.add_argument("--cluster", required=True)
    task.add_argument("--hidden", type=int, required=True)
    task.add_argument("--sync", action="store_true")
    task.add_argument("--run-dir", required=True)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from {', '.join(CASES)}")
    parser.add_argument("--backends", default=",".join(BACKENDS), help=f"comma-separated, from {', '.join(BACKENDS)}")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case and backend, interleaved (default 3)")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds in each measuring window (default 8)")
    parser.add_argument("--keep-openblas-env", action="store_true",
                        help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in the benchmark's processes")
    parser.add_argument("--output", default=str(RESULTS), help="where to save the JSON report ('' to skip)")
    args = parser.parse_args()
    if args.command == "task":
        return run_task(args)

    backends = [b for b in args.backends.split(",") if b]
    cases = [CASES[name] for name in args.cases.split(",") if name]
    report: dict[str, Any] = {
        "benchmark": "training", "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                             "processor": platform.processor() or platform.machine()},
        "settings": {"batch": BATCH, "input": INPUT, "classes": CLASSES, "learning_rate": LEARNING_RATE,
                     "warmup_steps": WARMUP_STEPS, "duration_s": args.duration, "repeats": args.repeats,
                     "openblas_env_kept": args.keep_openblas_env},
        "cases": [],
    }
    for case in cases:
        runs = []
        for repeat in range(args.repeats):
            order = backends[repeat % len(backends):] + backends[:repeat % len(backends)]
            for backend in order:
                result = run_case(case, backend, args.duration, args.keep_openblas_env)
                runs.append(result)
                if not args.json:
                    print(f"  {case.name} {backend} run {repeat + 1}: {result['worker_steps_per_s']:.1f} worker "
                          f"steps/s, {result['global_steps_per_s']:.1f} global steps/s", file=sys.stderr, flush=True)
        report["cases"].append(summarize(case, runs))
    if args.output:
        pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.output).write_text(json.dumps(report, indent=2))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(table(report))
    return 0


if __name__ == "__main__":
    # Tasks talk mutual TLS, as users' do: a CA for this run, inherited by every task it starts.
    with certificates.loopback_tls_for_this_process("tensorgrid benchmark"):
        sys.exit(main())
