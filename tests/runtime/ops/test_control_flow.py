"""``tf.cond`` and ``tf.while_loop``: each program runs on TensorFlow's ``tf.compat.v1`` (the
oracle) and on tensorgrid, and the fetched values (forward and ``tf.gradients``) must agree.

Side effects are checked too: an assign in the branch not taken never happens, and a
gradient pass does not repeat a branch's side effects. Bad arguments fail with errors that
name them. The distributed run lives in distributed/test_control_flow_distributed.py.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid

Program = Callable[[Any], tuple[list[Any], Callable[[Any], dict[Any, Any]]]]
X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=np.float64)


def cond_both_ways(tf: Any) -> Any:
    x = tf.placeholder(tf.float64, [2, 3])
    w = tf.Variable(np.arange(3.0) / 4.0 + 0.1)
    flag = tf.placeholder(tf.bool, [])
    out = tf.cond(flag, lambda: tf.reduce_sum(tf.tanh(x * w)), lambda: tf.reduce_sum(tf.square(x) * w) * 0.5)
    grads = tf.gradients(out, [x, w])
    return [out, *grads], lambda on: {x: X, flag: on}


def cond_nested_structures(tf: Any) -> Any:
    x = tf.placeholder(tf.float64, [2, 3])
    a = tf.placeholder(tf.float64, [])
    out = tf.cond(a > 0.0,
                  lambda: {"sum": tf.reduce_sum(x) * a, "pair": (x * a, tf.constant(1, tf.int32))},
                  lambda: {"sum": tf.reduce_max(x) - a, "pair": (x - a, tf.constant(2, tf.int32))})
    grads = tf.gradients([out["sum"], out["pair"][0]], [x, a])
    return [out["sum"], out["pair"][0], out["pair"][1], *grads], lambda on: {x: X, a: 2.0 if on else -3.0}


def cond_in_cond(tf: Any) -> Any:
    x = tf.placeholder(tf.float64, [])
    outer = tf.cond(x > 0.0,
                    lambda: tf.cond(x > 1.0, lambda: x * x * x, lambda: tf.exp(x) * 2.0),
                    lambda: -x)
    return [outer, tf.gradients(outer, x)[0]], lambda on: {x: 1.5 if on else 0.5}


def while_power(tf: Any) -> Any:
    x = tf.placeholder(tf.float64, [2, 3])
    w = tf.Variable(np.array([0.9, 1.1, -0.5]))
    i, acc = tf.while_loop(lambda i, acc: i < 4, lambda i, acc: (i + 1, acc * x + w), [tf.constant(0), tf.ones_like(x)])
    loss = tf.reduce_sum(acc)
    return [i, acc, *tf.gradients(loss, [x, w])], lambda on: {x: X * (1.0 if on else 0.5)}


def while_maximum_iterations(tf: Any) -> Any:
    x = tf.placeholder(tf.float64, [])
    result = tf.while_loop(lambda v: v < 1e9, lambda v: v * x, [x], maximum_iterations=3)
    return [result, tf.gradients(result, x)[0]], lambda on: {x: 1.5 if on else 3.0}


def while_growing_shape(tf: Any) -> Any:
    x = tf.placeholder(tf.float64, [None])
    _, grown = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.concat([v, v * 2.0], 0)),
                             [tf.constant(0), x], shape_invariants=[tf.TensorShape([]), tf.TensorShape([None])],
                             parallel_iterations=1)
    total = tf.reduce_sum(grown * grown)
    return [grown, tf.gradients(total, x)[0]], lambda on: {x: np.array([1.0, -2.0]) if on else np.array([0.5])}


def while_with_cond_inside(tf: Any) -> Any:
    x = tf.placeholder(tf.float64, [])

    def body(i: Any, v: Any) -> Any:
        return i + 1, tf.cond(tf.equal(i % 2, 0), lambda: v * x, lambda: v + x)

    _, out = tf.while_loop(lambda i, v: i < 5, body, (tf.constant(0), tf.constant(1.0, tf.float64)))
    return [out, tf.gradients(out, x)[0]], lambda on: {x: 0.7 if on else -1.3}


PROGRAMS: dict[str, Program] = {
    "cond_both_ways": cond_both_ways,
    "cond_nested_structures": cond_nested_structures,
    "cond_in_cond": cond_in_cond,
    "while_power": while_power,
    "while_maximum_iterations": while_maximum_iterations,
    "while_growing_shape": while_growing_shape,
    "while_with_cond_inside": while_with_cond_inside,
}


def run(tf: Any, program: Program) -> list[list[Any]]:
    graph = tf.Graph()
    with graph.as_default():
        fetches, feed = program(tf)
        with tf.Session(graph=graph) as sess:
            sess.run(tf.global_variables_initializer())
            return [sess.run(fetches, feed(on)) for on in (True, False)]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_agrees_with_tensorflow(tf1: Any, name: str) -> None:
    expected = run(tf1, PROGRAMS[name])
    actual = run(tensorgrid, PROGRAMS[name])
    for want_run, got_run in zip(expected, actual):
        assert len(want_run) == len(got_run)
        for want, got in zip(want_run, got_run):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-12)
            assert np.asarray(got).dtype == np.asarray(want).dtype


def side_effects(tf: Any) -> list[float]:
    """Counts runs of each branch with assign_add; a gradient pass must not count again."""
    graph = tf.Graph()
    with graph.as_default():
        taken = tf.Variable(0.0)
        not_taken = tf.Variable(0.0)
        before = tf.Variable(0.0)
        x = tf.placeholder(tf.float64, [])
        flag = tf.placeholder(tf.bool, [])
        count_runs = tf.assign_add(before, 1.0)

        def true_fn() -> Any:
            # an op of the enclosing graph as a control dependency runs before the cond, whichever branch
            with tf.control_dependencies([tf.assign_add(taken, 1.0), count_runs]):
                return x * 3.0

        def false_fn() -> Any:
            with tf.control_dependencies([tf.assign_add(not_taken, 1.0)]):
                return x * x

        out = tf.cond(flag, true_fn, false_fn)
        grad = tf.gradients(out, x)[0]
        counter = tf.Variable(0.0)
        looped = tf.while_loop(lambda i: i < 3, lambda i: tf.tuple([i + 1], control_inputs=[tf.assign_add(counter, 1.0)])[0],
                               [tf.constant(0)])
        with tf.Session(graph=graph) as sess:
            sess.run(tf.global_variables_initializer())
            values = [float(v) for v in sess.run([out, grad], {x: 2.0, flag: True})]
            values += [float(v) for v in sess.run([out, grad], {x: 2.0, flag: False})]
            values += [float(sess.run(looped))]
            return values + [float(v) for v in sess.run([taken, not_taken, counter, before])]


def test_only_the_taken_branch_runs_its_side_effects(tf1: Any) -> None:
    assert side_effects(tensorgrid) == side_effects(tf1) == [6.0, 3.0, 4.0, 4.0, 3.0, 1.0, 1.0, 3.0, 2.0]


def test_an_assign_returned_by_a_branch_updates_the_variable() -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        v = tf.Variable(1.0)
        flag = tf.placeholder(tf.bool, [])
        out = tf.cond(flag, lambda: tf.assign(v, 5.0), lambda: tf.identity(v))
        with tf.Session() as sess:
            sess.run(v.initializer)
            assert sess.run(out, {flag: False}) == 1.0
            assert sess.run(out, {flag: True}) == 5.0
            assert sess.run(v) == 5.0


def test_training_through_a_loop_matches_tensorflow(tf1: Any) -> None:
    def train(tf: Any) -> Any:
        with tf.Graph().as_default():
            w = tf.Variable(np.array([0.3, -0.2]), dtype=tf.float64)
            x = tf.constant(np.array([1.0, 2.0]))
            _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, tf.tanh(y * w + x)), [0, x])
            loss = tf.reduce_sum(tf.square(y - 0.5))
            step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                for _ in range(5):
                    sess.run(step)
                return sess.run([w, loss])

    for want, got in zip(train(tf1), train(tensorgrid)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("build, error, message", [
    (lambda tf: tf.cond(True, lambda: 1.0, lambda: 2.0), TypeError, "pred must not be a Python bool"),
    (lambda tf: tf.cond(tf.constant(1.0) > 0, lambda: 1.0, None), TypeError, "false_fn must be callable"),
    (lambda tf: tf.cond(tf.constant([True, False]), lambda: 1.0, lambda: 2.0), ValueError, "pred must be a scalar"),
    (lambda tf: tf.cond(tf.constant(True), lambda: tf.constant(1.0), lambda: tf.constant(1)), TypeError,
     "same dtypes"),
    (lambda tf: tf.cond(tf.constant(True), lambda: (1.0, 2.0), lambda: 1.0), ValueError, "same nested structure"),
    (lambda tf: tf.while_loop(lambda i: tf.reduce_sum(i) < 3, lambda i: tf.concat([i, i], 0), [tf.constant([1])]),
     ValueError,
     "shape_invariants"),
    (lambda tf: tf.while_loop(lambda i: i < 3, lambda i: tf.cast(i, tf.float32), [tf.constant(1)]), TypeError,
     "enters the loop as int32"),
    (lambda tf: tf.while_loop(lambda i: i < 3, lambda i: i + 1, []), ValueError, "No loop variables"),
    (lambda tf: tf.while_loop(lambda i: i < 3, lambda i: i + 1, [1], parallel_iterations=0), ValueError,
     "parallel_iterations"),
    (lambda tf: tf.while_loop(lambda i: i < 3, lambda i: i + tf.Variable(1), [1]), ValueError,
     "create variables, queues and accumulators outside"),
])
def test_bad_arguments_are_named(build: Any, error: type, message: str) -> None:
    with tensorgrid.Graph().as_default():
        with pytest.raises(error, match=message):
            build(tensorgrid)


def test_a_loop_past_its_shape_invariant_at_run_time_fails_clearly() -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        new_shape = tf.placeholder(tf.int32, [2])
        out = tf.while_loop(lambda v: tf.size(v) < 8, lambda v: tf.reshape(tf.concat([v, v], 0), new_shape),
                            [tf.zeros([2, 1])], shape_invariants=[tf.TensorShape([2, None])])
        with tf.Session() as sess:
            assert sess.run(out, {new_shape: [2, -1]}).shape == (2, 4)
            with pytest.raises(tf.errors.InvalidArgumentError, match=r"shape \[4, 1\] after an iteration"):
                sess.run(out, {new_shape: [4, 1]})


@pytest.mark.parametrize("branch", ["garbage", [[["a", "_Arg", [], "", [["index", "x"]], ["float32"], [()]]], ["a:0"], []],
                                    [[], ["missing:0"], []]])
def test_a_malformed_function_attribute_fails_the_step_not_the_process(branch: Any) -> None:
    tf = tensorgrid
    with tf.Graph().as_default() as graph:
        pred = tf.placeholder(tf.bool, [])
        good = tf.cond(pred, lambda: tf.constant(1.0), lambda: tf.constant(2.0))
        bad = graph.create_op("If", [pred], [(tf.float32, [])], name="bad_if",
                              attrs={"then_branch": branch, "else_branch": branch}).outputs[0]
        with tf.Session() as sess:
            with pytest.raises(tf.errors.InvalidArgumentError, match="bad_if"):
                sess.run(bad, {pred: True})
            assert sess.run(good, {pred: False}) == 2.0
