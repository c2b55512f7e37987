"""Session step programs against ``Plan.run``, in one process: what ``call_program.StepProgram``
saves per ``sess.run``.

Each case builds one session step and runs it past the runs that make its program; then the
same session runs the step alternately through ``Plan.run`` (the path of a step without a
program) and through the program, in blocks (interleaved, so the machine's load falls on
both alike). Reported: the median over ``--blocks`` blocks of each, and their ratio.

- ``small``: a fed 4-vector through 7 x ``relu(y * 1.5 - 0.5)`` (35 nodes), wall us per run;
- ``wide_deep``, ``dlrm_like``: the training steps of ``bench/sparse_training.py`` (1 BLAS
  thread, its 1,000,000-row tables), CPU ms per step.

    .venv/bin/python bench/step_programs.py [--cases small wide_deep dlrm_like] [--blocks 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(BENCH, "..", "examples"))
sys.path.insert(0, BENCH)

import sparse_training  # noqa: E402 - after the path of the examples it imports

import tensorgrid as tf  # noqa: E402
from tensorgrid.execution import call_program  # noqa: E402

WARMUP_RUNS = call_program.PLAN_RUNS_BEFORE_GENERATION + 4


def alternate(session: Any, run_once: Callable[[int], None], runs_per_block: int, blocks: int,
              clock: Callable[[], float]) -> tuple[int, float, float]:
    """(nodes, Plan.run's and the program's median time per run) of the session's one step program."""
    for i in range(WARMUP_RUNS):
        run_once(i)
    plans = session._engine._plans
    (key,) = [k for k, r in plans.items() if isinstance(r, call_program.StepProgram) and r.run.__name__ == "call"]
    program = plans[key]
    times: dict[str, list[float]] = {"plan": [], "program": []}
    for block in range(blocks):
        order = [("plan", program._plan), ("program", program)]
        for name, runner in order if block % 2 == 0 else order[::-1]:
            plans[key] = runner
            started = clock()
            for i in range(runs_per_block):
                run_once(i)
            times[name].append((clock() - started) / runs_per_block)
    plans[key] = program
    return len(program._plan.nodes), statistics.median(times["plan"]), statistics.median(times["program"])


def small(blocks: int) -> tuple[int, float, float]:
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [4])
        y = x
        for _ in range(7):
            y = tf.nn.relu(y * 1.5 - 0.5)
        feed = {x: np.ones(4, np.float32)}
        with tf.Session() as session:
            return alternate(session, lambda i: session.run(y, feed), 2000, blocks, time.perf_counter)


def sparse_step(model: str, blocks: int) -> tuple[int, float, float]:
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    with tf.Graph().as_default():
        feeds, loss, batches = sparse_training.build(tf, model, 1_000_000)
        step = sparse_training.train_op(tf, model, loss)
        feed_dicts = [dict(zip(feeds, batch)) for batch in batches]
        with tf.Session(config=config) as session:
            session.run(tf.global_variables_initializer())
            return alternate(session, lambda i: session.run(step, feed_dicts[i % len(feed_dicts)]), 20, blocks,
                             time.process_time)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", choices=("small", "wide_deep", "dlrm_like"),
                        default=["small", "wide_deep", "dlrm_like"])
    parser.add_argument("--blocks", type=int, default=10)
    args = parser.parse_args()
    print(f"median of {args.blocks} interleaved blocks each, load average {os.getloadavg()[0]:.1f}")
    for case in args.cases:
        if case == "small":
            nodes, by_plan, by_program = small(args.blocks)
            unit, scale = "us wall per run", 1e6
        else:
            nodes, by_plan, by_program = sparse_step(case, args.blocks)
            unit, scale = "ms CPU per step", 1e3
        print(f"{case:10s} {nodes:5d} nodes  Plan.run {by_plan * scale:8.2f}  program {by_program * scale:8.2f} "
              f"{unit}  ({by_plan / by_program:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
