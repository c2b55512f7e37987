"""In-graph replicated training of the digits MLP: one client drives a tower per worker, TF1 style.

Every task runs this program with its own ``TF_CONFIG``. Worker 0 is the client: it
builds one graph with the variables on the parameter server and one copy of the
model (a tower) per worker task, each on its share of the batch, averages the
towers' gradients and applies them once per step. The other tasks only serve
(``server.join()``) and stop when the client finishes::

    tensorgrid local --ps 1 --workers 2 -- python examples/in_graph_digits.py
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Optional, Sequence


from tensorgrid import data


def import_tf(backend: str) -> Any:
    if backend == "tensorflow":
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
        return tf
    import tensorgrid as tf

    return tf


def tower_loss(tf: Any, images: Any, labels: Any, params: dict[str, Any]) -> Any:
    hidden = tf.nn.relu(tf.matmul(images, params["w1"]) + params["b1"])
    logits = tf.matmul(hidden, params["w2"]) + params["b2"]
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)), logits


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=128, help="global batch, split across the towers")
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--min-accuracy", type=float, default=0.9)
    parser.add_argument("--backend", choices=("tensorgrid", "tensorflow"), default="tensorgrid")
    args = parser.parse_args(argv)
    tf = import_tf(args.backend)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    cluster = resolver.cluster_spec()
    if not cluster.jobs:
        print("TF_CONFIG is not set: run me with `tensorgrid local --ps 1 --workers 2 -- python "
              "examples/in_graph_digits.py`", file=sys.stderr)
        return 2
    job, index = resolver.task_type, resolver.task_id
    server = tf.train.Server(cluster, job_name=job, task_index=index)
    if (job, index) != ("worker", 0):
        server.join()
        return 0

    towers = cluster.num_tasks("worker")
    digits = data.load_digits(seed=0)
    batches = data.Batches(digits.train.images, digits.train.labels, batch_size=args.batch_size, seed=0)
    init = tf.truncated_normal_initializer(stddev=0.1, seed=1)
    with tf.device("/job:ps/task:0"):
        params = {
            "w1": tf.get_variable("w1", [64, 128], initializer=init),
            "b1": tf.get_variable("b1", [128], initializer=tf.zeros_initializer()),
            "w2": tf.get_variable("w2", [128, 10], initializer=init),
            "b2": tf.get_variable("b2", [10], initializer=tf.zeros_initializer()),
        }
        global_step = tf.train.get_or_create_global_step()
    images = tf.placeholder(tf.float32, [None, 64], name="images")
    labels = tf.placeholder(tf.int64, [None], name="labels")
    tower_grads = []
    for i, (tower_images, tower_labels) in enumerate(zip(tf.split(images, towers), tf.split(labels, towers))):
        with tf.device(f"/job:worker/task:{i}"), tf.name_scope(f"tower_{i}"):
            loss, _ = tower_loss(tf, tower_images, tower_labels, params)
            tower_grads.append(tf.gradients(loss, list(params.values())))
    with tf.device("/job:ps/task:0"):
        averaged = [tf.add_n(list(grads)) / float(towers) for grads in zip(*tower_grads)]
        train_op = tf.train.GradientDescentOptimizer(args.learning_rate).apply_gradients(
            list(zip(averaged, params.values())), global_step=global_step)
    with tf.device("/job:worker/task:0"):
        _, test_logits = tower_loss(tf, images, labels, params)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(test_logits, 1), labels), tf.float32))

    print(f"in-graph replication: {towers} towers, batch {args.batch_size}", flush=True)
    started = time.perf_counter()
    with tf.Session(server.target) as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(1, args.steps + 1):
            batch_images, batch_labels = batches.next_batch()
            sess.run(train_op, {images: batch_images, labels: batch_labels})
            if step % 100 == 0:
                print(f"step {step}  {step / (time.perf_counter() - started):.1f} steps/s", flush=True)
        test_accuracy = float(sess.run(accuracy, {images: digits.test.images, labels: digits.test.labels}))
    print(f"test accuracy {test_accuracy:.4f} on {len(digits.test)} held-out digits", flush=True)
    return 0 if test_accuracy >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
