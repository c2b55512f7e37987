"""A parameter server SIGKILLed mid-training and restarted at the same address, with no
checkpoint directory at all: it loads its state from the live replica on the next PS, and
the global step and the job's counters go on from (close to) where they were. With
replication off, the restarted PS comes back empty and the chief initializes the model
again, as before. Its ``tensorgrid_ps_started_from_replica`` gauge (what the operator reads
to say which recovery happened) tells the two apart."""

import signal
import subprocess
import sys
import time

import pytest

from cluster_processes import LocalCluster
from cluster_processes import TaskProcess
from cluster_processes import task_environment
from ps_failover_support import PROGRAM
from ps_failover_support import reports
from ps_failover_support import started_from_replica
from tensorgrid.distributed.rpc import ports

pytestmark = [pytest.mark.timeout(420)]

FLAGS = ["--steps", "200", "--log-every", "10", "--pace-ms", "10", "--rows", "2000"]


def _kill_ps0_midway_and_restart(cluster, kill_at_step):
    """The chief's report before the kill, its reports after, its log, and ps:0's
    ``tensorgrid_ps_started_from_replica`` at its first start and after its restart."""
    command = [sys.executable, PROGRAM, *FLAGS]
    ps0 = cluster.task("ps", 0)
    metrics_port = ports.free_ports(1)[0]
    ps0.extra_env = {**ps0.extra_env, "TENSORGRID_METRICS_PORT": str(metrics_port)}
    for task in cluster.tasks.values():
        task.start(wait=False, command=command)
    chief = cluster.task("worker", 0)
    # Read before the steps are waited for (the gauge is set before the first step): training
    # runs on meanwhile, and at 200 steps a few seconds read late is after its end under load.
    first_start = started_from_replica(ps0, metrics_port, "ps:0")
    while not reports(chief.log()) or reports(chief.log())[-1][0] < kill_at_step:
        chief.wait_for_output("global step", timeout=150)
        time.sleep(0.05)
    before = reports(chief.log())[-1]
    ps0.kill(signal.SIGKILL)
    ps0.start(wait=False, command=command)
    restart = started_from_replica(ps0, metrics_port, "ps:0")
    assert chief.wait(timeout=180) == 0, chief.log()
    after = reports(chief.log())
    return before, after[after.index(before) + 1:], chief.log(), (first_start, restart)


@pytest.fixture(params=["ring of 2 PS", "1 PS and a standby"])
def replicated_cluster(request, tmp_path):
    """2 PS, each holding the next one's replica; or 1 PS whose replica a standby task holds."""
    if request.param == "ring of 2 PS":
        with LocalCluster(tmp_path, {"ps": 2, "worker": 2}, start=False,
                          extra_env={"TENSORGRID_PS_REPLICATION": "1"}) as cluster:
            yield cluster
        return
    address = f"localhost:{ports.free_ports(1)[0]}"
    with LocalCluster(tmp_path, {"ps": 1, "worker": 2}, start=False,
                      extra_env={"TENSORGRID_PS_REPLICA_ADDRESS": address}) as cluster:
        standby = TaskProcess("ps-standby", 0, address, cluster.cluster, str(tmp_path / "standby.log"),
                              {"TENSORGRID_PS_STANDBY_FOR": "/job:ps/replica:0/task:0"})
        standby.start(wait=False, command=[sys.executable, "-m", "tensorgrid", "ps-standby", "--address", address])
        standby.wait_listening(timeout=120)
        try:
            yield cluster
        finally:
            standby.kill()


def test_a_killed_ps_resumes_from_its_live_replica_without_a_checkpoint(replicated_cluster):
    cluster = replicated_cluster
    (step, examples), resumed, chief_log, started = _kill_ps0_midway_and_restart(cluster, kill_at_step=80)
    ps0_log = cluster.task("ps", 0).log()
    assert "from its live replica" in ps0_log, ps0_log
    assert started == (0, 1)  # empty at first (its holder held nothing yet), from the replica after the kill
    assert "A step failed" in chief_log  # the chief's steps failed while ps0 was away, and were retried
    recovered = chief_log.split("A step failed", 1)[1]
    assert "already initialized on the parameter servers" in recovered and "Initializing" not in recovered
    # The lag bound is 1 s, a few dozen steps at this pace; nothing near the 80 steps a
    # restart from scratch would lose.
    first_step, first_examples = resumed[0]
    assert first_step >= step - 40, (step, resumed[:3])
    assert first_examples >= examples - 40 * 64, (examples, resumed[:3])
    assert resumed[-1][0] > first_step  # and training went on to its end (the exit status)
    assert cluster.task("worker", 1).wait(timeout=60) == 0, cluster.task("worker", 1).log()


def test_with_replication_off_a_killed_ps_comes_back_empty(tmp_path, monkeypatch):
    monkeypatch.delenv("TENSORGRID_PS_REPLICATION", raising=False)  # off: the default without a standby
    with LocalCluster(tmp_path, {"ps": 2, "worker": 2}, start=False) as cluster:
        (step, _), resumed, chief_log, started = _kill_ps0_midway_and_restart(cluster, kill_at_step=80)
        assert "from its live replica" not in cluster.task("ps", 0).log()
        assert started == (0, 0)
        assert "Initializing the model" in chief_log.split("A step failed", 1)[1]
        # No checkpoint to restore: the chief initialized the model again, the step restarted.
        assert resumed[0][0] < step - 40, (step, resumed[:3])
        assert cluster.task("worker", 1).wait(timeout=60) == 0, cluster.task("worker", 1).log()


def test_tensorgrid_local_ps_standby_starts_a_standby_holding_the_ps_replica(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tensorgrid", "local", "--ps", "1", "--workers", "1", "--ps-standby", "--",
         sys.executable, PROGRAM, "--steps", "20", "--log-every", "5", "--rows", "100"],
        env=task_environment(), capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[ps-standby:0]" in result.stdout and "Standby for /job:ps/replica:0/task:0" in result.stdout
    assert "keeping a live replica of its state on the standby of /job:ps/replica:0/task:0" in result.stdout
    assert "pushed its whole state" in result.stdout
