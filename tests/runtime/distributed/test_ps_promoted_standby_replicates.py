"""The PS a standby became keeps a live replica again: it pushes its state to the next standby
started at the standby's address, so losing the same PS a second (and third) time loses no more
than the lag, with no checkpoint directory. On loopback, 1 PS, 2 workers:

1. the PS is SIGKILLed; standby 1 (told by its take-over file) becomes ``ps:0``; standby 2 starts
   at standby 1's old address and receives the promoted PS's whole state;
2. the promoted process is SIGKILLed and started again with the same command (its take-over file
   still names ``ps:0``, as after a container restart on Kubernetes): it comes back as ``ps:0``,
   not as a standby, and loads its state from standby 2;
3. that process is SIGKILLed too; standby 2, told by its file, takes over with the replica it holds.

After each loss the workers' next steps are within a few steps of the last before it."""

import signal
import sys
import time

import pytest

from cluster_processes import LocalCluster
from cluster_processes import TaskProcess
from ps_failover_support import PROGRAM
from ps_failover_support import reports
from tensorgrid.distributed.rpc import ports

pytestmark = [pytest.mark.timeout(240)]

PS0 = "/job:ps/replica:0/task:0"
# Trains until the test ends it: the three losses come at steps the test waits for, not before an end.
COMMAND = [sys.executable, PROGRAM, "--steps", "1000000", "--log-every", "10", "--pace-ms", "10", "--rows", "2000"]
MARGIN_STEPS = 40  # the lag (1 s at most) of a few dozen steps a second, and the steps in flight
PUSHED_WHOLE_STATE = f"{PS0}: pushed its whole state to the standby of {PS0}"


def _standby(cluster, tmp_path, name, address, take_over_file):
    task = TaskProcess("ps-standby", 0, address, cluster.cluster, str(tmp_path / f"{name}.log"),
                       {"TENSORGRID_PS_STANDBY_FOR": PS0})
    return task.start(wait=False, command=[sys.executable, "-m", "tensorgrid", "ps-standby", "--address", address,
                                           "--take-over-file", str(take_over_file)])


def _steps(chief):
    """The global steps worker:0 reported, in order, from its whole log (``log()`` keeps its tail)."""
    with open(chief.log_path, "rb") as f:
        return [step for step, _ in reports(f.read().decode(errors="replace"))]


def _wait_for_step(chief, step, timeout=90):
    deadline = time.monotonic() + timeout
    while not _steps(chief) or _steps(chief)[-1] < step:
        assert time.monotonic() < deadline, f"no global step {step} in {timeout} s:\n{chief.log()}"
        assert chief.process.poll() is None, chief.log()
        time.sleep(0.05)


def _lose(ps, chief, then):
    """SIGKILLs ``ps`` at the chief's latest step, runs ``then()`` (what replaces it), and returns
    (the last step reported before, the least step reported after, once the steps went past it)."""
    before = _steps(chief)
    ps.kill(signal.SIGKILL)
    then()
    _wait_for_step(chief, before[-1] + 1)
    return before[-1], min(_steps(chief)[len(before):])


def _wait_for_count(task, text, count, timeout=60):
    deadline = time.monotonic() + timeout
    while task.log().count(text) < count:
        assert time.monotonic() < deadline, f"{text!r} not said {count} times in {timeout} s:\n{task.log()}"
        assert task.process.poll() is None, task.log()
        time.sleep(0.05)


def test_a_promoted_standby_replicates_to_the_next_one_and_comes_back_as_the_ps(tmp_path):
    standby_address = f"localhost:{ports.free_ports(1)[0]}"
    first_file, second_file = tmp_path / "standby1-take-over", tmp_path / "standby2-take-over"
    with LocalCluster(tmp_path, {"ps": 1, "worker": 2}, start=False,
                      extra_env={"TENSORGRID_PS_REPLICA_ADDRESS": standby_address}) as cluster:
        standbys = [_standby(cluster, tmp_path, "standby1", standby_address, first_file)]
        try:
            standbys[0].wait_listening(timeout=60)
            for task in cluster.tasks.values():
                task.start(wait=False, command=COMMAND)
            chief = cluster.task("worker", 0)
            _wait_for_step(chief, 60)

            # 1. The PS is lost: standby 1 becomes it; standby 2 comes up where standby 1 served.
            losses = [_lose(cluster.task("ps", 0), chief, lambda: first_file.write_text(PS0))]
            promoted = standbys[0]
            promoted.wait_for_output(f"a standby took over at {cluster.cluster['ps'][0]}", timeout=30)
            standbys.append(_standby(cluster, tmp_path, "standby2", standby_address, second_file))
            promoted.wait_for_output(PUSHED_WHOLE_STATE, timeout=60)
            _wait_for_step(chief, losses[-1][1] + 20)  # pushes go on: the replica follows the steps

            # 2. The promoted process ends and starts again with its file still naming ps:0: it is ps:0.
            restarted = TaskProcess("ps-standby", 0, standby_address, cluster.cluster,
                                    str(tmp_path / "standby1-restarted.log"), {"TENSORGRID_PS_STANDBY_FOR": PS0})
            standbys.append(restarted)
            losses.append(_lose(promoted, chief, lambda: restarted.start(wait=False, command=promoted.process.args)))
            restarted.wait_for_output(f"from its live replica on the standby of {PS0}", timeout=5)
            _wait_for_count(restarted, PUSHED_WHOLE_STATE, 1)  # standby 2 now holds this incarnation's state
            _wait_for_step(chief, losses[-1][1] + 20)

            # 3. The same PS is lost again: standby 2 takes over with the replica it holds.
            losses.append(_lose(restarted, chief, lambda: second_file.write_text(PS0)))
            standbys[1].wait_for_output("from its live replica on this standby", timeout=5)
        finally:
            for standby in standbys:
                standby.kill()
        restarted_log = restarted.log()
        assert "comes back as /job:ps/replica:0/task:0, not as a standby" in restarted_log, restarted_log
        assert "Standby for" not in restarted_log, restarted_log  # it never served as a standby
        with open(chief.log_path, "rb") as f:
            recovered = f.read().decode(errors="replace").split("A step failed", 1)[1]
        assert "Initializing the model" not in recovered  # the model was never lost
        for before, resumed in losses:
            assert resumed >= before - MARGIN_STEPS, (losses, chief.log())
