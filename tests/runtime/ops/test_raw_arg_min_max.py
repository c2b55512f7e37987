"""``tf.arg_min`` / ``tf.arg_max``: TF1's raw ArgMin/ArgMax ops, which published programs call
(aymericdamien's ``nearest_neighbor.py``: ``tf.arg_min(distance, 0)``), with TensorFlow 2.21's
``tf.compat.v1`` as the oracle for values, dtypes and the op's argument order.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid

DISTANCES = np.array([[3.0, 1.0, 2.0], [0.5, 4.0, -1.0]], dtype=np.float32)

BUILDS: dict[str, Callable[[Any], Any]] = {
    "arg_min over dimension 0": lambda tf: tf.arg_min(tf.constant(DISTANCES), 0),
    "arg_max over dimension 1": lambda tf: tf.arg_max(tf.constant(DISTANCES), 1),
    "output_type third, positionally": lambda tf: tf.arg_min(tf.constant(DISTANCES), 1, tf.int32),
    "keyword arguments": lambda tf: tf.arg_max(input=tf.constant([1, 7, 3]), dimension=0, name="best"),
    "a fed 1-D vector": lambda tf: tf.arg_min(tf.reduce_sum(tf.abs(tf.constant(DISTANCES)), axis=1), 0),
}


@pytest.mark.oracle
@pytest.mark.parametrize("build", BUILDS.values(), ids=BUILDS.keys())
def test_raw_arg_ops_match_tensorflow(build: Callable[[Any], Any], request: pytest.FixtureRequest) -> None:
    results = []
    for name in ("tensorgrid", "tensorflow"):
        library = tensorgrid if name == "tensorgrid" else request.getfixturevalue("tf1")
        with library.Graph().as_default():
            tensor = build(library)
            with library.Session() as session:
                results.append((tensor.dtype.name, tensor.op.type, np.asarray(session.run(tensor))))
    (ours_dtype, ours_type, ours), (their_dtype, their_type, theirs) = results
    assert (ours_dtype, ours_type) == (their_dtype, their_type)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.oracle
def test_an_out_of_range_dimension_fails_as_on_tensorflow(request: pytest.FixtureRequest) -> None:
    errors = []
    for name in ("tensorgrid", "tensorflow"):
        library = tensorgrid if name == "tensorgrid" else request.getfixturevalue("tf1")
        with library.Graph().as_default():
            with pytest.raises(ValueError) as caught:
                library.arg_min(library.constant(DISTANCES), 2)
            errors.append(caught.value)
    assert "2" in str(errors[0])
