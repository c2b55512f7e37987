"""The final-figures contract between the halves: when a chief's process ends, its runtime leaves
the job's last global step, rate, target and loss in the file ``TENSORGRID_TERMINATION_MESSAGE_PATH``
names (the container's termination message), and the operator's parser
(``tensorgrid_operator.reconcile.progress.final_figures``) reads them from it."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from tensorgrid.distributed.rpc import ports
from tensorgrid_operator.reconcile import progress

ROOT = pathlib.Path(__file__).resolve().parents[3]
# A PS and the chief (worker 0) in one process, trained 7 steps with a loss summary at each, then
# the interpreter exits: the chief's server writes its figures on the way out.
TRAINING = """
import sys
import tensorgrid as tf
spec = {"ps": ["localhost:%d"], "worker": ["localhost:%d"]}
ps = tf.train.Server(spec, "ps", 0)
chief = tf.train.Server(spec, "worker", 0)
with tf.Graph().as_default():
    with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
        step = tf.train.get_or_create_global_step()
        w = tf.get_variable("w", [4], initializer=tf.zeros_initializer())
        loss = tf.reduce_sum(tf.square(w - 1.0))
        tf.summary.scalar("loss", loss)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    with tf.train.MonitoredTrainingSession(master=chief.target, is_chief=True, checkpoint_dir=sys.argv[1],
                                           hooks=[tf.train.StopAtStepHook(last_step=7)],
                                           save_summaries_steps=1, save_checkpoint_secs=None) as sess:
        while not sess.should_stop():
            sess.run(train)
"""


def test_the_operator_reads_the_figures_a_chief_leaves_when_it_ends(tmp_path: pathlib.Path) -> None:
    message = tmp_path / "termination-log"
    env = {**os.environ, "TENSORGRID_TERMINATION_MESSAGE_PATH": str(message),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "runtime"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", TRAINING % tuple(ports.free_ports(2)), str(tmp_path)],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    figures = progress.final_figures(message.read_text())
    assert figures is not None, message.read_text()
    assert (figures["globalStep"], figures["targetStep"]) == (7, 7)
    assert figures["stepsPerSecond"] > 0
    assert set(figures["losses"]) == {"loss"} and 0 < figures["losses"]["loss"] < 4.0
