"""A click model on raw 64-bit user and item ids, in embedding variables (DeepRec's ``tf.get_embedding_variable``).

No vocabulary size, no hashing into buckets: each id gets its own row the second time it is seen
(``tf.CounterFilter(filter_freq=2)``: ids seen once, most of a long tail, never take memory), and
ids not updated in ``--steps-to-live`` global steps are evicted when a checkpoint is saved
(``tf.GlobalStepEvict``). Each table is split over the PS tasks by id hash
(``partitioner=tf.fixed_size_partitioner(<number of PS>)``). Run::

    tensorgrid local --ps 2 --workers 2 -- python examples/embedding_click_model.py

- ``logit = user_bias + item_bias + <user_vector, item_vector> + b``: two 1-wide and two 8-wide
  embedding variables, sigmoid cross-entropy, Adagrad (its accumulator kept per id in the tables);
- the data are synthetic and seeded: 20,000 users and 5,000 items with random 64-bit ids, drawn
  with a heavy head, clicks from a hidden logistic model over the ids (a constant guess scores
  about 0.69).

The chief (the Chief task if the cluster has one, else worker 0) checkpoints into ``--checkpoint-dir``
every ``--save-steps`` steps (each save evicts); examples/trainingjob-embedding.yaml runs it as a
TrainingJob.
Each worker ends with its loss trend and the ids the tables store, and exits with status 1 if
the loss did not fall.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from typing import Any, Optional, Sequence

import numpy as np

import tensorgrid as tf

USERS, ITEMS, DIM = 20_000, 5_000, 8


class ClickData:
    """Seeded clicks on raw 64-bit ids: every task draws the same ids and hidden effects (``seed``),
    each worker its own examples (``stream``)."""

    def __init__(self, seed: int, stream: int) -> None:
        hidden = np.random.default_rng(seed)
        self.user_ids = hidden.integers(-2**63, 2**63 - 1, USERS, dtype=np.int64)
        self.item_ids = hidden.integers(-2**63, 2**63 - 1, ITEMS, dtype=np.int64)
        self.user_effect = hidden.normal(0.0, 1.0, USERS)
        self.item_effect = hidden.normal(0.0, 1.0, ITEMS)
        self.rng = np.random.default_rng([seed, stream])

    def batch(self, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(user ids [size], item ids [size], clicks [size, 1])."""
        users = (self.rng.random(size) ** 4 * USERS).astype(np.int64)
        items = (self.rng.random(size) ** 4 * ITEMS).astype(np.int64)
        logit = self.user_effect[users] + self.item_effect[items] - 0.5
        clicks = (self.rng.random(size) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
        return self.user_ids[users], self.item_ids[items], clicks[:, None]


def build_model(parts: int, steps_to_live: int) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
    """The feeds (users, items, clicks), the loss and the tables by name."""
    users = tf.placeholder(tf.int64, [None], name="users")
    items = tf.placeholder(tf.int64, [None], name="items")
    clicks = tf.placeholder(tf.float32, [None, 1], name="clicks")
    option = tf.EmbeddingVariableOption(filter_option=tf.CounterFilter(filter_freq=2),
                                        evict_option=tf.GlobalStepEvict(steps_to_live=steps_to_live))
    tables = {}
    for name, dim in (("user_bias", 1), ("item_bias", 1), ("user_vector", DIM), ("item_vector", DIM)):
        tables[name] = tf.get_embedding_variable(
            name, dim, initializer=tf.truncated_normal_initializer(stddev=0.05, seed=len(tables)),
            partitioner=tf.fixed_size_partitioner(parts), ev_option=option)
    user_vector = tf.nn.embedding_lookup(tables["user_vector"], users)
    item_vector = tf.nn.embedding_lookup(tables["item_vector"], items)
    bias = tf.get_variable("bias", [1], initializer=tf.zeros_initializer())
    logits = (tf.nn.embedding_lookup(tables["user_bias"], users) + tf.nn.embedding_lookup(tables["item_bias"], items)
              + tf.reduce_sum(user_vector * item_vector, 1, keepdims=True) + bias)
    # Sigmoid cross-entropy, written out stably: max(x, 0) - x * z + log(1 + exp(-|x|)).
    loss = tf.reduce_mean(tf.maximum(logits, 0.0) - logits * clicks + tf.log(1.0 + tf.exp(-tf.abs(logits))))
    return users, items, clicks, loss, tables


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="global steps to train (default 1000)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=0.2)
    parser.add_argument("--log-every", type=int, default=100, help="local steps between loss reports")
    parser.add_argument("--steps-to-live", type=int, default=300, help="evict ids not updated in this many steps")
    parser.add_argument("--save-steps", type=int, default=200, help="global steps between checkpoints (evictions)")
    parser.add_argument("--checkpoint-dir", default=None, help="default: a new temporary directory")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    cluster = resolver.cluster_spec()
    job, index = resolver.task_type, resolver.task_id
    if not cluster.jobs:
        print("TF_CONFIG is not set: run me with `tensorgrid local --ps 2 --workers 2 -- python "
              "examples/embedding_click_model.py`", file=sys.stderr)
        return 2
    server = tf.train.Server(cluster, job_name=job, task_index=index)
    if job == "ps":
        server.join()
        return 0

    # A Chief task (a TrainingJob's Chief replica) is the chief; without one, worker 0 is.
    is_chief = job == "chief" or (job == "worker" and index == 0 and "chief" not in cluster.jobs)
    parts = len(cluster.as_dict()["ps"])
    with tf.device(tf.train.replica_device_setter(worker_device=f"/job:{job}/task:{index}", cluster=cluster)):
        users, items, clicks, loss, tables = build_model(parts, args.steps_to_live)
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdagradOptimizer(args.learning_rate).minimize(loss, global_step=global_step)
        stored = {name: table.total_count() for name, table in tables.items()}
    checkpoint_dir = args.checkpoint_dir or tempfile.mkdtemp(prefix="embedding_click_model-")
    data = ClickData(args.seed, stream=index + (1 if job == "worker" and "chief" in cluster.jobs else 0))
    config = tf.ConfigProto(device_filters=["/job:ps", f"/job:{job}/task:{index}"])
    print(f"{job}:{index} {'(chief) ' if is_chief else ''}training to global step {args.steps}: "
          f"4 embedding variables in {parts} parts on {parts} PS", flush=True)
    started = time.perf_counter()
    window: list[float] = []
    reports: list[float] = []
    local_steps = 0
    seen_users: set[int] = set()
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, config=config,
                                           checkpoint_dir=checkpoint_dir if is_chief else None,
                                           save_checkpoint_steps=args.save_steps, save_summaries_steps=None,
                                           hooks=[tf.train.StopAtStepHook(last_step=args.steps)],
                                           log_step_count_steps=0) as sess:
        while not sess.should_stop():
            batch_users, batch_items, batch_clicks = data.batch(args.batch_size)
            seen_users.update(batch_users.tolist())
            local_steps += 1
            report_due = local_steps % args.log_every == 0
            # The table sizes are fetched in the step itself: its last step ends the session.
            _, step, batch_loss, counts = sess.run([train_op, global_step, loss, stored if report_due else {}],
                                                   {users: batch_users, items: batch_items, clicks: batch_clicks})
            window.append(float(batch_loss))
            if report_due:
                reports.append(float(np.mean(window)))
                window = []
                print(f"{job}:{index} global step {step:5d}  mean loss of the last {args.log_every} steps "
                      f"{reports[-1]:.4f}  ids stored: {({name: int(n) for name, n in counts.items()})}", flush=True)
    print(f"{job}:{index} done: {local_steps} local steps in {time.perf_counter() - started:.1f} s; "
          f"this worker saw {len(seen_users)} distinct user ids", flush=True)
    if len(reports) < 2:
        print(f"{job}:{index} too few local steps for a loss trend (another worker did most of them)", flush=True)
        return 0
    if not reports[-1] < reports[0]:
        print(f"FAILED: the loss did not fall ({reports[0]:.4f} -> {reports[-1]:.4f})", file=sys.stderr)
        return 1
    print(f"{job}:{index} loss fell from {reports[0]:.4f} to {reports[-1]:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
