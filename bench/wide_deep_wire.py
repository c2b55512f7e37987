"""Bytes on the wire per step of the wide-and-deep click model, tensorgrid vs TensorFlow.

The program of ``examples/wide_deep_click.py`` (a ``--rows`` x 64 embedding table and a
``--rows`` x 1 wide table, each ``fixed_size_partitioner(2)``: one half on each of 2 ps
tasks; a 256-64-1 deep network; Adagrad; batches of 256 examples with 4 ids each),
trained asynchronously by 2 workers, every task a process on 127.0.0.1, once on
tensorgrid and once on TensorFlow 2.21's ``tf.compat.v1`` runtime (``tf.train.Server``),
interleaved. The batches are drawn before training (16 per worker, cycled), so a step is
the graph's work only.

Bytes on the wire are counted by the kernel, per TCP connection: ``ss -tinp`` lists every
established socket of the cluster's processes with its ``bytes_received`` (TCP payload
bytes, TLS records included for tensorgrid, which speaks mutual TLS as users run it); the
difference over the measuring window, summed over the sockets of the ps processes, is
what the workers sent to the ps (gradients, ids), and summed over the workers' sockets,
what the ps sent to the workers (looked-up rows, the dense weights). tensorgrid's tasks on
one machine would use a Unix socket for their tensors, which ``ss`` cannot count; the
benchmark turns that off (``TENSORGRID_DATA_CHANNEL_UNIX=0``), so they use TCP as tasks on
different machines do. Divided by the worker steps of the window (each worker counts its
own), that is bytes per step each way. What the rows touched weigh: 256 x 4 lookups x 64
floats x 4 bytes = 262,144 bytes each way (the issue's "batch x 64 x 4 bytes per lookup",
4 lookups a step), plus the deep network's 16,513 weights (66,052 bytes) each way and the
wide table's 1,280 rows of 1 float.

    .venv/bin/python bench/wide_deep_wire.py                  # 1,000,000 rows; JSON in bench/results/wide_deep_wire.json
    .venv/bin/python bench/wide_deep_wire.py --rows 1000000,100000 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "examples"))
sys.path.insert(0, str(BENCH))

import training  # the sibling benchmark: free ports, the tasks' environment
import wide_deep_click  # the program measured

from tensorgrid.distributed.rpc import certificates

BATCH = 256
DATA_BATCHES = 16
WARMUP_STEPS = 20
LEARNING_RATE = 0.3
BACKENDS = ("tensorgrid", "tensorflow")
ROWS_BYTES_PER_STEP = BATCH * wide_deep_click.FIELDS * wide_deep_click.EMBEDDING_DIM * 4
DENSE_BYTES = ((wide_deep_click.FIELDS * wide_deep_click.EMBEDDING_DIM + 1) * 64 + 64 + 1) * 4
RESULTS = BENCH / "results" / "wide_deep_wire.json"


# ----------------------------------------------------------------------------- one task (a child process)

def run_task(args: argparse.Namespace) -> int:
    tf = wide_deep_click.import_tf(args.backend)
    cluster = tf.train.ClusterSpec(json.loads(args.cluster))
    job, index = args.job, args.index
    config = tf.ConfigProto(device_filters=["/job:ps", f"/job:{job}/task:{index}"])
    server = tf.train.Server(cluster, job_name=job, task_index=index, config=config)
    if job == "ps":
        server.join()
        return 0
    with tf.device(tf.train.replica_device_setter(worker_device=f"/job:worker/task:{index}", cluster=cluster)):
        ids, cross, clicks, loss = wide_deep_click.build_model(tf, 0, vocabulary=args.rows)
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdagradOptimizer(LEARNING_RATE).minimize(loss, global_step=global_step)
    data = wide_deep_click.ClickData(0, stream=index, vocabulary=args.rows)
    feeds = [dict(zip((ids, cross, clicks), data.batch(BATCH))) for _ in range(DATA_BATCHES)]
    run_dir = pathlib.Path(args.run_dir)
    window: Optional[tuple[float, float]] = None
    counted, step, parent = 0, 0, os.getppid()
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=index == 0, config=config,
                                           log_step_count_steps=0) as sess:
        while True:
            sess.run(train_op, feed_dict=feeds[step % DATA_BATCHES])
            step += 1
            now = time.time()
            if step == WARMUP_STEPS:
                (run_dir / f"ready-{index}").write_text("ready")
            if window is None:
                if step >= WARMUP_STEPS and (run_dir / "go").exists():
                    start_at, duration = json.loads((run_dir / "go").read_text())
                    window = (start_at, start_at + duration)
                continue
            if now < window[0]:
                continue
            if now < window[1]:
                counted += 1
                continue
            (run_dir / f"result-{index}.tmp").write_text(json.dumps({"steps": counted, "seconds": window[1] - window[0]}))
            (run_dir / f"result-{index}.tmp").rename(run_dir / f"result-{index}.json")
            # Idle until the parent stops the cluster (it kills the process group).
            while os.getppid() == parent and time.time() < window[1] + 120:
                time.sleep(0.2)
            os._exit(0)


# ----------------------------------------------------------------------------- bytes on the wire

SOCKET_LINE = re.compile(r"^\d+\s+\d+\s+(\S+)\s+(\S+)\s+users:\(\((.*)\)\)")
"""A socket's line of ``ss -tinpH state established`` (no state column): queues, addresses, owners."""
PID = re.compile(r"pid=(\d+)")
RECEIVED = re.compile(r"bytes_received:(\d+)")


def received_by_socket(pids: set[int]) -> dict[tuple[str, str], tuple[int, int]]:
    """(local, peer) -> (pid, bytes received so far) of every established TCP socket of ``pids``."""
    listing = subprocess.run(["ss", "-tinpH", "state", "established"], check=True, capture_output=True,
                             text=True).stdout.splitlines()
    sockets: dict[tuple[str, str], tuple[int, int]] = {}
    current: Optional[tuple[tuple[str, str], int]] = None
    for line in listing:
        match = SOCKET_LINE.match(line.strip()) if not line.startswith("\t") else None
        if match:
            owners = {int(p) for p in PID.findall(match.group(3))} & pids
            current = ((match.group(1), match.group(2)), owners.pop()) if owners else None
            continue
        received = RECEIVED.search(line)
        if current is not None and received:
            sockets[current[0]] = (current[1], int(received.group(1)))
            current = None
    return sockets


def received_between(before: dict[tuple[str, str], tuple[int, int]],
                     after: dict[tuple[str, str], tuple[int, int]]) -> dict[int, int]:
    """Bytes each process received in between (a socket opened in between counts from 0)."""
    by_pid: dict[int, int] = {}
    for key, (pid, total) in after.items():
        by_pid[pid] = by_pid.get(pid, 0) + total - before.get(key, (pid, 0))[1]
    return by_pid


# ----------------------------------------------------------------------------- one run (the parent)

def run_once(backend: str, rows: int, duration: float, timeout: float = 600.0) -> dict[str, Any]:
    ports = training.free_ports(4)
    cluster = {"ps": [f"127.0.0.1:{p}" for p in ports[:2]], "worker": [f"127.0.0.1:{p}" for p in ports[2:]]}
    run_dir = pathlib.Path(tempfile.mkdtemp(prefix=f"tg-wire-{backend}-"))
    env = dict(training.child_env(keep_openblas_env=False), TENSORGRID_DATA_CHANNEL_UNIX="0")
    tasks = [("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1)]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for job, index in tasks:
            with open(run_dir / f"{job}-{index}.log", "wb") as log:
                processes.append(subprocess.Popen(
                    [sys.executable, __file__, "task", "--backend", backend, "--job", job, "--index", str(index),
                     "--cluster", json.dumps(cluster), "--rows", str(rows), "--run-dir", str(run_dir)],
                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + timeout
        wait_for(run_dir, ["ready-0", "ready-1"], deadline, processes)
        start_at = time.time() + 1.0
        (run_dir / "go.tmp").write_text(json.dumps([start_at, duration]))
        (run_dir / "go.tmp").rename(run_dir / "go")
        pids = {p.pid for p in processes}
        time.sleep(max(0.0, start_at - time.time()))
        before = received_by_socket(pids)
        time.sleep(max(0.0, start_at + duration - time.time()))
        after = received_by_socket(pids)
        wait_for(run_dir, ["result-0.json", "result-1.json"], deadline, processes)
        results = [json.loads((run_dir / f"result-{i}.json").read_text()) for i in range(2)]
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        shutil.rmtree(run_dir, ignore_errors=True)
    received = received_between(before, after)
    steps = sum(r["steps"] for r in results)
    to_ps = sum(received.get(p.pid, 0) for p, (job, _) in zip(processes, tasks) if job == "ps")
    to_workers = sum(received.get(p.pid, 0) for p, (job, _) in zip(processes, tasks) if job == "worker")
    return {"backend": backend, "rows": rows, "worker_steps": steps,
            "worker_steps_per_s": sum(r["steps"] / r["seconds"] for r in results),
            "bytes_per_step_ps_to_workers": to_workers / max(1, steps),
            "bytes_per_step_workers_to_ps": to_ps / max(1, steps)}


def wait_for(run_dir: pathlib.Path, names: list[str], deadline: float, processes: list[subprocess.Popen[bytes]]) -> None:
    while not all((run_dir / name).exists() for name in names):
        if any(p.poll() is not None for p in processes):
            raise RuntimeError(f"a task exited early:\n{logs_of(run_dir)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster did not produce {names} in time:\n{logs_of(run_dir)}")
        time.sleep(0.1)


def logs_of(run_dir: pathlib.Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(run_dir.glob("*.log")))


# ----------------------------------------------------------------------------- report

def summarize(runs: list[dict[str, Any]], rows: int) -> dict[str, Any]:
    keys = ("worker_steps_per_s", "bytes_per_step_ps_to_workers", "bytes_per_step_workers_to_ps")
    by_backend = {backend: {key: statistics.median(r[key] for r in runs if r["backend"] == backend) for key in keys}
                  for backend in {r["backend"] for r in runs}}
    ratios = {}
    if set(BACKENDS) <= set(by_backend):
        ratios = {key: by_backend["tensorgrid"][key] / by_backend["tensorflow"][key] for key in keys}
    return {"rows": rows, "table_bytes": rows * wide_deep_click.EMBEDDING_DIM * 4, "backends": by_backend,
            "ratio_tensorgrid_vs_tensorflow": ratios, "runs": runs}


def table(cases: list[dict[str, Any]]) -> str:
    lines = [f"rows-touched bytes per step: {ROWS_BYTES_PER_STEP:,} each way (+ {DENSE_BYTES:,} of dense weights)",
             "| table rows | backend | worker steps/s | bytes/step ps -> workers | bytes/step workers -> ps |",
             "|---|---|---|---|---|"]
    for case in cases:
        for backend, figures in sorted(case["backends"].items(), reverse=True):
            lines.append(f"| {case['rows']:,} | {backend} | {figures['worker_steps_per_s']:.1f} | "
                         f"{figures['bytes_per_step_ps_to_workers']:,.0f} | {figures['bytes_per_step_workers_to_ps']:,.0f} |")
        ratio = case["ratio_tensorgrid_vs_tensorflow"]
        if ratio:
            lines.append(f"| {case['rows']:,} | **tensorgrid / TF** | **{ratio['worker_steps_per_s']:.2f}** | "
                         f"**{ratio['bytes_per_step_ps_to_workers']:.2f}** | **{ratio['bytes_per_step_workers_to_ps']:.2f}** |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    task = sub.add_parser("task", help=argparse.SUPPRESS)
    task.add_argument("--backend", choices=BACKENDS, required=True)
    task.add_argument("--job", choices=("ps", "worker"), required=True)
    task.add_argument("--index", type=int, required=True)
    task.add_argument("--cluster", required=True)
    task.add_argument("--rows", type=int, required=True)
    task.add_argument("--run-dir", required=True)
    parser.add_argument("--rows", default="1000000", help="comma-separated table sizes (default 1000000)")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--repeats", type=int, default=2, help="runs per size and backend, interleaved (default 2)")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds in each measuring window (default 8)")
    args = parser.parse_args()
    if args.command == "task":
        return run_task(args)
    backends = [b for b in args.backends.split(",") if b]
    unknown = set(backends) - set(BACKENDS)
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}; valid are {', '.join(BACKENDS)}")
    cases = []
    for rows in (int(r) for r in args.rows.split(",") if r):
        if rows < 4 * BATCH:
            parser.error(f"--rows {rows} is too small: at least {4 * BATCH} (4 fields of ids)")
        runs = []
        for repeat in range(args.repeats):
            for backend in backends[repeat % len(backends):] + backends[:repeat % len(backends)]:
                result = run_once(backend, rows, args.duration)
                runs.append(result)
                print(f"  {rows} rows {backend} run {repeat + 1}: {result['worker_steps_per_s']:.1f} worker steps/s, "
                      f"{result['bytes_per_step_ps_to_workers']:,.0f} B/step down, "
                      f"{result['bytes_per_step_workers_to_ps']:,.0f} B/step up", file=sys.stderr, flush=True)
        cases.append(summarize(runs, rows))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "wide_deep_wire", "batch": BATCH, "duration_s": args.duration,
                                   "rows_bytes_per_step": ROWS_BYTES_PER_STEP, "dense_bytes": DENSE_BYTES,
                                   "cases": cases}, indent=1) + "\n")
    print(table(cases))
    return 0


if __name__ == "__main__":
    # tensorgrid's tasks talk mutual TLS, as users' do: a CA for this run, inherited by every task.
    with certificates.loopback_tls_for_this_process("tensorgrid wire benchmark"):
        sys.exit(main())
