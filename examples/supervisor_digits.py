"""Between-graph replicated training of the digits MLP with ``tf.train.Supervisor``, as TF1 wrote it.

The shape of TensorFlow's old distributed how-to and of Kubeflow's ``dist_mnist.py``: every
task runs this program; a PS serves variables in ``server.join()`` (which never returns);
a worker builds the model under ``replica_device_setter`` (variables on the PS, computation on
itself) and trains in a ``Supervisor``'s ``managed_session``. The chief (worker 0) initializes
the model, or restores it from the latest checkpoint in ``--logdir``, writes checkpoints every
``--save_model_secs`` and the loss summary every ``--summary_every`` steps; the other workers wait
until the chief has initialized the model. Started by hand, one process per task::

    python examples/supervisor_digits.py --ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224 \\
        --job_name=ps --task_index=0
    python examples/supervisor_digits.py --ps_hosts=... --worker_hosts=... --job_name=worker --task_index=0
    python examples/supervisor_digits.py --ps_hosts=... --worker_hosts=... --job_name=worker --task_index=1

or all at once (the cluster then comes from ``TF_CONFIG``)::

    tensorgrid local --ps 1 --workers 2 -- python examples/supervisor_digits.py

``--backend tensorflow`` runs the same program on TensorFlow.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any

import numpy as np

import tensorgrid as tf
from tensorgrid import data

HIDDEN_UNITS = 128


flags = tf.app.flags
flags.DEFINE_string("ps_hosts", "", "comma-separated host:port of the PS tasks (default: TF_CONFIG)")
flags.DEFINE_string("worker_hosts", "", "comma-separated host:port of the workers")
flags.DEFINE_string("job_name", "", "'ps' or 'worker'")
flags.DEFINE_integer("task_index", 0, "index of this task in its job")
flags.DEFINE_string("logdir", os.environ.get("CHECKPOINT_DIR"),
                    "the chief's checkpoints and summaries (default: $CHECKPOINT_DIR or a temp dir)")
flags.DEFINE_integer("steps", 1000, "global steps to train")
flags.DEFINE_integer("batch_size", 64, "examples per batch")
flags.DEFINE_float("learning_rate", 0.05, "gradient descent's learning rate")
flags.DEFINE_float("save_model_secs", 10, "seconds between the chief's checkpoints")
flags.DEFINE_float("save_summaries_secs", 5, "seconds between step-rate summaries")
flags.DEFINE_integer("summary_every", 50, "local steps between the chief's loss summaries")
flags.DEFINE_integer("log_every", 100, "local steps between progress lines")
flags.DEFINE_float("min_accuracy", 0.9, "the chief fails below this test accuracy")
flags.DEFINE_integer("seed", 0, "seed of the initial weights and the batches")
flags.DEFINE_enum("backend", "tensorgrid", ["tensorgrid", "tensorflow"], "the library that builds and trains the model")
FLAGS = flags.FLAGS


def import_tf(backend: str) -> Any:
    if backend == "tensorflow":
        import tensorflow.compat.v1 as tensorflow_v1

        tensorflow_v1.disable_v2_behavior()
        return tensorflow_v1
    return tf


def cluster_and_task(tf: Any) -> tuple[Any, str, int]:
    """The cluster and this task: from the flags when given, else from ``TF_CONFIG``."""
    if FLAGS.ps_hosts or FLAGS.worker_hosts:
        cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
        return cluster, FLAGS.job_name, FLAGS.task_index
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return resolver.cluster_spec(), resolver.task_type, resolver.task_id


def dense(tf: Any, inputs: Any, units: int, name: str, seed: int) -> Any:
    fan_in = int(inputs.shape[1])
    with tf.variable_scope(name):
        weights = tf.get_variable("weights", [fan_in, units], initializer=tf.truncated_normal_initializer(
            stddev=float(np.sqrt(2.0 / fan_in)), seed=seed))
        biases = tf.get_variable("biases", [units], initializer=tf.zeros_initializer())
        return tf.matmul(inputs, weights) + biases


def main(unused_argv: list[str]) -> int:
    tf = import_tf(FLAGS.backend)  # the flags are tensorgrid's; the model is built by --backend
    cluster, job_name, task_index = cluster_and_task(tf)
    if not cluster.jobs or job_name not in ("ps", "worker"):
        print("No cluster: pass --ps_hosts, --worker_hosts, --job_name (ps or worker) and --task_index, or run "
              "me with `tensorgrid local --ps 1 --workers 2 -- python examples/supervisor_digits.py`",
              file=sys.stderr)
        return 2
    server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
    if job_name == "ps":
        server.join()  # never returns: the process ends once training is over

    is_chief = task_index == 0
    digits = data.load_digits(seed=FLAGS.seed)
    batches = data.Batches(digits.train.images, digits.train.labels, batch_size=FLAGS.batch_size,
                           seed=FLAGS.seed + 1000 * task_index)
    with tf.device(tf.train.replica_device_setter(worker_device=f"/job:worker/task:{task_index}", cluster=cluster)):
        images = tf.placeholder(tf.float32, [None, 64], name="images")
        labels = tf.placeholder(tf.int64, [None], name="labels")
        hidden = tf.nn.relu(dense(tf, images, HIDDEN_UNITS, "hidden", FLAGS.seed))
        logits = dense(tf, hidden, 10, "softmax_linear", FLAGS.seed + 1)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))
        loss_summary = tf.summary.scalar("loss", loss)
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(FLAGS.learning_rate).minimize(loss, global_step=global_step)

    logdir = FLAGS.logdir or tempfile.mkdtemp(prefix="tensorgrid-supervisor-")
    # summary_op=None: the summary needs a batch fed, which the Supervisor's summary thread cannot
    # do, so the chief writes it itself with summary_computed (the step rate is still the thread's).
    sv = tf.train.Supervisor(is_chief=is_chief, logdir=logdir, global_step=global_step, summary_op=None,
                             save_model_secs=FLAGS.save_model_secs, save_summaries_secs=FLAGS.save_summaries_secs,
                             recovery_wait_secs=1)
    config = tf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{task_index}"])
    who = f"worker:{task_index}{' (chief)' if is_chief else ''}"
    print(f"{who} waiting for the model to be ready" if not is_chief else f"{who} initializing the model",
          flush=True)
    started = time.perf_counter()
    local_steps, step, first_loss, last_loss = 0, 0, None, None
    with sv.managed_session(server.target, config=config) as sess:
        print(f"{who} starts training at global step {int(sess.run(global_step))}", flush=True)
        while not sv.should_stop() and step < FLAGS.steps:
            batch_images, batch_labels = batches.next_batch()
            feed = {images: batch_images, labels: batch_labels}
            _, step, batch_loss = sess.run([train_op, global_step, loss], feed_dict=feed)
            local_steps += 1
            if is_chief and local_steps % FLAGS.summary_every == 0:
                sv.summary_computed(sess, sess.run(loss_summary, feed_dict=feed))
            first_loss = batch_loss if first_loss is None else first_loss
            last_loss = batch_loss
            if local_steps % FLAGS.log_every == 0:
                print(f"{who} global step {step:5d}  loss {batch_loss:.4f}", flush=True)
        if is_chief:
            sv.saver.save(sess, sv.save_path, global_step=global_step)
            test_accuracy = float(sess.run(accuracy, {images: digits.test.images, labels: digits.test.labels}))
    sv.stop()
    losses = "" if first_loss is None else f", loss went from {first_loss:.4f} to {last_loss:.4f}"
    print(f"{who} done: {local_steps} local steps in {time.perf_counter() - started:.1f} s{losses}", flush=True)
    if not is_chief:
        return 0
    print(f"test accuracy {test_accuracy:.4f} on {len(digits.test)} held-out digits; checkpoints and summaries "
          f"in {logdir}", flush=True)
    if test_accuracy < FLAGS.min_accuracy:
        print(f"FAILED: test accuracy {test_accuracy:.4f} is below --min_accuracy {FLAGS.min_accuracy}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    tf.app.run(main)
