"""Asynchronous training on data handed out in shards at run time, each record once per epoch.

Every task runs this program with its own ``TF_CONFIG``; the workers read their input through
``tf.data.experimental.dynamic_shard_records``: task 0 (the chief, else worker 0) hands the shards
out as workers ask, so a worker may join late, die or leave, and every record is still trained once
per epoch (docs/data.md, "Dynamic shards")::

    tensorgrid local --ps 1 --workers 3 -- python examples/dynamic_shards_regression.py

The model is a linear regression on synthetic records (``y = x @ w_true``). ``--trained-records
DIR`` makes each worker append the record numbers of every step it trained to ``DIR/<task>.txt``
(one line per step); ``--hold-after-steps N`` makes a worker stop after N steps, in the middle of
a shard, and wait to be killed; ``--pause-while-exists PATH`` holds a worker back while PATH
exists: with them, tests/runtime/data/test_dynamic_shards_cluster.py proves the exactly-once promise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Optional, Sequence

import numpy as np

import tensorgrid as tf

FEATURES = 4


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=960, help="records in the data set (default 960)")
    parser.add_argument("--shard-size", type=int, default=32, help="records per shard (default 32)")
    parser.add_argument("--batch-size", type=int, default=16, help="records per step; must divide --shard-size")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lease-seconds", type=float, default=30.0,
                        help="how long a silent worker keeps its shard before it goes back to the queue")
    parser.add_argument("--step-seconds", type=float, default=0.0, help="extra time per step, as a bigger model")
    parser.add_argument("--trained-records", help="a folder: each worker appends the records it trained there")
    parser.add_argument("--hold-after-steps", type=int, default=0,
                        help="stop after this many steps (mid-shard) and wait to be killed (0: never)")
    parser.add_argument("--pause-while-exists", metavar="PATH",
                        help="after each step, wait while this file exists (a test's way to let another worker in)")
    parser.add_argument("--checkpoint-dir", default=os.environ.get("CHECKPOINT_DIR"))
    args = parser.parse_args(argv)
    if args.shard_size % args.batch_size:
        parser.error(f"--batch-size {args.batch_size} must divide --shard-size {args.shard_size}, so that a step "
                     f"never trains records of two shards")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    cluster = resolver.cluster_spec()
    job, index = resolver.task_type, resolver.task_id
    server = tf.train.Server(cluster, job_name=job, task_index=index)
    if job == "ps":
        server.join()
    is_chief = job == "chief" or (job == "worker" and index == 0 and "chief" not in cluster.jobs)

    rng = np.random.RandomState(0)
    features = rng.randn(args.records, FEATURES).astype(np.float32)
    labels = features @ np.arange(1, FEATURES + 1, dtype=np.float32).reshape(FEATURES, 1)
    with tf.device(tf.train.replica_device_setter(cluster=cluster, worker_device=f"/job:{job}/task:{index}")):
        records = tf.data.experimental.dynamic_shard_records(
            num_records=args.records, shard_size=args.shard_size, num_epochs=args.epochs,
            lease_seconds=args.lease_seconds)
        record_ids = records.batch(args.batch_size).make_one_shot_iterator().get_next()
        x = tf.gather(tf.constant(features), record_ids)
        y = tf.gather(tf.constant(labels), record_ids)
        weights = tf.get_variable("weights", [FEATURES, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(x, weights) - y))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=global_step)

    trained_log = None
    if args.trained_records:
        os.makedirs(args.trained_records, exist_ok=True)
        trained_log = open(os.path.join(args.trained_records, f"{job}{index}.txt"), "a")
    steps = 0
    print(f"{job}:{index} {'(chief) ' if is_chief else ''}training {args.epochs} epochs of {args.records} records",
          flush=True)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                           checkpoint_dir=args.checkpoint_dir if is_chief else None,
                                           hooks=[tf.data.experimental.DynamicShardsHook(is_chief)]) as sess:
        while not sess.should_stop():
            trained, loss_value, _ = sess.run([record_ids, loss, train_op])
            steps += 1
            if trained_log is not None:
                trained_log.write(" ".join(str(int(r)) for r in trained) + "\n")
                trained_log.flush()
            if steps % 20 == 0:
                print(f"{job}:{index} step {steps} loss {loss_value:.4f}", flush=True)
            if steps == args.hold_after_steps:
                print(f"{job}:{index} holding after {steps} steps", flush=True)
                time.sleep(3600)
            time.sleep(args.step_seconds)
            while args.pause_while_exists and os.path.exists(args.pause_while_exists):
                time.sleep(0.05)
    print(f"{job}:{index} done after {steps} steps; last loss {loss_value if steps else float('nan'):.4f}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
