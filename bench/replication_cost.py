"""What the ring of live PS replicas costs a large model's training: steps/s with it on and off.

The issue's target (docs/fault-tolerance.md, "When a parameter server dies"): with
``TENSORGRID_PS_REPLICATION=1`` a job trains at >= 0.9 of its steps/s with it ``0``. The model is
the one replication costs most: ``examples/wide_deep_click.py`` (a 1,000,000 x 64 table and a
1,000,000 x 1 table, Adagrad, over 2 PS), 2 async workers under ``tensorgrid local``, so each PS
pushes its half of both tables and their accumulators whole once (about 260 MB), then the rows
its steps write. Runs alternate on, off, on, off, ... so a change of the machine's load falls on
both. Per run: worker:0's global steps/s over a common window (from the first report at or past
``--window-from`` to its last report: the first full push falls before it, the steady state in
it) and the seconds of the whole run (the first push included). Reported: the medians and
min-max per mode, their ratio, and the load average before and after.

Run::

    PYTHONPATH=runtime python bench/replication_cost.py [--steps 600] [--repeats 3] [--window-from 100]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "wide_deep_click.py")
REPORT = re.compile(r"worker:0 global step\s+(\d+)")


def run(replication: bool, steps: int, window_from: int, extra_env: dict[str, str]) -> dict[str, float]:
    """One job; worker:0's steps/s over the window and the run's seconds."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", TENSORGRID_PS_REPLICATION="1" if replication else "0",
               **extra_env)
    command = [sys.executable, "-m", "tensorgrid", "local", "--ps", "2", "--workers", "2", "--",
               sys.executable, EXAMPLE, "--steps", str(steps), "--log-every", "10"]
    started = time.monotonic()
    reports: list[tuple[int, float]] = []
    tail: list[str] = []
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as job:
        assert job.stdout is not None
        for line in job.stdout:
            tail = (tail + [line])[-40:]
            found = REPORT.search(line)
            if found:
                reports.append((int(found.group(1)), time.monotonic()))
        code = job.wait()
    seconds = time.monotonic() - started
    if code != 0:
        raise RuntimeError(f"tensorgrid local exited {code}:\n{''.join(tail)}")
    window = [(step, at) for step, at in reports if step >= window_from]
    if len(window) < 2:
        raise RuntimeError(f"worker:0 reported {len(window)} steps at or past global step {window_from}: "
                           f"too few for a window (--steps {steps})")
    (s0, t0), (s1, t1) = window[0], window[-1]
    return {"steps_per_s": (s1 - s0) / (t1 - t0), "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3, help="runs per mode, interleaved")
    parser.add_argument("--window-from", type=int, default=100, help="the global step the window starts at")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the replication-on runs (e.g. "
                             "TENSORGRID_PS_REPLICA_INTERVAL_S=0.5); repeatable")
    args = parser.parse_args()
    extra = {}
    for item in args.env:
        name, equals, value = item.partition("=")
        if not equals:
            parser.error(f"--env {item!r}: write NAME=VALUE")
        extra[name] = value
    loads = [os.getloadavg()[0]]
    results: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    for _ in range(args.repeats):
        for replication in (True, False):
            mode = "on" if replication else "off"
            result = run(replication, args.steps, args.window_from, extra if replication else {})
            results[mode].append(result)
            loads.append(os.getloadavg()[0])
            print(f"replication {mode}: {result['steps_per_s']:.2f} global steps/s from step {args.window_from}, "
                  f"{result['seconds']:.1f} s the run (load {loads[-1]:.1f})", flush=True)
    medians = {}
    for mode, found in results.items():
        rates = [r["steps_per_s"] for r in found]
        seconds = [r["seconds"] for r in found]
        medians[mode] = statistics.median(rates)
        print(f"{mode}: median {medians[mode]:.2f} global steps/s (min-max {min(rates):.2f}-{max(rates):.2f}), "
              f"median {statistics.median(seconds):.1f} s a run ({min(seconds):.1f}-{max(seconds):.1f})", flush=True)
    seconds_ratio = (statistics.median(r["seconds"] for r in results["off"])
                     / statistics.median(r["seconds"] for r in results["on"]))
    print(f"steps/s on / off: {medians['on'] / medians['off']:.2f} in the window, {seconds_ratio:.2f} over whole "
          f"runs; 1-minute load average {min(loads):.1f}-{max(loads):.1f}", flush=True)


if __name__ == "__main__":
    main()
