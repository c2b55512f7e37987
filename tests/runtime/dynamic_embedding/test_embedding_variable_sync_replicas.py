"""Synchronous training of an embedding variable (``SyncReplicasOptimizer``): the replicas' gradients,
keyed by 64-bit ids (negative ones too), meet in a SparseConditionalAccumulator per table part and
each key moves by the mean of the gradients that touched it, as one worker applying that mean would
move it, and as the same synchronous run moves the rows of a fixed table whose rows the ids map to."""

from __future__ import annotations


import numpy as np
import pytest

import sync_sparse_reference
import sync_sparse_training

import tensorgrid as tf

LR = 0.5
ROWS, DIM = 6, 2
INITIAL = np.arange(ROWS * DIM, dtype=np.float32).reshape(ROWS, DIM) / 10.0
KEY_OF_ROW = np.array([r + ROWS * m for r, m in enumerate([-(2**58), 2**57, 5, -1, 2**40, 3])], np.int64)
"""A raw id per row of INITIAL: id % ROWS is the row, so a new id starts at that row of the initializer."""
# (rows looked up, upstream gradient per looked-up row) of two replicas per global step, unsorted and repeated.
FEEDS = [
    [([3, 0], [[3.0, 4.0], [1.0, 2.0]]), ([3, 3], [[5.0, 6.0], [1.0, 1.0]])],
    [([1], [[2.0, 2.0]]), ([3, 1, 1], [[4.0, 4.0], [6.0, 2.0], [1.0, 0.0]])],
]
STALE = ([5], [[100.0, 100.0]])
"""A backup replica's gradient computed at step 0, pushed after that step: dropped."""


def _train_sync(embedding_variable: bool, parts: int = 1) -> np.ndarray:
    """Two aggregated steps of two replicas each (a stale push in between); the rows of KEY_OF_ROW after."""
    graph = tf.Graph()
    with graph.as_default():
        step = tf.train.get_or_create_global_step()
        ids = tf.placeholder(tf.int64, [None], name="ids")
        upstream = tf.placeholder(tf.float32, [None, DIM], name="upstream")
        partitioner = tf.fixed_size_partitioner(parts) if parts > 1 else None
        if embedding_variable:
            option = tf.EmbeddingVariableOption(init_option=tf.InitializerOption(
                tf.constant_initializer(INITIAL), default_value_dim=ROWS))
            table = tf.get_embedding_variable("emb", DIM, ev_option=option, partitioner=partitioner)
            looked_up = tf.constant(KEY_OF_ROW)
        else:
            table = tf.get_variable("emb", initializer=tf.constant(INITIAL), partitioner=partitioner)
            looked_up = tf.range(ROWS, dtype=tf.int64)
        # A fixed table's parts hold contiguous rows (fixed_size_partitioner): looked up by "div".
        strategy = {} if embedding_variable else {"partition_strategy": "div"}
        loss = tf.reduce_sum(tf.nn.embedding_lookup(table, ids, **strategy) * upstream)
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(LR), replicas_to_aggregate=2,
                                             total_num_replicas=3)
        train_op = opt.minimize(loss, global_step=step)
        rows = tf.nn.embedding_lookup(table, looked_up, **strategy)
        hook = opt.make_session_run_hook(is_chief=True)
        hook.begin()
        init = [tf.global_variables_initializer(), tf.local_variables_initializer()]
    as_ids = (lambda rows_: KEY_OF_ROW[rows_]) if embedding_variable else (lambda rows_: rows_)
    with sync_sparse_training.chief_session(tf, graph, hook, init) as sess:
        sync_sparse_training.run_sync_steps(
            sess, train_op, step, lambda looked, grads: {ids: as_ids(np.asarray(looked)), upstream: grads}, FEEDS,
            {0: STALE})
        return np.asarray(sess.run(rows))


def _one_worker_applying_the_mean() -> np.ndarray:
    """Per step and row: the mean over the replicas that touched the row of their summed row gradients."""
    return sync_sparse_reference.expected_table(INITIAL, LR, FEEDS)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("parts", [1, 2])
def test_sync_replicas_average_an_embedding_variable_by_key(parts: int) -> None:
    keyed = _train_sync(embedding_variable=True, parts=parts)
    np.testing.assert_allclose(keyed, _one_worker_applying_the_mean(), rtol=1e-6)
    np.testing.assert_allclose(keyed, _train_sync(embedding_variable=False, parts=parts), rtol=1e-6)
    np.testing.assert_array_equal(keyed[[2, 4, 5]], INITIAL[[2, 4, 5]])  # never trained (5 only by the stale push)


def test_the_accumulator_of_an_embedding_variable_takes_ids_not_rows() -> None:
    with tf.Graph().as_default():
        ev = tf.get_embedding_variable("emb", DIM)
        step = tf.train.get_or_create_global_step()
        ids = tf.placeholder(tf.int64, [None])
        loss = tf.reduce_sum(tf.nn.embedding_lookup(ev, ids))
        tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(LR), 2).minimize(loss, global_step=step)
        (accumulator,) = [op for op in tf.get_default_graph().get_operations()
                          if op.type == "SparseConditionalAccumulator"]
        assert accumulator.get_attr("indices_are_keys") is True
        acc = tf.SparseConditionalAccumulator(tf.float32, shape=[ROWS, DIM])
        with tf.Session() as sess:  # a table's accumulator still refuses ids outside its rows
            with pytest.raises(tf.errors.InvalidArgumentError, match="indices must be >= 0, got -1"):
                sess.run(acc.apply_grad([-1], [[1.0, 2.0]]))
        with pytest.raises(TypeError, match="indices_are_keys must be True or False, got 1"):
            tf.SparseConditionalAccumulator(tf.float32, indices_are_keys=1)
