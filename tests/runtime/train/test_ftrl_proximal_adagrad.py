"""FtrlOptimizer and ProximalAdagradOptimizer against TF1 itself, dense and sparse.

The same initial weights and data are trained a few steps with tensorgrid and with
``tf.compat.v1``; the variables, every slot, the slot names and the slot variables' names
must agree, in float32 and float64, across FTRL's learning-rate powers (-0.5, 0 and
another), L1, L2, L2 shrinkage and beta. Sparse gradients (an embedding lookup's and
``tf.gather``'s, with repeated ids, on a matrix and on a vector) must move only the rows
the batch looked up, through one fused ``SparseApply*`` op.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf

W0 = np.array([[0.5, -1.5, 2.0], [1.0, 0.25, -0.75]])
C = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]])
STEPS = 5


def _as(lib: Any, dtype: type, value: float) -> Any:
    """A hyper-parameter as a tensor of the variables' dtype: TF1's ProximalAdagradOptimizer does not cast its
    hyper-parameters (even the default strengths), so a float64 model must give float64 tensors for all three
    (tensorgrid casts: docs/differences.md)."""
    return lib.constant(value, lib.as_dtype(dtype))


OPTIMIZERS: dict[str, Callable[[Any, type], Any]] = {
    "ftrl": lambda lib, dt: lib.train.FtrlOptimizer(0.1),
    "ftrl_l1_l2": lambda lib, dt: lib.train.FtrlOptimizer(
        0.2, l1_regularization_strength=0.05, l2_regularization_strength=0.1),
    "ftrl_strong_l1": lambda lib, dt: lib.train.FtrlOptimizer(0.5, l1_regularization_strength=0.5),
    "ftrl_power_0": lambda lib, dt: lib.train.FtrlOptimizer(
        0.05, learning_rate_power=0.0, initial_accumulator_value=0.5, l1_regularization_strength=0.01),
    "ftrl_power_0.3": lambda lib, dt: lib.train.FtrlOptimizer(
        0.3, learning_rate_power=-0.3, l2_regularization_strength=0.2),
    "ftrl_shrinkage": lambda lib, dt: lib.train.FtrlOptimizer(
        0.2, l1_regularization_strength=0.02, l2_regularization_strength=0.1, l2_shrinkage_regularization_strength=0.3),
    "ftrl_shrinkage_power_0": lambda lib, dt: lib.train.FtrlOptimizer(
        0.1, learning_rate_power=0.0, l2_shrinkage_regularization_strength=0.25),
    "ftrl_beta": lambda lib, dt: lib.train.FtrlOptimizer(
        _as(lib, dt, 0.25), l2_regularization_strength=0.05, beta=0.5, initial_accumulator_value=0.0),
    "ftrl_beta_python_rate": lambda lib, dt: lib.train.FtrlOptimizer(
        0.25, l1_regularization_strength=0.01, l2_regularization_strength=0.1, beta=0.3),
    "proximal_adagrad": lambda lib, dt: lib.train.ProximalAdagradOptimizer(
        _as(lib, dt, 0.1), l1_regularization_strength=_as(lib, dt, 0.0), l2_regularization_strength=_as(lib, dt, 0.0)),
    "proximal_adagrad_l1_l2": lambda lib, dt: lib.train.ProximalAdagradOptimizer(
        _as(lib, dt, 0.3), initial_accumulator_value=0.2, l1_regularization_strength=_as(lib, dt, 0.05),
        l2_regularization_strength=_as(lib, dt, 0.1)),
    "proximal_adagrad_l2": lambda lib, dt: lib.train.ProximalAdagradOptimizer(
        _as(lib, dt, 0.2), l1_regularization_strength=_as(lib, dt, 0.0), l2_regularization_strength=_as(lib, dt, 0.5)),
}


def sparse_op(optimizer: str) -> str:
    if optimizer.startswith("proximal"):
        return "SparseApplyProximalAdagrad"
    return "SparseApplyFtrlV2" if "shrinkage" in optimizer else "SparseApplyFtrl"


TOLERANCE = {np.float64: (1e-10, 1e-12), np.float32: (2e-5, 2e-6)}
CASES = [pytest.param(name, dtype, id=f"{name}-{dtype.__name__}") for dtype in (np.float64, np.float32)
         for name in sorted(OPTIMIZERS)]


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
        opt = OPTIMIZERS[optimizer](lib, dtype)
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


@pytest.mark.parametrize("optimizer, dtype", CASES)
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


def test_strong_l1_makes_weights_exactly_zero_as_tensorflow_does(tf1: Any) -> None:
    ours, _, _ = dense_run(tf, "ftrl_strong_l1", np.float64)
    theirs, _, _ = dense_run(tf1, "ftrl_strong_l1", np.float64)
    zeros = np.concatenate([theirs["w"].ravel(), theirs["b"]]) == 0.0
    assert zeros.any() and not zeros.all()
    np.testing.assert_array_equal(np.concatenate([ours["w"].ravel(), ours["b"]]) == 0.0, zeros)


def test_slot_names_and_slot_variables_are_tensorflows(tf1: Any) -> None:
    expected = {
        "ftrl": (lambda lib: lib.train.FtrlOptimizer(0.1), {"accum": "w/Ftrl", "linear": "w/Ftrl_1"}),
        "ftrl_named": (lambda lib: lib.train.FtrlOptimizer(0.1, name="Wide", accum_name="acc", linear_name="lin"),
                       {"accum": "w/acc", "linear": "w/lin"}),
        "ftrl_v2": (lambda lib: lib.train.FtrlOptimizer(0.1, l2_shrinkage_regularization_strength=0.1),
                    {"accum": "w/Ftrl", "linear": "w/Ftrl_1"}),
        "proximal_adagrad": (lambda lib: lib.train.ProximalAdagradOptimizer(0.1),
                             {"accumulator": "w/ProximalAdagrad"}),
    }
    for case, (make, slots) in expected.items():
        for lib in (tf, tf1):
            with lib.Graph().as_default():
                w = lib.Variable([1.0, 2.0], name="w")
                opt = make(lib)
                opt.minimize(lib.reduce_sum(w * w))
                assert opt.get_slot_names() == sorted(slots), (lib.__name__, case)
                for name, variable_name in slots.items():
                    slot = opt.get_slot(w, name)
                    assert slot.op.name == variable_name, (lib.__name__, case)
                    assert slot not in lib.trainable_variables() and slot in lib.global_variables()


def test_slots_start_as_tensorflows_and_live_with_their_variable() -> None:
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(np.zeros((2, 2)), name="w")
        ftrl = tf.train.FtrlOptimizer(0.1, initial_accumulator_value=0.25)
        adagrad = tf.train.ProximalAdagradOptimizer(0.1, initial_accumulator_value=0.5)
        train = tf.group(ftrl.minimize(tf.reduce_sum(w)), adagrad.minimize(tf.reduce_sum(w)))
        slots = [ftrl.get_slot(w, "accum"), ftrl.get_slot(w, "linear"), adagrad.get_slot(w, "accumulator")]
        assert [slot.device for slot in slots] == ["/job:ps/task:0"] * 3
        updates = [op for op in tf.get_default_graph().get_operations()
                   if op.type in ("ApplyFtrl", "ApplyProximalAdagrad")]
        assert sorted(op.type for op in updates) == ["ApplyFtrl", "ApplyProximalAdagrad"]
        assert {op.device for op in updates} == {"/job:ps/task:0"}
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            initial = sess.run(slots)
            sess.run(train)
    np.testing.assert_array_equal(initial[0], np.full((2, 2), 0.25))
    np.testing.assert_array_equal(initial[1], np.zeros((2, 2)))
    np.testing.assert_array_equal(initial[2], np.full((2, 2), 0.5))


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
    bias0 = rng.standard_normal(ROWS).astype(dtype)
    w0 = rng.standard_normal((DIM, 1)).astype(dtype) * 0.5
    graph = lib.Graph()
    with graph.as_default(), graph.device(device):
        table = lib.Variable(table0, name="emb")
        bias = lib.Variable(bias0, name="bias")
        other = lib.Variable(table0[:4] * 2, name="other")
        w = lib.Variable(w0, name="w")
        ids = lib.placeholder(lib.int32, [None, 3], name="ids")
        y = lib.placeholder(lib.as_dtype(dtype), [None, 1], name="y")
        pooled = lib.reduce_sum(lib.nn.embedding_lookup(table, ids), 1)
        biases = lib.reduce_sum(lib.gather(bias, ids), 1, keepdims=True)
        gathered = lib.reduce_sum(lib.gather(other, [0, 2, 2]))
        loss = lib.reduce_mean(lib.square(lib.matmul(pooled, w) + biases - y)) + 0.1 * gathered
        opt = OPTIMIZERS[optimizer](lib, dtype)
        step = opt.minimize(loss)
        variables = {"emb": table, "bias": bias, "other": other, "w": w}
        slots = {f"{key}/{name}": opt.get_slot(v, name) for key, v in variables.items()
                 for name in opt.get_slot_names()}
        with lib.Session(graph=graph) as sess:
            sess.run(lib.global_variables_initializer())
            for batch, target in zip(BATCHES, TARGETS):
                sess.run(step, {ids: batch, y: target.astype(dtype)})
            values = sess.run({**variables, **slots})
    values["emb0"], values["bias0"], values["other0"] = table0, bias0, table0[:4] * 2
    updates = tuple(f"{opt.get_name()}/update_{name}/" for name in ("emb", "bias", "other"))
    types = sorted(op.type for op in graph.get_operations() if op.name.startswith(updates))
    return values, types


@pytest.mark.parametrize("optimizer, dtype", CASES)
def test_sparse_steps_match_tensorflow_and_move_only_looked_up_rows(tf1: Any, optimizer: str, dtype: type) -> None:
    ours, types = sparse_run(tf, optimizer, dtype)
    theirs, _ = sparse_run(tf1, optimizer, dtype)
    assert sorted(ours) == sorted(theirs)
    rtol, atol = TOLERANCE[dtype]
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=rtol, atol=atol, err_msg=f"{optimizer}: {key}")
    for name in ("emb", "bias"):
        np.testing.assert_array_equal(ours[name][UNUSED_ROWS], ours[f"{name}0"][UNUSED_ROWS])
        for slot in [key for key in ours if key.startswith(f"{name}/")]:
            np.testing.assert_array_equal(ours[slot][UNUSED_ROWS], theirs[slot][UNUSED_ROWS])
    np.testing.assert_array_equal(ours["other"][[1, 3]], ours["other0"][[1, 3]])
    assert not np.allclose(ours["other"][[0, 2]], ours["other0"][[0, 2]])
    assert types.count(sparse_op(optimizer)) == 3 and not any(t.startswith("Apply") for t in types)


@pytest.mark.parametrize("optimizer", ["ftrl_shrinkage", "ftrl_power_0.3", "proximal_adagrad_l1_l2"])
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


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Any:
    return tf if request.param == "tensorgrid" else request.getfixturevalue("tf1")


@pytest.mark.parametrize("arguments, message", [
    ({"initial_accumulator_value": -0.1}, "initial_accumulator_value -0.100000 needs to be positive or zero"),
    ({"learning_rate_power": 0.5}, "learning_rate_power 0.500000 needs to be negative or zero"),
    ({"l1_regularization_strength": -1.0}, "l1_regularization_strength -1.000000 needs to be positive or zero"),
    ({"l2_regularization_strength": -1.0}, "l2_regularization_strength -1.000000 needs to be positive or zero"),
    ({"l2_shrinkage_regularization_strength": -1.0}, "l2_shrinkage_regularization_strength -1.000000 needs"),
])
def test_ftrl_rejects_what_tensorflow_rejects(lib: Any, arguments: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        lib.train.FtrlOptimizer(0.1, **arguments)


def test_proximal_adagrad_needs_a_positive_accumulator(lib: Any) -> None:
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive: 0.0"):
        lib.train.ProximalAdagradOptimizer(0.1, initial_accumulator_value=0.0)


@pytest.mark.parametrize("make", [
    pytest.param(lambda lib: lib.train.FtrlOptimizer(-0.1), id="ftrl"),
    pytest.param(lambda lib: lib.train.ProximalAdagradOptimizer(-0.1), id="proximal_adagrad"),
])
def test_a_sparse_update_needs_a_positive_learning_rate(lib: Any, make: Callable[[Any], Any]) -> None:
    with lib.Graph().as_default():
        table = lib.Variable(np.ones((3, 2), np.float32), name="emb")
        step = make(lib).minimize(lib.reduce_sum(lib.gather(table, [0, 2])))
        with lib.Session() as sess:
            sess.run(lib.global_variables_initializer())
            with pytest.raises(lib.errors.InvalidArgumentError, match="lr"):
                sess.run(step)
