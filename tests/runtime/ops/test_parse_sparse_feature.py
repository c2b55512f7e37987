"""``tf.io.SparseFeature`` in ``parse_example`` and ``parse_single_example``, with TensorFlow 2.21's
``tf.compat.v1`` as the oracle: the same SparseTensor (indices sorted unless ``already_sorted``,
values, dense shape ``[batch, *size]``) from the same serialized examples, over one index key and
over two, beside the plain features, and a SparseFeature's parts asked for themselves too. An index
outside its size is an InvalidArgumentError here (TensorFlow gives an index outside the dense shape)."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

import tensorgrid


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The library a test runs on, with a fresh default graph: tensorgrid, or TF1 (the oracle)."""
    library = tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")
    with library.Graph().as_default():
        yield library


def example(tf: Any, **features: Any) -> bytes:
    def feature(values: list[Any]) -> Any:
        if values and isinstance(values[0], float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=values))
        if values and isinstance(values[0], bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    message = tf.train.Example(features=tf.train.Features(feature={k: feature(v) for k, v in features.items()}))
    return bytes(message.SerializeToString())


def plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: plain(item) for key, item in sorted(value.items())}
    if hasattr(value, "dense_shape"):
        return {"indices": np.asarray(value.indices).tolist(), "values": np.asarray(value.values).tolist(),
                "dense_shape": np.asarray(value.dense_shape).tolist()}
    return np.asarray(value).tolist()


def test_sparse_features_parse_as_tensorflow_parses_them(lib: Any) -> None:
    tf = lib
    records = [example(tf, ix=[3, 1], iy=[0, 2], v=[1.0, 2.0], word=[b"a", b"b"], n=[7]),
               example(tf, n=[8]),
               example(tf, ix=[4], iy=[1], v=[5.0], word=[b"c"], n=[9])]
    serialized = tf.placeholder(tf.string, [None])
    spec = {"one_index": tf.io.SparseFeature("ix", "v", tf.float32, 5),
            "two_indexes": tf.io.SparseFeature(["ix", "iy"], "v", tf.float32, [5, 3], already_sorted=True),
            "by_word": tf.io.SparseFeature("ix", "word", tf.string, 6),
            "ix": tf.io.VarLenFeature(tf.int64), "n": tf.io.FixedLenFeature([1], tf.int64)}
    parsed = tf.io.parse_example(serialized, {key: value for key, value in spec.items() if key != "by_word"})
    with tf.Session() as session:
        result = plain(session.run(parsed, {serialized: records}))
    assert result["one_index"] == {"indices": [[0, 1], [0, 3], [2, 4]], "values": [2.0, 1.0, 5.0],
                                   "dense_shape": [3, 5]}
    assert result["two_indexes"]["indices"] == [[0, 3, 0], [0, 1, 2], [2, 4, 1]]
    assert result["two_indexes"]["dense_shape"] == [3, 5, 3]
    assert result["ix"]["values"] == [3, 1, 4] and result["n"] == [[7], [8], [9]]
    assert sorted(result) == ["ix", "n", "one_index", "two_indexes"]


def test_a_single_example_has_no_batch_dimension(lib: Any) -> None:
    tf = lib
    serialized = tf.placeholder(tf.string, [])
    parsed = tf.io.parse_single_example(serialized, {"words": tf.io.SparseFeature("ix", "word", tf.string, 4)})
    with tf.Session() as session:
        result = plain(session.run(parsed, {serialized: example(tf, ix=[2, 0], word=[b"x", b"y"])}))
    assert result == {"words": {"indices": [[0], [2]], "values": [b"y", b"x"], "dense_shape": [4]}}


def test_index_and_value_lists_of_different_lengths_fail_the_step(lib: Any) -> None:
    tf = lib
    serialized = tf.placeholder(tf.string, [None])
    parsed = tf.io.parse_example(serialized, {"sf": tf.io.SparseFeature("ix", "v", tf.float32, 5)})
    with tf.Session() as session, pytest.raises(tf.errors.InvalidArgumentError):
        session.run(parsed, {serialized: [example(tf, ix=[1, 2], v=[1.0])]})


def test_an_index_outside_its_size_is_an_error_naming_it() -> None:
    tf = tensorgrid
    serialized = tf.placeholder(tf.string, [None])
    parsed = tf.io.parse_example(serialized, {"sf": tf.io.SparseFeature("ix", "v", tf.float32, 5)})
    with tf.Session() as session, pytest.raises(tf.errors.InvalidArgumentError, match=r"index 7 of key ix"):
        session.run(parsed, {serialized: [example(tf, ix=[7], v=[1.0])]})


def test_a_part_asked_for_with_another_type_is_refused() -> None:
    tf = tensorgrid
    with pytest.raises(ValueError, match="'v'"):
        tf.io.parse_example(tf.placeholder(tf.string, [None]), {
            "sf": tf.io.SparseFeature("ix", "v", tf.float32, 5), "v": tf.io.FixedLenFeature([1], tf.float32)})
