"""A chief killed mid-training and started again keeps the live model on the parameter servers.

The PS keeps the variables while the chief is gone; the restarted chief finds them
initialized and trains on from there (docs/architecture.md, "Session recovery never
rolls a live model back"), and the PS reaches the new chief's data channel at once.
Every task is a real process running examples/distributed_digits.py.
"""

import os
import re
import signal
import sys
import time

import pytest

from cluster_processes import LocalCluster
from tensorgrid.distributed.rpc import ports

pytestmark = [pytest.mark.timeout(300)]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROGRAM = os.path.join(ROOT, "examples", "distributed_digits.py")


def _program(*flags):
    return [sys.executable, PROGRAM, "--log-every", "20", "--min-accuracy", "0.5", *flags]


def _global_steps(text):
    return [int(s) for s in re.findall(r"^\w+:\d+ global step\s+(\d+)", text, re.MULTILINE)]


def _wait_for_step(task, at_least, timeout):
    """Waits until ``task`` logged a global step of at least ``at_least``; returns the last one."""
    for _ in range(int(timeout * 10)):
        steps = _global_steps(task.log())
        if steps and steps[-1] >= at_least:
            return steps[-1]
        if task.process.poll() is not None:
            pytest.fail(f"{task.job}:{task.index} exited before global step {at_least}:\n{task.log()}")
        time.sleep(0.1)
    pytest.fail(f"{task.job}:{task.index} did not reach global step {at_least}:\n{task.log()}")


@pytest.mark.parametrize("mode", ["async", "sync", "async-fixed-data-port"])
def test_a_restarted_chief_keeps_the_live_model(tmp_path, mode):
    """``async-fixed-data-port``: the chief's data channel has a fixed port, as on
    Kubernetes, so its restart shows only in its incarnation."""
    flags = ["--steps", "2500", "--checkpoint-every", "100000", "--checkpoint-dir", str(tmp_path / "ckpt")]
    if mode == "sync":
        flags += ["--sync", "--learning-rate", "0.1"]
    with LocalCluster(tmp_path, {"ps": 1, "worker": 2}, start=False) as cluster:
        if mode == "async-fixed-data-port":
            cluster.task("worker", 0).extra_env = {"TENSORGRID_DATA_PORT": str(ports.free_ports(1)[0])}
        for job in ("ps", "worker"):
            for (j, _), task in cluster.tasks.items():
                if j == job:
                    task.start(wait=False, command=_program(*flags))
        chief, other = cluster.task("worker", 0), cluster.task("worker", 1)
        reached = _wait_for_step(chief, 200, timeout=180)
        chief.kill(signal.SIGKILL)
        before_restart = len(chief.log())
        chief.start(wait=False, command=_program(*flags))
        assert chief.wait(timeout=240) == 0, chief.log()
        after = chief.log()[before_restart:]
        assert "Model is already initialized on the parameter servers" in after, after
        assert "Restoring the model" not in after and "Running local_init" not in after
        resumed = _global_steps(after)
        assert resumed and min(resumed) >= reached, (reached, resumed[:3], after)
        assert other.wait(timeout=120) == 0, other.log()
        assert cluster.task("ps", 0).wait(timeout=120) == 0, cluster.task("ps", 0).log()
