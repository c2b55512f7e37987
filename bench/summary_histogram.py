"""Histogram summaries: milliseconds per ``sess.run`` of ``tf.summary.histogram``, tensorgrid vs TensorFlow.

TF1 programs write a histogram of every weight matrix at each logged step
(``tensorboard_advanced.py``, ``mnist_with_summaries.py``); tensorgrid computes the
``HistogramProto`` in numpy where TensorFlow does it in C++. Each case is a graph holding one
float32 variable of N standard-normal values and its histogram summary (a variable: TensorFlow's
graph optimizer folds the summary of a constant into a constant); one ``sess.run`` of
the summary is timed, the libraries interleaved, the median of ``--repeats`` rounds of
``--runs`` runs each reported, with the ratio tensorgrid / TensorFlow of those medians.

    .venv/bin/python bench/summary_histogram.py [--sizes 1000,200704,1000000] [--repeats 5] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import time
from typing import Any, Callable

import numpy as np

RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "summary_histogram.json"


def histogram_run(tf: Any, values: np.ndarray) -> tuple[Any, Callable[[], Any]]:
    """A session and a callable that runs the histogram summary of ``values`` once."""
    graph = tf.Graph()
    with graph.as_default():
        weights = tf.Variable(values, name="weights")
        summary = tf.summary.histogram("weights", weights)
    session = tf.Session(graph=graph)
    session.run(weights.initializer)
    return session, lambda: session.run(summary)


def milliseconds_per_run(run: Callable[[], Any], runs: int) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        run()
    return (time.perf_counter() - started) / runs * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,200704,1000000", help="comma-separated value counts")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5, help="sess.run calls timed together in one repeat")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow.compat.v1 as tf1

    import tensorgrid as tg

    tf1.disable_v2_behavior()
    libraries = {"tensorgrid": tg, "TensorFlow 2.21": tf1}
    sizes = [int(size) for size in args.sizes.split(",")]
    rng = np.random.default_rng(0)
    medians: dict[str, dict[str, float]] = {}
    for size in sizes:
        values = rng.standard_normal(size).astype(np.float32)
        sessions, runs = {}, {}
        for name, library in libraries.items():
            sessions[name], runs[name] = histogram_run(library, values)
            runs[name]()  # the first run of a session builds its executor: not timed
        timings: dict[str, list[float]] = {name: [] for name in libraries}
        for repeat in range(args.repeats):
            order = list(libraries) if repeat % 2 == 0 else list(reversed(libraries))
            for name in order:
                timings[name].append(milliseconds_per_run(runs[name], args.runs))
        for session in sessions.values():
            session.close()
        medians[str(size)] = {name: statistics.median(values) for name, values in timings.items()}
    print(f"ms per sess.run of a histogram summary (median of {args.repeats} x {args.runs} runs)")
    print(f"{'values':>10s} {'tensorgrid':>12s} {'TensorFlow':>12s} {'tensorgrid / TF':>16s}")
    for count, by_library in medians.items():
        ours, theirs = by_library["tensorgrid"], by_library["TensorFlow 2.21"]
        print(f"{int(count):>10,d} {ours:12.3f} {theirs:12.3f} {ours / theirs:16.2f}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"repeats": args.repeats, "runs": args.runs, "ms_per_run": medians},
                                  indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
