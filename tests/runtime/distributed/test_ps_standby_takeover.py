"""A standby that takes over its PS's address: 1 PS whose replica a ``tensorgrid ps-standby``
holds, the PS SIGKILLed mid-training and never restarted; the standby, told to take over
(SIGUSR1), becomes ``ps:0`` at the PS's address with the replica it held loaded, and the
workers' retried steps go on from (close to) where they were, with no checkpoint directory."""

import signal
import sys
import time

import pytest

from cluster_processes import LocalCluster
from cluster_processes import TaskProcess
from ps_failover_support import PROGRAM
from ps_failover_support import reports
from ps_failover_support import started_from_replica
from tensorgrid.distributed.rpc import ports

pytestmark = [pytest.mark.timeout(300)]

COMMAND = [sys.executable, PROGRAM, "--steps", "200", "--log-every", "10", "--pace-ms", "10", "--rows", "2000"]


def test_a_standby_takes_over_its_lost_ps_with_the_replica_loaded(tmp_path):
    address = f"localhost:{ports.free_ports(1)[0]}"
    metrics_port = ports.free_ports(1)[0]
    with LocalCluster(tmp_path, {"ps": 1, "worker": 2}, start=False,
                      extra_env={"TENSORGRID_PS_REPLICA_ADDRESS": address}) as cluster:
        standby = TaskProcess("ps-standby", 0, address, cluster.cluster, str(tmp_path / "standby.log"),
                              {"TENSORGRID_PS_STANDBY_FOR": "/job:ps/replica:0/task:0",
                               "TENSORGRID_METRICS_PORT": str(metrics_port)})
        standby.start(wait=False, command=[sys.executable, "-m", "tensorgrid", "ps-standby", "--address", address])
        try:
            standby.wait_listening(timeout=120)
            for task in cluster.tasks.values():
                task.start(wait=False, command=COMMAND)
            chief = cluster.task("worker", 0)
            while not reports(chief.log()) or reports(chief.log())[-1][0] < 80:
                chief.wait_for_output("global step", timeout=150)
                time.sleep(0.05)
            step, examples = reports(chief.log())[-1]
            cluster.task("ps", 0).kill(signal.SIGKILL)
            standby.process.send_signal(signal.SIGUSR1)
            assert started_from_replica(standby, metrics_port, "the standby") == 1  # it loaded the replica it held
            assert chief.wait(timeout=180) == 0, chief.log()
            assert cluster.task("worker", 1).wait(timeout=60) == 0, cluster.task("worker", 1).log()
            assert standby.wait(timeout=120) == 0, standby.log()  # it stopped as the PS, when training ended
        finally:
            standby.kill()
        standby_log = standby.log()
        assert "a standby took over at " + cluster.cluster["ps"][0] in standby_log, standby_log
        assert "from its live replica on this standby" in standby_log, standby_log
        chief_log = chief.log()
        recovered = chief_log.split("A step failed", 1)[1]
        assert "already initialized on the parameter servers" in recovered and "Initializing" not in recovered
        after = reports(chief_log)
        resumed = after[after.index((step, examples)) + 1:]
        assert resumed[0][0] >= step - 40, (step, resumed[:3])
        assert resumed[0][1] >= examples - 40 * 64, (examples, resumed[:3])
        assert resumed[-1][0] > resumed[0][0]


def test_a_standby_that_cannot_take_over_holds_its_replica_again(tmp_path):
    # The PS still listens at its address: the standby cannot start there, says so, and serves its replica again.
    address = f"localhost:{ports.free_ports(1)[0]}"
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}, start=False) as cluster:
        cluster.task("ps", 0).start()
        standby = TaskProcess("ps-standby", 0, address, cluster.cluster, str(tmp_path / "standby.log"),
                              {"TENSORGRID_PS_STANDBY_FOR": "/job:ps/replica:0/task:0"})
        standby.start(wait=False, command=[sys.executable, "-m", "tensorgrid", "ps-standby", "--address", address])
        try:
            standby.wait_for_output("Standby for /job:ps/replica:0/task:0", timeout=120)
            standby.process.send_signal(signal.SIGUSR1)
            standby.wait_for_output("did not take over", timeout=60)
            standby.wait_for_output("holding its replica again", timeout=60)
            # That error line comes before serve_standby logs its start again: wait for it.
            held = "Standby for /job:ps/replica:0/task:0: holding its replica at"
            deadline = time.monotonic() + 60
            while standby.log().count(held) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert standby.log().count(held) == 2
            standby.wait_listening(timeout=30)
            assert standby.process.poll() is None
        finally:
            standby.kill()
