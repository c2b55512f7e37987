"""Optimizers: each update against a numpy re-implementation of TF's formula, over several steps.

Also checked: slot variables (names, collections, colocation with their variable),
that updates are placed where the variables live, the global step, the errors for
missing gradients, locking under concurrent steps, the fused kernels through the
cupy backend's interface, and (when TensorFlow is installed) TF1 itself as oracle.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf

W0 = np.array([[0.5, -1.5, 2.0], [1.0, 0.25, -0.75]])
C = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]])
STEPS = 5


def _grad(w: np.ndarray) -> np.ndarray:
    """The gradient of the test loss ``sum(w * C) + 0.5 * sum(w ** 2)``."""
    return C + w


def _f32(x: float) -> float:
    """A Python float hyper-parameter as TF1 sees it: converted to a float32 tensor, then cast."""
    return float(np.float32(x))


# ---------------------------------------------------------------- numpy references (TF's formulas)

def _gd_reference(lr: float) -> list[np.ndarray]:
    w, out, lr = W0.copy(), [], _f32(lr)
    for _ in range(STEPS):
        w = w - lr * _grad(w)
        out.append(w)
    return out


def _momentum_reference(lr: float, momentum: float, nesterov: bool) -> list[np.ndarray]:
    w, accum, out = W0.copy(), np.zeros_like(W0), []
    lr, momentum = _f32(lr), _f32(momentum)
    for _ in range(STEPS):
        g = _grad(w)
        accum = accum * momentum + g
        w = w - (lr * g + lr * momentum * accum if nesterov else lr * accum)
        out.append(w)
    return out


def _adagrad_reference(lr: float, initial: float) -> list[np.ndarray]:
    w, accum, out, lr = W0.copy(), np.full_like(W0, initial), [], _f32(lr)
    for _ in range(STEPS):
        g = _grad(w)
        accum = accum + g * g
        w = w - lr * g / np.sqrt(accum)
        out.append(w)
    return out


def _adam_reference(lr: float, beta1: float, beta2: float, epsilon: float) -> list[np.ndarray]:
    w, m, v, out = W0.copy(), np.zeros_like(W0), np.zeros_like(W0), []
    lr, beta1, beta2, epsilon = _f32(lr), _f32(beta1), _f32(beta2), _f32(epsilon)
    # The beta powers are float32 variables (their initial values are Python floats).
    beta1_power, beta2_power = np.float32(beta1), np.float32(beta2)
    for _ in range(STEPS):
        g = _grad(w)
        lr_t = lr * np.sqrt(1 - float(beta2_power)) / (1 - float(beta1_power))
        beta1_power, beta2_power = beta1_power * np.float32(beta1), beta2_power * np.float32(beta2)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        w = w - lr_t * m / (np.sqrt(v) + epsilon)
        out.append(w)
    return out


CASES: dict[str, tuple[Callable[[], Any], Callable[[], list[np.ndarray]]]] = {
    "gradient_descent": (lambda: tf.train.GradientDescentOptimizer(0.1), lambda: _gd_reference(0.1)),
    "momentum": (lambda: tf.train.MomentumOptimizer(0.05, 0.9), lambda: _momentum_reference(0.05, 0.9, False)),
    "nesterov": (lambda: tf.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
                 lambda: _momentum_reference(0.05, 0.9, True)),
    "adagrad": (lambda: tf.train.AdagradOptimizer(0.3, initial_accumulator_value=0.2),
                lambda: _adagrad_reference(0.3, 0.2)),
    "adam": (lambda: tf.train.AdamOptimizer(0.1, beta1=0.8, beta2=0.95, epsilon=1e-3),
             lambda: _adam_reference(0.1, 0.8, 0.95, 1e-3)),
}
TOLERANCE = {np.float64: 1e-12, np.float32: 2e-6}


def _train(make_optimizer: Callable[[], Any], dtype: Any, device: str = "") -> list[np.ndarray]:
    with tf.device(device):
        w = tf.Variable(W0.astype(dtype), name="w")
        loss = tf.reduce_sum(w * tf.constant(C.astype(dtype))) + 0.5 * tf.reduce_sum(tf.square(w))
        train = make_optimizer().minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        values = []
        for _ in range(STEPS):
            sess.run(train)
            values.append(sess.run(w))
    return values


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", sorted(CASES))
def test_update_matches_tf_formula(case: str, dtype: Any) -> None:
    make_optimizer, reference = CASES[case]
    for step, (got, want) in enumerate(zip(_train(make_optimizer, dtype), reference())):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype],
                                   err_msg=f"{case} after step {step + 1}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_kernels_run_through_the_gpu_backend_interface(case: str, strict_gpu: Any) -> None:
    make_optimizer, reference = CASES[case]
    got = _train(make_optimizer, np.float64, device="/device:GPU:0")
    np.testing.assert_allclose(got[-1], reference()[-1], rtol=1e-12)


def test_learning_rate_may_be_a_tensor(session: tf.Session) -> None:
    lr = tf.placeholder(tf.float64, [], name="lr")
    w = tf.Variable(W0, name="w")
    loss = tf.reduce_sum(w * C) + 0.5 * tf.reduce_sum(tf.square(w))
    train = tf.train.MomentumOptimizer(lr, 0.5).minimize(loss)
    session.run(tf.global_variables_initializer())
    expected, accum = W0.copy(), np.zeros_like(W0)
    for rate in (0.1, 0.01, 0.2):
        session.run(train, {lr: rate})
        accum = accum * 0.5 + _grad(expected)
        expected = expected - rate * accum
    np.testing.assert_allclose(session.run(w), expected, rtol=1e-12)


# ---------------------------------------------------------------- slots and placement

def test_slot_names_collections_and_initial_values(session: tf.Session) -> None:
    with tf.variable_scope("dense"):
        w = tf.get_variable("w", [2, 3])
        b = tf.get_variable("b", [3])
    loss = tf.reduce_sum(tf.matmul(tf.ones([1, 2]), w) + b)
    momentum, adam, adagrad = (tf.train.MomentumOptimizer(0.1, 0.9), tf.train.AdamOptimizer(),
                               tf.train.AdagradOptimizer(0.1))
    for opt in (momentum, adam, adagrad):
        opt.minimize(loss)
    assert momentum.get_slot(w, "momentum").op.name == "dense/w/Momentum"
    assert adam.get_slot(w, "m").op.name == "dense/w/Adam"
    assert adam.get_slot(w, "v").op.name == "dense/w/Adam_1"
    assert adagrad.get_slot(b, "accumulator").op.name == "dense/b/Adagrad"
    assert adam.get_slot_names() == ["m", "v"]
    assert adam.get_slot(w, "nonexistent") is None
    assert [v.op.name for v in adam.variables()] == [
        "beta1_power", "beta2_power", "dense/b/Adam", "dense/b/Adam_1", "dense/w/Adam", "dense/w/Adam_1"]
    slots = momentum.variables() + adam.variables() + adagrad.variables()
    assert tf.trainable_variables() == [w, b]
    assert all(s in tf.global_variables() and not s.trainable for s in slots)
    session.run(tf.global_variables_initializer())
    np.testing.assert_array_equal(session.run(adam.get_slot(w, "m")), np.zeros((2, 3)))
    np.testing.assert_allclose(session.run(adagrad.get_slot(w, "accumulator")), np.full((2, 3), 0.1))
    assert session.run(adam.variables()[0]) == pytest.approx(0.9)


def test_slots_and_updates_are_colocated_with_their_variable() -> None:
    with tf.device("/job:ps/task:1"):
        a = tf.Variable(np.ones(3), name="a")
    with tf.device("/job:ps/task:0"):
        b = tf.Variable(np.ones(3), name="b")
    with tf.device("/job:worker/task:0"):
        loss = tf.reduce_sum(a * b)
        gs = tf.train.get_or_create_global_step()
        opt = tf.train.AdamOptimizer(0.1)
        train = opt.minimize(loss, global_step=gs)
    for var in (a, b):
        for slot_name in ("m", "v"):
            slot = opt.get_slot(var, slot_name)
            assert slot.device == var.device
            assert slot.initializer.device == var.device
        update = tf.get_default_graph().get_operation_by_name(f"Adam/update_{var.op.name}/ApplyAdam")
        assert update.device == var.device
        assert update.get_attr("_class") == [f"loc:@{var.op.name}"]
    # The beta powers live with the first variable by name ("a"), and so do their updates.
    beta1_power, beta2_power = opt._get_beta_accumulators()
    assert beta1_power.device == beta2_power.device == a.device
    assert tf.get_default_graph().get_operation_by_name("Adam/Assign").device == a.device
    # The global step is incremented where it lives, after the update group.
    assert gs.device == "/job:worker/task:0"
    assert train.type == "AssignAdd" and train.device == gs.device
    assert [c.name for c in train.control_inputs] == ["Adam/update"]


def test_minimize_increments_the_global_step(session: tf.Session) -> None:
    w = tf.Variable([1.0, 2.0], name="w")
    gs = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.5).minimize(tf.reduce_sum(tf.square(w)), global_step=gs)
    assert tf.get_collection(tf.GraphKeys.TRAIN_OP) == [train]
    session.run(tf.global_variables_initializer())
    for _ in range(3):
        session.run(train)
    assert tf.train.global_step(session, gs) == 3
    np.testing.assert_allclose(session.run(w), [0.0, 0.0])


def test_global_step_variable() -> None:
    assert tf.train.get_global_step() is None
    gs = tf.train.get_or_create_global_step()
    assert gs.op.name == "global_step" and gs.dtype.base_dtype == tf.int64 and gs.shape.as_list() == []
    assert not gs.trainable
    assert tf.get_collection(tf.GraphKeys.GLOBAL_STEP) == [gs]
    assert gs in tf.global_variables()
    assert tf.train.get_global_step() is gs
    assert tf.train.get_or_create_global_step() is gs
    with pytest.raises(ValueError, match='"global_step" already exists'):
        tf.train.create_global_step()


def test_a_plain_variable_named_global_step_is_found() -> None:
    step = tf.Variable(0, name="global_step", trainable=False)
    assert tf.train.get_global_step() is step.op.outputs[0]


# ---------------------------------------------------------------- gradients and errors

def test_no_gradient_for_any_variable_is_an_error_listing_them() -> None:
    w = tf.Variable(1.0, name="w")
    x = tf.placeholder(tf.float32, [], name="x")
    with pytest.raises(ValueError, match=r"No gradients provided for any variable.*w:0"):
        tf.train.GradientDescentOptimizer(0.1).minimize(x * 2.0, var_list=[w])
    with pytest.raises(ValueError, match=r"No gradients provided for any variable: \[.*w:0"):
        tf.train.GradientDescentOptimizer(0.1).apply_gradients([(None, w)])


def test_compute_gradients_pairs_and_partial_updates(session: tf.Session) -> None:
    a = tf.Variable(3.0, name="a")
    b = tf.Variable(4.0, name="b")
    unused = tf.Variable(5.0, name="unused")
    opt = tf.train.GradientDescentOptimizer(0.1)
    grads_and_vars = opt.compute_gradients(a * b)
    assert [v for _, v in grads_and_vars] == [a, b, unused]
    assert grads_and_vars[2][0] is None
    clipped = [(tf.clip_by_value(g, -1.0, 1.0), v) for g, v in grads_and_vars if g is not None]
    train = opt.apply_gradients(clipped)
    session.run(tf.global_variables_initializer())
    session.run(train)
    assert session.run([a, b, unused]) == pytest.approx([2.9, 3.9, 5.0])


def test_var_list_limits_the_update(session: tf.Session) -> None:
    a = tf.Variable(1.0, name="a")
    b = tf.Variable(1.0, name="b")
    train = tf.train.GradientDescentOptimizer(0.5).minimize(a * b, var_list=[b], gate_gradients=tf.train.Optimizer.GATE_GRAPH)
    session.run(tf.global_variables_initializer())
    session.run(train)
    assert session.run([a, b]) == pytest.approx([1.0, 0.5])


def test_integer_variables_are_rejected() -> None:
    n = tf.Variable(1, name="n")
    with pytest.raises(ValueError, match="Invalid type int32"):
        tf.train.GradientDescentOptimizer(0.1).compute_gradients(n * 2, var_list=[n])


def test_slots_do_not_inherit_the_callers_control_dependencies(session: tf.Session) -> None:
    x = tf.placeholder(tf.float32, [2], name="x")
    w = tf.Variable([1.0, 1.0], name="w")
    loss = tf.reduce_sum(w * x)
    before = tf.identity(x, name="needs_x")
    with tf.control_dependencies([before]):
        train = tf.train.AdamOptimizer(0.1).minimize(loss)
    session.run(tf.global_variables_initializer())  # would need a feed of x if slots depended on it
    session.run(train, {x: [1.0, -1.0]})
    np.testing.assert_allclose(session.run(w), [0.9, 1.1], rtol=1e-5)


def test_locking_updates_from_concurrent_steps_lose_nothing() -> None:
    w = tf.Variable(np.zeros(1000), name="w")
    # d(loss)/dw = -1 everywhere, so every step adds exactly lr.
    train = tf.train.GradientDescentOptimizer(1.0, use_locking=True).minimize(-tf.reduce_sum(w))
    steps_per_thread, threads = 50, 4
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())

        def work() -> None:
            for _ in range(steps_per_thread):
                sess.run(train)

        workers = [threading.Thread(target=work) for _ in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        np.testing.assert_array_equal(sess.run(w), np.full(1000, float(steps_per_thread * threads)))


def test_fused_op_checks_shapes_and_needs_variables() -> None:
    from tensorgrid.ops import training_ops

    w = tf.Variable(np.zeros(3), name="w")
    with pytest.raises(ValueError, match="must have the same shape"):
        training_ops.apply_gradient_descent(w, 0.1, np.zeros(4))
    with pytest.raises(TypeError, match="must be a variable"):
        training_ops.apply_gradient_descent(tf.constant(np.zeros(3)), 0.1, np.zeros(3))
    with pytest.raises(ValueError, match="alpha must be a scalar"):
        training_ops.apply_gradient_descent(w, [0.1, 0.2], np.zeros(3))


def test_update_of_an_uninitialized_variable_names_it(session: tf.Session) -> None:
    w = tf.Variable([1.0], name="never_initialized")
    train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(w))
    with pytest.raises(tf.errors.FailedPreconditionError, match="never_initialized"):
        session.run(train)


# ---------------------------------------------------------------- TensorFlow as oracle


ORACLE_OPTIMIZERS = {
    "gradient_descent": lambda t: t.train.GradientDescentOptimizer(0.1),
    "momentum": lambda t: t.train.MomentumOptimizer(0.05, 0.9),
    "nesterov": lambda t: t.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
    "adagrad": lambda t: t.train.AdagradOptimizer(0.3, initial_accumulator_value=0.2),
    "adam": lambda t: t.train.AdamOptimizer(0.1, beta1=0.8, beta2=0.95, epsilon=1e-3),
}


def _oracle_run(lib: Any, make_optimizer: Callable[[Any], Any], graph: Any, session_factory: Any) -> dict[str, Any]:
    with graph.as_default():
        w = lib.Variable(W0.astype(np.float32), name="w")
        b = lib.Variable(np.float32([0.5, -0.5, 1.0]), name="b")
        x = lib.constant(C.T.astype(np.float32))
        loss = lib.reduce_mean(lib.square(lib.matmul(x, w) + b)) + lib.reduce_sum(lib.square(w)) * 0.01
        gs = lib.train.get_or_create_global_step()
        opt = make_optimizer(lib)
        train = opt.minimize(loss, global_step=gs)
        slots = {f"{v.op.name}/{name}": opt.get_slot(v, name) for v in (w, b) for name in opt.get_slot_names()}
        init = lib.global_variables_initializer()
        with session_factory(graph) as sess:
            sess.run(init)
            for _ in range(STEPS):
                sess.run(train)
            return sess.run({"w": w, "b": b, "loss": loss, "global_step": gs, **slots})


@pytest.mark.parametrize("case", sorted(ORACLE_OPTIMIZERS))
def test_optimizer_steps_match_tensorflow(case: str, tf1: Any) -> None:
    make_optimizer = ORACLE_OPTIMIZERS[case]
    ours = _oracle_run(tf, make_optimizer, tf.Graph(), lambda g: tf.Session(graph=g))
    theirs = _oracle_run(tf1, make_optimizer, tf1.Graph(), lambda g: tf1.Session(graph=g))
    assert sorted(ours) == sorted(theirs)
    assert ours["global_step"] == theirs["global_step"] == STEPS
    for key in ours:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-6, err_msg=f"{case}: {key}")
