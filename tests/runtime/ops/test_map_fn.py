"""``tf.map_fn`` against TensorFlow 2.21's ``tf.compat.v1``: values, static shapes and gradients.

Each case builds the same map on both libraries, runs it and ``tf.gradients`` of the
sum of its results with respect to its inputs (and to a variable ``fn`` captures), and
compares. Nested ``elems`` and a ``dtype`` giving another output structure are covered,
as are an unknown number of elements and TF1's errors for scalars.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid

X = np.arange(12, dtype=np.float32).reshape(4, 3) / 4.0 - 1.0
V = np.float32([0.5, -1.0, 2.0, 1.5])


def single(tf: Any) -> tuple[Any, list[Any], dict[Any, Any]]:
    x = tf.constant(X)
    return tf.map_fn(lambda row: tf.reduce_sum(row * row) + row[0], x), [x], {}


def shapes_change(tf: Any) -> tuple[Any, list[Any], dict[Any, Any]]:
    x = tf.placeholder(tf.float32, [None, 3])
    out = tf.map_fn(lambda row: tf.stack([row, tf.exp(row)]), x)
    return out, [x], {x: X}


def nested_with_dtype(tf: Any) -> tuple[Any, list[Any], dict[Any, Any]]:
    x, v = tf.constant(X), tf.constant(V)
    out = tf.map_fn(lambda pair: (pair[0] * pair[1], tf.cast(tf.reduce_sum(pair[0]) > 0, tf.int32)), (x, v),
                    dtype=(tf.float32, tf.int32))
    return out, [x, v], {}


def nested_out_of_one(tf: Any) -> tuple[Any, list[Any], dict[Any, Any]]:
    v = tf.placeholder(tf.float32, [None])
    out = tf.map_fn(lambda e: {"square": e * e, "parts": (e + 1.0, tf.exp(e))}, v,
                    dtype={"square": tf.float32, "parts": (tf.float32, tf.float32)})
    return out, [v], {v: V}


def captured_variable(tf: Any) -> tuple[Any, list[Any], dict[Any, Any]]:
    w = tf.Variable(np.float32([[1.0], [-2.0], [0.5]]), name="w")
    x = tf.constant(X)
    out = tf.map_fn(lambda row: tf.tanh(tf.matmul(row[None, :], w))[0], x, back_prop=True, parallel_iterations=4)
    return out, [x, w], {}


CASES: dict[str, Callable[[Any], tuple[Any, list[Any], dict[Any, Any]]]] = {
    "single": single, "shapes change": shapes_change, "nested with dtype": nested_with_dtype,
    "nested out of one": nested_out_of_one, "captured variable": captured_variable,
}


def run_case(lib: Any, case: str) -> tuple[Any, list[Any], list[Any]]:
    with lib.Graph().as_default():
        out, inputs, feed = CASES[case](lib)
        leaves = [t for t in (out.values() if isinstance(out, dict) else [out])]
        flat: list[Any] = []
        while leaves:
            leaf = leaves.pop(0)
            if isinstance(leaf, (list, tuple)):
                leaves = list(leaf) + leaves
            elif isinstance(leaf, dict):
                leaves = [leaf[k] for k in sorted(leaf)] + leaves
            else:
                flat.append(leaf)
        floats = [t for t in flat if t.dtype.is_floating]
        loss = lib.add_n([lib.reduce_sum(t) for t in floats])
        grads = lib.gradients(loss, inputs)
        with lib.Session() as sess:
            sess.run(lib.global_variables_initializer())
            values, grad_values = sess.run([out, grads], feed)
        return values, [t.shape.as_list() if t.shape.ndims is not None else None for t in flat], grad_values


def assert_close(ours: Any, theirs: Any, what: str) -> None:
    if isinstance(theirs, dict):
        assert sorted(ours) == sorted(theirs), what
        for key in theirs:
            assert_close(ours[key], theirs[key], f"{what}[{key}]")
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), what
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_close(a, b, f"{what}[{i}]")
    else:
        assert np.asarray(ours).dtype == np.asarray(theirs).dtype, what
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6, err_msg=what)


@pytest.mark.parametrize("case", CASES)
def test_values_shapes_and_gradients_match_tensorflow(tf1: Any, case: str) -> None:
    ours, our_shapes, our_grads = run_case(tensorgrid, case)
    theirs, their_shapes, their_grads = run_case(tf1, case)
    assert_close(ours, theirs, "values")
    assert our_shapes == their_shapes
    assert_close(our_grads, their_grads, "gradients")


@pytest.mark.parametrize("lib_name", ["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def test_scalars_and_structure_mismatches_are_refused(lib_name: str, request: pytest.FixtureRequest) -> None:
    lib = tensorgrid if lib_name == "tensorgrid" else request.getfixturevalue("tf1")
    with lib.Graph().as_default():
        with pytest.raises(ValueError, match="must be 1\\+ dimensional Tensors, not scalars"):
            lib.map_fn(lambda e: e, lib.constant(1.0))
        with pytest.raises(ValueError):
            lib.map_fn(lambda e: e, (lib.constant([1.0]), lib.constant(1.0)))
        with pytest.raises((ValueError, TypeError)):
            lib.map_fn(lambda e: (e, e), lib.constant([1.0, 2.0]))
        if lib is tensorgrid:  # TF 2.21 fails with an AttributeError of its autograph wrapper instead
            with pytest.raises(TypeError, match="fn must be callable"):
                lib.map_fn(None, lib.constant([1.0]))


def test_map_fn_is_one_while_op_and_runs_on_an_empty_batch() -> None:
    tf = tensorgrid
    with tf.Graph().as_default() as graph:
        x = tf.placeholder(tf.float32, [None, 2])
        out = tf.map_fn(lambda row: row * 2.0, x)
        assert [op.type for op in graph.get_operations()].count("While") == 1
        with tf.Session() as sess:
            np.testing.assert_array_equal(sess.run(out, {x: np.zeros((0, 2), np.float32)}), np.zeros((0, 2)))
