"""What a parameter server's death costs, with its live replica and without (docs/fault-tolerance.md).

A job of 2 PS and 2 workers trains the small wide-and-deep model of
``tests/runtime/support/ps_failover_program.py`` asynchronously, with no checkpoint
directory; every task is a process on loopback. Per mode (replication on, off), interleaved:

- throughput: global steps/s of runs without failures, on and off taking turns (the best of
  ``--repeats`` per mode; steps/s on / off, target >= 0.9);
- failover: ps:0 (which holds the global step) is SIGKILLed at ``--kill-at`` and started
  again at the same address: the global step the chief saw last before the kill and first
  after it (updates lost = their difference), and the seconds from the kill to the next
  completed step.

Run::

    PYTHONPATH=runtime python bench/ps_failover.py [--steps 600] [--kill-at 300] [--rows 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Optional

from tensorgrid.distributed.rpc.ports import free_ports

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(ROOT, "tests", "runtime", "support", "ps_failover_program.py")
REPORT = re.compile(r"worker:0 global step (\d+) examples (\d+) at ([\d.]+)")


class Job:
    """2 PS and 2 workers running the program, each a process with its log file."""

    def __init__(self, folder: str, flags: list[str], replication: bool) -> None:
        addresses = iter(f"localhost:{port}" for port in free_ports(4))
        self.cluster = {"ps": [next(addresses), next(addresses)], "worker": [next(addresses), next(addresses)]}
        self.folder, self.flags = folder, flags
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", TENSORGRID_PS_REPLICATION="1" if replication else "0")
        self.processes: dict[tuple[str, int], subprocess.Popen[bytes]] = {}

    def start(self, job: str, index: int) -> None:
        env = dict(self.env, TF_CONFIG=json.dumps({"cluster": self.cluster, "task": {"type": job, "index": index}}))
        with open(self.log_path(job, index), "ab") as log:
            self.processes[(job, index)] = subprocess.Popen([sys.executable, PROGRAM, *self.flags], env=env,
                                                            stdout=log, stderr=subprocess.STDOUT,
                                                            start_new_session=True)

    def log_path(self, job: str, index: int) -> str:
        return os.path.join(self.folder, f"{job}{index}.log")

    def log(self, job: str, index: int) -> str:
        with open(self.log_path(job, index), encoding="utf-8", errors="replace") as f:
            return f.read()

    def reports(self) -> list[tuple[int, int, float]]:
        return [(int(s), int(e), float(t)) for s, e, t in REPORT.findall(self.log("worker", 0))]

    def kill(self, job: str, index: int) -> None:
        process = self.processes[(job, index)]
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def close(self) -> None:
        for job, index in list(self.processes):
            self.kill(job, index)


def run(replication: bool, steps: int, rows: int, kill_at: Optional[int]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ps-failover-") as folder:
        job = Job(folder, ["--steps", str(steps), "--rows", str(rows), "--log-every", "1"], replication)
        try:
            for name, count in (("ps", 2), ("worker", 2)):
                for index in range(count):
                    job.start(name, index)
            chief = job.processes[("worker", 0)]
            result: dict[str, float] = {}
            if kill_at is not None:
                while not job.reports() or job.reports()[-1][0] < kill_at:
                    if chief.poll() is not None:
                        raise RuntimeError(f"the chief ended before step {kill_at}")
                    time.sleep(0.02)
                last = job.reports()[-1]
                killed_at = time.time()
                job.kill("ps", 0)
                job.start("ps", 0)
                seen = len(job.reports())
                while job.log("ps", 0).count("Started server for") < 2 and chief.poll() is None:
                    time.sleep(0.02)
                serving_at = time.time()
                chief.wait(timeout=600)
                first = job.reports()[seen:][0]
                result.update(step_before=last[0], step_after=first[0], lost=max(last[0] - first[0], 0),
                              seconds_to_next_step=first[2] - killed_at, seconds_to_serving=serving_at - killed_at)
            else:
                chief.wait(timeout=600)
                reports = job.reports()
                # From the 20th report on: the start (sessions, first registration) is not steady state.
                (s0, _, t0), (s1, _, t1) = reports[min(20, len(reports) - 2)], reports[-1]
                result["steps_per_s"] = (s1 - s0) / (t1 - t0)
            if chief.returncode != 0:
                raise RuntimeError(f"the chief exited {chief.returncode}; see {job.log_path('worker', 0)}")
            return result
        finally:
            job.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--kill-at", type=int, default=300)
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=2, help="throughput runs per mode (the best is kept)")
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"on": [], "off": []}
    # Interleaved (on, off, on, off, ...) so a change of the machine's load falls on both modes.
    for _ in range(args.repeats):
        for replication in (True, False):
            mode = "on" if replication else "off"
            rates[mode].append(run(replication, args.steps, args.rows, None)["steps_per_s"])
            print(f"replication {mode}: {rates[mode][-1]:.1f} global steps/s without failures", flush=True)
    best = {mode: max(found) for mode, found in rates.items()}
    print(f"best of {args.repeats}: on {best['on']:.1f}, off {best['off']:.1f} global steps/s", flush=True)
    print(f"steps/s on / off: {best['on'] / best['off']:.2f}", flush=True)
    for replication in (True, False):
        mode = "on" if replication else "off"
        failover = run(replication, args.steps, args.rows, args.kill_at)
        print(f"replication {mode}: ps:0 killed at global step {failover['step_before']:.0f}, training resumed at "
              f"{failover['step_after']:.0f} (updates lost: {failover['lost']:.0f}), "
              f"{failover['seconds_to_next_step']:.1f} s from the kill to the next completed step (the restarted PS "
              f"served after {failover['seconds_to_serving']:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
