"""``tf.train.Supervisor`` trainers on a real cluster of processes, started as TF1 programs are.

A trainer in the shape of Kubeflow's ``dist_mnist.py`` (flags for the hosts, ``server.join()``
for the PS, ``prepare_or_wait_for_session``), each task a process started by hand: the chief
initializes the model, the other worker waits for it, both train and their loss falls, the
chief writes a checkpoint, and every task ends with status 0. And
``examples/supervisor_digits.py`` (``managed_session``) under ``tensorgrid local``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cluster_processes import LocalCluster
from cluster_processes import task_environment

import tensorgrid as tf

pytestmark = [pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "supervisor_digits.py"

DIST_MNIST_STYLE = textwrap.dedent("""
    import sys
    import tempfile

    import numpy as np

    import tensorgrid as tf
    from tensorgrid import data

    flags = tf.app.flags
    flags.DEFINE_string("ps_hosts", None, "Comma-separated list of hostname:port pairs")
    flags.DEFINE_string("worker_hosts", None, "Comma-separated list of hostname:port pairs")
    flags.DEFINE_string("job_name", None, "job name: worker or ps")
    flags.DEFINE_integer("task_index", None, "Worker task index, should be >= 0")
    flags.DEFINE_string("train_dir", None, "Directory for checkpoints and summaries")
    flags.DEFINE_integer("train_steps", 300, "Number of (global) training steps to perform")
    FLAGS = flags.FLAGS


    def main(unused_argv):
        cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
        server = tf.distribute.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
        if FLAGS.job_name == "ps":
            server.join()

        is_chief = FLAGS.task_index == 0
        digits = data.load_digits()
        batches = data.Batches(digits.train.images, digits.train.labels, batch_size=64, seed=FLAGS.task_index)
        worker_device = "/job:worker/task:%d" % FLAGS.task_index
        with tf.device(tf.train.replica_device_setter(worker_device=worker_device, ps_device="/job:ps/cpu:0",
                                                      cluster=cluster)):
            global_step = tf.Variable(0, name="global_step", trainable=False)
            x = tf.placeholder(tf.float32, [None, 64])
            y_ = tf.placeholder(tf.int64, [None])
            w = tf.Variable(tf.truncated_normal([64, 10], stddev=0.1, seed=1))
            b = tf.Variable(tf.zeros([10]))
            logits = tf.matmul(x, w) + b
            cross_entropy = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y_, logits=logits))
            train_step = tf.train.AdamOptimizer(0.01).minimize(cross_entropy, global_step=global_step)

        init_op = tf.global_variables_initializer()
        sv = tf.train.Supervisor(is_chief=is_chief, logdir=FLAGS.train_dir, init_op=init_op, recovery_wait_secs=1,
                                 global_step=global_step)
        sess_config = tf.ConfigProto(allow_soft_placement=True, log_device_placement=False,
                                     device_filters=["/job:ps", "/job:worker/task:%d" % FLAGS.task_index])
        if is_chief:
            print("Worker %d: Initializing session..." % FLAGS.task_index, flush=True)
        else:
            print("Worker %d: Waiting for session to be initialized..." % FLAGS.task_index, flush=True)
        sess = sv.prepare_or_wait_for_session(server.target, config=sess_config)
        print("Worker %d: Session initialization complete." % FLAGS.task_index, flush=True)

        losses = []
        while True:
            images, labels = batches.next_batch()
            _, step, loss = sess.run([train_step, global_step, cross_entropy], feed_dict={x: images, y_: labels})
            losses.append(loss)
            # Each worker takes 20 steps of its own at least: under load one worker can take
            # nearly all the global steps before the other's first (6 of 300 was seen).
            if step >= FLAGS.train_steps and len(losses) >= 20:
                break
        print("Worker %d: first loss %.4f last loss %.4f after %d local steps (global step %d)"
              % (FLAGS.task_index, np.mean(losses[:10]), np.mean(losses[-10:]), len(losses), step), flush=True)


    if __name__ == "__main__":
        tf.app.run(main)
""")


def test_hand_started_tasks_chief_initializes_the_other_waits_both_train(tmp_path: Path) -> None:
    # Started as TF1's how-to starts them: no TENSORGRID_TLS_DIR, so the tasks take mutual TLS
    # from the user's own CA (the run's XDG_STATE_HOME), with nothing set up.
    program = tmp_path / "dist_mnist_style.py"
    program.write_text(DIST_MNIST_STYLE)
    train_dir = tmp_path / "train_dir"
    with LocalCluster(str(tmp_path), {"ps": 1, "worker": 2}, start=False,
                      extra_env={"TENSORGRID_TLS_DIR": "", "TENSORGRID_INSECURE": ""}) as cluster:
        hosts = {job: ",".join(addresses) for job, addresses in cluster.cluster.items()}

        def start(job: str, index: int) -> None:
            cluster.task(job, index).start(wait=False, command=[
                sys.executable, str(program), f"--ps_hosts={hosts['ps']}", f"--worker_hosts={hosts['worker']}",
                f"--job_name={job}", f"--task_index={index}", f"--train_dir={train_dir}"])

        start("ps", 0)
        cluster.task("ps", 0).wait_listening()
        start("worker", 1)
        other = cluster.task("worker", 1)
        # It waits: nothing initializes the model until the chief comes.
        other.wait_for_output("Waiting for the chief to initialize the model", timeout=120)
        assert "Session initialization complete" not in other.log()
        start("worker", 0)
        chief = cluster.task("worker", 0)
        assert chief.wait(timeout=240) == 0, chief.log()
        assert other.wait(timeout=120) == 0, other.log()
        assert cluster.task("ps", 0).wait(timeout=60) == 0, cluster.task("ps", 0).log()

        figures = {}
        for task in (chief, other):
            found = re.search(r"first loss (\S+) last loss (\S+) after (\d+) local steps", task.log())
            assert found, task.log()
            figures[task] = float(found.group(1)), float(found.group(2)), int(found.group(3))
        # The loss falls from where the chief started: the other worker may join a model the
        # chief has already trained (its own first losses then are low already).
        untrained = figures[chief][0]
        for first, last, local_steps in figures.values():
            assert local_steps >= 10 and last < untrained * 0.7, (untrained, first, last, local_steps)
        assert "Session initialization complete" in other.log()
    # The chief's checkpoint thread saved at its start, with the global step in the name.
    latest = tf.train.latest_checkpoint(str(train_dir))
    assert latest is not None and re.search(r"model\.ckpt-\d+$", latest), os.listdir(train_dir)
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(train_dir))


def test_supervisor_example_under_tensorgrid_local(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tensorgrid", "local", "--ps", "1", "--workers", "2", "--",
         sys.executable, str(EXAMPLE), "--steps", "400", "--log_every", "50", "--min_accuracy", "0.85",
         "--logdir", str(tmp_path)],
        capture_output=True, text=True, timeout=280, env=task_environment())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tasks: ps:0=0, worker:0=0, worker:1=0" in result.stdout, result.stdout
    assert "worker:1 done" in result.stdout and "test accuracy" in result.stdout, result.stdout
    assert tf.train.latest_checkpoint(str(tmp_path)) is not None
