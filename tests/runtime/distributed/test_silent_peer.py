"""A parameter server that stops answering without closing its connections (power
loss, a partition, a frozen process) is noticed within a bound, named in the
workers' logs, and training goes on once it answers again or a replacement is up.

The PS is frozen with SIGSTOP: its kernel keeps the connections open and accepts new
ones, as for a partitioned host whose connections were not reset, but nothing answers.
Every task is a real process running examples/distributed_digits.py.
"""

import os
import re
import signal
import sys
import time

import pytest

from cluster_processes import LocalCluster

pytestmark = [pytest.mark.timeout(300)]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROGRAM = os.path.join(ROOT, "examples", "distributed_digits.py")
# Short bounds, so the test waits seconds rather than the defaults' half minute.
LIVENESS_ENV = {"TENSORGRID_REPLY_PROBE_SECONDS": "2", "TENSORGRID_KEEPALIVE_SECONDS": "2",
                "TENSORGRID_KEEPALIVE_TIMEOUT_SECONDS": "2"}
DETECTED = "A step failed with UnavailableError"


def _program(*flags):
    return [sys.executable, PROGRAM, "--log-every", "20", "--min-accuracy", "0.5", *flags]


def _global_steps(text):
    return [int(s) for s in re.findall(r"^\w+:\d+ global step\s+(\d+)", text, re.MULTILINE)]


def _wait_for_step(task, at_least, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        steps = _global_steps(task.log())
        if steps and steps[-1] >= at_least:
            return steps[-1]
        if task.process.poll() is not None:
            pytest.fail(f"{task.job}:{task.index} exited before global step {at_least}:\n{task.log()}")
        time.sleep(0.1)
    pytest.fail(f"{task.job}:{task.index} did not reach global step {at_least}:\n{task.log()}")


def _start(cluster, flags):
    for job in ("ps", "worker"):
        for (j, _), task in cluster.tasks.items():
            if j == job:
                task.start(wait=False, command=_program(*flags))


def _freeze_until_detected(cluster):
    """Freezes the PS mid-training; returns each worker's log once it reported the PS gone."""
    ps = cluster.task("ps", 0)
    workers = [cluster.task("worker", 0), cluster.task("worker", 1)]
    for worker in workers:
        _wait_for_step(worker, 300, timeout=180)
    os.killpg(ps.process.pid, signal.SIGSTOP)
    # The bound is seconds (one probe interval, one probe timeout, one status deadline);
    # 90 s leaves room for a loaded machine, against the hang forever this replaces.
    for worker in workers:
        worker.wait_for_output(DETECTED, timeout=90)
        failure = worker.log().split(DETECTED, 1)[1].splitlines()[0]
        assert "/job:ps/replica:0/task:0" in failure, failure


def test_a_frozen_ps_is_reported_and_its_replacement_resumes_from_the_checkpoint(tmp_path):
    flags = ["--steps", "1200", "--checkpoint-every", "100", "--checkpoint-dir", str(tmp_path / "ckpt")]
    with LocalCluster(tmp_path, {"ps": 1, "worker": 2}, start=False, extra_env=LIVENESS_ENV) as cluster:
        _start(cluster, flags)
        _freeze_until_detected(cluster)
        ps, chief = cluster.task("ps", 0), cluster.task("worker", 0)
        ps.kill(signal.SIGKILL)
        ps.start(wait=False, command=_program(*flags))
        assert chief.wait(timeout=240) == 0, chief.log()
        assert "Restoring the model from checkpoint" in chief.log().split(DETECTED, 1)[1]
        assert cluster.task("worker", 1).wait(timeout=120) == 0, cluster.task("worker", 1).log()
        assert ps.wait(timeout=120) == 0, ps.log()


@pytest.mark.parametrize("transport", ["data-channel", "grpc"])
def test_a_ps_that_answers_again_keeps_its_live_model(tmp_path, transport):
    """``grpc``: every call on gRPC (no data channel), where gRPC's keepalive pings find the
    frozen peer."""
    flags = ["--steps", "1200", "--checkpoint-every", "100000", "--checkpoint-dir", str(tmp_path / "ckpt")]
    env = dict(LIVENESS_ENV, TENSORGRID_DATA_CHANNEL="0" if transport == "grpc" else "1")
    with LocalCluster(tmp_path, {"ps": 1, "worker": 2}, start=False, extra_env=env) as cluster:
        _start(cluster, flags)
        chief = cluster.task("worker", 0)
        _freeze_until_detected(cluster)
        reached = max(_global_steps(chief.log()))
        os.killpg(cluster.task("ps", 0).process.pid, signal.SIGCONT)
        assert chief.wait(timeout=240) == 0, chief.log()
        after = chief.log().split(DETECTED, 1)[1]
        assert "Restoring the model" not in after
        assert min(_global_steps(after)) >= reached
        assert cluster.task("worker", 1).wait(timeout=120) == 0, cluster.task("worker", 1).log()
        assert cluster.task("ps", 0).wait(timeout=120) == 0, cluster.task("ps", 0).log()

