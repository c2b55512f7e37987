"""The progress contract between the halves: what a task's /metrics page says, the operator reads.

A parameter server holding ``global_step`` serves it on its metrics port; the chief's
StopAtStepHook exports its last step, and the scalar summaries it writes (the loss). The
operator's parser (``tensorgrid_operator.reconcile.progress``) reads them from the pages as served over HTTP.
"""

from __future__ import annotations

import glob
import urllib.request

import tensorgrid as tf
from tensorgrid.kernels import summary_kernels
from tensorgrid.kernels import tf_record
from tensorgrid.distributed.rpc import ports
from tensorgrid_operator.reconcile import progress


def last_scalar(logdir, tag):
    """The last value written for ``tag`` in the event files of ``logdir`` (read as TFRecords)."""
    found = None
    for path in sorted(glob.glob(f"{logdir}/events.out.tfevents.*")):
        for record in tf_record.read_records(path):
            for summary in summary_kernels.fields_of(record, 5):
                for name, value in summary_kernels.scalar_values(summary):
                    if name == tag:
                        found = value
    return found


def test_the_operator_reads_the_global_step_target_and_loss_a_training_serves(monkeypatch, tmp_path):
    ps_port, worker_port, metrics_port = ports.free_ports(3)
    spec = {"ps": [f"localhost:{ps_port}"], "worker": [f"localhost:{worker_port}"]}
    monkeypatch.setenv("TENSORGRID_METRICS_PORT", str(metrics_port))
    ps = tf.train.Server(spec, "ps", 0)
    monkeypatch.delenv("TENSORGRID_METRICS_PORT")
    worker = tf.train.Server(spec, "worker", 0)
    try:
        graph = tf.Graph()
        with graph.as_default():
            with tf.device(tf.train.replica_device_setter(ps_tasks=1)):
                step = tf.train.get_or_create_global_step()
                w = tf.get_variable("w", [4], initializer=tf.zeros_initializer())
                loss = tf.reduce_sum(tf.square(w - 1.0))
                tf.summary.scalar("loss", loss)
                train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
            hooks = [tf.train.StopAtStepHook(last_step=7)]
            with tf.train.MonitoredTrainingSession(master=worker.target, is_chief=True, hooks=hooks,
                                                   checkpoint_dir=str(tmp_path), save_summaries_steps=1,
                                                   save_checkpoint_secs=None) as sess:
                while not sess.should_stop():
                    sess.run(train)
        page = urllib.request.urlopen(f"http://localhost:{metrics_port}/metrics", timeout=10).read().decode()
        reading = progress.read_page("ps-0", page)
        assert (reading.global_step, reading.target_step, reading.error) == (7, 7, "")
        assert reading.loss_tag == "loss" and reading.loss == last_scalar(str(tmp_path), "loss") < 4.0
    finally:
        worker.stop()
        ps.stop()
