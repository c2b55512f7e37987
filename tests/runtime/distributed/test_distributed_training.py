"""Between-graph training on a real cluster of processes: accuracy, and surviving failures.

Every task runs examples/distributed_digits.py with its own TF_CONFIG, as in a pod.
"""

import os
import re
import signal
import subprocess
import sys

import pytest

from cluster_processes import LocalCluster
from cluster_processes import task_environment

pytestmark = [pytest.mark.timeout(300), pytest.mark.gpu_node]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROGRAM = os.path.join(ROOT, "examples", "distributed_digits.py")


def program(*flags):
    return [sys.executable, PROGRAM, "--log-every", "50", *flags]


def test_tensorgrid_local_async_training_reaches_single_process_accuracy(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tensorgrid", "local", "--ps", "1", "--workers", "2", "--",
         *program("--steps", "800", "--min-accuracy", "0.9", "--checkpoint-dir", str(tmp_path))],
        capture_output=True, text=True, timeout=280, env=task_environment())
    assert result.returncode == 0, result.stdout + result.stderr
    accuracy = float(re.search(r"test accuracy (\S+)", result.stdout).group(1))
    assert accuracy >= 0.9
    # Every task exited by itself: the PS stopped once both workers finished.
    assert "tasks: ps:0=0, worker:0=0, worker:1=0" in result.stdout
    assert "stopped:" not in result.stdout
    assert "[worker:1]" in result.stdout and "[ps:0]" in result.stdout


def test_tensorgrid_local_sync_training(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tensorgrid", "local", "--ps", "1", "--workers", "2", "--sync", "--",
         *program("--steps", "400", "--learning-rate", "0.1", "--min-accuracy", "0.9",
                  "--checkpoint-dir", str(tmp_path))],
        capture_output=True, text=True, timeout=280, env=task_environment())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "training sync" in result.stdout
    assert float(re.search(r"test accuracy (\S+)", result.stdout).group(1)) >= 0.9
    assert "stopped:" not in result.stdout


def _start_all(cluster, flags, order=("ps", "worker")):
    for job in order:
        for (j, i), task in cluster.tasks.items():
            if j == job:
                task.start(wait=False, command=program(*flags))


def test_killing_a_worker_does_not_stop_the_others(tmp_path):
    with LocalCluster(tmp_path, {"ps": 1, "worker": 3}, start=False,
                      extra_env={"TENSORGRID_PS_GRACE_SECONDS": "2"}) as cluster:
        _start_all(cluster, ["--steps", "900", "--checkpoint-dir", str(tmp_path / "ckpt")])
        victim = cluster.task("worker", 2)
        victim.wait_for_output("global step", timeout=120)
        victim.kill(signal.SIGKILL)
        assert cluster.task("worker", 0).wait(timeout=240) == 0, cluster.task("worker", 0).log()
        assert cluster.task("worker", 1).wait(timeout=60) == 0, cluster.task("worker", 1).log()
        # The PS does not wait for the dead worker forever: a grace period after the chief finished.
        assert cluster.task("ps", 0).wait(timeout=60) == 0
        assert "the chief finished" in cluster.task("ps", 0).log()
        assert "test accuracy" in cluster.task("worker", 0).log()


def test_workers_started_before_the_ps_wait_for_it(tmp_path):
    with LocalCluster(tmp_path, {"ps": 1, "worker": 2}, start=False) as cluster:
        _start_all(cluster, ["--steps", "300", "--min-accuracy", "0.5", "--checkpoint-dir", str(tmp_path / "c")],
                   order=("worker",))
        chief = cluster.task("worker", 0)
        chief.wait_for_output("waiting for /job:ps", timeout=60)
        cluster.task("ps", 0).start(wait=False, command=program())
        assert chief.wait(timeout=200) == 0, chief.log()
        assert cluster.task("worker", 1).wait(timeout=60) == 0
        assert cluster.task("ps", 0).wait(timeout=60) == 0


def test_a_restarted_ps_resumes_from_the_latest_checkpoint_with_the_step_intact(tmp_path):
    checkpoints = tmp_path / "ckpt"
    flags = ["--steps", "1200", "--checkpoint-every", "100", "--checkpoint-dir", str(checkpoints),
             "--min-accuracy", "0.5"]
    with LocalCluster(tmp_path, {"ps": 1, "worker": 2}, start=False) as cluster:
        _start_all(cluster, flags)
        chief = cluster.task("worker", 0)
        ps = cluster.task("ps", 0)
        while not _checkpoint_steps(checkpoints) or max(_checkpoint_steps(checkpoints)) < 200:
            chief.wait_for_output("global step", timeout=120)
            if chief.process.poll() is not None:
                pytest.fail(f"chief finished before a checkpoint at step 200:\n{chief.log()}")
        saved = max(_checkpoint_steps(checkpoints))
        ps.kill(signal.SIGKILL)
        ps.start(wait=False, command=program(*flags))
        assert chief.wait(timeout=240) == 0, chief.log()
        log = chief.log()
        assert "Restoring the model from checkpoint" in log
        after = log.split("Restoring the model from checkpoint", 1)[1]
        resumed = [int(s) for s in re.findall(r"global step\s+(\d+)", after)]
        assert resumed and min(resumed) >= saved, (saved, resumed[:3])
        assert cluster.task("worker", 1).wait(timeout=120) == 0, cluster.task("worker", 1).log()


def _checkpoint_steps(directory):
    if not directory.exists():
        return []
    return [int(m.group(1)) for name in os.listdir(directory) for m in [re.match(r"model\.ckpt-(\d+)\.index$", name)]
            if m]


def test_in_graph_replication_example_trains_and_every_task_exits(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tensorgrid", "local", "--ps", "1", "--workers", "2", "--",
         sys.executable, os.path.join(ROOT, "examples", "in_graph_digits.py"), "--steps", "300",
         "--min-accuracy", "0.85"],
        capture_output=True, text=True, timeout=280, env=task_environment())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 towers" in result.stdout
    assert "tasks: ps:0=0, worker:0=0, worker:1=0" in result.stdout
    assert "stopped:" not in result.stdout
