"""Synchronous training of embedding tables: SparseConditionalAccumulator and SyncReplicasOptimizer.

A SparseConditionalAccumulator holds IndexedSlices gradients tagged with the step they
were computed at; a take hands back the rows touched since the last take, each the
mean of the gradients that touched it (TF's per-row mean), in order of first
appearance. TensorFlow's ``tf.compat.v1`` is the oracle for the accumulator's results
and for a whole synchronous run on a gathered table (stale gradients included), and a
real cluster (two PS processes holding the parts of a partitioned table) must give
the same table as the in-process run, with the rows no batch touched unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sync_sparse_reference
import sync_sparse_training

import tensorgrid as tf
from cluster_processes import LocalCluster

LR = 0.5
ROWS, DIM = 6, 2


# ---------------------------------------------------------------- the accumulator against TensorFlow

# (local step, indices, rows); the accumulator is at step 0, then 1 after the first take. Each gradient's
# indices are sorted and distinct, as TF's merge assumes (see the next test for any order and repeats).
APPLIES = [
    (0, [1, 3], [[2.0, 2.0], [1.0, 1.0]]),
    (0, [3], [[10.0, 20.0]]),
    (0, [0, 1, 5], [[4.0, 0.0], [0.5, 0.5], [1.0, 1.0]]),
]
AFTER_TAKE = [
    (0, [2], [[9.0, 9.0]]),  # stale: computed at step 0 when the accumulator is at step 1
    (1, [2, 4], [[2.0, 6.0], [1.0, 3.0]]),
    (2, [2], [[4.0, 4.0]]),
]


def _accumulator_run(lib: Any, reduction: str) -> list[Any]:
    """Applies APPLIES, takes 3, applies AFTER_TAKE, takes 2; returns what was fetched."""
    with lib.Graph().as_default():
        acc = lib.SparseConditionalAccumulator(lib.float32, shape=[ROWS, DIM], reduction_type=reduction)
        step = lib.placeholder(lib.int64, [])
        indices = lib.placeholder(lib.int64, [None])
        rows = lib.placeholder(lib.float32, [None, DIM])
        apply = acc.apply_indexed_slices_grad(lib.IndexedSlices(rows, indices, lib.constant([ROWS, DIM], lib.int64)),
                                              local_step=step)
        count = acc.num_accumulated()
        first = acc.take_indexed_slices_grad(3)
        second = acc.take_grad(2)
        with lib.Session() as sess:
            fetched = []
            for batch, take in ((APPLIES, first), (AFTER_TAKE, second)):
                for local_step, ids, values in batch:
                    sess.run(apply, {step: local_step, indices: ids, rows: values})
                    fetched.append(sess.run(count))
                taken = sess.run(take)
                fetched += [taken.indices, taken.values,
                            taken.dense_shape if hasattr(taken, "dense_shape") else taken.shape]
            return fetched


@pytest.mark.parametrize("reduction", ["MEAN", "SUM"])
def test_accumulator_takes_what_tensorflow_takes(tf1: Any, reduction: str) -> None:
    ours = _accumulator_run(tf, reduction)
    theirs = _accumulator_run(tf1, reduction)
    assert len(ours) == len(theirs)
    for mine, oracle in zip(ours, theirs):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(oracle))
    # Spelled out for the mean: row 1 = (2 + 0.5) / 2, row 3 = (1 + 10) / 2; rows sorted by index.
    if reduction == "MEAN":
        np.testing.assert_array_equal(ours[3], [0, 1, 3, 5])
        np.testing.assert_allclose(ours[4], [[4.0, 0.0], [1.25, 1.25], [5.5, 10.5], [1.0, 1.0]])


def test_indices_in_any_order_and_repeated_are_summed_before_the_mean(session: tf.Session) -> None:
    """A gather's gradient lists rows as the batch looked them up: unsorted, repeated. (TF's merge
    assumes sorted, distinct indices and would return row 1 twice here.)"""
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[ROWS, DIM])
    session.run(acc.apply_grad([2, 1, 1], [[5.0, 5.0], [1.0, 1.0], [2.0, 2.0]]))
    session.run(acc.apply_grad([4, 1], [[7.0, 7.0], [3.0, 3.0]]))
    taken = session.run(acc.take_grad(2))
    np.testing.assert_array_equal(taken.indices, [1, 2, 4])
    np.testing.assert_allclose(taken.values, [[3.0, 3.0], [5.0, 5.0], [7.0, 7.0]])  # row 1: (1 + 2 + 3) / 2


@pytest.mark.parametrize("indices, values, message", [
    ([7], [[1.0, 2.0]], "index 7 is out of range for 6 rows"),
    ([-1], [[1.0, 2.0]], "indices must be >= 0, got -1"),
    ([1, 2], [[1.0, 2.0]], "2 indices, values of shape [1, 2]"),
])
def test_bad_gradients_are_rejected_naming_the_value(session: tf.Session, indices: Any, values: Any,
                                                      message: str) -> None:
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[ROWS, DIM])
    index_feed = tf.placeholder(tf.int64, [None])
    value_feed = tf.placeholder(tf.float32, [None, DIM])
    with pytest.raises(tf.errors.InvalidArgumentError, match=message.replace("[", r"\[")):
        session.run(acc.apply_grad(index_feed, value_feed, [ROWS, DIM]), {index_feed: indices, value_feed: values})
    assert session.run(acc.num_accumulated()) == 0


def test_gradients_that_do_not_fit_the_accumulator_are_rejected(session: tf.Session) -> None:
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[ROWS, DIM])
    with pytest.raises(ValueError, match=r"has shape \(6, 2\), got rows of shape \(3,\)"):
        acc.apply_grad([1], [[1.0, 2.0, 3.0]])
    rows = tf.placeholder(tf.float32, [None, None])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"the gradient's shape \[6, 3\] does not match"):
        session.run(acc.apply_grad([1], rows, [ROWS, 3]), {rows: [[1.0, 2.0, 3.0]]})
    with pytest.raises(TypeError, match="takes a tf.IndexedSlices, got Tensor"):
        acc.apply_indexed_slices_grad(tf.constant([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="reduction_type must be 'MEAN' or 'SUM', got 'MAX'"):
        tf.SparseConditionalAccumulator(tf.float32, reduction_type="MAX")
    with pytest.raises(tf.errors.InvalidArgumentError, match="num_required must be positive, but was 0"):
        session.run(acc.take_grad(0))


# ---------------------------------------------------------------- SyncReplicasOptimizer on an embedding

INITIAL = np.arange(ROWS * DIM, dtype=np.float32).reshape(ROWS, DIM) / 10.0
# (ids, upstream gradient per looked-up row): two replicas per global step, then a stale one. TF's
# accumulator is exact for sorted, distinct ids (the oracle's feeds); a batch's ids usually are neither.
SORTED_FEEDS = [
    [([0, 3], [[1.0, 2.0], [3.0, 4.0]]), ([3], [[5.0, 6.0]])],
    [([1], [[2.0, 2.0]]), ([1, 3], [[6.0, 2.0], [4.0, 4.0]])],
]
BATCH_FEEDS = [
    [([3, 0], [[3.0, 4.0], [1.0, 2.0]]), ([3, 3], [[5.0, 6.0], [1.0, 1.0]])],
    [([1], [[2.0, 2.0]]), ([3, 1, 1], [[4.0, 4.0], [6.0, 2.0], [1.0, 0.0]])],
]
STALE = ([5], [[100.0, 100.0]])


def _sync_model(lib: Any, partitioned: bool, cluster: Any = None) -> dict[str, Any]:
    device = lib.train.replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0") if cluster else None
    with lib.device(device):
        step = lib.train.get_or_create_global_step()
        if partitioned:
            emb = lib.get_variable("emb", initializer=lib.constant(INITIAL), partitioner=lib.fixed_size_partitioner(2))
        else:
            emb = lib.Variable(INITIAL, name="emb")
        ids = lib.placeholder(lib.int64, [None], name="ids")
        upstream = lib.placeholder(lib.float32, [None, DIM], name="upstream")
        loss = lib.reduce_sum(lib.nn.embedding_lookup(emb, ids, partition_strategy="div") * upstream)
        opt = lib.train.SyncReplicasOptimizer(lib.train.GradientDescentOptimizer(LR), replicas_to_aggregate=2,
                                              total_num_replicas=3)
        train_op = opt.minimize(loss, global_step=step)
    return {"step": step, "emb": emb, "ids": ids, "upstream": upstream, "opt": opt, "train_op": train_op}


def _train_sync(lib: Any, target: str, partitioned: bool, feeds_per_step: Any, cluster: Any = None) -> np.ndarray:
    """Two aggregated steps of two replicas each (a stale push in between) in one session; returns the table."""
    graph = lib.Graph()
    with graph.as_default():
        m = _sync_model(lib, partitioned, cluster)
        hook = m["opt"].make_session_run_hook(is_chief=True)
        hook.begin()
        table = lib.concat(list(m["emb"]), 0) if partitioned else m["emb"]
        init = [lib.global_variables_initializer(), lib.local_variables_initializer()]
    # After step 0, a backup replica's gradient computed at step 0, which is dropped.
    with sync_sparse_training.chief_session(lib, graph, hook, init, target) as sess:
        sync_sparse_training.run_sync_steps(
            sess, m["train_op"], m["step"], lambda ids, upstream: {m["ids"]: ids, m["upstream"]: upstream},
            feeds_per_step, {0: STALE})
        return np.asarray(sess.run(table))


def _expected_table(feeds_per_step: Any) -> np.ndarray:
    """Per step and row: the mean over the replicas that touched the row of their summed row gradients."""
    return sync_sparse_reference.expected_table(INITIAL, LR, feeds_per_step)


@pytest.mark.timeout(60)
def test_sync_replicas_averages_sparse_gradients_row_by_row_as_tensorflow(tf1: Any) -> None:
    ours = _train_sync(tf, "", False, SORTED_FEEDS)
    theirs = _train_sync(tf1, "", False, SORTED_FEEDS)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    np.testing.assert_allclose(ours, _expected_table(SORTED_FEEDS), rtol=1e-6)
    np.testing.assert_array_equal(ours[[2, 4, 5]], INITIAL[[2, 4, 5]])  # untouched (5 only by the stale push)


@pytest.mark.timeout(60)
def test_sync_replicas_aggregates_a_batch_of_unsorted_repeated_ids() -> None:
    graph = tf.Graph()
    with graph.as_default():
        _sync_model(tf, partitioned=False)
    types = [op.type for op in graph.get_operations()]
    assert "SparseConditionalAccumulator" in types and "ConditionalAccumulator" not in types
    table = _train_sync(tf, "", False, BATCH_FEEDS)
    np.testing.assert_allclose(table, _expected_table(BATCH_FEEDS), rtol=1e-6)
    np.testing.assert_array_equal(table[[2, 4, 5]], INITIAL[[2, 4, 5]])


@pytest.mark.timeout(120)
def test_sync_replicas_on_a_table_partitioned_over_two_ps_processes(tmp_path: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 2, "worker": 1}) as cluster:
        graph = tf.Graph()
        with graph.as_default():
            _sync_model(tf, partitioned=True, cluster=cluster.cluster)
        accumulators = sorted(op.device for op in graph.get_operations() if op.type == "SparseConditionalAccumulator")
        assert accumulators == ["/job:ps/task:0", "/job:ps/task:1"]
        assert "ConditionalAccumulator" not in [op.type for op in graph.get_operations()]
        remote = _train_sync(tf, cluster.target("worker"), True, BATCH_FEEDS, cluster=cluster.cluster)
    local = _train_sync(tf, "", True, BATCH_FEEDS)
    np.testing.assert_array_equal(remote, local)
    np.testing.assert_allclose(remote, _expected_table(BATCH_FEEDS), rtol=1e-6)
