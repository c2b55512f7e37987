"""``tf.int8`` and ``tf.int16`` (aymericdamien's ``basic_operations.py`` feeds ``tf.int16``
placeholders), with TensorFlow 2.21's ``tf.compat.v1`` as the oracle: placeholders, constants,
arithmetic, casts and variables of these types give TensorFlow's values and dtypes.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import pytest

import tensorgrid


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    library = tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")
    with library.Graph().as_default():
        yield library


def fed_add_and_multiply(tf: Any) -> Any:
    a = tf.placeholder(tf.int16)
    b = tf.placeholder(tf.int16)
    with tf.Session() as session:
        return session.run([tf.add(a, b), tf.multiply(a, b)], feed_dict={a: 2, b: 3})


def variable_update(tf: Any) -> Any:
    counter = tf.Variable(np.array([1, -2], dtype=np.int8))
    step = tf.assign_add(counter, tf.constant([3, 4], dtype=tf.int8))
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        session.run(step)
        return session.run(counter)


PROGRAMS: dict[str, Callable[[Any], Any]] = {
    "int16 placeholders fed python ints": fed_add_and_multiply,
    "int8 constant arithmetic wraps": lambda tf: tf.Session().run(
        tf.constant([100, -100], dtype=tf.int8) + tf.constant([100, -100], dtype=tf.int8)),
    "cast float to int16 and back": lambda tf: tf.Session().run(
        tf.cast(tf.cast(tf.constant([1.7, -2.7, 300.0]), tf.int16), tf.float32)),
    "int16 reduce_sum and argmax": lambda tf: tf.Session().run(
        [tf.reduce_sum(tf.constant([[1, 2], [3, 4]], dtype=tf.int16), axis=0),
         tf.argmax(tf.constant([5, 9, 2], dtype=tf.int8))]),
    "an int8 variable": variable_update,
}


@pytest.mark.oracle
@pytest.mark.parametrize("program", PROGRAMS.values(), ids=PROGRAMS.keys())
def test_small_integer_programs_match_tensorflow(program: Callable[[Any], Any], request: pytest.FixtureRequest) -> None:
    results = []
    for name in ("tensorgrid", "tensorflow"):
        library = tensorgrid if name == "tensorgrid" else request.getfixturevalue("tf1")
        with library.Graph().as_default():
            results.append(program(library))
    ours, theirs = results
    for mine, tfs in zip(ours if isinstance(ours, list) else [ours], theirs if isinstance(theirs, list) else [theirs]):
        assert np.asarray(mine).dtype == np.asarray(tfs).dtype
        np.testing.assert_array_equal(mine, tfs)


def test_the_dtypes_have_tensorflows_names_and_numbers(lib: Any) -> None:
    assert (lib.int8.name, lib.int8.as_datatype_enum if lib is not tensorgrid else lib.int8.enum) == ("int8", 6)
    assert (lib.int16.name, lib.int16.as_datatype_enum if lib is not tensorgrid else lib.int16.enum) == ("int16", 5)
    assert lib.as_dtype(np.int16) == lib.int16
    assert lib.int8.min == -128 and lib.int16.max == 32767
    assert lib.int8.is_integer and not lib.int16.is_floating
