"""Step latency benchmark: an empty distributed step, tensorgrid vs TensorFlow's own runtime.

An empty step is the smallest step that crosses tasks: a session fetches the value
of a scalar variable that lives on another task, so the step goes client -> master
(``RunStep``) -> the remote task (``RunGraph``) -> back, and carries one float32.
Three processes on 127.0.0.1: a ``master`` task (``tf.train.Server`` of job
``worker``), the ``remote`` task (job ``ps``) holding the variable, and a client.
Two shapes of client:

- ``remote client``: the client is its own process and reaches the master over gRPC
  (client -> master -> remote -> master -> client: two network hops each way);
- ``in-process client``: the session runs inside the master's process, as in
  between-graph training where each worker's session targets its own server
  (master -> remote -> master: one hop each way).

Both backends run the same program in the same run, interleaved (tensorgrid,
TensorFlow, TensorFlow, tensorgrid, ...); each measurement is ``--steps`` steps after
200 warm-up steps, and the report gives the median over repetitions of the p50 and
p99 step latency. Target (issue #6): p50 <= 1 ms.

    .venv/bin/python bench/latency.py           # table; JSON saved to bench/results/latency.json
    .venv/bin/python bench/latency.py --json    # JSON on stdout

Throughput of the RecvTensor path (1 MiB, 64 MiB, 1 GiB) is ``bench/transport.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import signal
import statistics
import subprocess
import sys
import time
from typing import Any

BACKENDS = ("tensorgrid", "tensorflow")
CLIENTS = ("remote client", "in-process client")
WARMUP_STEPS = 200
RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "latency.json"
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import training  # the sibling benchmark: backends, ports, child environment


def measure_steps(tf: Any, target: str, steps: int) -> dict[str, float]:
    """Builds the empty step on ``target`` and times ``steps`` of it (after a warm-up)."""
    with tf.device("/job:ps/task:0"):
        value = tf.get_variable("remote_scalar", [], initializer=tf.zeros_initializer())
    config = tf.ConfigProto(device_filters=["/job:ps", "/job:worker/task:0"])
    with tf.Session(target, config=config) as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(WARMUP_STEPS):
            sess.run(value)
        samples = []
        for _ in range(steps):
            started = time.perf_counter()
            sess.run(value)
            samples.append(time.perf_counter() - started)
    samples.sort()
    return {"p50_ms": samples[len(samples) // 2] * 1e3, "p99_ms": samples[int(len(samples) * 0.99)] * 1e3,
            "mean_ms": statistics.fmean(samples) * 1e3}


def run_task(args: argparse.Namespace) -> int:
    tf = training.import_tf(args.backend)
    cluster = tf.train.ClusterSpec(json.loads(args.cluster))
    config = tf.ConfigProto(device_filters=["/job:ps", "/job:worker/task:0"])
    server = tf.train.Server(cluster, job_name=args.job, task_index=0, config=config)
    if args.client == "none":
        server.join()
        return 0
    target = server.target if args.client == "in-process" else f"grpc://{cluster.task_address('worker', 0)}"
    print(json.dumps(measure_steps(tf, target, args.steps)), flush=True)
    os._exit(0)  # the servers of the run are stopped by the parent


def run_client(args: argparse.Namespace) -> int:
    tf = training.import_tf(args.backend)
    cluster = json.loads(args.cluster)
    print(json.dumps(measure_steps(tf, f"grpc://{cluster['worker'][0]}", args.steps)), flush=True)
    return 0


def run_once(backend: str, client: str, steps: int, keep_openblas_env: bool) -> dict[str, float]:
    master_port, remote_port = training.free_ports(2)
    cluster = json.dumps({"worker": [f"127.0.0.1:{master_port}"], "ps": [f"127.0.0.1:{remote_port}"]})
    env = training.child_env(keep_openblas_env)
    base = [sys.executable, __file__, "task", "--backend", backend, "--cluster", cluster, "--steps", str(steps)]
    servers = [subprocess.Popen(base + ["--job", "ps", "--client", "none"], env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        if client == "in-process client":
            measured = subprocess.run(base + ["--job", "worker", "--client", "in-process"], env=env,
                                      capture_output=True, text=True, timeout=600)
        else:
            servers.append(subprocess.Popen(base + ["--job", "worker", "--client", "none"], env=env,
                                            start_new_session=True, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
            measured = subprocess.run([sys.executable, __file__, "client", "--backend", backend, "--cluster", cluster,
                                       "--steps", str(steps)], env=env, capture_output=True, text=True, timeout=600)
        if measured.returncode != 0:
            raise RuntimeError(f"{backend} {client} failed:\n{measured.stderr[-3000:]}")
        return json.loads(measured.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
    finally:
        for server in servers:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def table(report: dict[str, Any]) -> str:
    lines = ["| client | backend | p50 ms | p99 ms | **tensorgrid / TF (p50; lower is better)** |", "|---|---|---|---|---|"]
    for row in report["results"]:
        for backend in BACKENDS:
            if backend not in row["backends"]:
                continue
            figures = row["backends"][backend]
            ratio = row.get("p50_ratio_tensorgrid_vs_tensorflow")
            shown = f"**{ratio:.2f}**" if ratio is not None and backend == "tensorgrid" else ""
            lines.append(f"| {row['client']} | {backend} | {figures['p50_ms']:.3f} | {figures['p99_ms']:.3f} | "
                         f"{shown} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    for name in ("task", "client"):
        child = sub.add_parser(name, help=argparse.SUPPRESS)
        child.add_argument("--backend", choices=BACKENDS, required=True)
        child.add_argument("--cluster", required=True)
        child.add_argument("--steps", type=int, required=True)
        if name == "task":
            child.add_argument("--job", choices=("ps", "worker"), required=True)
            child.add_argument("--client", choices=("none", "in-process"), required=True)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated, from tensorgrid, tensorflow")
    parser.add_argument("--steps", type=int, default=2000, help="timed steps per measurement (default 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per client and backend (default 3)")
    parser.add_argument("--keep-openblas-env", action="store_true",
                        help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in the benchmark's processes")
    parser.add_argument("--output", default=str(RESULTS), help="where to save the JSON report ('' to skip)")
    args = parser.parse_args()
    if args.command == "task":
        return run_task(args)
    if args.command == "client":
        return run_client(args)

    backends = [b for b in args.backends.split(",") if b]
    report: dict[str, Any] = {
        "benchmark": "latency", "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "settings": {"steps": args.steps, "warmup_steps": WARMUP_STEPS, "repeats": args.repeats}, "results": [],
    }
    for client in CLIENTS:
        runs: dict[str, list[dict[str, float]]] = {b: [] for b in backends}
        for repeat in range(args.repeats):
            for backend in (backends if repeat % 2 == 0 else list(reversed(backends))):
                result = run_once(backend, client, args.steps, args.keep_openblas_env)
                runs[backend].append(result)
                if not args.json:
                    print(f"  {client} {backend} run {repeat + 1}: p50 {result['p50_ms']:.3f} ms, "
                          f"p99 {result['p99_ms']:.3f} ms", file=sys.stderr, flush=True)
        row: dict[str, Any] = {"client": client, "backends": {
            backend: {"p50_ms": statistics.median(r["p50_ms"] for r in samples),
                      "p99_ms": statistics.median(r["p99_ms"] for r in samples), "runs": samples}
            for backend, samples in runs.items()}}
        if len(backends) == 2:
            row["p50_ratio_tensorgrid_vs_tensorflow"] = (row["backends"]["tensorgrid"]["p50_ms"]
                                                         / row["backends"]["tensorflow"]["p50_ms"])
        report["results"].append(row)
    if args.output:
        pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.output).write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    # Tasks talk mutual TLS, as users' do: a CA for this run, inherited by every task it starts.
    with training.certificates.loopback_tls_for_this_process("tensorgrid benchmark"):
        sys.exit(main())
