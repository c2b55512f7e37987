"""Sparse updates of a large embedding table: the cost of one training step, sparse vs dense.

One process, one session. A table of ``--rows`` x 64 float32 (1,000,000 by default:
256 MB), a batch of 256 examples with 4 ids each (1024 lookups, at most 1024 rows
touched), ``loss = sum(lookup ** 2)``. Each optimizer steps the table two ways:

- ``sparse``: the gradient is the lookup's IndexedSlices, applied as TF1 does
  (``scatter_sub`` for SGD, ``SparseApply*`` for the others);
- ``dense``: the same gradient densified (``tf.convert_to_tensor``) before
  ``apply_gradients``, i.e. a full-table update: what tensorgrid did before it had
  IndexedSlices, and what any optimizer without a sparse path does.

TensorFlow 2.21 (``tf.compat.v1``, same graph) runs the same cases as the peer. Each
figure is the median over ``--repeats`` runs of the mean step time of ``--steps`` steps
after 3 warm-up steps.

    .venv/bin/python bench/sparse_embedding.py          # table; JSON in bench/results/sparse_embedding.json
    .venv/bin/python bench/sparse_embedding.py --rows 100000 --backends tensorgrid
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import time
from typing import Any

import numpy as np

DIM, BATCH, FIELDS = 64, 256, 4
OPTIMIZERS = {
    "sgd": lambda tf: tf.train.GradientDescentOptimizer(0.1),
    "momentum": lambda tf: tf.train.MomentumOptimizer(0.1, 0.9),
    "adagrad": lambda tf: tf.train.AdagradOptimizer(0.1),
    "adam": lambda tf: tf.train.AdamOptimizer(0.01),
}
RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "sparse_embedding.json"


def import_backend(name: str) -> Any:
    if name == "tensorflow":
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
        return tf
    import tensorgrid as tf

    return tf


def step_time(tf: Any, rows: int, optimizer: str, mode: str, steps: int) -> float:
    """Mean seconds per step after warm-up."""
    rng = np.random.default_rng(0)
    with tf.Graph().as_default():
        table = tf.get_variable("table", [rows, DIM], initializer=tf.zeros_initializer())
        ids = tf.placeholder(tf.int64, [BATCH, FIELDS])
        loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(table, ids) - 1.0))
        opt = OPTIMIZERS[optimizer](tf)
        grads_and_vars = opt.compute_gradients(loss)
        if mode == "dense":
            grads_and_vars = [(tf.convert_to_tensor(g), v) for g, v in grads_and_vars]
        train = opt.apply_gradients(grads_and_vars)
        batches = [rng.integers(0, rows, (BATCH, FIELDS)) for _ in range(steps + 3)]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for batch in batches[:3]:
                sess.run(train, {ids: batch})
            started = time.perf_counter()
            for batch in batches[3:]:
                sess.run(train, {ids: batch})
            return (time.perf_counter() - started) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backends", nargs="+", default=["tensorgrid", "tensorflow"])
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    backends = {name: import_backend(name) for name in args.backends}
    for optimizer in OPTIMIZERS:
        for mode in ("sparse", "dense"):
            for name, tf in backends.items():
                times = [step_time(tf, args.rows, optimizer, mode, args.steps) for _ in range(args.repeats)]
                results.setdefault(f"{optimizer} {mode}", {})[name] = statistics.median(times) * 1000
    print(f"ms per step, {args.rows} x {DIM} float32 table, {BATCH} x {FIELDS} ids per batch "
          f"(median of {args.repeats} runs of {args.steps} steps)")
    print(f"{'case':18s}" + "".join(f"{name:>12s}" for name in backends))
    for case, by_backend in results.items():
        print(f"{case:18s}" + "".join(f"{by_backend[name]:12.2f}" for name in backends))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": args.rows, "dim": DIM, "batch": BATCH, "fields": FIELDS,
                                   "steps": args.steps, "repeats": args.repeats, "machine": platform.node(),
                                   "ms_per_step": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
