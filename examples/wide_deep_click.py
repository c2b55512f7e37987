"""A wide-and-deep click model on a 1,000,000 x 64 embedding table sharded over two parameter servers.

The kind of model parameter servers exist for: most parameters sit in embedding
tables, and each step reads and updates only the rows its batch looks up. Run::

    tensorgrid local --ps 2 --workers 2 -- python examples/wide_deep_click.py

- deep: each example's 4 categorical ids (one per field) look up 64-wide rows of
  ``embeddings`` (1,000,000 x 64 floats, 256 MB, ``fixed_size_partitioner(2)``: one
  half on each PS), concatenated and fed to a 256-64-1 relu network;
- wide: a linear model over the same ids plus a hashed cross of fields 0 and 1,
  ``tf.nn.embedding_lookup_sparse`` over a partitioned 1,000,000 x 1 weight table;
- logit = wide + deep, sigmoid cross-entropy, Adagrad. The gradients of both tables
  are IndexedSlices: only the looked-up rows travel, and Adagrad moves only them on
  the PS. The two workers train asynchronously (between-graph replication), or
  synchronously with ``--sync`` (``tensorgrid local --sync``): a SyncReplicasOptimizer
  averages both workers' IndexedSlices row by row in a SparseConditionalAccumulator on
  each table's PS, so a synchronous step moves only the rows the batches touched too.

The data are synthetic and seeded: ids drawn with a heavy head (as real traffic is),
clicks drawn from a hidden logistic model over the ids: a constant guess scores a loss
of 0.680, the hidden model itself 0.444. Worker 0 (the chief) initializes the tables on
the PS. The run ends with each worker's mean loss of its first and last reports, and
exits with status 1 if it did not fall.
``--backend tensorflow`` runs the same program on TensorFlow.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Optional, Sequence

import numpy as np

VOCABULARY = 1_000_000
EMBEDDING_DIM = 64
FIELDS = 4


def import_tf(backend: str) -> Any:
    if backend == "tensorflow":
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
        return tf
    import tensorgrid as tf

    return tf


class ClickData:
    """Seeded synthetic clicks: field ``f``'s ids live in ``[f * 250000, (f + 1) * 250000)`` (a quarter of
    ``vocabulary`` each), drawn so that the first 1000 ids of a field carry 40% of its traffic; ``p(click) = sigmoid(sum of the ids' hidden effects
    + a cross effect of fields 0 and 1 - 1)``. Every task draws the same hidden effects (``seed``);
    each worker draws its own examples (``stream``)."""

    def __init__(self, seed: int, stream: int, vocabulary: int = VOCABULARY) -> None:
        hidden = np.random.default_rng(seed)
        self.vocabulary = vocabulary
        self.effect = hidden.normal(0.0, 1.0, vocabulary).astype(np.float32)
        self.cross_effect = hidden.normal(0.0, 0.5, vocabulary).astype(np.float32)
        self.rng = np.random.default_rng([seed, stream])

    def batch(self, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids [size, 4], hashed crosses [size], clicks [size, 1])."""
        field_size = self.vocabulary // FIELDS
        skewed = (self.rng.random((size, FIELDS)) ** 6 * field_size).astype(np.int64)
        ids = skewed + np.arange(FIELDS, dtype=np.int64) * field_size
        cross = (ids[:, 0] * 1_000_003 + ids[:, 1]) % self.vocabulary
        logit = self.effect[ids].sum(axis=1) + self.cross_effect[cross] - 1.0
        clicks = (self.rng.random(size) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
        return ids, cross, clicks[:, None]


def wide_input(tf: Any, ids: Any, cross: Any) -> Any:
    """A SparseTensor with one row per example: its 4 ids and its cross feature."""
    columns = tf.concat([ids, tf.expand_dims(cross, 1)], 1)  # [batch, 5]
    batch = tf.shape(columns, out_type=tf.int64)[0]
    rows = tf.reshape(tf.tile(tf.expand_dims(tf.range(batch), 1), [1, FIELDS + 1]), [-1])
    positions = tf.tile(tf.range(FIELDS + 1, dtype=tf.int64), tf.expand_dims(tf.cast(batch, tf.int32), 0))
    indices = tf.stack([rows, positions], 1)
    return tf.SparseTensor(indices, tf.reshape(columns, [-1]), tf.stack([batch, tf.constant(FIELDS + 1, tf.int64)]))


def build_model(tf: Any, seed: int, vocabulary: int = VOCABULARY) -> tuple[Any, Any, Any, Any]:
    """The model's feeds (ids, cross, clicks) and loss; ``vocabulary`` rows in each table
    (bench/wide_deep_wire.py varies it)."""
    ids = tf.placeholder(tf.int64, [None, FIELDS], name="ids")
    cross = tf.placeholder(tf.int64, [None], name="cross")
    clicks = tf.placeholder(tf.float32, [None, 1], name="clicks")
    shards = tf.fixed_size_partitioner(2)
    embeddings = tf.get_variable("embeddings", [vocabulary, EMBEDDING_DIM], partitioner=shards,
                                 initializer=tf.random_normal_initializer(stddev=0.05, seed=seed))
    wide_weights = tf.get_variable("wide_weights", [vocabulary, 1], partitioner=shards,
                                   initializer=tf.zeros_initializer())
    deep = tf.reshape(tf.nn.embedding_lookup(embeddings, ids), [-1, FIELDS * EMBEDDING_DIM])
    for i, units in enumerate((64, 1)):
        fan_in = int(deep.shape[1])
        weights = tf.get_variable(f"deep{i}/weights", [fan_in, units], initializer=tf.random_normal_initializer(
            stddev=float(np.sqrt(2.0 / fan_in)), seed=seed + i + 1))
        biases = tf.get_variable(f"deep{i}/biases", [units], initializer=tf.zeros_initializer())
        deep = tf.matmul(deep, weights) + biases
        if units > 1:
            deep = tf.nn.relu(deep)
    wide = tf.nn.embedding_lookup_sparse(wide_weights, wide_input(tf, ids, cross), None, combiner="sum")
    logits = wide + deep
    # Sigmoid cross-entropy, written out stably: max(x, 0) - x * z + log(1 + exp(-|x|)).
    loss = tf.reduce_mean(tf.maximum(logits, 0.0) - logits * clicks + tf.log(1.0 + tf.exp(-tf.abs(logits))))
    return ids, cross, clicks, loss


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1500, help="global steps to train (default 1500)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=0.3)
    parser.add_argument("--log-every", type=int, default=100, help="local steps between loss reports")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=("tensorgrid", "tensorflow"), default="tensorgrid")
    parser.add_argument("--sync", action="store_true", default=os.environ.get("TENSORGRID_SYNC") == "1",
                        help="synchronous training with SyncReplicasOptimizer (default: $TENSORGRID_SYNC)")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    tf = import_tf(args.backend)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    cluster = resolver.cluster_spec()
    job, index = resolver.task_type, resolver.task_id
    if not cluster.jobs:
        print("TF_CONFIG is not set: run me with `tensorgrid local --ps 2 --workers 2 -- python "
              "examples/wide_deep_click.py`", file=sys.stderr)
        return 2
    server = tf.train.Server(cluster, job_name=job, task_index=index)
    if job == "ps":
        server.join()
        return 0

    is_chief = job == "worker" and index == 0
    with tf.device(tf.train.replica_device_setter(worker_device=f"/job:{job}/task:{index}", cluster=cluster)):
        ids, cross, clicks, loss = build_model(tf, args.seed)
        global_step = tf.train.get_or_create_global_step()
        optimizer = tf.train.AdagradOptimizer(args.learning_rate)
        hooks = [tf.train.StopAtStepHook(last_step=args.steps)]
        if args.sync:
            replicas = len(cluster.as_dict()["worker"])
            optimizer = tf.train.SyncReplicasOptimizer(optimizer, replicas_to_aggregate=replicas,
                                                       total_num_replicas=replicas)
            hooks.append(optimizer.make_session_run_hook(is_chief))
        train_op = optimizer.minimize(loss, global_step=global_step)

    data = ClickData(args.seed, stream=index)
    config = tf.ConfigProto(device_filters=["/job:ps", f"/job:{job}/task:{index}"])
    print(f"{job}:{index} {'(chief) ' if is_chief else ''}training {'sync' if args.sync else 'async'} to global "
          f"step {args.steps}: "
          f"embeddings {VOCABULARY} x {EMBEDDING_DIM} in 2 parts on {len(cluster.as_dict()['ps'])} PS", flush=True)
    started = time.perf_counter()
    window: list[float] = []
    reports: list[float] = []
    local_steps = 0
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, config=config,
                                           hooks=hooks,
                                           log_step_count_steps=0) as sess:
        while not sess.should_stop():
            batch_ids, batch_cross, batch_clicks = data.batch(args.batch_size)
            _, step, batch_loss = sess.run([train_op, global_step, loss],
                                           {ids: batch_ids, cross: batch_cross, clicks: batch_clicks})
            local_steps += 1
            window.append(float(batch_loss))
            if local_steps % args.log_every == 0:
                reports.append(float(np.mean(window)))
                window = []
                rate = local_steps / (time.perf_counter() - started)
                print(f"{job}:{index} global step {step:5d}  mean loss of the last {args.log_every} steps "
                      f"{reports[-1]:.4f}  {rate:5.1f} local steps/s", flush=True)
    print(f"{job}:{index} done: {local_steps} local steps in {time.perf_counter() - started:.1f} s", flush=True)
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
