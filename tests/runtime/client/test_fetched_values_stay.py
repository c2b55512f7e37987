"""A value ``Session.run`` returned never changes afterwards, as in TensorFlow (the oracle).

Kernels such as identity, reshape, slices and control flow may hand back their input, or a
view of it, without a copy; when that input is a variable's buffer, the next step's update
would otherwise change an array the program already holds: a silent wrong result.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid

VIEWS: dict[str, Callable[[Any, Any], Any]] = {
    "identity": lambda tf, v: tf.identity(v),
    "stop_gradient": lambda tf, v: tf.stop_gradient(v),
    "reshape": lambda tf, v: tf.reshape(v, [2, 3]),
    "expand_dims then squeeze": lambda tf, v: tf.squeeze(tf.expand_dims(v, 0)),
    "transpose": lambda tf, v: tf.transpose(tf.reshape(v, [2, 3])),
    "strided slice": lambda tf, v: v[1:4],
    "split": lambda tf, v: tf.split(v, 2)[1],
    "unstack": lambda tf, v: tf.unstack(tf.reshape(v, [2, 3]))[0],
    "broadcast_to": lambda tf, v: tf.broadcast_to(v, [2, 6]),
    "cond": lambda tf, v: tf.cond(tf.constant(True), lambda: tf.identity(v), lambda: v * 2.0),
    "while_loop with no iteration": lambda tf, v: tf.while_loop(lambda x: tf.constant(False), lambda x: x + 1.0,
                                                                 [tf.identity(v)]),
    "py_func returning its input": lambda tf, v: tf.py_func(lambda x: x, [v], tf.float32),
    "Print": lambda tf, v: tf.Print(v, [v]),
}


@pytest.mark.oracle
@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_a_fetched_view_of_a_variable_keeps_its_value_after_the_variable_changes(
        view: Callable[[Any, Any], Any], request: pytest.FixtureRequest) -> None:
    results = []
    for library in (tensorgrid, request.getfixturevalue("tf1")):
        with library.Graph().as_default():
            v = library.Variable(np.arange(6, dtype=np.float32))
            fetch = view(library, v)
            update = library.assign_add(v, np.full(6, 100.0, np.float32))
            with library.Session() as session:
                session.run(library.global_variables_initializer())
                before = session.run(fetch)
                kept = np.array(before, copy=True)
                session.run(update)
                np.testing.assert_array_equal(before, kept, err_msg=f"{library.__name__}: the fetched value changed")
                results.append(kept)
    np.testing.assert_array_equal(results[0], results[1])
