"""Incremental vs full checkpoints of a large embedding table: bytes written and seconds per save.

One process, one session. A table of ``--rows`` x ``--dim`` float32 (1,000,000 x 16 by default:
64 MB) in ``--parts`` partitions, trained by Adagrad (its slot doubles what a save holds) through
``embedding_lookup``'s sparse gradient. After ``--steps`` steps of ``--ids`` random ids each (uniform
over the table, the worst case, or ``--zipf A``: id ``k`` drawn with weight ``1 / (k + 1) ** A``, the
skew of real categorical features), the same values are saved twice:

- ``incremental``: ``Saver(incremental=True)``, whose previous save was the full checkpoint written
  after the initializer: a delta of the rows written since;
- ``full``: a plain ``Saver``: the whole table, its slot and the global step.

With ``--embedding-variable`` the table is a ``tf.get_embedding_variable`` of ``--dim`` columns in
``--parts`` parts, its ``--rows`` keys stored by a lookup before the first save, and not trained:
the first update after that save adds the Adagrad slot to every key (at its initial value, which the
full save already holds), and a delta holds only the keys updated since, with their rows,
frequencies, versions and Adagrad slot.

Each figure is the median of ``--repeats`` rounds (each round trains ``--steps`` more steps, then
saves both ways). The delta is restored once at the end (full + every delta) and compared with the
live table, so the figures are of a checkpoint that restores.

    .venv/bin/python bench/incremental_checkpoint.py            # table; JSON in bench/results/incremental_checkpoint.json
    .venv/bin/python bench/incremental_checkpoint.py --rows 100000 --repeats 1
    .venv/bin/python bench/incremental_checkpoint.py --embedding-variable   # the same on an embedding variable
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import tempfile
import time
from typing import Any

import numpy as np

import tensorgrid as tf

RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "incremental_checkpoint.json"


def _bytes_of(prefix: str) -> int:
    """The bytes a save wrote: its index and data file."""
    directory, base = os.path.split(prefix)
    return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory)
               if n in (base + ".index", base + ".data", base + ".data.1"))


def _timed_save(saver: Any, sess: Any, prefix: str, step: int) -> tuple[str, float]:
    start = time.perf_counter()
    path = saver.save(sess, prefix, global_step=step, write_meta_graph=False)
    return path, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument("--steps", type=int, default=100, help="training steps between saves")
    parser.add_argument("--ids", type=int, default=4096, help="random ids per step")
    parser.add_argument("--zipf", type=float, default=0.0,
                        help="draw ids with weight 1 / (id + 1) ** ZIPF (0: uniform)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--embedding-variable", action="store_true",
                        help="a tf.get_embedding_variable table holding --rows keys instead of a fixed table")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    weights = None
    if args.zipf:
        weights = 1.0 / np.arange(1, args.rows + 1, dtype=np.float64) ** args.zipf
        weights /= weights.sum()
    directory = tempfile.mkdtemp(prefix="incremental-checkpoint-")
    rounds: list[dict[str, Any]] = []
    with tf.Graph().as_default():
        initializer = tf.random_uniform_initializer(-0.05, 0.05, seed=1)
        if args.embedding_variable:
            emb = tf.get_embedding_variable("emb", args.dim, partitioner=tf.fixed_size_partitioner(args.parts),
                                            initializer=initializer)
        else:
            emb = tf.get_variable("emb", [args.rows, args.dim], partitioner=tf.fixed_size_partitioner(args.parts),
                                  initializer=initializer)
        ids = tf.placeholder(tf.int64, [None])
        step = tf.train.get_or_create_global_step()
        loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(emb, ids)))
        train = tf.train.AdagradOptimizer(0.1).minimize(loss, global_step=step)
        incremental = tf.train.Saver(incremental=True, full_save_every=1_000_000, max_to_keep=None)
        full = tf.train.Saver(max_to_keep=None)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            if args.embedding_variable:  # look every key up once: the table holds --rows keys, no slot yet
                for start in range(0, args.rows, 65536):
                    sess.run(loss, {ids: np.arange(start, min(start + 65536, args.rows))})
            base, base_seconds = _timed_save(incremental, sess, os.path.join(directory, "incremental"), 0)
            print(f"first save (full, by the incremental saver): {_bytes_of(base) / 1e6:.1f} MB in {base_seconds:.2f} s")
            touched: set[int] = set()
            for repeat in range(args.repeats):
                train_start = time.perf_counter()
                round_touched = set()
                for _ in range(args.steps):
                    batch = (rng.integers(0, args.rows, args.ids) if weights is None
                             else rng.choice(args.rows, args.ids, p=weights))
                    round_touched.update(batch.tolist())
                    sess.run(train, {ids: batch})
                train_seconds = time.perf_counter() - train_start
                touched |= round_touched
                at = int(sess.run(step))
                delta, delta_seconds = _timed_save(incremental, sess, os.path.join(directory, "incremental"), at)
                whole, full_seconds = _timed_save(full, sess, os.path.join(directory, "full"), at)
                rounds.append({"rows_touched": len(round_touched), "train_seconds": train_seconds,
                               "incremental_bytes": _bytes_of(delta), "incremental_seconds": delta_seconds,
                               "full_bytes": _bytes_of(whole), "full_seconds": full_seconds})
                print(f"round {repeat + 1}: {len(round_touched)} rows touched in {args.steps} steps "
                      f"({train_seconds:.1f} s); delta {_bytes_of(delta) / 1e6:.2f} MB in {delta_seconds:.3f} s, "
                      f"full {_bytes_of(whole) / 1e6:.1f} MB in {full_seconds:.3f} s")
            live = None if args.embedding_variable else np.concatenate(sess.run(list(emb)))
    restore_start = time.perf_counter()
    if args.embedding_variable:  # the last delta's chain against the full save of the same moment
        chain, saved = tf.train.NewCheckpointReader(delta), tf.train.NewCheckpointReader(whole)
        names = sorted(saved.get_variable_to_shape_map())
        restored_entries = [chain.get_tensor(name) for name in names]
        restore_seconds = time.perf_counter() - restore_start
        if not all(np.array_equal(a, saved.get_tensor(n)) for n, a in zip(names, restored_entries)):
            raise SystemExit("the chain full + deltas does not restore the table the full save holds")
    else:
        restored = tf.train.load_variable(delta, "emb")
        restore_seconds = time.perf_counter() - restore_start
        if not np.array_equal(restored, live):
            raise SystemExit("the chain full + deltas does not restore the live table")

    def median(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    summary = {
        "table": (f"embedding variable of {args.rows} keys x {args.dim} float32 in {args.parts} parts, Adagrad"
                  if args.embedding_variable else f"{args.rows} x {args.dim} float32 in {args.parts} parts, Adagrad"),
        "steps_between_saves": args.steps, "ids_per_step": args.ids, "repeats": args.repeats,
        "ids": f"zipf {args.zipf}" if args.zipf else "uniform",
        "rows_touched_median": median("rows_touched"),
        "incremental_bytes_median": median("incremental_bytes"), "incremental_seconds_median": median("incremental_seconds"),
        "full_bytes_median": median("full_bytes"), "full_seconds_median": median("full_seconds"),
        "restore_chain_seconds": restore_seconds, "chain_length": args.repeats + 1,
        "rounds": rounds, "python": platform.python_version(), "machine": platform.machine(),
        "cpus": os.cpu_count(), "load_average": os.getloadavg(),
    }
    print(f"\n{'save':<12} {'bytes (median)':>16} {'seconds (median)':>18}")
    print(f"{'incremental':<12} {summary['incremental_bytes_median']:>16,.0f} {summary['incremental_seconds_median']:>18.3f}")
    print(f"{'full':<12} {summary['full_bytes_median']:>16,.0f} {summary['full_seconds_median']:>18.3f}")
    print(f"delta / full: {summary['incremental_bytes_median'] / summary['full_bytes_median']:.3%} of the bytes, "
          f"{summary['incremental_seconds_median'] / summary['full_seconds_median']:.1%} of the time; "
          f"restoring the chain (full + {args.repeats} deltas) took {restore_seconds:.2f} s")
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
