"""``tf.py_func`` and ``tf.numpy_function``, with TensorFlow 2.21's ``tf.compat.v1`` as the oracle.

The same calls run on both libraries: results and their structure (one tensor for a
dtype, a list for a list of dtypes, the op for none), op types, unknown shapes, no
gradient, and the error class of a step whose function returns the wrong dtype or
number of values or raises (ValueError and TypeError InvalidArgumentError,
StopIteration OutOfRangeError, others UnknownError).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import pytest

import tensorgrid


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The library a test runs on, with a fresh default graph: tensorgrid, or TF1 (the oracle)."""
    library = tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")
    with library.Graph().as_default():
        yield library


def run(lib: Any, fetch: Any, feed: Any = None) -> Any:
    with lib.Session() as session:
        return session.run(fetch, feed)


def test_one_dtype_gives_one_tensor_of_unknown_shape(lib: Any) -> None:
    x = lib.constant([1.0, 2.0])
    y = lib.py_func(lambda a: a * 2, [x], lib.float32)
    assert y.op.type == "PyFunc" and y.op.name == "PyFunc" and y.shape.ndims is None and y.dtype == lib.float32
    np.testing.assert_array_equal(run(lib, y), np.float32([2, 4]))


def test_a_list_of_dtypes_gives_a_list_and_stateless_is_its_own_op_type(lib: Any) -> None:
    x = lib.placeholder(lib.int64, [None])
    pair = lib.py_func(lambda a: (a + 1, (a * 0.5).astype(np.float64)), [x], [lib.int64, lib.float64],
                       stateful=False, name="halves")
    single = lib.py_func(lambda a: a, [x], (lib.int64,))
    assert isinstance(pair, list) and isinstance(single, list) and len(single) == 1
    assert pair[0].op.type == "PyFuncStateless" and pair[0].op.name == "halves"
    values = run(lib, [pair, single], {x: [2, 4]})
    np.testing.assert_array_equal(values[0][0], [3, 5])
    np.testing.assert_array_equal(values[0][1], [1.0, 2.0])
    np.testing.assert_array_equal(values[1][0], [2, 4])


def test_no_outputs_gives_the_op_and_the_function_runs(lib: Any) -> None:
    calls = []
    op = lib.py_func(lambda a: calls.append(int(a)), [lib.constant(7)], [])
    assert op.type == "PyFunc"
    run(lib, op)
    assert calls == [7]


def test_strings_numbers_and_variables_reach_the_function_as_numpy(lib: Any) -> None:
    seen = {}

    def record(s: Any, v: Any, n: Any) -> Any:
        seen.update(s=s, v=v, n=n)
        return (s + b"!", "text", np.int32(3))

    w = lib.Variable([[1.5]], name="w")
    out = lib.numpy_function(record, [lib.constant(b"ab"), w, 5], [lib.string, lib.string, lib.int32])
    assert out[0].op.type == "PyFunc"
    with lib.Session() as session:
        session.run(w.initializer)
        values = session.run(out)
    assert values[0] == b"ab!" and values[1] == b"text" and values[2] == 3
    assert seen["s"] == b"ab" and seen["v"].dtype == np.float32 and seen["n"].dtype == np.int32


def test_no_gradient_flows_through_it(lib: Any) -> None:
    x = lib.constant([1.0, 2.0])
    y = lib.py_func(lambda a: a * 2, [x], lib.float32)
    assert lib.gradients(lib.reduce_sum(y * x), x)[0] is not None
    assert lib.gradients(lib.reduce_sum(y), x) == [None]


def _raise(exc: BaseException) -> Callable[..., Any]:
    def fail(*_: Any) -> Any:
        raise exc
    return fail


FAILURES: dict[str, tuple[Callable[..., Any], Any, str]] = {
    "float64 for float32": (lambda a: a.astype(np.float64), "float32", "InvalidArgumentError"),
    "a Python float is float64": (lambda a: 3.5, "float32", "InvalidArgumentError"),
    "a Python int is int64, not int32": (lambda a: 3, "int32", "InvalidArgumentError"),
    "a string for a number": (lambda a: "s", "float32", "InvalidArgumentError"),
    "two values for one": (lambda a: (a, a), ["float32"], "InvalidArgumentError"),
    "one value for two": (lambda a: a, ["float32", "float32"], "InvalidArgumentError"),
    "ValueError": (_raise(ValueError("bad")), "float32", "InvalidArgumentError"),
    "TypeError": (_raise(TypeError("bad")), "float32", "InvalidArgumentError"),
    "StopIteration": (_raise(StopIteration()), "float32", "OutOfRangeError"),
    "RuntimeError": (_raise(RuntimeError("bad")), "float32", "UnknownError"),
    "KeyError": (_raise(KeyError("bad")), "float32", "UnknownError"),
}


@pytest.mark.parametrize("case", FAILURES)
def test_a_bad_function_fails_the_step_with_tensorflows_error_class(lib: Any, case: str) -> None:
    func, tout, error = FAILURES[case]
    tout_dtypes = [lib.as_dtype(t) for t in tout] if isinstance(tout, list) else lib.as_dtype(tout)
    out = lib.py_func(func, [lib.constant([1.0, 2.0])], tout_dtypes)
    with pytest.raises(lib.errors.OpError) as raised:
        run(lib, out)
    assert type(raised.value).__name__ == error


def test_the_error_names_the_op_and_the_function_error() -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        out = tf.py_func(_raise(ValueError("no good value")), [tf.constant(1.0)], tf.float32, name="scorer")
        with tf.Session() as session, pytest.raises(tf.errors.InvalidArgumentError,
                                                   match="ValueError: no good value .*PyFunc op scorer"):
            session.run(out)
        wrong = tf.py_func(lambda a: a.astype(np.float64), [tf.constant(1.0)], tf.float32, name="wrong")
        with tf.Session() as session, pytest.raises(tf.errors.InvalidArgumentError,
                                                   match="0-th value .* op wrong is float64, but expects float32"):
            session.run(wrong)


def test_bad_arguments_are_refused_when_the_graph_is_built() -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="func must be callable"):
            tf.py_func("not a function", [], tf.float32)
        with pytest.raises(TypeError, match="inp must be a list or tuple"):
            tf.py_func(lambda a: a, tf.constant(1.0), tf.float32)
        with pytest.raises(TypeError):
            tf.py_func(lambda a: a, [tf.constant(1.0)], "no such dtype")
