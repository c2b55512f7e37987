"""Synchronous training with a dead worker: the chief reports which replica the step
waits for, then waits for its replacement or fails, as TENSORGRID_SYNC_MISSING_REPLICAS
says. Every task is a real process running examples/distributed_digits.py --sync."""

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
REPORT = "sync training: global step"


def _program(*flags):
    return [sys.executable, PROGRAM, "--sync", "--learning-rate", "0.1", "--log-every", "20", "--min-accuracy", "0.5",
            "--steps", "1500", "--checkpoint-every", "100000", *flags]


def _start_and_kill_worker_1(cluster, tmp_path):
    for job in ("ps", "worker"):
        for (j, _), task in cluster.tasks.items():
            if j == job:
                task.start(wait=False, command=_program("--checkpoint-dir", str(tmp_path / "ckpt")))
    chief, other = cluster.task("worker", 0), cluster.task("worker", 1)
    deadline = time.monotonic() + 180
    while not re.search(r"^worker:1 global step\s+[1-9]\d\d", other.log(), re.MULTILINE):
        assert time.monotonic() < deadline and other.process.poll() is None, other.log()
        time.sleep(0.1)
    other.kill(signal.SIGKILL)
    chief.wait_for_output(REPORT, timeout=60)
    report = chief.log().split(REPORT, 1)[1].splitlines()[0]
    assert re.search(r"\d+ of 2 in; training tasks not answering: /job:worker/replica:0/task:1 \(", report), report
    return chief, other


def test_the_chief_names_the_missing_replica_and_goes_on_with_its_replacement(tmp_path):
    with LocalCluster(tmp_path, {"ps": 1, "worker": 2}, start=False,
                      extra_env={"TENSORGRID_SYNC_REPORT_SECONDS": "2"}) as cluster:
        chief, other = _start_and_kill_worker_1(cluster, tmp_path)
        other.start(wait=False, command=_program("--checkpoint-dir", str(tmp_path / "ckpt")))
        assert chief.wait(timeout=240) == 0, chief.log()
        assert other.wait(timeout=120) == 0, other.log()


def test_with_fail_the_chief_stops_naming_the_missing_replica(tmp_path):
    with LocalCluster(tmp_path, {"ps": 1, "worker": 2}, start=False,
                      extra_env={"TENSORGRID_SYNC_REPORT_SECONDS": "2", "TENSORGRID_SYNC_MISSING_REPLICAS": "fail",
                                 "TENSORGRID_SYNC_FAIL_AFTER_SECONDS": "5"}) as cluster:
        chief, _ = _start_and_kill_worker_1(cluster, tmp_path)
        assert chief.wait(timeout=120) != 0, chief.log()
        assert re.search(r"DeadlineExceededError: synchronous training stopped: global step \d+ got \d of 2 gradients"
                         r".*/job:worker/replica:0/task:1", chief.log()), chief.log()


def test_the_settings_refuse_bad_values_naming_them():
    from tensorgrid.train import sync_replicas_watch as watch

    assert watch.WatchSettings.from_env({}) == watch.WatchSettings()
    assert watch.WatchSettings.from_env({watch.MISSING_ENV: "fail", watch.FAIL_AFTER_ENV: "90"}).fail_after_s == 90
    with pytest.raises(ValueError, match=r"TENSORGRID_SYNC_MISSING_REPLICAS='skip'; valid values are wait, fail"):
        watch.WatchSettings.from_env({watch.MISSING_ENV: "skip"})
    with pytest.raises(ValueError, match=r"TENSORGRID_SYNC_REPORT_SECONDS='0' is not a number of seconds"):
        watch.WatchSettings.from_env({watch.REPORT_ENV: "0"})
