"""``MonitoredTrainingSession`` opened again, against TensorFlow 2.21's ``tf.compat.v1`` (the oracle).

A program that opens a second MonitoredTrainingSession on the same graph (now finalized by
the first), or a new process that opens one on the checkpoint directory of an earlier run,
continues from the global step of the last checkpoint. The Scaffold's ops and Saver come
from the graph's collections, where the first session's Scaffold put them; a collection
holding two candidates is an error, as in TensorFlow.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

import cluster_processes
import tensorgrid

PROGRAM = """
import sys
if sys.argv[1] == "tensorflow":
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
else:
    import tensorgrid as tf
global_step = tf.train.get_or_create_global_step()
weight = tf.Variable(1.0, name="weight")
train = tf.group(weight.assign_add(1.0), tf.assign_add(global_step, 1))
for _ in range(int(sys.argv[3])):
    with tf.train.MonitoredTrainingSession(checkpoint_dir=sys.argv[2]) as session:
        for _ in range(int(sys.argv[4])):
            session.run(train)
        print("global_step", session.run(global_step), "weight", session.run(weight))
"""


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib_name(request: pytest.FixtureRequest) -> str:
    if request.param == "tensorflow":
        request.getfixturevalue("tf1")  # the oracle must be installed (CI fails without it)
    return str(request.param)


def run_program(lib_name: str, checkpoint_dir: str, sessions: int, steps: int) -> list[str]:
    """The ``global_step ... weight ...`` line each MonitoredTrainingSession of one process printed."""
    done = subprocess.run([sys.executable, "-c", PROGRAM, lib_name, checkpoint_dir, str(sessions), str(steps)],
                          env=cluster_processes.task_environment(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return [line for line in done.stdout.splitlines() if line.startswith("global_step")]


@pytest.mark.timeout(600)
def test_a_second_session_on_the_same_graph_continues_the_global_step(lib_name: str, tmp_path: Any) -> None:
    assert run_program(lib_name, str(tmp_path), sessions=2, steps=3) == [
        "global_step 3 weight 4.0", "global_step 6 weight 7.0"]


@pytest.mark.timeout(600)
def test_a_new_process_restores_from_the_checkpoint_dir_and_continues(lib_name: str, tmp_path: Any) -> None:
    assert run_program(lib_name, str(tmp_path), sessions=1, steps=3) == ["global_step 3 weight 4.0"]
    assert run_program(lib_name, str(tmp_path), sessions=1, steps=2) == ["global_step 5 weight 6.0"]


def test_two_savers_in_the_savers_collection_are_an_error(tf1: Any) -> None:
    for lib in (tensorgrid, tf1):
        with lib.Graph().as_default():
            lib.Variable(1.0)
            lib.add_to_collection(lib.GraphKeys.SAVERS, lib.train.Saver())
            lib.add_to_collection(lib.GraphKeys.SAVERS, lib.train.Saver())
            with pytest.raises(RuntimeError, match="More than one item in"):
                lib.train.MonitoredTrainingSession()


def test_two_init_ops_in_the_init_op_collection_are_an_error(tf1: Any) -> None:
    for lib in (tensorgrid, tf1):
        with lib.Graph().as_default():
            lib.Variable(1.0)
            lib.add_to_collection(lib.GraphKeys.INIT_OP, lib.no_op())
            lib.add_to_collection(lib.GraphKeys.INIT_OP, lib.no_op())
            with pytest.raises(RuntimeError, match="More than one item in"):
                lib.train.MonitoredTrainingSession()


def test_a_model_without_variables_runs_in_a_monitored_session(tf1: Any) -> None:
    for lib in (tensorgrid, tf1):
        with lib.Graph().as_default():
            total = lib.constant(2.0) + 3.0
            with lib.train.MonitoredTrainingSession() as session:
                assert session.run(total) == 5.0
