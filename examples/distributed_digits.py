"""Between-graph replicated training of the digits MLP on parameter servers, TF1 style.

Every task runs this same program with its own ``TF_CONFIG`` (the operator sets it in
each pod; ``tensorgrid local`` sets it on loopback). PS tasks serve variables until
training ends; each worker builds the model with ``replica_device_setter`` (variables
on the PS, computation on itself) and trains through a ``MonitoredTrainingSession``;
the chief (worker 0, or the ``chief`` task) initializes, checkpoints and reports
the test accuracy::

    tensorgrid local --ps 1 --workers 2 -- python examples/distributed_digits.py
    tensorgrid local --ps 1 --workers 2 --sync -- python examples/distributed_digits.py

Asynchronous by default; synchronous (``SyncReplicasOptimizer``) with ``--sync`` or
``TENSORGRID_SYNC=1``. ``--backend tensorflow`` runs the same program on TensorFlow.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any, Optional, Sequence

import numpy as np

from tensorgrid import data

HIDDEN_UNITS = 128


def import_tf(backend: str) -> Any:
    if backend == "tensorflow":
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


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1500, help="global steps to train (default 1500)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--sync", action="store_true", default=os.environ.get("TENSORGRID_SYNC") == "1",
                        help="synchronous training with SyncReplicasOptimizer (default: $TENSORGRID_SYNC)")
    parser.add_argument("--checkpoint-dir", default=os.environ.get("CHECKPOINT_DIR"),
                        help="where the chief saves checkpoints (default: $CHECKPOINT_DIR or a temp dir)")
    parser.add_argument("--checkpoint-every", type=int, default=500, help="global steps between checkpoints")
    parser.add_argument("--log-every", type=int, default=250)
    parser.add_argument("--pace-ms", type=float, default=0.0,
                        help="make each of a worker's steps last at least this long (to watch a job, or disrupt it, "
                             "while it trains: the end-to-end suite's fault tests; default 0, as fast as it goes)")
    parser.add_argument("--min-accuracy", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=("tensorgrid", "tensorflow"), default="tensorgrid")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    tf = import_tf(args.backend)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    cluster = resolver.cluster_spec()
    job, index = resolver.task_type, resolver.task_id
    if not cluster.jobs:
        print("TF_CONFIG is not set: run me with `tensorgrid local --ps 1 --workers 2 -- python "
              "examples/distributed_digits.py` or in a TrainingJob", file=sys.stderr)
        return 2
    server = tf.train.Server(cluster, job_name=job, task_index=index)
    if job == "ps":
        server.join()
        return 0

    is_chief = job == "chief" or (job == "worker" and index == 0 and "chief" not in cluster.jobs)
    replicas = len(cluster.as_dict().get("worker", [])) + len(cluster.as_dict().get("chief", []))
    digits = data.load_digits(seed=args.seed)
    batches = data.Batches(digits.train.images, digits.train.labels, batch_size=args.batch_size,
                           seed=args.seed + 1000 * (index + (job == "chief") * 100))

    with tf.device(tf.train.replica_device_setter(worker_device=f"/job:{job}/task:{index}", cluster=cluster)):
        images = tf.placeholder(tf.float32, [None, 64], name="images")
        labels = tf.placeholder(tf.int64, [None], name="labels")
        hidden = tf.nn.relu(dense(tf, images, HIDDEN_UNITS, "hidden", args.seed))
        logits = dense(tf, hidden, 10, "softmax_linear", args.seed + 1)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))
        # Written by the chief every 100 steps (MonitoredTrainingSession's summaries) for
        # TensorBoard; the operator shows the last one in `kubectl get tj` (LOSS).
        tf.summary.scalar("loss", loss)
        global_step = tf.train.get_or_create_global_step()
        optimizer = tf.train.GradientDescentOptimizer(args.learning_rate)
        hooks = [tf.train.StopAtStepHook(last_step=args.steps)]
        if args.sync:
            optimizer = tf.train.SyncReplicasOptimizer(optimizer, replicas_to_aggregate=replicas,
                                                       total_num_replicas=replicas)
            hooks.append(optimizer.make_session_run_hook(is_chief))
        train_op = optimizer.minimize(loss, global_step=global_step)

    test_feed = {images: digits.test.images, labels: digits.test.labels}
    final = tf.train.FinalOpsHook(accuracy, test_feed)
    checkpoint_dir = args.checkpoint_dir or tempfile.mkdtemp(prefix="tensorgrid-digits-")
    config = tf.ConfigProto(device_filters=["/job:ps", f"/job:{job}/task:{index}"])
    mode = "sync" if args.sync else "async"
    print(f"{job}:{index} {'(chief) ' if is_chief else ''}training {mode} to global step {args.steps} "
          f"with {replicas} replicas", flush=True)
    started = time.perf_counter()
    local_steps = 0
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                           checkpoint_dir=checkpoint_dir if is_chief else None,
                                           hooks=hooks, chief_only_hooks=[final], config=config,
                                           save_checkpoint_steps=args.checkpoint_every, log_step_count_steps=0) as sess:
        while not sess.should_stop():
            step_started = time.perf_counter()
            batch_images, batch_labels = batches.next_batch()
            _, step, batch_loss = sess.run([train_op, global_step, loss],
                                           feed_dict={images: batch_images, labels: batch_labels})
            local_steps += 1
            if args.pace_ms > 0:
                time.sleep(max(0.0, args.pace_ms / 1000 - (time.perf_counter() - step_started)))
            if local_steps % args.log_every == 0:
                rate = local_steps / (time.perf_counter() - started)
                print(f"{job}:{index} global step {step:5d}  loss {batch_loss:.4f}  {rate:6.1f} local steps/s",
                      flush=True)
    elapsed = time.perf_counter() - started
    print(f"{job}:{index} done: {local_steps} local steps in {elapsed:.1f} s", flush=True)
    if not is_chief:
        return 0
    test_accuracy = float(final.final_ops_values)
    print(f"test accuracy {test_accuracy:.4f} on {len(digits.test)} held-out digits ({mode}, {replicas} workers, "
          f"checkpoints in {checkpoint_dir})", flush=True)
    if test_accuracy < args.min_accuracy:
        print(f"FAILED: test accuracy {test_accuracy:.4f} is below --min-accuracy {args.min_accuracy}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
