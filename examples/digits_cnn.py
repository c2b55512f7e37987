"""Trains a small convolutional network on the 8x8 handwritten digits, TF1 style.

Two 3x3 convolutions with relu, each followed by 2x2 max pooling (8x8 -> 4x4 -> 2x2),
then a fully connected layer to the 10 classes: the shape of TF1's "Deep MNIST"
tutorial, scaled to 8x8 images. It runs unchanged on tensorgrid (the default) and on
TensorFlow itself::

    python examples/digits_cnn.py
    python examples/digits_cnn.py --backend tensorflow   # import tensorflow.compat.v1 as tf

The program exits with status 1 when the test accuracy is below ``--min-accuracy``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Optional, Sequence

import numpy as np

from tensorgrid import data

CONV_FILTERS = (16, 32)


def import_tf(backend: str) -> Any:
    """``import tensorgrid as tf``, or TensorFlow's own TF1 API in graph mode."""
    if backend == "tensorflow":
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
        return tf
    import tensorgrid as tf

    return tf


def make_optimizer(tf: Any, name: str, learning_rate: float) -> Any:
    if name == "sgd":
        return tf.train.GradientDescentOptimizer(learning_rate)
    if name == "momentum":
        return tf.train.MomentumOptimizer(learning_rate, momentum=0.9)
    return tf.train.AdamOptimizer(learning_rate)


def he_normal(tf: Any, shape: list[int], fan_in: int, seed: int) -> Any:
    return tf.truncated_normal(shape, stddev=np.sqrt(2.0 / fan_in), seed=seed)


def conv_pool(tf: Any, inputs: Any, filters: int, name: str, seed: int) -> Any:
    """3x3 convolution (SAME) + bias + relu, then 2x2 max pooling that halves height and width."""
    channels = int(inputs.shape[3])
    with tf.name_scope(name):
        kernel = tf.Variable(he_normal(tf, [3, 3, channels, filters], 9 * channels, seed), name="weights")
        biases = tf.Variable(tf.zeros([filters]), name="biases")
        conv = tf.nn.conv2d(inputs, kernel, strides=[1, 1, 1, 1], padding="SAME")
        activated = tf.nn.relu(conv + biases)
        return tf.nn.max_pool(activated, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")


def build_model(tf: Any, images: Any, seed: int) -> Any:
    """Logits (batch, 10) for flattened 8x8 images."""
    net = tf.reshape(images, [-1, 8, 8, 1])
    for index, filters in enumerate(CONV_FILTERS):
        net = conv_pool(tf, net, filters, f"conv{index + 1}", seed + index)
    flat_size = 2 * 2 * CONV_FILTERS[-1]
    flat = tf.reshape(net, [-1, flat_size])
    with tf.name_scope("softmax_linear"):
        weights = tf.Variable(he_normal(tf, [flat_size, 10], flat_size, seed + 10), name="weights")
        biases = tf.Variable(tf.zeros([10]), name="biases")
        return tf.matmul(flat, weights) + biases


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=500, help="training steps (default 500)")
    parser.add_argument("--batch-size", type=int, default=64, help="examples per step (default 64)")
    parser.add_argument("--learning-rate", type=float, default=0.01, help="default 0.01")
    parser.add_argument("--optimizer", choices=("sgd", "momentum", "adam"), default="adam")
    parser.add_argument("--seed", type=int, default=0, help="seeds the weights, the split and the batches")
    parser.add_argument("--log-every", type=int, default=100, help="steps between progress lines")
    parser.add_argument("--min-accuracy", type=float, default=0.9,
                        help="exit with status 1 if the test accuracy is below this (default 0.9)")
    parser.add_argument("--backend", choices=("tensorgrid", "tensorflow"), default="tensorgrid")
    return parser.parse_args(argv)


def train(argv: Optional[Sequence[str]] = None) -> dict[str, float]:
    """Trains as the flags say, prints progress, returns the final loss and accuracies."""
    args = parse_args(argv)
    tf = import_tf(args.backend)
    digits = data.load_digits(seed=args.seed)
    batches = data.Batches(digits.train.images, digits.train.labels, batch_size=args.batch_size, seed=args.seed)

    with tf.Graph().as_default():
        tf.set_random_seed(args.seed)
        images = tf.placeholder(tf.float32, [None, 64], name="images")
        labels = tf.placeholder(tf.int64, [None], name="labels")
        logits = build_model(tf, images, args.seed)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))
        global_step = tf.train.get_or_create_global_step()
        train_op = make_optimizer(tf, args.optimizer, args.learning_rate).minimize(loss, global_step=global_step)

        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            started, logged_step = time.perf_counter(), 0
            last_loss, last_accuracy = float("nan"), float("nan")
            for step in range(1, args.steps + 1):
                batch_images, batch_labels = batches.next_batch()
                _, last_loss, last_accuracy = sess.run(
                    [train_op, loss, accuracy], feed_dict={images: batch_images, labels: batch_labels})
                if step % args.log_every == 0 or step == args.steps:
                    rate = (step - logged_step) * args.batch_size / (time.perf_counter() - started)
                    print(f"step {step:5d}  loss {last_loss:.4f}  train accuracy {last_accuracy:.3f}  "
                          f"{rate:8.0f} examples/s", flush=True)
                    started, logged_step = time.perf_counter(), step
            test_accuracy = float(sess.run(
                accuracy, feed_dict={images: digits.test.images, labels: digits.test.labels}))
            final_step = int(sess.run(global_step))
    print(f"test accuracy {test_accuracy:.4f} on {len(digits.test)} held-out digits "
          f"after {final_step} steps ({args.backend})")
    return {"loss": float(last_loss), "train_accuracy": float(last_accuracy), "test_accuracy": test_accuracy,
            "min_accuracy": args.min_accuracy}


def main(argv: Optional[Sequence[str]] = None) -> int:
    result = train(argv)
    if result["test_accuracy"] < result["min_accuracy"]:
        print(f"FAILED: test accuracy {result['test_accuracy']:.4f} is below --min-accuracy "
              f"{result['min_accuracy']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
