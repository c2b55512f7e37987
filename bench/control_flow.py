"""Control flow and input pipelines, tensorgrid beside TensorFlow 2.21's ``tf.compat.v1``.

Three in-process cases, each the same program on both libraries, run interleaved
(tensorgrid, TF, TF, tensorgrid, ...) and reported as the median of ``--repeats`` runs:

- ``while``: one ``tf.while_loop`` of 1000 iterations over a 64-vector (``x * 0.999 + 0.001``);
  microseconds per iteration;
- ``while_grad``: the same loop and its ``tf.gradients``; microseconds per iteration;
- ``dataset``: ``from_tensor_slices`` (10000 x 64) ``.map(x * 2).batch(32)``, one
  ``get_next`` per ``Session.run``; batches per second.

    .venv/bin/python bench/control_flow.py [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Callable

import numpy as np

ITERATIONS = 1000
ROWS = 10000


def time_loop(tf: Any, with_gradient: bool) -> float:
    with tf.Graph().as_default():
        x0 = tf.placeholder(tf.float32, [64])
        _, x = tf.while_loop(lambda i, x: i < ITERATIONS, lambda i, x: (i + 1, x * 0.999 + 0.001), [0, x0])
        fetch = tf.gradients(tf.reduce_sum(x), x0)[0] if with_gradient else x
        feed = {x0: np.ones(64, np.float32)}
        with tf.Session() as sess:
            sess.run(fetch, feed)  # warm
            start = time.perf_counter()
            for _ in range(3):
                sess.run(fetch, feed)
            return (time.perf_counter() - start) / 3 / ITERATIONS * 1e6


def time_dataset(tf: Any) -> float:
    with tf.Graph().as_default():
        data = np.random.RandomState(0).rand(ROWS, 64).astype(np.float32)
        dataset = tf.data.Dataset.from_tensor_slices(data).map(lambda x: x * 2.0).batch(32)
        element = tf.data.make_one_shot_iterator(dataset).get_next()
        batches = 0
        with tf.Session() as sess:
            start = time.perf_counter()
            try:
                while True:
                    sess.run(element)
                    batches += 1
            except tf.errors.OutOfRangeError:
                pass
            return batches / (time.perf_counter() - start)


CASES: dict[str, tuple[Callable[[Any], float], str, bool]] = {
    "while": (lambda tf: time_loop(tf, False), "us/iteration", False),
    "while_grad": (lambda tf: time_loop(tf, True), "us/iteration", False),
    "dataset": (time_dataset, "batches/s", True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import tensorflow.compat.v1 as tf1

    import tensorgrid

    tf1.disable_v2_behavior()
    results = {}
    for name, (measure, unit, higher_is_better) in CASES.items():
        ours: list[float] = []
        theirs: list[float] = []
        for repeat in range(args.repeats):
            order = [(tensorgrid, ours), (tf1, theirs)]
            for library, out in order if repeat % 2 == 0 else reversed(order):
                out.append(measure(library))
        a, b = statistics.median(ours), statistics.median(theirs)
        ratio = a / b if higher_is_better else b / a
        results[name] = {"unit": unit, "tensorgrid": a, "tensorflow": b, "speed_ratio": ratio}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'case':<12} {'unit':<14} {'tensorgrid':>12} {'tensorflow':>12} {'speed tg/tf':>12}")
    for name, r in results.items():
        print(f"{name:<12} {r['unit']:<14} {r['tensorgrid']:>12.1f} {r['tensorflow']:>12.1f} {r['speed_ratio']:>12.2f}")


if __name__ == "__main__":
    main()
