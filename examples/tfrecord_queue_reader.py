"""The digits from TFRecord files through a TF1 queue pipeline, trained between-graph on parameter servers.

The input is read as TF1 programs (TensorFlow's old ``fully_connected_reader.py``,
``cifar10_input.py``) read it: ``tf.train.string_input_producer`` names the files, a
``tf.TFRecordReader`` reads ``tf.train.Example`` records from them, ``tf.parse_single_example``
decodes each, and ``tf.train.shuffle_batch`` (two enqueue threads) mixes them into batches.
The pipeline runs on each worker (built under ``tf.device`` of the worker, so its queues,
reader and epoch counter stay there); ``replica_device_setter`` puts the model's variables on
the PS. The ``MonitoredTrainingSession`` starts the queue runners; with ``--num-epochs`` a
worker stops when its input ends (the session ends cleanly on the OutOfRangeError), else at
``--steps`` global steps. Every task runs this same program::

    tensorgrid local --ps 1 --workers 2 -- python examples/tfrecord_queue_reader.py

The digits are written as ``--shards`` TFRecord files in ``--data-dir`` first, unless they are
there already (each task writes the same bytes, atomically, so tasks may race). Each worker
prints its mean loss over its first and last ``--log-every`` steps, the chief the test
accuracy. ``--backend tensorflow`` runs the same program on TensorFlow.
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

HIDDEN_UNITS = 64


def import_tf(backend: str) -> Any:
    if backend == "tensorflow":
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
        return tf
    import tensorgrid as tf

    return tf


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "tensorgrid-digits-tfrecord"),
                        help="where the digits' TFRecord files are, or are written (default: a temp dir)")
    parser.add_argument("--shards", type=int, default=4, help="TFRecord files of the training digits (default 4)")
    parser.add_argument("--steps", type=int, default=600, help="global steps to train (default 600)")
    parser.add_argument("--num-epochs", type=int, default=None,
                        help="read the files this many times, then stop (default: until --steps)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--checkpoint-dir", default=os.environ.get("CHECKPOINT_DIR"),
                        help="where the chief saves checkpoints (default: $CHECKPOINT_DIR or a temp dir)")
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--min-accuracy", type=float, default=0.85)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=("tensorgrid", "tensorflow"), default="tensorgrid")
    return parser.parse_args(argv)


def write_digits(tf: Any, digits: Any, data_dir: str, shards: int) -> list[str]:
    """The training digits as ``shards`` TFRecord files of tf.train.Examples {"image": 64 floats, "label": int}."""
    os.makedirs(data_dir, exist_ok=True)
    paths = [os.path.join(data_dir, f"digits-train-{shard:02d}-of-{shards:02d}.tfrecord") for shard in range(shards)]
    for shard, path in enumerate(paths):
        if os.path.exists(path):
            continue
        partial = f"{path}.{os.getpid()}.partial"
        with tf.io.TFRecordWriter(partial) as writer:
            for image, label in zip(digits.train.images[shard::shards], digits.train.labels[shard::shards]):
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image": tf.train.Feature(float_list=tf.train.FloatList(value=image.tolist())),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}))
                writer.write(example.SerializeToString())
        os.replace(partial, path)
    return paths


def input_batches(tf: Any, paths: list[str], args: argparse.Namespace, seed: int) -> tuple[Any, Any]:
    """Shuffled (images, labels) batches read from the TFRecord files by queue runners."""
    filenames = tf.train.string_input_producer(paths, num_epochs=args.num_epochs, seed=seed)
    _, serialized = tf.TFRecordReader().read(filenames)
    features = tf.parse_single_example(serialized, {"image": tf.FixedLenFeature([64], tf.float32),
                                                    "label": tf.FixedLenFeature([], tf.int64)})
    return tf.train.shuffle_batch([features["image"], features["label"]], batch_size=args.batch_size,
                                  capacity=20 * args.batch_size, min_after_dequeue=10 * args.batch_size,
                                  num_threads=2, seed=seed, allow_smaller_final_batch=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    tf = import_tf(args.backend)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    cluster = resolver.cluster_spec()
    job, index = resolver.task_type, resolver.task_id
    if not cluster.jobs:
        print("TF_CONFIG is not set: run me with `tensorgrid local --ps 1 --workers 2 -- python "
              "examples/tfrecord_queue_reader.py` or in a TrainingJob", file=sys.stderr)
        return 2
    server = tf.train.Server(cluster, job_name=job, task_index=index)
    if job == "ps":
        server.join()
        return 0

    is_chief = job == "chief" or (job == "worker" and index == 0 and "chief" not in cluster.jobs)
    digits = data.load_digits(seed=args.seed)
    paths = write_digits(tf, digits, args.data_dir, args.shards)
    worker_device = f"/job:{job}/task:{index}"
    with tf.device(worker_device):
        images, labels = input_batches(tf, paths, args, seed=args.seed + 100 * index + 1)

    with tf.device(tf.train.replica_device_setter(worker_device=worker_device, cluster=cluster)):
        hidden_w = tf.get_variable("hidden/weights", [64, HIDDEN_UNITS],
                                   initializer=tf.truncated_normal_initializer(stddev=0.125, seed=args.seed))
        hidden_b = tf.get_variable("hidden/biases", [HIDDEN_UNITS], initializer=tf.zeros_initializer())
        out_w = tf.get_variable("softmax/weights", [HIDDEN_UNITS, 10],
                                initializer=tf.truncated_normal_initializer(stddev=0.125, seed=args.seed + 1))
        out_b = tf.get_variable("softmax/biases", [10], initializer=tf.zeros_initializer())

        def logits_of(batch: Any) -> Any:
            return tf.matmul(tf.nn.relu(tf.matmul(batch, hidden_w) + hidden_b), out_w) + out_b

        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits_of(images)))
        tf.summary.scalar("loss", loss)
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(args.learning_rate).minimize(loss, global_step=global_step)
        test_logits = logits_of(tf.constant(digits.test.images))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(test_logits, 1), tf.constant(digits.test.labels)),
                                          tf.float32))

    final = tf.train.FinalOpsHook(accuracy)
    checkpoint_dir = args.checkpoint_dir or tempfile.mkdtemp(prefix="tensorgrid-tfrecord-queue-")
    config = tf.ConfigProto(device_filters=["/job:ps", worker_device])
    until = f"{args.num_epochs} epochs of" if args.num_epochs else f"global step {args.steps} on"
    print(f"{job}:{index} {'(chief) ' if is_chief else ''}training to {until} {len(paths)} TFRecord files",
          flush=True)
    started = time.perf_counter()
    losses: list[float] = []
    hooks = [] if args.num_epochs else [tf.train.StopAtStepHook(last_step=args.steps)]
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                           checkpoint_dir=checkpoint_dir if is_chief else None, hooks=hooks,
                                           chief_only_hooks=[final], config=config, log_step_count_steps=0) as sess:
        while not sess.should_stop():
            _, step, batch_loss = sess.run([train_op, global_step, loss])
            losses.append(float(batch_loss))
            if len(losses) % args.log_every == 0:
                print(f"{job}:{index} global step {step:5d}  loss {batch_loss:.4f}", flush=True)
    if not losses:
        print(f"FAILED: {job}:{index} trained no step", file=sys.stderr)
        return 1
    window = max(1, min(args.log_every, len(losses) // 2))
    first, last = float(np.mean(losses[:window])), float(np.mean(losses[-window:]))
    print(f"{job}:{index} done: {len(losses)} local steps in {time.perf_counter() - started:.1f} s, mean loss "
          f"{first:.4f} over the first {window} -> {last:.4f} over the last", flush=True)
    if not is_chief:
        return 0
    test_accuracy = float(final.final_ops_values)
    print(f"test accuracy {test_accuracy:.4f} on {len(digits.test)} held-out digits (checkpoints in "
          f"{checkpoint_dir})", flush=True)
    if test_accuracy < args.min_accuracy:
        print(f"FAILED: test accuracy {test_accuracy:.4f} is below --min-accuracy {args.min_accuracy}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
