"""A ``tf.layers`` CNN on the 8x8 digits, trained between-graph on parameter servers, TF1 style.

The model is written as TF1 programs write it with ``tf.layers``: ``conv2d``,
``batch_normalization`` (its moving averages in ``tf.GraphKeys.UPDATE_OPS``, run with the train
op), ``max_pooling2d``, ``flatten``, ``dense`` and ``dropout`` switched by a ``training``
placeholder. Every task runs this same program with its own ``TF_CONFIG``: PS tasks serve the
variables (``replica_device_setter`` puts every layer's kernel, bias and moving statistics there),
workers train through a ``MonitoredTrainingSession``, the chief reports the test accuracy::

    tensorgrid local --ps 1 --workers 2 -- python examples/layers_cnn_digits.py

Each worker prints its mean loss over its first and last ``--log-every`` steps. ``--backend
tensorflow`` runs the same program on TensorFlow (``tf.layers`` there needs tf-keras).
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


def import_tf(backend: str) -> Any:
    if backend == "tensorflow":
        # TensorFlow 2.16+ serves tf.compat.v1.layers from tf-keras only when asked to.
        os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
        return tf
    import tensorgrid as tf

    return tf


def build_model(tf: Any, images: Any, training: Any, seed: int) -> Any:
    """Logits (batch, 10) for flattened 8x8 images: two conv blocks, a hidden layer, dropout."""
    net = tf.reshape(images, [-1, 8, 8, 1])
    for filters in (16, 32):
        net = tf.layers.conv2d(net, filters, 3, padding="same", use_bias=False,
                               kernel_initializer=tf.variance_scaling_initializer(2.0, seed=seed + filters))
        net = tf.layers.batch_normalization(net, training=training)
        net = tf.layers.max_pooling2d(tf.nn.relu(net), pool_size=2, strides=2, padding="same")
    net = tf.layers.flatten(net)
    net = tf.layers.dense(net, 64, activation=tf.nn.relu,
                          kernel_initializer=tf.variance_scaling_initializer(2.0, seed=seed + 1))
    net = tf.layers.dropout(net, rate=0.25, training=training, seed=seed + 2)
    return tf.layers.dense(net, 10, kernel_initializer=tf.glorot_uniform_initializer(seed=seed + 3), name="logits")


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=600, help="global steps to train (default 600)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--checkpoint-dir", default=os.environ.get("CHECKPOINT_DIR"),
                        help="where the chief saves checkpoints (default: $CHECKPOINT_DIR or a temp dir)")
    parser.add_argument("--log-every", type=int, default=50)
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
              "examples/layers_cnn_digits.py` or in a TrainingJob", file=sys.stderr)
        return 2
    server = tf.train.Server(cluster, job_name=job, task_index=index)
    if job == "ps":
        server.join()
        return 0

    is_chief = job == "chief" or (job == "worker" and index == 0 and "chief" not in cluster.jobs)
    digits = data.load_digits(seed=args.seed)
    batches = data.Batches(digits.train.images, digits.train.labels, batch_size=args.batch_size,
                           seed=args.seed + 1000 * (index + (job == "chief") * 100))

    with tf.device(tf.train.replica_device_setter(worker_device=f"/job:{job}/task:{index}", cluster=cluster)):
        images = tf.placeholder(tf.float32, [None, 64], name="images")
        labels = tf.placeholder(tf.int64, [None], name="labels")
        training = tf.placeholder_with_default(False, [], name="training")
        logits = build_model(tf, images, training, args.seed)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))
        tf.summary.scalar("loss", loss)
        global_step = tf.train.get_or_create_global_step()
        optimizer = tf.train.GradientDescentOptimizer(args.learning_rate)
        # batch_normalization's moving averages move with every training step.
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            train_op = optimizer.minimize(loss, global_step=global_step)

    final = tf.train.FinalOpsHook(accuracy, {images: digits.test.images, labels: digits.test.labels})
    checkpoint_dir = args.checkpoint_dir or tempfile.mkdtemp(prefix="tensorgrid-layers-cnn-")
    config = tf.ConfigProto(device_filters=["/job:ps", f"/job:{job}/task:{index}"])
    print(f"{job}:{index} {'(chief) ' if is_chief else ''}training to global step {args.steps}", flush=True)
    started = time.perf_counter()
    losses: list[float] = []
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                           checkpoint_dir=checkpoint_dir if is_chief else None,
                                           hooks=[tf.train.StopAtStepHook(last_step=args.steps)],
                                           chief_only_hooks=[final], config=config, log_step_count_steps=0) as sess:
        while not sess.should_stop():
            batch_images, batch_labels = batches.next_batch()
            _, step, batch_loss = sess.run([train_op, global_step, loss], feed_dict={
                images: batch_images, labels: batch_labels, training: True})
            losses.append(float(batch_loss))
            if len(losses) % args.log_every == 0:
                print(f"{job}:{index} global step {step:5d}  loss {batch_loss:.4f}", flush=True)
    window = max(1, min(args.log_every, len(losses) // 2))
    print(f"{job}:{index} done: {len(losses)} local steps in {time.perf_counter() - started:.1f} s, mean loss "
          f"{np.mean(losses[:window]):.4f} over the first {window} -> {np.mean(losses[-window:]):.4f} over the last",
          flush=True)
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
