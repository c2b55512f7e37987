"""Optimizers apply sparse gradients (IndexedSlices) with TF1's sparse semantics.

An embedding model whose batches repeat ids (within a row and across rows) and leave
some rows out is trained a few steps by each optimizer, with tensorgrid and with
``tf.compat.v1``; the table, the dense weights and every slot must agree. With
GradientDescent, Momentum and Adagrad the rows a batch does not look up do not move
at all (Momentum's accumulator does not carry them); TF1's Adam decays every row's
moments and moves every row by them, so rows looked up earlier keep moving, as in TF.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf

ROWS, DIM = 10, 4
UNUSED_ROWS = [8, 9]
FIRST_STEP_ROWS = [6, 7]
# Three batches of 3 ids per example: repeats within an example and across examples;
# rows 8 and 9 are never looked up, rows 6 and 7 only in the first step.
BATCHES = [
    np.array([[0, 0, 6], [7, 3, 0], [1, 2, 3]], np.int32),
    np.array([[1, 1, 1], [4, 5, 2], [0, 3, 5]], np.int32),
    np.array([[2, 4, 4], [5, 5, 0], [3, 1, 2]], np.int32),
]
TARGETS = [np.array([[1.0], [-2.0], [0.5]]), np.array([[0.0], [1.0], [-1.0]]), np.array([[2.0], [0.5], [-0.5]])]

OPTIMIZERS: dict[str, Callable[[Any], Any]] = {
    "sgd": lambda lib: lib.train.GradientDescentOptimizer(0.1),
    "momentum": lambda lib: lib.train.MomentumOptimizer(0.05, 0.9),
    "nesterov": lambda lib: lib.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
    "adagrad": lambda lib: lib.train.AdagradOptimizer(0.3, initial_accumulator_value=0.2),
    "adam": lambda lib: lib.train.AdamOptimizer(0.1, beta1=0.8, beta2=0.95, epsilon=1e-3),
}
ROWS_STAY = {"sgd", "momentum", "nesterov", "adagrad"}


def initial_values(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return rng.standard_normal((ROWS, DIM)).astype(dtype), rng.standard_normal((DIM, 1)).astype(dtype) * 0.5


def train(lib: Any, optimizer: str, dtype: type, steps: int = len(BATCHES)) -> tuple[dict[str, np.ndarray], list[str]]:
    """The variables and slots after one step per batch, and the op types of the update ops."""
    table0, w0 = initial_values(dtype)
    graph = lib.Graph()
    with graph.as_default():
        table = lib.Variable(table0, name="emb")
        w = lib.Variable(w0, name="w")
        ids = lib.placeholder(lib.int32, [None, 3], name="ids")
        y = lib.placeholder(lib.as_dtype(dtype), [None, 1], name="y")
        pooled = lib.reduce_sum(lib.nn.embedding_lookup(table, ids), 1)
        loss = lib.reduce_mean(lib.square(lib.matmul(pooled, w) - y))
        opt = OPTIMIZERS[optimizer](lib)
        step = opt.minimize(loss)
        slots = {f"{v.op.name}/{name}": opt.get_slot(v, name) for v in (table, w) for name in opt.get_slot_names()}
        with lib.Session() as sess:
            sess.run(lib.global_variables_initializer())
            for batch, target in zip(BATCHES[:steps], TARGETS[:steps]):
                sess.run(step, {ids: batch, y: target.astype(dtype)})
            values = sess.run({"emb": table, "w": w, **slots})
    update_types = sorted(op.type for op in graph.get_operations() if op.name.startswith(f"{opt.get_name()}/update_emb/"))
    return values, update_types


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_sparse_steps_match_tensorflow(tf1: Any, optimizer: str, dtype: type) -> None:
    ours, update_types = train(tf, optimizer, dtype)
    theirs, _ = train(tf1, optimizer, dtype)
    assert sorted(ours) == sorted(theirs)
    rtol, atol = (1e-10, 1e-12) if dtype == np.float64 else (2e-6, 1e-6)
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=rtol, atol=atol, err_msg=f"{optimizer}: {key}")
    table0, _ = initial_values(dtype)
    np.testing.assert_array_equal(ours["emb"][UNUSED_ROWS], table0[UNUSED_ROWS])
    after_first_step = train(tf, optimizer, dtype, steps=1)[0]["emb"][FIRST_STEP_ROWS]
    if optimizer in ROWS_STAY:
        np.testing.assert_array_equal(ours["emb"][FIRST_STEP_ROWS], after_first_step)
    else:  # Adam's decaying moments keep moving rows the last batches did not look up, in TF too
        assert not np.allclose(theirs["emb"][FIRST_STEP_ROWS], after_first_step)
    # One fused op updates the table, not a dense Apply* of a densified gradient.
    fused = {"sgd": "ScatterSub", "momentum": "SparseApplyMomentum", "nesterov": "SparseApplyMomentum",
             "adagrad": "SparseApplyAdagrad", "adam": "SparseApplyAdam"}[optimizer]
    assert fused in update_types and not any(t.startswith("Apply") for t in update_types)


def test_momentum_does_not_carry_rows_absent_from_the_batch(session: tf.Session) -> None:
    # Step 1 touches row 0 (gradient 1); step 2 touches only row 1. A dense momentum
    # update would move row 0 again by lr * momentum = 0.09 in step 2.
    table = tf.Variable(np.zeros((2, 1)), name="table")
    ids = tf.placeholder(tf.int32, [1])
    step = tf.train.MomentumOptimizer(0.1, 0.9).minimize(tf.reduce_sum(tf.gather(table, ids)))
    session.run(tf.global_variables_initializer())
    session.run(step, {ids: [0]})
    session.run(step, {ids: [1]})
    np.testing.assert_allclose(session.run(table), [[-0.1], [-0.1]])


def test_repeated_indices_are_summed_before_the_update(session: tf.Session) -> None:
    # Adagrad squares the summed gradient (2 ** 2), not each occurrence (1 + 1).
    table = tf.Variable(np.zeros((2, 1)), name="table")
    step = tf.train.AdagradOptimizer(1.0, initial_accumulator_value=1.0).minimize(
        tf.reduce_sum(tf.gather(table, [0, 0])))
    opt_accum = [v for v in tf.global_variables() if v.op.name == "table/Adagrad"][0]
    session.run(tf.global_variables_initializer())
    session.run(step)
    np.testing.assert_allclose(session.run(opt_accum), [[5.0], [1.0]])
    np.testing.assert_allclose(session.run(table), [[-2.0 / np.sqrt(5.0)], [0.0]])


class _PlainSparseSGD(tf.train.Optimizer):
    """An optimizer written against the base class: it implements ``_apply_sparse`` only."""

    def __init__(self) -> None:
        super().__init__(False, "PlainSparseSGD")
        self.seen_indices: list[Any] = []

    def _apply_dense(self, grad: Any, var: Any) -> Any:
        return var.assign_sub(grad).op

    def _apply_sparse(self, grad: Any, var: Any) -> Any:
        self.seen_indices.append(grad.indices)
        return var.scatter_update(tf.IndexedSlices(tf.gather(var, grad.indices) - grad.values, grad.indices))


def test_the_base_class_deduplicates_indices_for_apply_sparse(session: tf.Session) -> None:
    table = tf.Variable(np.zeros((3, 1)), name="table")
    opt = _PlainSparseSGD()
    step = opt.minimize(tf.reduce_sum(tf.gather(table, [2, 0, 2, 2])))
    session.run(tf.global_variables_initializer())
    session.run(step)
    np.testing.assert_array_equal(session.run(opt.seen_indices[0]), [2, 0])
    np.testing.assert_allclose(session.run(table), [[-1.0], [0.0], [-3.0]])


def test_a_constraint_on_a_sparsely_updated_variable_is_an_error() -> None:
    table = tf.Variable(np.zeros((3, 1)), name="table", constraint=lambda v: v)
    with pytest.raises(RuntimeError, match="constraint function on a sparse variable"):
        tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf.gather(table, [1])))


def test_sparse_kernels_check_their_indices(session: tf.Session) -> None:
    from tensorgrid.ops import training_ops

    table = tf.Variable(np.zeros((3, 2)), name="table")
    accum = tf.Variable(np.zeros((3, 2)), name="accum")
    with pytest.raises(ValueError, match="must hold one row of var"):
        training_ops.sparse_apply_adagrad(table, accum, 0.1, np.ones((2, 3)), [0, 1])
    update = training_ops.sparse_apply_adagrad(table, accum, 0.1, np.ones((2, 2)), [0, 3])
    session.run(tf.global_variables_initializer())
    with pytest.raises(tf.errors.InvalidArgumentError, match="Index 3 in indices is out of range"):
        session.run(update)


def test_sparse_updates_run_through_the_gpu_backend_interface(strict_gpu: Any) -> None:
    with tf.device("/device:GPU:0"):
        table = tf.Variable(np.ones((4, 2)), name="table")
        loss = tf.reduce_sum(tf.square(tf.gather(table, [3, 1, 3])))
        steps = [opt.minimize(loss) for opt in (tf.train.MomentumOptimizer(0.1, 0.9), tf.train.AdamOptimizer(0.1),
                                                tf.train.AdagradOptimizer(0.1), tf.train.GradientDescentOptimizer(0.1))]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in steps:
            sess.run(step)
        result = sess.run(table)
    assert np.all(result[[1, 3]] < 1.0) and result[1, 0] > result[3, 0]
