"""One task of a small asynchronous wide-and-deep job, for the PS failover tests and
bench/ps_failover.py: run as every task of a cluster (its TF_CONFIG says which).

A PS serves until training ends. A worker trains a click model with no checkpoint
directory at all, so the parameter servers hold the only copy of the model: an
embedding table (``--rows`` x 16, partitioned over the PS tasks, rows updated sparsely
by Adagrad), a dense layer, the global step and ``examples_seen`` (a counter every step
adds its batch size to). Every ``--log-every`` local steps it prints
``<job>:<index> global step <s> examples <e> at <unix time>``, the lines the test and the
benchmark read.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Optional, Sequence

import numpy as np

import tensorgrid as tf

EMBEDDING_WIDTH = 16
FIELDS = 4


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=600, help="global steps to train")
    parser.add_argument("--rows", type=int, default=20000, help="rows of the embedding table")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--pace-ms", type=float, default=0.0, help="least milliseconds per local step")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    cluster = resolver.cluster_spec()
    job, index = resolver.task_type, resolver.task_id
    server = tf.train.Server(cluster, job_name=job, task_index=index)
    if job == "ps":
        server.join()
        return 0
    ps_tasks = len(cluster.as_dict()["ps"])
    rng = np.random.default_rng(index)
    with tf.device(tf.train.replica_device_setter(worker_device=f"/job:{job}/task:{index}", cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        examples_seen = tf.Variable(0, dtype=tf.int64, name="examples_seen", trainable=False)
        ids = tf.placeholder(tf.int64, [None, FIELDS], name="ids")
        clicks = tf.placeholder(tf.float32, [None], name="clicks")
        table = tf.get_variable("embeddings", [args.rows, EMBEDDING_WIDTH],
                                initializer=tf.random_normal_initializer(stddev=0.05),
                                partitioner=tf.fixed_size_partitioner(ps_tasks))
        rows = tf.reshape(tf.nn.embedding_lookup(table, ids), [-1, FIELDS * EMBEDDING_WIDTH])
        weights = tf.get_variable("dense", [FIELDS * EMBEDDING_WIDTH, 1],
                                  initializer=tf.random_normal_initializer(stddev=0.05))
        logits = tf.reshape(tf.matmul(rows, weights), [-1])
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=clicks, logits=logits))
        train = tf.train.AdagradOptimizer(0.1).minimize(loss, global_step=global_step)
        with tf.control_dependencies([train]):
            step_op = tf.assign_add(examples_seen, tf.shape(ids, out_type=tf.int64)[0])
    hooks = [tf.train.StopAtStepHook(last_step=args.steps)]
    config = tf.ConfigProto(device_filters=["/job:ps", f"/job:{job}/task:{index}"])
    is_chief = index == 0
    local_steps = 0
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, checkpoint_dir=None,
                                           hooks=hooks, config=config, log_step_count_steps=0) as sess:
        while not sess.should_stop():
            started = time.perf_counter()
            batch = rng.integers(0, args.rows, size=(args.batch_size, FIELDS))
            labels = (batch[:, 0] % 3 == 0).astype(np.float32)
            _, step, seen = sess.run([step_op, global_step, examples_seen], {ids: batch, clicks: labels})
            local_steps += 1
            if args.pace_ms > 0:
                time.sleep(max(0.0, args.pace_ms / 1000 - (time.perf_counter() - started)))
            if local_steps % args.log_every == 0:
                print(f"{job}:{index} global step {step} examples {seen} at {time.time():.3f}", flush=True)
    print(f"{job}:{index} done: {local_steps} local steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
