"""A (nested) list of tensors where one tensor is expected, with TensorFlow 2.21's
``tf.compat.v1`` as the oracle: ``convert_to_tensor`` packs it as TF1 does (``tf.stack``,
the other elements converted to the first tensor's dtype), and what cannot be packed
fails with TensorFlow's error class, never a string constant of the Python objects.
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


def run(lib: Any, fetch: Any) -> Any:
    with lib.Session() as session:
        session.run(lib.global_variables_initializer())
        return session.run(fetch)


BUILDS: dict[str, Callable[[Any], Any]] = {
    "reduce_sum of a list": lambda tf: tf.reduce_sum([tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0])], axis=0),
    "nested lists": lambda tf: tf.convert_to_tensor([[tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0])],
                                                     [[5.0, 6.0], tf.constant([7.0, 8.0])]]),
    "python numbers take the tensor's dtype": lambda tf: tf.convert_to_tensor([tf.constant(1.5), 2, 3.0]),
    "a tuple with an int64 tensor": lambda tf: tf.convert_to_tensor((1, tf.constant(2, dtype=tf.int64))),
    "a requested dtype casts the tensors": lambda tf: tf.convert_to_tensor([tf.constant([1.5, 2.0]), [3, 4]],
                                                                           dtype=tf.int32),
    "a variable among numbers": lambda tf: tf.convert_to_tensor([tf.Variable(2.0), 3.0]),
    "a reshape to a list holding a tensor": lambda tf: tf.reshape(tf.range(6), [tf.constant(2), -1]),
    "a known Dimension in a shape list": lambda tf: tf.reshape(tf.zeros([2, 3]), [-1, tf.zeros([2, 3]).shape[1]]),
}


@pytest.mark.oracle
@pytest.mark.parametrize("build", BUILDS.values(), ids=BUILDS.keys())
def test_a_list_of_tensors_is_packed_as_tf1_packs_it(build: Callable[[Any], Any], request: pytest.FixtureRequest) -> None:
    results = []
    for name in ("tensorgrid", "tensorflow"):
        library = tensorgrid if name == "tensorgrid" else request.getfixturevalue("tf1")
        with library.Graph().as_default():
            tensor = build(library)
            value = run(library, tensor)
            results.append((tensor.dtype.name, np.asarray(value)))
    (ours_dtype, ours), (their_dtype, theirs) = results
    assert ours_dtype == their_dtype
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


MISTAKES: dict[str, Callable[[Any], Any]] = {
    "tf.constant of tensors": lambda tf: tf.constant([tf.constant(1.0), tf.constant(2.0)]),
    "a tensor of another dtype in the list": lambda tf: tf.convert_to_tensor([tf.constant(1.0), tf.constant(1)]),
    "a number that does not fit the requested dtype": lambda tf: tf.convert_to_tensor([tf.constant(1), 2.5], dtype=tf.int32),
    "an object among tensors": lambda tf: tf.convert_to_tensor([tf.constant(1.0), object()]),
    "a list of objects": lambda tf: tf.convert_to_tensor([object(), object()]),
    "an object in an op's argument": lambda tf: tf.reduce_sum([[1.0, object()]]),
}


@pytest.mark.parametrize("mistake", MISTAKES.values(), ids=MISTAKES.keys())
def test_what_cannot_be_packed_fails_as_in_tensorflow(lib: Any, mistake: Callable[[Any], Any]) -> None:
    with pytest.raises(TypeError):
        mistake(lib)


def test_no_string_constant_is_made_of_python_objects() -> None:
    with tensorgrid.Graph().as_default() as graph:
        with pytest.raises(TypeError, match="object"):
            tensorgrid.convert_to_tensor([object()])
        with pytest.raises(TypeError, match="Failed to convert elements"):
            tensorgrid.convert_to_tensor(np.array([1.0, object()], dtype=object))
        assert not [op for op in graph.get_operations() if op.type == "Const" and op.outputs[0].dtype == tensorgrid.string]
