"""A Python ``range`` where a tensor is expected, with TensorFlow 2.21's ``tf.compat.v1`` as the
oracle: ``tf.convert_to_tensor`` (and every op taking a tensor) converts it to its values, while
graph-mode ``tf.constant`` refuses it with a ValueError (TF 1.x accepted it: Kubeflow's
``tf_smoke.py`` calls ``tf.constant(range(100), shape=[10, 10])``, docs/tf1-programs.md).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid

CONVERTED: dict[str, Callable[[Any], Any]] = {
    "convert_to_tensor": lambda tf: tf.convert_to_tensor(range(3)),
    "convert_to_tensor with a dtype": lambda tf: tf.convert_to_tensor(range(1, 7, 2), dtype=tf.float32),
    "an op's input": lambda tf: tf.add(range(3), 1),
    "a reshape's tensor": lambda tf: tf.reshape(range(4), [2, 2]),
    "an empty range": lambda tf: tf.convert_to_tensor(range(0)),
}


@pytest.mark.oracle
@pytest.mark.parametrize("build", CONVERTED.values(), ids=CONVERTED.keys())
def test_a_range_converts_to_its_values_as_tf1_converts_it(build: Callable[[Any], Any],
                                                            request: pytest.FixtureRequest) -> None:
    results = []
    for library in (tensorgrid, request.getfixturevalue("tf1")):
        with library.Graph().as_default():
            tensor = build(library)
            with library.Session() as session:
                results.append((tensor.dtype.name, np.asarray(session.run(tensor))))
    (ours_dtype, ours), (their_dtype, theirs) = results
    assert ours_dtype == their_dtype
    np.testing.assert_array_equal(ours, theirs)
    assert ours.dtype == theirs.dtype


REFUSED: dict[str, Callable[[Any], Any]] = {
    "a range": lambda tf: tf.constant(range(6)),
    "a range with a shape": lambda tf: tf.constant(range(100), shape=[10, 10]),
    "a list of ranges": lambda tf: tf.constant([range(2), range(2)]),
}


@pytest.mark.oracle
@pytest.mark.parametrize("build", REFUSED.values(), ids=REFUSED.keys())
def test_tf_constant_refuses_a_range_with_tensorflows_error_class(build: Callable[[Any], Any],
                                                                  request: pytest.FixtureRequest) -> None:
    tf1 = request.getfixturevalue("tf1")
    with tf1.Graph().as_default(), pytest.raises(ValueError):
        build(tf1)
    with tensorgrid.Graph().as_default(), pytest.raises(ValueError, match=r"range\(0, .*list\(") as raised:
        build(tensorgrid)
    assert "tensor instead" not in str(raised.value)
