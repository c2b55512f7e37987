"""What ``dynamic_shards`` costs a step: the chief's own loop reading shards against ``Dataset.range``.

One process runs a one-task cluster (worker 0, which hosts the shard service) and a
``MonitoredTrainingSession`` with ``DynamicShardsHook`` over a trivial training step (batches of 8
record numbers, a 4-feature linear model, plain SGD), so what the data path costs per step is
most of the step. Cases, run in a rotating order in every round (so the machine's load falls on
all alike): ``range`` (``Dataset.range(n).batch(8)``, no shard service), ``shards64``
(``dynamic_shard_records(shard_size=64)``: a shard every 8 steps) and ``shards8`` (a shard every
step). Reported: the median over ``--rounds`` of the wall ms and the CPU ms (this process's, every
thread: the task's server runs in it) per step, after a warm-up. On a loaded machine the CPU time is
the steadier figure.

    .venv/bin/python bench/dynamic_shards_step.py [--rounds 5] [--steps 400] [--cases range shards64 shards8]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tensorgrid as tf
from tensorgrid.distributed.rpc import ports

BATCH = 8
FEATURES = 4
WARMUP_STEPS = 40
CASES = {"range": 0, "shards64": 64, "shards8": 8}
"""Case name: shard size (0: ``Dataset.range``, no shards)."""


def ms_per_step(server: tf.train.Server, shard_size: int, steps: int, name: str) -> tuple[float, float]:
    """Wall and CPU milliseconds per step of the case with shards of ``shard_size`` (0: ``Dataset.range``)."""
    records = (WARMUP_STEPS + steps) * BATCH
    features = np.random.RandomState(0).randn(records, FEATURES).astype(np.float32)
    with tf.Graph().as_default():
        if shard_size:
            dataset = tf.data.experimental.dynamic_shard_records(num_records=records, shard_size=shard_size, name=name)
        else:
            dataset = tf.data.Dataset.range(records)
        ids = dataset.batch(BATCH).make_one_shot_iterator().get_next()
        x = tf.gather(tf.constant(features), ids)
        weights = tf.get_variable("weights", [FEATURES, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(x, weights) - 1.0))
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(
            loss, global_step=tf.train.get_or_create_global_step())
        with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True,
                                               hooks=[tf.data.experimental.DynamicShardsHook(True)]) as sess:
            for _ in range(WARMUP_STEPS):
                sess.run(train_op)
            started, cpu_started = time.perf_counter(), time.process_time()
            for _ in range(steps):
                sess.run(train_op)
            return ((time.perf_counter() - started) * 1000.0 / steps,
                    (time.process_time() - cpu_started) * 1000.0 / steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400, help="timed steps per case and round")
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    args = parser.parse_args()
    server = tf.train.Server({"worker": [f"localhost:{ports.free_ports(1)[0]}"]}, "worker", 0)
    times: dict[str, list[tuple[float, float]]] = {case: [] for case in args.cases}
    try:
        for round_ in range(args.rounds):
            order = args.cases[round_ % len(args.cases):] + args.cases[:round_ % len(args.cases)]
            for case in order:
                times[case].append(ms_per_step(server, CASES[case], args.steps, f"bench{round_}{case}"))
    finally:
        server.stop()
    print("| case | wall ms per step (median) | min-max | CPU ms per step (median) | min-max | rounds |")
    print("|---|---|---|---|---|---|")
    for case, found in times.items():
        wall, cpu = [w for w, _ in found], [c for _, c in found]
        print(f"| {case} | {statistics.median(wall):.2f} | {min(wall):.2f}-{max(wall):.2f} | "
              f"{statistics.median(cpu):.2f} | {min(cpu):.2f}-{max(cpu):.2f} | {len(found)} |")


if __name__ == "__main__":
    main()
