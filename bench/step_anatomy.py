"""Where one training step's time goes: a worker step of the training benchmark, timed phase by phase.

A diagnostic, not a comparison: one parameter server (a separate process) and one
worker (this process), the benchmark's MLP (``bench/training.py``), asynchronous
SGD. After a warm-up, the worker's registered partition is instrumented in place
(every kernel timed, every Recv's arrival stamped, pushes and the RunGraph call
to the PS timed) and ``--steps`` steps are run. Printed, p50 and mean per step:

- until the variables arrived: RunGraph to the PS, the PS reads its variables and
  pushes them (2.68 MB at H=512) over the worker's data channel;
- compute: the worker's kernels (forward and backward pass, loss);
- push of the gradients to the PS (wire and acknowledgement);
- last Recv: when the PS finished its updates (its control edges arrive);
- the partition, and the whole step as the client sees it;
- the worker process's CPU time per step.

    .venv/bin/python bench/step_anatomy.py [--hidden 512] [--steps 1000]

It reads runtime internals (the worker's registered partitions); it is a
measuring tool, not an API user. Like the training benchmark, it runs without
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (it restarts itself without them).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import training  # the sibling benchmark: model, ports, child environment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    if any(name in os.environ for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")):
        # As in the training benchmark: numpy picks this processor's own kernels.
        os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]], training.child_env(False))

    ps_port, worker_port = training.free_ports(2)
    cluster = {"ps": [f"127.0.0.1:{ps_port}"], "worker": [f"127.0.0.1:{worker_port}"]}
    ps = subprocess.Popen([sys.executable, training.__file__, "task", "--backend", "tensorgrid", "--job", "ps",
                           "--index", "0", "--cluster", json.dumps(cluster), "--hidden", str(args.hidden),
                           "--run-dir", "."], env=training.child_env(False), start_new_session=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        report(args.hidden, args.steps, cluster)
    finally:
        os.killpg(ps.pid, signal.SIGKILL)
        ps.wait(timeout=30)
    os._exit(0)  # at once: this process's server would otherwise report to the PS just stopped


def report(hidden: int, steps: int, cluster: dict[str, list[str]]) -> None:
    import tensorgrid as tf
    from tensorgrid.distributed.rpc import clients

    spec = tf.train.ClusterSpec(cluster)
    server = tf.train.Server(spec, job_name="worker", task_index=0)
    with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:0", cluster=spec)):
        x = tf.placeholder(tf.float32, [None, training.INPUT])
        y = tf.placeholder(tf.int64, [None])
        h = tf.nn.relu(training.dense(tf, x, hidden, "hidden1", 1))
        h = tf.nn.relu(training.dense(tf, h, hidden, "hidden2", 2))
        logits = training.dense(tf, h, training.CLASSES, "softmax_linear", 3)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        global_step = tf.train.get_or_create_global_step()
        train = tf.train.GradientDescentOptimizer(training.LEARNING_RATE).minimize(loss, global_step=global_step)
    rng = np.random.default_rng(0)
    feed = {x: rng.standard_normal((training.BATCH, training.INPUT), dtype=np.float32),
            y: rng.integers(0, training.CLASSES, training.BATCH)}
    now: dict[str, Any] = {}

    def timed(fn: Callable[..., Any], key: str) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args)
            finally:
                now[key] = now.get(key, 0.0) + time.perf_counter() - started
        return run

    def stamped_recv(kernel: Callable[..., Any]) -> Callable[..., Any]:
        def recv(ctx: Any, step: Any, done: Callable[..., None], *args: Any) -> None:
            def arrived(*result: Any, **failure: Any) -> None:
                now.setdefault("recvs", []).append(time.perf_counter())
                done(*result, **failure)
            kernel(ctx, step, arrived, *args)
        return recv

    config = tf.ConfigProto(device_filters=["/job:ps", "/job:worker/task:0"])
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True, config=config,
                                           log_step_count_steps=0) as sess:
        for _ in range(100):
            sess.run([train, global_step], feed)
        for registered in server.worker._graphs.values():
            for node in registered.plan.nodes:
                if node.is_async:
                    node.kernel = stamped_recv(node.kernel)
                elif node.ctx.op_type != "_Send":
                    node.kernel = timed(node.kernel, "compute")
        run_graph = server.worker.run_graph

        def partition(*args: Any) -> Any:
            now["start"] = time.perf_counter()
            try:
                return run_graph(*args)
            finally:
                now["end"] = time.perf_counter()
        server.worker.run_graph = partition  # type: ignore[method-assign]
        clients.WorkerClient.push_tensors = timed(clients.WorkerClient.push_tensors, "push")  # type: ignore[method-assign]
        phases: dict[str, list[float]] = collections.defaultdict(list)
        cpu_started = time.process_time()
        for _ in range(steps):
            now.clear()
            started = time.perf_counter()
            sess.run([train, global_step], feed)
            phases["step (as the client sees it)"].append(time.perf_counter() - started)
            recvs = sorted(now["recvs"])
            phases["until the variables arrived"].append(recvs[0] - now["start"])
            phases["compute (the worker's kernels)"].append(now["compute"])
            phases["push of the gradients (wire + ack)"].append(now["push"])
            phases["last Recv (the PS's updates done)"].append(recvs[-1] - now["start"])
            phases["the worker's partition"].append(now["end"] - now["start"])
        cpu = (time.process_time() - cpu_started) / steps
    print(f"H={hidden}: {steps} steps, 1 ps + 1 worker, async SGD")
    print(f"{'phase':<40} {'p50 ms':>8} {'mean ms':>8}")
    for name, samples in phases.items():
        print(f"{name:<40} {statistics.median(samples) * 1e3:>8.3f} {statistics.fmean(samples) * 1e3:>8.3f}")
    print(f"{'worker process CPU per step':<40} {cpu * 1e3:>8.3f}", flush=True)


if __name__ == "__main__":
    # Tasks talk mutual TLS, as users' do: a CA for this run, inherited by every task it starts.
    with training.certificates.loopback_tls_for_this_process("tensorgrid benchmark"):
        main()
