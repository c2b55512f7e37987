"""Synchronous training (``SyncReplicasOptimizer``) of an embedding variable that admits keys by count
and evicts past ``max_entries``: the table ends as one worker leaves it that looks the replicas' ids
up in the same order (so the same keys are admitted and evicted) and applies, per step, each key's
mean gradient over the replicas that touched it; keys not stored when the mean arrives stay out."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sync_sparse_reference
import sync_sparse_training

import tensorgrid as tf
from tensorgrid.kernels import embedding_variable_kernels

LR = 0.5
ROWS, DIM = 7, 2
INITIAL = np.arange(ROWS * DIM, dtype=np.float32).reshape(ROWS, DIM) / 10.0 + 1.0
A, B, C, D, E = -(2**58) + 1, 2**57 + 3, 5, -1, 2**40
FILTER_FREQ, MAX_ENTRIES = 2, 3
# (ids looked up, upstream gradient per id) of two replicas per global step. Step 0: A is admitted by
# replica 0's second lookup of it, B and C wait. The backup push after it counts D. Step 1: B, C and D
# are admitted, which takes the table past 3 keys (A, updated longest ago, goes); E waits, its
# gradient finds no key. Step 2: E is admitted, A comes back (counted anew), and keys go again.
FEEDS = [
    [([A, B, A], [[1.0, 2.0], [3.0, 1.0], [0.5, 0.5]]), ([A, C], [[2.0, 0.0], [1.0, 1.0]])],
    [([B, C, D], [[1.0, 1.0], [2.0, 0.0], [0.0, 3.0]]), ([B, E, D, C], [[3.0, 1.0], [4.0, 4.0], [1.0, 1.0], [0.0, 2.0]])],
    [([A, E], [[1.0, -1.0], [2.0, 2.0]]), ([E, A, B], [[0.0, 1.0], [3.0, 3.0], [1.0, 0.0]])],
]
BACKUPS = [([D], [[100.0, 100.0]]), ([A], [[100.0, 100.0]])]
"""After each step but the last, a backup replica's gradient of that step, pushed once it was applied:
dropped as stale, but its lookup counts. (It also moves the one local step the replicas of this one
session share to the new global step, as each replica's own would be.)"""


def _embedding_variable(parts: int) -> Any:
    option = tf.EmbeddingVariableOption(
        filter_option=tf.CounterFilter(filter_freq=FILTER_FREQ), max_entries=MAX_ENTRIES,
        init_option=tf.InitializerOption(tf.constant_initializer(INITIAL), default_value_dim=ROWS))
    return tf.get_embedding_variable("emb", DIM, ev_option=option,
                                     partitioner=tf.fixed_size_partitioner(parts) if parts > 1 else None)


def _saved_table(sess: Any, tmp_path: Any, name: str) -> dict[str, np.ndarray]:
    """The table's keys (ascending over its parts) with their values, frequencies and versions, as saved."""
    reader = tf.train.NewCheckpointReader(tf.train.Saver().save(sess, str(tmp_path / name / "model")))
    entries = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
    prefixes = sorted(n[:-len("-keys")] for n in entries if n.endswith("-keys"))
    keys = np.concatenate([entries[f"{p}-keys"] for p in prefixes])
    order = np.argsort(keys)
    return {column: np.concatenate([entries[f"{p}-{column}"] for p in prefixes])[order]
            for column in ("keys", "values", "freqs", "versions")}


def _train_sync(tmp_path: Any, parts: int) -> dict[str, np.ndarray]:
    graph = tf.Graph()
    with graph.as_default():
        step = tf.train.get_or_create_global_step()
        ids = tf.placeholder(tf.int64, [None], name="ids")
        upstream = tf.placeholder(tf.float32, [None, DIM], name="upstream")
        loss = tf.reduce_sum(tf.nn.embedding_lookup(_embedding_variable(parts), ids) * upstream)
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(LR), replicas_to_aggregate=2,
                                             total_num_replicas=3)
        train_op = opt.minimize(loss, global_step=step)
        hook = opt.make_session_run_hook(is_chief=True)
        hook.begin()
        init = [tf.global_variables_initializer(), tf.local_variables_initializer()]
    with sync_sparse_training.chief_session(tf, graph, hook, init) as sess:
        sync_sparse_training.run_sync_steps(sess, train_op, step, lambda looked, grads: {ids: looked, upstream: grads},
                                            FEEDS, dict(enumerate(BACKUPS)))
        with graph.as_default():
            return _saved_table(sess, tmp_path, "sync")


def _one_worker_applying_the_means(tmp_path: Any, parts: int) -> dict[str, np.ndarray]:
    with tf.Graph().as_default():
        step = tf.train.get_or_create_global_step()
        ev = _embedding_variable(parts)
        table_parts = list(ev) if parts > 1 else [ev]
        ids = tf.placeholder(tf.int64, [None])
        lookup = tf.nn.embedding_lookup(ev, ids)
        keys = [tf.placeholder(tf.int64, [None]) for _ in table_parts]
        means = [tf.placeholder(tf.float32, [None, DIM]) for _ in table_parts]
        apply = tf.train.GradientDescentOptimizer(LR).apply_gradients(
            [(tf.IndexedSlices(m, k), part) for m, k, part in zip(means, keys, table_parts)], global_step=step)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for global_step, feeds in enumerate(FEEDS):
                for looked, _ in feeds:
                    sess.run(lookup, {ids: looked})
                mean_of_key = sync_sparse_reference.mean_gradients(feeds)
                all_keys = np.array(sorted(mean_of_key), np.int64)
                part_of_key = embedding_variable_kernels.partition_of_keys(all_keys, len(table_parts))
                feed: dict[Any, Any] = {}
                for index, (k, m) in enumerate(zip(keys, means)):
                    mine = all_keys[part_of_key == index]
                    feed[k] = mine
                    feed[m] = np.array([mean_of_key[key] for key in mine.tolist()], np.float32).reshape(-1, DIM)
                sess.run(apply, feed)
                if global_step < len(BACKUPS):
                    sess.run(lookup, {ids: BACKUPS[global_step][0]})
            return _saved_table(sess, tmp_path, "reference")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("parts", [1, 2])
def test_sync_replicas_with_admission_and_eviction_leave_the_table_one_worker_would(tmp_path: Any, parts: int):
    synced = _train_sync(tmp_path, parts)
    reference = _one_worker_applying_the_means(tmp_path, parts)
    for column, expected in reference.items():
        np.testing.assert_allclose(synced[column], expected, rtol=1e-6, err_msg=column)
    if parts == 1:
        _check_by_hand(synced)


def _check_by_hand(table: dict[str, np.ndarray]) -> None:
    """The one-part table worked out by hand. A key starts at row ``key % 7`` of INITIAL. After step 1,
    B, C and D hold their row less LR times their mean gradient, A is gone. Step 2 stores A again
    (the backup's lookup and replica 0's) and E, so two of B, C and D, all updated last at step 1,
    go (which two, the eviction's order of equals decides); A and E move by their step-2 means."""
    row = {key: INITIAL[key % ROWS] for key in (A, B, C, D, E)}
    after_step_1 = {B: row[B] - LR * np.array([2.0, 1.0]), C: row[C] - LR * np.array([1.0, 1.0]),
                    D: row[D] - LR * np.array([0.5, 2.0])}
    expected = {A: row[A] - LR * np.array([2.0, 1.0]), E: row[E] - LR * np.array([1.0, 1.5])}
    keys = table["keys"].tolist()
    (survivor,) = set(keys) - {A, E}
    assert len(keys) == MAX_ENTRIES and survivor in after_step_1, keys
    expected[survivor] = after_step_1[survivor]
    np.testing.assert_allclose(table["values"], np.stack([expected[k] for k in keys]), rtol=1e-6)
    assert table["freqs"].tolist() == [3, 3, 3]  # admitted on a second lookup, then looked up once more
    assert table["versions"].tolist() == [1 if k == survivor else 2 for k in keys]
