"""RMSProp, Adadelta and ProximalGradientDescent against TF1 itself, dense and sparse.

The same initial weights and data are trained a few steps with tensorgrid and with
``tf.compat.v1``; the variables, every slot, the slot names and the slot variables'
names must agree. Sparse gradients (an embedding lookup's, a ``tf.gather``'s) must move
only the rows the batch looked up, through one fused ``SparseApply*`` op, as TF's do.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf

W0 = np.array([[0.5, -1.5, 2.0], [1.0, 0.25, -0.75]])
C = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]])
STEPS = 5

OPTIMIZERS: dict[str, Callable[[Any], Any]] = {
    "rmsprop": lambda lib: lib.train.RMSPropOptimizer(0.05),
    "rmsprop_momentum": lambda lib: lib.train.RMSPropOptimizer(0.05, decay=0.8, momentum=0.7, epsilon=1e-6),
    "rmsprop_centered": lambda lib: lib.train.RMSPropOptimizer(0.05, momentum=0.5, epsilon=1e-4, centered=True),
    "adadelta": lambda lib: lib.train.AdadeltaOptimizer(1.0, rho=0.9, epsilon=1e-4),
    "adadelta_defaults": lambda lib: lib.train.AdadeltaOptimizer(),
    "proximal": lambda lib: lib.train.ProximalGradientDescentOptimizer(0.1),
    "proximal_l1_l2": lambda lib: lib.train.ProximalGradientDescentOptimizer(
        0.1, l1_regularization_strength=0.3, l2_regularization_strength=0.2),
    "proximal_l2": lambda lib: lib.train.ProximalGradientDescentOptimizer(0.1, l2_regularization_strength=0.5),
}
SPARSE_OP = {"rmsprop": "SparseApplyRMSProp", "rmsprop_momentum": "SparseApplyRMSProp",
             "rmsprop_centered": "SparseApplyCenteredRMSProp", "adadelta": "SparseApplyAdadelta",
             "adadelta_defaults": "SparseApplyAdadelta", "proximal": "SparseApplyProximalGradientDescent",
             "proximal_l1_l2": "SparseApplyProximalGradientDescent",
             "proximal_l2": "SparseApplyProximalGradientDescent"}
TOLERANCE = {np.float64: (1e-10, 1e-12), np.float32: (2e-5, 2e-6)}
DTYPES = [pytest.param(np.float64, id="float64"), pytest.param(np.float32, id="float32")]


def cases(dtype: type) -> list[str]:
    """TF1's ProximalGradientDescentOptimizer does not cast its float32 hyper-parameters to a float64
    variable's dtype (TypeError); tensorgrid does (docs/differences.md), so those runs have no oracle."""
    return [name for name in sorted(OPTIMIZERS) if dtype == np.float32 or not name.startswith("proximal")]


ORACLE_CASES = [pytest.param(name, dtype.values[0], id=f"{name}-{dtype.id}") for dtype in DTYPES
                for name in cases(dtype.values[0])]


def dense_run(lib: Any, optimizer: str, dtype: type,
              device: str = "") -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """Values after STEPS steps; the slot variables' names; the optimizer's op types."""
    graph = lib.Graph()
    with graph.as_default(), graph.device(device):
        w = lib.Variable(W0.astype(dtype), name="w")
        b = lib.Variable(np.array([0.5, -0.5, 1.0], dtype), name="b")
        x = lib.constant(C.T.astype(dtype))
        loss = lib.reduce_mean(lib.square(lib.matmul(x, w) + b)) + lib.reduce_sum(lib.square(w)) * 0.01
        gs = lib.train.get_or_create_global_step()
        opt = OPTIMIZERS[optimizer](lib)
        train = opt.minimize(loss, global_step=gs)
        slots = {f"{v.op.name}/{name}": opt.get_slot(v, name) for v in (w, b) for name in opt.get_slot_names()}
        with lib.Session(graph=graph) as sess:
            sess.run(lib.global_variables_initializer())
            for _ in range(STEPS):
                sess.run(train)
            values = sess.run({"w": w, "b": b, "loss": loss, "global_step": gs, **slots})
    names = {key: slot.op.name for key, slot in slots.items()}
    types = sorted(op.type for op in graph.get_operations() if op.type.startswith(("Apply", "SparseApply")))
    return values, names, types


@pytest.mark.parametrize("optimizer, dtype", ORACLE_CASES)
def test_dense_steps_and_slots_match_tensorflow(tf1: Any, optimizer: str, dtype: type) -> None:
    ours, our_names, our_types = dense_run(tf, optimizer, dtype)
    theirs, their_names, their_types = dense_run(tf1, optimizer, dtype)
    assert our_names == their_names
    assert our_types == their_types
    assert ours["global_step"] == theirs["global_step"] == STEPS
    rtol, atol = TOLERANCE[dtype]
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=rtol, atol=atol, err_msg=f"{optimizer}: {key}")
    assert not np.array_equal(ours["w"], W0)


def test_slot_names_are_tensorflows(tf1: Any) -> None:
    expected = {"rmsprop": ["momentum", "rms"], "rmsprop_centered": ["mg", "momentum", "rms"],
                "adadelta": ["accum", "accum_update"], "proximal": []}
    for optimizer, names in expected.items():
        for lib in (tf, tf1):
            with lib.Graph().as_default():
                w = lib.Variable([1.0, 2.0], name="w")
                opt = OPTIMIZERS[optimizer](lib)
                opt.minimize(lib.reduce_sum(w * w))
                assert opt.get_slot_names() == names, (lib.__name__, optimizer)
                for name in names:
                    slot = opt.get_slot(w, name)
                    assert slot not in lib.trainable_variables() and slot in lib.global_variables()
                assert opt.get_slot(w, "no_such_slot") is None


def test_rms_slot_starts_at_one_and_slots_live_with_their_variable() -> None:
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(np.zeros((2, 2)), name="w")
        opt = tf.train.RMSPropOptimizer(0.1, centered=True)
        train = opt.minimize(tf.reduce_sum(w))
        for name in opt.get_slot_names():
            assert opt.get_slot(w, name).device == "/job:ps/task:0"
        update = [op for op in tf.get_default_graph().get_operations() if op.type == "ApplyCenteredRMSProp"]
        assert [op.device for op in update] == ["/job:ps/task:0"]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(opt.get_slot(w, "rms")), np.ones((2, 2)))
            sess.run(train)


ROWS, DIM = 10, 4
UNUSED_ROWS = [8, 9]
BATCHES = [
    np.array([[0, 0, 6], [7, 3, 0], [1, 2, 3]], np.int32),
    np.array([[1, 1, 1], [4, 5, 2], [0, 3, 5]], np.int32),
    np.array([[2, 4, 4], [5, 5, 0], [3, 1, 2]], np.int32),
]
TARGETS = [np.array([[1.0], [-2.0], [0.5]]), np.array([[0.0], [1.0], [-1.0]]), np.array([[2.0], [0.5], [-0.5]])]


def sparse_run(lib: Any, optimizer: str, dtype: type, device: str = "") -> tuple[dict[str, Any], list[str]]:
    rng = np.random.default_rng(7)
    table0 = rng.standard_normal((ROWS, DIM)).astype(dtype)
    w0 = rng.standard_normal((DIM, 1)).astype(dtype) * 0.5
    graph = lib.Graph()
    with graph.as_default(), graph.device(device):
        table = lib.Variable(table0, name="emb")
        other = lib.Variable(table0[:4] * 2, name="other")
        w = lib.Variable(w0, name="w")
        ids = lib.placeholder(lib.int32, [None, 3], name="ids")
        y = lib.placeholder(lib.as_dtype(dtype), [None, 1], name="y")
        pooled = lib.reduce_sum(lib.nn.embedding_lookup(table, ids), 1)
        gathered = lib.reduce_sum(lib.gather(other, [0, 2, 2]))
        loss = lib.reduce_mean(lib.square(lib.matmul(pooled, w) - y)) + 0.1 * gathered
        opt = OPTIMIZERS[optimizer](lib)
        step = opt.minimize(loss)
        variables = {"emb": table, "other": other, "w": w}
        slots = {f"{key}/{name}": opt.get_slot(v, name) for key, v in variables.items()
                 for name in opt.get_slot_names()}
        with lib.Session(graph=graph) as sess:
            sess.run(lib.global_variables_initializer())
            for batch, target in zip(BATCHES, TARGETS):
                sess.run(step, {ids: batch, y: target.astype(dtype)})
            values = sess.run({**variables, **slots})
    values["emb0"], values["other0"] = table0, table0[:4] * 2
    types = sorted(op.type for op in graph.get_operations()
                   if op.name.startswith((f"{opt.get_name()}/update_emb/", f"{opt.get_name()}/update_other/")))
    return values, types


@pytest.mark.parametrize("optimizer, dtype", ORACLE_CASES)
def test_sparse_steps_match_tensorflow_and_move_only_looked_up_rows(tf1: Any, optimizer: str, dtype: type) -> None:
    ours, types = sparse_run(tf, optimizer, dtype)
    theirs, _ = sparse_run(tf1, optimizer, dtype)
    assert sorted(ours) == sorted(theirs)
    rtol, atol = TOLERANCE[dtype]
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=rtol, atol=atol, err_msg=f"{optimizer}: {key}")
    np.testing.assert_array_equal(ours["emb"][UNUSED_ROWS], ours["emb0"][UNUSED_ROWS])
    np.testing.assert_array_equal(ours["other"][[1, 3]], ours["other0"][[1, 3]])
    assert not np.allclose(ours["other"][[0, 2]], ours["other0"][[0, 2]])
    assert types.count(SPARSE_OP[optimizer]) == 2 and not any(t.startswith("Apply") for t in types)


@pytest.mark.parametrize("optimizer", ["rmsprop_centered", "adadelta", "proximal_l1_l2"])
def test_fused_kernels_run_through_the_gpu_backend_interface(optimizer: str, strict_gpu: Any) -> None:
    # The same steps on the CPU, then on the GPU path: ops default to /device:GPU:0 under strict_gpu.
    on_gpu, _, _ = dense_run(tf, optimizer, np.float64, device="/device:GPU:0")
    sparse_on_gpu, _ = sparse_run(tf, optimizer, np.float64, device="/device:GPU:0")
    assert strict_gpu.COUNTERS.host_to_device >= 1
    on_cpu, _, _ = dense_run(tf, optimizer, np.float64, device="/device:CPU:0")
    sparse_on_cpu, _ = sparse_run(tf, optimizer, np.float64, device="/device:CPU:0")
    for key in on_cpu:
        np.testing.assert_allclose(on_gpu[key], on_cpu[key], rtol=1e-12, err_msg=key)
    for key in sparse_on_cpu:
        np.testing.assert_allclose(sparse_on_gpu[key], sparse_on_cpu[key], rtol=1e-12, err_msg=key)


def test_l1_drives_small_weights_to_exactly_zero(session: tf.Session) -> None:
    w = tf.Variable([0.0625, -0.0625, 3.0], dtype=tf.float64, name="w")
    step = tf.train.ProximalGradientDescentOptimizer(1.0, l1_regularization_strength=0.125).minimize(
        tf.reduce_sum(w) * 0.0)
    session.run(tf.global_variables_initializer())
    session.run(step)
    np.testing.assert_array_equal(session.run(w), [0.0, 0.0, 2.875])


def test_hyper_parameters_must_be_scalars() -> None:
    w = tf.Variable([1.0, 2.0], name="w")
    with pytest.raises(ValueError, match="rho must be a scalar"):
        tf.train.AdadeltaOptimizer(rho=[0.9, 0.9]).minimize(tf.reduce_sum(w))
