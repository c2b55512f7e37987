"""``tf.sparse.cross`` and ``tf.sparse.cross_hashed`` (what ``crossed_column`` builds) against
TensorFlow 2.21's ``tf.compat.v1``: the same crosses in the same order, the same ids."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid


def _sparse_words(tf: Any) -> Any:
    # Row 1 has no feature: it has no cross. Row 2 has three.
    return tf.SparseTensor([[0, 0], [2, 0], [2, 1], [2, 2], [3, 0]], ["p", "q", "r", "日本", "p"], [4, 3])


def _sparse_ids(tf: Any) -> Any:
    return tf.SparseTensor([[0, 0], [1, 0], [2, 0], [3, 0], [3, 1]],
                           tf.constant([5, -3, 2 ** 50, 0, 9], tf.int64), [4, 2])


def _dense_words(tf: Any) -> Any:
    return tf.constant([["x", "y"], ["z", "w"], ["", "a" * 70], ["u", "v"]])


CROSSES: dict[str, Callable[[Any], Any]] = {
    "hashed, sparse and dense mixed": lambda tf: tf.sparse.cross_hashed(
        [_dense_words(tf), _sparse_words(tf), tf.constant([[1], [2], [3], [4]]), _sparse_ids(tf)],
        num_buckets=1000, hash_key=7),
    "hashed, default key and whole int64 range": lambda tf: tf.sparse.cross_hashed(
        [_sparse_words(tf), _dense_words(tf)]),
    "hashed, one input": lambda tf: tf.sparse.cross_hashed([_sparse_ids(tf)], num_buckets=10),
    "hashed, key 0 is the default": lambda tf: tf.sparse.cross_hashed([_sparse_words(tf), _sparse_ids(tf)],
                                                                      num_buckets=97, hash_key=0),
    "strings": lambda tf: tf.sparse.cross([_sparse_words(tf), _dense_words(tf), _sparse_ids(tf)]),
    "strings, own separator": lambda tf: tf.sparse.cross([_dense_words(tf), tf.constant([[1], [2], [3], [4]])],
                                                          separator="+"),
}


@pytest.mark.oracle
@pytest.mark.parametrize("build", CROSSES.values(), ids=CROSSES.keys())
def test_crosses_are_tensorflows(build: Callable[[Any], Any], tf1: Any) -> None:
    results = []
    for library in (tensorgrid, tf1):
        with library.Graph().as_default():
            cross = build(library)
            with library.Session() as session:
                value = session.run(cross)
        results.append((value.indices.tolist(), value.values.tolist(), np.asarray(value.dense_shape).tolist()))
    assert results[0] == results[1]


def test_inputs_of_other_batch_sizes_are_refused() -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        cross = tf.sparse.cross_hashed([tf.constant([["a"], ["b"]]), tf.constant([["c"]])], num_buckets=5)
        with tf.Session() as session, pytest.raises(tf.errors.InvalidArgumentError, match="batch sizes"):
            session.run(cross)
        with pytest.raises(TypeError, match="strings or integers"):
            tf.sparse.cross_hashed([tf.constant([[1.5]])])
        with pytest.raises(ValueError, match="matrices"):
            tf.sparse.cross_hashed([tf.constant(["a"])])
