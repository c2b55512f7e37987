"""What adding and removing a worker costs a running asynchronous job (issue 28, elastic jobs).

``kubectl scale tj/NAME`` adds a worker whose TF_CONFIG lists one more worker than the running
tasks' (the parameter servers take it in: ``Server.learn_peers``) and removes the highest worker
with SIGTERM. This benchmark does the same with processes on loopback, no Kubernetes: 1 PS and
``--workers`` workers train the small wide-and-deep model of
``tests/runtime/support/ps_failover_program.py`` asynchronously (every worker prints its global
step after every local step); once warm, each run goes through three phases, each measured in
the same run so that the machine's load falls on all of them:

1. ``before``: ``--window`` seconds at the starting worker count;
2. a worker joins (started with the grown TF_CONFIG, index ``--workers``): the seconds from its
   start (a new process: Python, imports, TLS, its session) to its first completed step, then
   ``joined``: ``--window`` seconds with one more worker;
3. it leaves (SIGTERM, as the operator's scale-down deletes the highest index): the seconds until
   its process is gone, then ``after``: ``--window`` seconds at the starting count again.

Per phase: global steps/s (the increments of ``global_step``, read from worker 0's reports). The
pause a join or a leave causes the running workers: the longest gap between two consecutive steps
of any running worker from the event to 2 s after it is done, against the longest gap in an
equally long stretch of ``before`` (the machine's own jitter). Figures are the median over
``--repeats`` runs, each on a fresh cluster.

Run::

    PYTHONPATH=runtime python bench/elastic_scaling.py [--repeats 3] [--workers 2] [--window 8] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional

from tensorgrid.distributed.rpc.ports import free_ports

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(ROOT, "tests", "runtime", "support", "ps_failover_program.py")
REPORT = re.compile(r"worker:\d+ global step (\d+) examples \d+ at ([\d.]+)")
WARM_STEPS = 50
# After a join or a leave is done, the stretch in which its pause is still looked for.
SETTLE_SECONDS = 2.0
EVENT_TIMEOUT_SECONDS = 120.0


class Job:
    """1 PS and some workers running the program, each a process with its log file; workers may be added."""

    def __init__(self, folder: str, workers: int, rows: int) -> None:
        addresses = [f"localhost:{port}" for port in free_ports(workers + 2)]
        self.cluster = {"ps": addresses[:1], "worker": addresses[1:workers + 1]}
        self.spare_address = addresses[workers + 1]
        self.folder = folder
        self.flags = ["--steps", str(10 ** 9), "--rows", str(rows), "--log-every", "1"]
        self.processes: dict[tuple[str, int], subprocess.Popen[bytes]] = {}

    def start(self, job: str, index: int, cluster: Optional[dict[str, list[str]]] = None) -> None:
        config = {"cluster": cluster or self.cluster, "task": {"type": job, "index": index}}
        env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CONFIG=json.dumps(config))
        with open(self.log_path(job, index), "ab") as log:
            self.processes[(job, index)] = subprocess.Popen([sys.executable, PROGRAM, *self.flags], env=env,
                                                            stdout=log, stderr=subprocess.STDOUT,
                                                            start_new_session=True)

    def join(self) -> int:
        """Starts one more worker, with the TF_CONFIG the operator gives a worker added to a running job."""
        index = len(self.cluster["worker"])
        self.start("worker", index, dict(self.cluster, worker=[*self.cluster["worker"], self.spare_address]))
        return index

    def log_path(self, job: str, index: int) -> str:
        return os.path.join(self.folder, f"{job}{index}.log")

    def reports(self, index: int) -> list[tuple[int, float]]:
        """(global step, unix time) of each step worker ``index`` reported."""
        with open(self.log_path("worker", index), encoding="utf-8", errors="replace") as f:
            return [(int(step), float(at)) for step, at in REPORT.findall(f.read())]

    def check_alive(self) -> None:
        for (job, index), process in self.processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"{job}:{index} exited {process.returncode}; see {self.log_path(job, index)}")

    def wait_for(self, what: str, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + EVENT_TIMEOUT_SECONDS
        while not done():
            self.check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {EVENT_TIMEOUT_SECONDS:.0f} s waiting for {what} (logs in "
                                   f"{self.folder})")
            time.sleep(0.02)

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def steps_per_second(reports: list[tuple[int, float]], start: float, end: float) -> float:
    """Global steps/s between ``start`` and ``end``: the last global step reported by each time."""
    def step_at(moment: float) -> int:
        seen = [step for step, at in reports if at <= moment]
        if not seen:
            raise ValueError(f"no step was reported by {moment:.3f}; the first came at {reports[0][1]:.3f}")
        return max(seen)

    return (step_at(end) - step_at(start)) / (end - start)


def longest_gap(reports: list[tuple[int, float]], start: float, end: float) -> float:
    """The longest time between two consecutive reported steps in [start, end], counting from ``start``."""
    return longest_gap_and_end(reports, start, end)[0]


def longest_gap_and_end(reports: list[tuple[int, float]], start: float, end: float) -> tuple[float, float]:
    """:func:`longest_gap`, and when that gap ended."""
    times = [start] + [at for _, at in reports if start < at <= end] + [end]
    return max((b - a, b) for a, b in zip(times, times[1:]))


def run(workers: int, window: float, rows: int) -> dict[str, float]:
    """One run: before, a join, joined, a leave, after. Returns its figures."""
    with tempfile.TemporaryDirectory(prefix="elastic-scaling-") as folder:
        job = Job(folder, workers, rows)
        try:
            job.start("ps", 0)
            for index in range(workers):
                job.start("worker", index)
            job.wait_for(f"global step {WARM_STEPS}",
                         lambda: bool(job.reports(0)) and job.reports(0)[-1][0] >= WARM_STEPS)
            time.sleep(window)
            joined_at = time.time()
            joiner = job.join()
            job.wait_for(f"worker {joiner}'s first step", lambda: bool(job.reports(joiner)))
            first_step_at = job.reports(joiner)[0][1]
            time.sleep(SETTLE_SECONDS + window)
            left_at = time.time()
            leaver = job.processes.pop(("worker", joiner))
            leaver.send_signal(signal.SIGTERM)
            leaver.wait(timeout=EVENT_TIMEOUT_SECONDS)
            gone_at = time.time()
            time.sleep(SETTLE_SECONDS + window)
            job.check_alive()
            ended_at = time.time()
            chief = job.reports(0)
            running = [job.reports(i) for i in range(workers)]
            join_span = (joined_at, first_step_at + SETTLE_SECONDS)
            leave_span = (left_at, gone_at + SETTLE_SECONDS)
            join_pause, join_pause_end = max(longest_gap_and_end(r, *join_span) for r in running)
            span = max(join_span[1] - join_span[0], leave_span[1] - leave_span[0])
            return {
                "before_steps_per_s": steps_per_second(chief, joined_at - window, joined_at),
                "joined_steps_per_s": steps_per_second(chief, first_step_at + SETTLE_SECONDS,
                                                       first_step_at + SETTLE_SECONDS + window),
                "after_steps_per_s": steps_per_second(chief, ended_at - window, ended_at),
                "join_to_first_step_s": first_step_at - joined_at,
                "join_pause_s": join_pause,
                "join_pause_end_to_first_step_s": first_step_at - join_pause_end,
                "sigterm_to_gone_s": gone_at - left_at,
                "leave_pause_s": max(longest_gap(r, *leave_span) for r in running),
                "steady_longest_gap_s": max(longest_gap(r, joined_at - min(span, window), joined_at)
                                            for r in running),
                "steady_median_step_s": statistics.median(
                    b - a for (_, a), (_, b) in zip(chief, chief[1:]) if joined_at - window <= a < joined_at),
            }
        finally:
            job.close()


ROWS = [
    ("before_steps_per_s", "global steps/s, {w} (before)", 1.0, "{:.1f}"),
    ("joined_steps_per_s", "global steps/s, {w1} (joined)", 1.0, "{:.1f}"),
    ("after_steps_per_s", "global steps/s, {w} (after the leave)", 1.0, "{:.1f}"),
    ("join_to_first_step_s", "join: new worker's start -> its first step (s)", 1.0, "{:.2f}"),
    ("join_pause_s", "join: longest step gap of a running worker (ms)", 1000.0, "{:.0f}"),
    ("join_pause_end_to_first_step_s", "join: that gap ended this long before the new worker's first step (s)",
     1.0, "{:.2f}"),
    ("sigterm_to_gone_s", "leave: SIGTERM -> process gone (s)", 1.0, "{:.2f}"),
    ("leave_pause_s", "leave: longest step gap of a running worker (ms)", 1000.0, "{:.0f}"),
    ("steady_longest_gap_s", "steady: longest step gap, same length, before (ms)", 1000.0, "{:.0f}"),
    ("steady_median_step_s", "steady: median step time of worker 0 (ms)", 1000.0, "{:.1f}"),
]


def _workers(count: int) -> str:
    return f"{count} worker" if count == 1 else f"{count} workers"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="runs, each on a fresh cluster (median reported)")
    parser.add_argument("--workers", type=int, default=2, help="workers before the join and after the leave")
    parser.add_argument("--window", type=float, default=8.0, help="seconds measured in each phase")
    parser.add_argument("--rows", type=int, default=20000, help="rows of the model's embedding table")
    parser.add_argument("--json", action="store_true", help="print the runs and medians as JSON")
    args = parser.parse_args()
    for name, value in (("--repeats", args.repeats), ("--workers", args.workers)):
        if value < 1:
            parser.error(f"{name} {value} must be >= 1")
    if not args.window > 0:
        parser.error(f"--window {args.window} must be a number of seconds > 0")
    runs = []
    for number in range(args.repeats):
        runs.append(run(args.workers, args.window, args.rows))
        if not args.json:
            print(f"run {number + 1}: " + ", ".join(f"{k} {v:.3f}" for k, v in runs[-1].items()), flush=True)
    medians = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    if args.json:
        print(json.dumps({"runs": runs, "median": medians}, indent=1))
        return
    print(f"\nmedian of {args.repeats} runs (1 ps, {args.workers} -> {args.workers + 1} -> {args.workers} workers):")
    print("| measure | median | min-max |\n|---|---|---|")
    for key, label, scale, form in ROWS:
        low, high = (min(r[key] for r in runs) * scale, max(r[key] for r in runs) * scale)
        print(f"| {label.format(w=_workers(args.workers), w1=_workers(args.workers + 1))} | {form.format(medians[key] * scale)} | "
              f"{form.format(low)}-{form.format(high)} |")


if __name__ == "__main__":
    main()
