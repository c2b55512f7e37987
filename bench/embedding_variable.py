"""Embedding variables (``tf.get_embedding_variable``) against a fixed table: lookups/s, updates/s, bytes per key.

One process, one session: the work the PS holding the table does (the ids and rows that travel
to and from a worker cost both tables the same). The embedding variable holds ``--keys`` distinct
raw 64-bit ids (1,000,000 by default, stored by lookups before timing); the fixed table is
``tf.get_variable([keys, 64])``. Each batch is ``--batch`` ids (16,384) drawn from a Zipf law
(exponent 1.2) over the keys: for the fixed table the row numbers, for the embedding variable the
raw ids of those rows, so both touch the same rows.

- ``lookup``: ``sess.run(tf.nn.embedding_lookup(table, ids))``; lookups/s = ids per second.
- ``sgd``, ``adagrad``: one training step, ``loss = sum((lookup - 1) ** 2)``, the lookup's
  IndexedSlices gradient applied to the touched rows; updates/s = ids per second. The learning
  rates are small (SGD 1e-4, Adagrad 1e-3) so that a Zipf head id, summed over its thousands of
  repeats in a batch, does not diverge to inf.

- ``lookup_kernel``: the lookup kernel alone, no session (``EmbeddingTable.gather`` against
  ``np.take`` from a filled ``[keys, 64]`` array, the same rows), in CPU seconds of this process
  (``time.process_time``, the best of ``--repeats`` rounds of ``--steps`` batches): the figure that
  stays comparable on a machine shared with other jobs, where wall-clock steps are not.

``--fixed-layout hashed`` gives the fixed table the rows a hash of the id would: a fixed random
permutation of the Zipf ranks, so its hot rows are scattered over the table as the embedding
variable's are (by default, ``rank``, row r is the r-th most frequent id's: the hot rows sit
together, which a real fixed table of hashed ids does not have).

Reported: the median over ``--repeats`` runs of the mean of ``--steps`` steps after 2 warm-up
steps, and embedding variable / fixed table (the issue's target: >= 0.7). Bytes per key: the
table's own count (``tensorgrid_embedding_table_bytes``) divided by its keys, after Adagrad.

    .venv/bin/python bench/embedding_variable.py                  # table; JSON in bench/results/embedding_variable.json
    .venv/bin/python bench/embedding_variable.py --keys 100000    # smaller, faster
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

import tensorgrid as tf
from tensorgrid.kernels import embedding_variable_kernels

DIM = 64
FILL_CHUNK = 131_072
CASES = {
    "lookup": None,
    "sgd": lambda: tf.train.GradientDescentOptimizer(1e-4),
    "adagrad": lambda: tf.train.AdagradOptimizer(1e-3),
    "lookup_kernel": None,
}
RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "embedding_variable.json"


def _batches(keys: int, batch: int, count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [((rng.zipf(1.2, batch) - 1) % keys).astype(np.int64) for _ in range(count)]


def _fixed_rows(keys: int, layout: str) -> np.ndarray:
    """The fixed table's row of each Zipf rank: itself (``rank``), or a fixed permutation (``hashed``)."""
    if layout == "rank":
        return np.arange(keys, dtype=np.int64)
    return np.random.default_rng(7).permutation(keys).astype(np.int64)


def step_seconds(kind: str, case: str, raw_ids: np.ndarray, batch: int, steps: int, seed: int,
                 fixed_layout: str = "rank") -> float:
    """Mean seconds per step of ``case`` on a ``kind`` ("embedding_variable" or "fixed") table."""
    keys = len(raw_ids)
    with tf.Graph().as_default():
        if kind == "fixed":
            table: Any = tf.get_variable("table", [keys, DIM], initializer=tf.zeros_initializer())
        else:
            table = tf.get_embedding_variable("table", DIM, initializer=tf.zeros_initializer())
        ids = tf.placeholder(tf.int64, [None])
        rows = tf.nn.embedding_lookup(table, ids)
        make_optimizer = CASES[case]
        fetch = rows if make_optimizer is None else make_optimizer().minimize(tf.reduce_sum(tf.square(rows - 1.0)))
        batches = _batches(keys, batch, steps + 2, seed)
        fixed_rows = _fixed_rows(keys, fixed_layout)
        feeds = [fixed_rows[b] for b in batches] if kind == "fixed" else [raw_ids[b] for b in batches]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            if kind == "embedding_variable":
                for start in range(0, keys, FILL_CHUNK):
                    sess.run(rows.op, {ids: raw_ids[start:start + FILL_CHUNK]})
            for feed in feeds[:2]:
                sess.run(fetch, {ids: feed})
            began = time.perf_counter()
            for feed in feeds[2:]:
                sess.run(fetch, {ids: feed})
            return (time.perf_counter() - began) / steps


def kernel_lookup_seconds(raw_ids: np.ndarray, batch: int, steps: int, repeats: int,
                          fixed_layout: str = "rank") -> dict[str, float]:
    """CPU seconds per batch of the lookup kernel and of ``np.take`` from a fixed array, the best of ``repeats``."""
    keys = len(raw_ids)
    rng = np.random.default_rng(0)
    table = embedding_variable_kernels.EmbeddingTable("table", DIM, np.float32, 0, 0, -1.0, 0.0)
    table.initialize(rng.random((4096, DIM), np.float32))
    for start in range(0, keys, FILL_CHUNK):
        table.gather(raw_ids[start:start + FILL_CHUNK], count=True)
    fixed = rng.random((keys, DIM), np.float32)
    batches = _batches(keys, batch, steps, 0)
    fixed_rows = _fixed_rows(keys, fixed_layout)
    runs: dict[str, Any] = {  # (lookup, its batches): the fixed table's rows mapped before timing
        "embedding_variable": ((lambda rows: table.gather(raw_ids[rows], count=True)), batches),
        "fixed": ((lambda rows: np.take(fixed, rows, axis=0)), [fixed_rows[b] for b in batches]),
    }
    best = {}
    for kind, (lookup, kind_batches) in runs.items():
        rounds = []
        for _ in range(repeats):
            began = time.process_time()
            for rows in kind_batches:
                lookup(rows)
            rounds.append((time.process_time() - began) / steps)
        best[kind] = min(rounds)
    return best


def bytes_per_key(raw_ids: np.ndarray) -> dict[str, float]:
    """The table's bytes (keys, values, slots) per stored key, with Adagrad's accumulator."""
    table = embedding_variable_kernels.EmbeddingTable("table", DIM, np.float32, 0, 0, -1.0, 0.0)
    table.initialize(np.zeros((4096, DIM), np.float32))
    for start in range(0, len(raw_ids), FILL_CHUNK):
        table.gather(raw_ids[start:start + FILL_CHUNK], count=True)
    table.ensure_slot("Adagrad", 0.1)
    return {kind: nbytes / table.size() for kind, nbytes in table.memory_bytes().items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=16_384)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--fixed-layout", choices=["rank", "hashed"], default="rank",
                        help="the fixed table's row of a Zipf rank: the rank (hot rows together) or a permutation")
    parser.add_argument("--json", action="store_true", help="JSON on stdout instead of the table")
    args = parser.parse_args()
    raw_ids = np.random.default_rng(1).integers(-2**63, 2**63 - 1, args.keys, dtype=np.int64)
    results: dict[str, Any] = {"keys": args.keys, "batch": args.batch, "dim": DIM, "steps": args.steps,
                               "repeats": args.repeats, "fixed_layout": args.fixed_layout, "machine": platform.platform(), "cases": {}}
    for case in args.cases:
        if case == "lookup_kernel":
            medians = kernel_lookup_seconds(raw_ids, args.batch, args.steps, args.repeats, args.fixed_layout)
        else:
            medians = {kind: statistics.median([step_seconds(kind, case, raw_ids, args.batch, args.steps, seed,
                                                             args.fixed_layout)
                                                for seed in range(args.repeats)])
                       for kind in ("embedding_variable", "fixed")}
        results["cases"][case] = {kind: {"ms_per_step": seconds * 1e3, "ids_per_second": args.batch / seconds}
                                  for kind, seconds in medians.items()}
        results["cases"][case]["ratio"] = medians["fixed"] / medians["embedding_variable"]
    results["bytes_per_key"] = bytes_per_key(raw_ids)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{args.keys:,} keys, dim {DIM}, batches of {args.batch:,} Zipf ids, fixed table rows by {args.fixed_layout}")
    print("| case | embedding variable ids/s | fixed table ids/s | ms per step (EV / fixed) | EV / fixed |")
    print("|---|---|---|---|---|")
    for case, row in results["cases"].items():
        ev, fixed = row["embedding_variable"], row["fixed"]
        print(f"| {case} | {ev['ids_per_second']:,.0f} | {fixed['ids_per_second']:,.0f} | "
              f"{ev['ms_per_step']:.1f} / {fixed['ms_per_step']:.1f} | {row['ratio']:.2f} |")
    per_key = results["bytes_per_key"]
    print(f"bytes per key: {sum(per_key.values()):.0f} "
          f"(keys {per_key['keys']:.0f}, values {per_key['values']:.0f}, slots {per_key['slots']:.0f})")


if __name__ == "__main__":
    main()
