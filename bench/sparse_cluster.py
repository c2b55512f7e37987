"""The distributed case of ``bench/sparse_training.py``: its models on 2 PS and 2 workers.

Why a module of its own: the in-process case is one child process per run; this one is a
cluster per run (every task a process on 127.0.0.1, variables placed by
``replica_device_setter``, a ``MonitoredTrainingSession`` per worker, async Adagrad), with
its own task program, measuring window and profiler.

Variants, interleaved in a rotating order within each repeat:

- ``tensorgrid``: mutual TLS as users get it (a CA made for the run); on one machine the
  data channel goes over the tasks' Unix sockets, so TLS covers gRPC's control calls only;
- ``tensorgrid-plaintext``: ``TENSORGRID_INSECURE=1``;
- ``tensorflow`` and ``tensorflow-1thread``: TensorFlow 2.21's ``tf.compat.v1`` runtime
  (``tf.train.Server``), with its default thread pools and with one intra-op and one
  inter-op thread per task.

``--tcp`` (``TENSORGRID_DATA_CHANNEL_UNIX=0``) sends tensorgrid's tensors over loopback TCP,
as tasks on different machines do; TLS then encrypts them. Every worker draws 16 batches
first (its own stream) and cycles them; after 20 warm-up steps every worker counts its
steps in one common window (``--duration`` seconds). Reported per variant: the median and
min-max over the runs of worker steps/s (the sum over workers), the CPU milliseconds of
every task per worker step, and the context switches of all tasks' threads per worker step (how
often a step's work waits for, or hands over to, another thread: what costs most on a busy machine).

``TENSORGRID_BENCH_PROFILE=DIR`` profiles worker 0's step loop during the window with
cProfile (``DIR/<variant>-<model>-worker0.prof``): where a worker's Python time goes.
"""

from __future__ import annotations

import cProfile
import json
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import training  # the sibling benchmark: free ports, the tasks' environment, CPU time of a process
import wide_deep_wire  # the sibling benchmark of the same cluster shape: waiting on its tasks' files

VARIANTS = ("tensorgrid", "tensorgrid-plaintext", "tensorflow", "tensorflow-1thread")
PS_TASKS = 2
WORKERS = 2
WARMUP_STEPS = 20
PROFILE_ENV = "TENSORGRID_BENCH_PROFILE"


def backend_of(variant: str) -> str:
    return "tensorflow" if variant.startswith("tensorflow") else "tensorgrid"


# ----------------------------------------------------------------------------- one task (a child process)

def run_task(variant: str, model: str, rows: int, job: str, index: int, cluster_json: str, run_dir_name: str) -> int:
    import sparse_training  # the models (imported here: sparse_training imports this module)

    tf = sparse_training.import_tf(backend_of(variant))
    cluster = tf.train.ClusterSpec(json.loads(cluster_json))
    filters = ["/job:ps", f"/job:{job}/task:{index}"]
    config = tf.ConfigProto(device_filters=filters)
    if variant == "tensorflow-1thread":
        config = tf.ConfigProto(device_filters=filters, intra_op_parallelism_threads=1,
                                inter_op_parallelism_threads=1)
    server = tf.train.Server(cluster, job_name=job, task_index=index, config=config)
    if job == "ps":
        server.join()
        return 0
    with tf.device(tf.train.replica_device_setter(worker_device=f"/job:worker/task:{index}", cluster=cluster)):
        feeds, loss, batches = sparse_training.build(tf, model, rows, stream=index)
        global_step = tf.train.get_or_create_global_step()
        train_op = sparse_training.train_op(tf, model, loss, global_step)
    feed_dicts = [dict(zip(feeds, batch)) for batch in batches]
    run_dir = pathlib.Path(run_dir_name)
    profile_dir = os.environ.get(PROFILE_ENV, "") if index == 0 else ""
    profiler: Optional[cProfile.Profile] = None
    window: Optional[tuple[float, float]] = None
    counted, step, parent = 0, 0, os.getppid()
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=index == 0, config=config,
                                           log_step_count_steps=0) as sess:
        while True:
            sess.run(train_op, feed_dict=feed_dicts[step % len(feed_dicts)])
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
                if profile_dir and profiler is None:
                    profiler = cProfile.Profile()
                    profiler.enable()
                counted += 1
                continue
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(str(pathlib.Path(profile_dir) / f"{variant}-{model}-worker{index}.prof"))
            result = {"steps": counted, "seconds": window[1] - window[0]}
            (run_dir / f"result-{index}.tmp").write_text(json.dumps(result))
            (run_dir / f"result-{index}.tmp").rename(run_dir / f"result-{index}.json")
            # Idle until the parent stops the cluster (it kills the process group).
            while os.getppid() == parent and time.time() < window[1] + 120:
                time.sleep(0.2)
            os._exit(0)


# ----------------------------------------------------------------------------- one run (the parent)

def run_once(variant: str, model: str, rows: int, duration: float, tcp: bool, timeout: float = 600.0) -> dict[str, Any]:
    ports = training.free_ports(PS_TASKS + WORKERS)
    cluster = {"ps": [f"127.0.0.1:{p}" for p in ports[:PS_TASKS]],
               "worker": [f"127.0.0.1:{p}" for p in ports[PS_TASKS:]]}
    run_dir = pathlib.Path(tempfile.mkdtemp(prefix=f"tg-sparse-{variant}-"))
    env = training.child_env(keep_openblas_env=False)
    if tcp:
        env["TENSORGRID_DATA_CHANNEL_UNIX"] = "0"
    if variant == "tensorgrid-plaintext":
        env.pop("TENSORGRID_TLS_DIR", None)
        env["TENSORGRID_INSECURE"] = "1"
    tasks = [("ps", i) for i in range(PS_TASKS)] + [("worker", i) for i in range(WORKERS)]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for job, index in tasks:
            with open(run_dir / f"{job}-{index}.log", "wb") as log:
                processes.append(subprocess.Popen(
                    [sys.executable, str(BENCH / "sparse_training.py"), "--task", variant, model, job, str(index),
                     json.dumps(cluster), str(run_dir), "--rows", str(rows)],
                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + timeout
        wide_deep_wire.wait_for(run_dir, [f"ready-{i}" for i in range(WORKERS)], deadline, processes)
        start_at = time.time() + 1.0
        (run_dir / "go.tmp").write_text(json.dumps([start_at, duration]))
        (run_dir / "go.tmp").rename(run_dir / "go")
        time.sleep(max(0.0, start_at - time.time()))
        cpu_before = [training._cpu_seconds(p.pid) for p in processes]
        switches_before = [context_switches(p.pid) for p in processes]
        time.sleep(max(0.0, start_at + duration - time.time()))
        cpu = [training._cpu_seconds(p.pid) - before for p, before in zip(processes, cpu_before)]
        switches = [context_switches(p.pid) - before for p, before in zip(processes, switches_before)]
        wide_deep_wire.wait_for(run_dir, [f"result-{i}.json" for i in range(WORKERS)], deadline, processes)
        results = [json.loads((run_dir / f"result-{i}.json").read_text()) for i in range(WORKERS)]
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        shutil.rmtree(run_dir, ignore_errors=True)
    steps = sum(r["steps"] for r in results)
    return {"variant": variant, "worker_steps_per_s": sum(r["steps"] / r["seconds"] for r in results),
            "cpu_ms_per_worker_step": {f"{job}{index}": seconds / max(1, steps) * 1e3
                                       for (job, index), seconds in zip(tasks, cpu)},
            "context_switches_per_worker_step": sum(switches) / max(1, steps)}


def context_switches(pid: int) -> int:
    """Voluntary and involuntary context switches of every thread of a process so far (Linux
    /proc; 0 elsewhere or once it exited): how often a step's work waits for, or hands over to,
    another thread."""
    total = 0
    try:
        threads = list(pathlib.Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0
    for thread in threads:
        try:
            status = (thread / "status").read_text()
        except OSError:
            continue
        total += sum(int(line.split()[1]) for line in status.splitlines() if "ctxt_switches:" in line)
    return total


def measure(model: str, variants: list[str], rows: int, duration: float, repeats: int, tcp: bool) -> dict[str, Any]:
    """Every variant ``repeats`` times, interleaved; medians, min-max and the ratio to the best TF."""
    runs: dict[str, list[dict[str, Any]]] = {variant: [] for variant in variants}
    for repeat in range(repeats):
        shift = repeat % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            result = run_once(variant, model, rows, duration, tcp)
            runs[variant].append(result)
            print(f"{model} distributed {variant}: {result['worker_steps_per_s']:.1f} worker steps/s",
                  file=sys.stderr, flush=True)
    summary: dict[str, Any] = {}
    for variant, results in runs.items():
        rates = [r["worker_steps_per_s"] for r in results]
        tasks = results[0]["cpu_ms_per_worker_step"]
        summary[variant] = {"median": statistics.median(rates), "min": min(rates), "max": max(rates),
                            "cpu_ms_per_worker_step": {task: statistics.median(r["cpu_ms_per_worker_step"][task]
                                                                               for r in results) for task in tasks},
                            "context_switches_per_worker_step": statistics.median(
                                r["context_switches_per_worker_step"] for r in results),
                            "runs": rates}
    best_tf = max((summary[v]["median"] for v in variants if backend_of(v) == "tensorflow"), default=None)
    for variant in variants:
        if best_tf and backend_of(variant) == "tensorgrid":
            summary[variant]["vs_best_tf"] = summary[variant]["median"] / best_tf
    return summary


def table(model: str, summary: dict[str, Any]) -> str:
    lines = []
    for variant, figures in summary.items():
        cpu = ", ".join(f"{task} {ms:.2f}" for task, ms in figures["cpu_ms_per_worker_step"].items())
        ratio = f"  **{figures['vs_best_tf']:.2f}** of best TF" if "vs_best_tf" in figures else ""
        lines.append(f"{model:10s} {variant:21s} {figures['median']:7.1f} ({figures['min']:.1f}-{figures['max']:.1f})"
                     f" worker steps/s; CPU ms/step {cpu}; context switches/step "
                     f"{figures['context_switches_per_worker_step']:.0f}{ratio}")
    return "\n".join(lines)
