"""What the PS-failover tests share: the program they run (``ps_failover_program.py``),
its progress reports, and ps:0's ``tensorgrid_ps_started_from_replica`` read from a
metrics page (tests/runtime/distributed/test_ps_failover.py, test_ps_standby_takeover.py)."""

from __future__ import annotations

import os
import re
import time
import urllib.request
from typing import Any

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ps_failover_program.py")
REPORT = re.compile(r"worker:0 global step (\d+) examples (\d+)")
STARTED_FROM_REPLICA = re.compile(
    r'^tensorgrid_ps_started_from_replica\{task="/job:ps/replica:0/task:0"\} (\S+)$', re.MULTILINE)


def reports(log: str) -> list[tuple[int, int]]:
    """The (global step, examples) the program's worker:0 reported, in order."""
    return [(int(step), int(examples)) for step, examples in REPORT.findall(log)]


def started_from_replica(task: Any, metrics_port: int, who: str, timeout: float = 60) -> float:
    """ps:0's ``tensorgrid_ps_started_from_replica`` on the metrics page of ``task`` (a
    ``cluster_processes.TaskProcess``, ``who`` in messages), once its start's load has ended
    (the sample is absent until then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as response:
                found = STARTED_FROM_REPLICA.search(response.read().decode())
            if found:
                return float(found.group(1))
        except OSError:
            pass  # not serving yet
        assert task.process.poll() is None, task.log()
        time.sleep(0.05)
    raise TimeoutError(f"{who} exported no tensorgrid_ps_started_from_replica in {timeout} s:\n{task.log()}")
