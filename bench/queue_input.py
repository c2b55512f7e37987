"""A queue-fed trainer: training steps per second, tensorgrid vs TensorFlow, in one run.

The shape of tensorflow/ecosystem's ``docker/mnist.py`` (docs/tf1-programs.md, row 5) in one
process: ``string_input_producer`` names a TFRecord file, a ``TFRecordReader`` reads it,
``parse_single_example`` and ``decode_raw`` decode each record, ``shuffle_batch`` (two enqueue
threads, capacity 1300, min_after_dequeue 1000) makes batches of 100, and a 784-128-128-10 MLP
trains on them with gradient descent in a ``MonitoredTrainingSession``. Every example goes
through one ``sess.run`` of the enqueue op in a queue-runner thread: 100 runs per training step.

Reported per library: the median over ``--repeats`` runs (the libraries interleaved) of
training steps/s after ``--warmup`` steps, and the process CPU time per step (all threads).

    .venv/bin/python bench/queue_input.py [--steps 100] [--warmup 20] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import tempfile
import time
from typing import Any

import numpy as np

RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "queue_input.json"
PIXELS = 784
RECORDS = 5000


def write_records(tg: Any, path: str) -> None:
    rng = np.random.default_rng(0)
    with tg.io.TFRecordWriter(path) as writer:
        for i in range(RECORDS):
            image = rng.integers(0, 256, PIXELS, dtype=np.uint8).tobytes()
            example = tg.train.Example(features=tg.train.Features(feature={
                "image_raw": tg.train.Feature(bytes_list=tg.train.BytesList(value=[image])),
                "label": tg.train.Feature(int64_list=tg.train.Int64List(value=[i % 10]))}))
            writer.write(example.SerializeToString())


def dense(tf: Any, x: Any, units: int, activation: Any = None) -> Any:
    weights = tf.Variable(tf.truncated_normal([int(x.shape[1]), units], stddev=0.05))
    y = tf.matmul(x, weights) + tf.Variable(tf.zeros([units]))
    return activation(y) if activation else y


def train(tf: Any, path: str, warmup: int, steps: int) -> tuple[float, float]:
    """(training steps/s, CPU ms per step) of the queue-fed MLP on ``tf``."""
    with tf.Graph().as_default():
        filenames = tf.train.string_input_producer([path])
        _, serialized = tf.TFRecordReader().read(filenames)
        features = tf.parse_single_example(serialized, features={
            "image_raw": tf.FixedLenFeature([], tf.string), "label": tf.FixedLenFeature([], tf.int64)})
        image = tf.decode_raw(features["image_raw"], tf.uint8)
        image.set_shape([PIXELS])
        image = tf.cast(image, tf.float32) * (1.0 / 255) - 0.5
        label = tf.cast(features["label"], tf.int32)
        images, labels = tf.train.shuffle_batch([image, label], batch_size=100, num_threads=2,
                                                capacity=1300, min_after_dequeue=1000)
        hidden = dense(tf, dense(tf, images, 128, tf.nn.relu), 128, tf.nn.relu)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                             logits=dense(tf, hidden, 10)))
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(
            loss, global_step=tf.train.get_or_create_global_step())
        with tf.train.MonitoredTrainingSession(log_step_count_steps=None) as sess:
            for _ in range(warmup):
                sess.run(train_op)
            started, cpu_started = time.perf_counter(), time.process_time()
            for _ in range(steps):
                sess.run(train_op)
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return steps / elapsed, cpu / steps * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow.compat.v1 as tf1

    import tensorgrid as tg

    tf1.disable_v2_behavior()
    libraries = {"tensorgrid": tg, "TensorFlow 2.21": tf1}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in libraries}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "train.tfrecords")
        write_records(tg, path)
        for repeat in range(args.repeats):
            order = list(libraries) if repeat % 2 == 0 else list(reversed(libraries))
            for name in order:
                runs[name].append(train(libraries[name], path, args.warmup, args.steps))
    medians = {name: {"steps_per_s": statistics.median(r[0] for r in results),
                      "cpu_ms_per_step": statistics.median(r[1] for r in results)}
               for name, results in runs.items()}
    print(f"queue-fed MLP, batch 100 (median of {args.repeats} runs of {args.steps} steps)")
    print(f"{'library':16s} {'steps/s':>9s} {'CPU ms/step':>12s}")
    for name, figures in medians.items():
        print(f"{name:16s} {figures['steps_per_s']:9.1f} {figures['cpu_ms_per_step']:12.1f}")
    ratio = medians["tensorgrid"]["steps_per_s"] / medians["TensorFlow 2.21"]["steps_per_s"]
    print(f"{'tensorgrid / TF':16s} {ratio:9.2f}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"steps": args.steps, "warmup": args.warmup, "repeats": args.repeats,
                                   "medians": medians, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
