"""``tf.io.parse_example`` / ``parse_single_example`` on serialized ``tf.train.Example`` protos,
``tf.io.decode_raw``, with TensorFlow's ``tf.compat.v1`` as the oracle.

The Examples are built with TensorFlow's own message classes and with tensorgrid's
(``tf.train.Example``): each parses the other's bytes. Every spec kind (FixedLenFeature with
and without a default, VarLenFeature, FixedLenSequenceFeature with allow_missing) and every
dtype an Example holds (int64, float32, string) gives TensorFlow's values, shapes and dtypes,
also inside ``Dataset.map`` over a TFRecordDataset, before and after ``batch``. Bad data is an
InvalidArgumentError naming the key, as in TensorFlow; bad specs a ValueError.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf


def _example(lib: Any, features: dict[str, Any]) -> bytes:
    """A serialized Example of ``lib``'s message classes: int lists as Int64List, float lists as
    FloatList, bytes lists as BytesList."""
    feature = {}
    for key, values in features.items():
        if values and isinstance(values[0], bytes):
            feature[key] = lib.train.Feature(bytes_list=lib.train.BytesList(value=values))
        elif values and isinstance(values[0], float):
            feature[key] = lib.train.Feature(float_list=lib.train.FloatList(value=values))
        else:
            feature[key] = lib.train.Feature(int64_list=lib.train.Int64List(value=values))
    return bytes(lib.train.Example(features=lib.train.Features(feature=feature)).SerializeToString())


RECORDS = [
    {"id": [7], "scores": [0.5, 1.5], "words": [b"a", b"bc"], "tags": [3, 1, 4], "pairs": [1, 2, 3, 4]},
    {"id": [8], "scores": [2.5, -1.0], "words": [b"", b"xyz"], "tags": [], "pairs": [5, 6]},
    {"id": [9], "scores": [0.0, 0.25], "words": [b"q", b"r"], "tags": [2], "name": [b"only here"]},
]


def _features(lib: Any) -> dict[str, Any]:
    return {
        "id": lib.io.FixedLenFeature([], lib.int64),
        "scores": lib.io.FixedLenFeature([2], lib.float32),
        "words": lib.io.FixedLenFeature([2], lib.string),
        "name": lib.io.FixedLenFeature([], lib.string, default_value=b"nobody"),
        "missing": lib.io.FixedLenFeature([2, 1], lib.float32, default_value=[[-1.0], [-2.0]]),
        "tags": lib.io.VarLenFeature(lib.int64),
        "pairs": lib.io.FixedLenSequenceFeature([2], lib.int64, allow_missing=True, default_value=-1),
        "absent_words": lib.io.VarLenFeature(lib.string),
    }


def _run(lib: Any, build: Any) -> Any:
    with lib.Graph().as_default():
        fetches = build(lib)
        with lib.Session() as sess:
            return sess.run(fetches)


def _assert_same_parse(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert sorted(ours) == sorted(theirs)
    for key, oracle in theirs.items():
        mine = ours[key]
        if hasattr(oracle, "indices"):
            for part in ("indices", "values", "dense_shape"):
                a, b = np.asarray(getattr(mine, part)), np.asarray(getattr(oracle, part))
                assert a.shape == b.shape and a.dtype.kind == b.dtype.kind, (key, part, a, b)
                np.testing.assert_array_equal(a, b, err_msg=f"{key}.{part}")
        else:
            a, b = np.asarray(mine), np.asarray(oracle)
            assert a.shape == b.shape and a.dtype == b.dtype, (key, a, b)
            np.testing.assert_array_equal(a, b, err_msg=key)


@pytest.mark.parametrize("writer", ["tensorflow", "tensorgrid"])
def test_parse_example_gives_tensorflows_tensors_for_every_kind_and_dtype(tf1: Any, writer: str) -> None:
    maker = tf1 if writer == "tensorflow" else tf
    records = [_example(maker, r) for r in RECORDS]
    ours = _run(tf, lambda lib: lib.io.parse_example(records, _features(lib)))
    theirs = _run(tf1, lambda lib: lib.io.parse_example(records, _features(lib)))
    _assert_same_parse(ours, theirs)


@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_parse_single_example_gives_tensorflows_tensors(tf1: Any, index: int) -> None:
    record = _example(tf1, RECORDS[index])
    ours = _run(tf, lambda lib: lib.io.parse_single_example(record, _features(lib)))
    theirs = _run(tf1, lambda lib: lib.io.parse_single_example(record, _features(lib)))
    _assert_same_parse(ours, theirs)


def test_static_shapes_and_types_are_tensorflows(tf1: Any) -> None:
    def shapes(lib: Any) -> dict[str, Any]:
        with lib.Graph().as_default():
            batch = lib.placeholder(lib.string, [None])
            parsed = lib.io.parse_example(batch, _features(lib))
            out = {}
            for key, value in parsed.items():
                if hasattr(value, "indices"):
                    out[key] = ("sparse", value.indices.shape.as_list(), value.values.dtype.name,
                                value.dense_shape.shape.as_list())
                else:
                    out[key] = ("dense", value.shape.as_list(), value.dtype.name)
            return out

    assert shapes(tf) == shapes(tf1)


def test_tensorflow_parses_the_examples_tensorgrid_builds(tf1: Any) -> None:
    record = _example(tf, RECORDS[0])
    parsed = tf1.train.Example.FromString(record)
    assert list(parsed.features.feature["tags"].int64_list.value) == [3, 1, 4]
    assert list(parsed.features.feature["words"].bytes_list.value) == [b"a", b"bc"]
    assert tf.train.Example.FromString(record) == tf.train.Example.FromString(_example(tf1, RECORDS[0]))


def test_parsing_inside_dataset_map_over_a_tfrecord_file(tf1: Any, tmp_path: Any) -> None:
    path = str(tmp_path / "examples.tfrecord")
    with tf1.io.TFRecordWriter(path) as writer:
        for record in RECORDS * 2:
            writer.write(_example(tf1, record))

    def elements(lib: Any, batch_first: bool) -> list[Any]:
        with lib.Graph().as_default():
            dataset = lib.data.TFRecordDataset(path)
            if batch_first:
                dataset = dataset.batch(4).map(lambda s: lib.io.parse_example(s, _features(lib)))
            else:
                # One example's sequence feature has its own length: batch cannot stack those (TF neither).
                single = {key: f for key, f in _features(lib).items() if key != "pairs"}
                dataset = dataset.map(lambda s: lib.io.parse_single_example(s, single)).batch(4)
            element = lib.data.make_one_shot_iterator(dataset).get_next()
            out = []
            with lib.Session() as sess:
                while True:
                    try:
                        out.append(sess.run(element))
                    except lib.errors.OutOfRangeError:
                        return out

    for batch_first in (True, False):
        ours, theirs = elements(tf, batch_first), elements(tf1, batch_first)
        assert len(ours) == len(theirs) == 2
        for mine, oracle in zip(ours, theirs):
            _assert_same_parse(mine, oracle)


def test_sparse_tensors_from_map_keep_their_structure_in_filter_and_a_second_map(tf1: Any) -> None:
    records = [_example(tf1, r) for r in RECORDS]

    def elements(lib: Any) -> list[Any]:
        with lib.Graph().as_default():
            dataset = (lib.data.Dataset.from_tensor_slices(records)
                       .map(lambda s: lib.io.parse_single_example(s, {"tags": lib.io.VarLenFeature(lib.int64)}))
                       .filter(lambda parsed: lib.size(parsed["tags"].values) > 0)
                       .map(lambda parsed: (parsed["tags"], lib.reduce_sum(parsed["tags"].values))))
            element = lib.data.make_one_shot_iterator(dataset).get_next()
            out = []
            with lib.Session() as sess:
                while True:
                    try:
                        out.append(sess.run(element))
                    except lib.errors.OutOfRangeError:
                        return out

    ours, theirs = elements(tf), elements(tf1)
    assert len(ours) == len(theirs) == 2
    for (sparse, total), (sparse_tf, total_tf) in zip(ours, theirs):
        assert total == total_tf
        _assert_same_parse({"tags": sparse}, {"tags": sparse_tf})


# ---------------------------------------------------------------- bad data and bad specs

@pytest.mark.parametrize(("record", "features", "names"), [
    ({"id": [1]}, {"other": ("fixed", [], "int64")}, ["other", "required"]),
    ({"id": [1.5]}, {"id": ("fixed", [], "int64")}, ["id", "float", "int64"]),
    ({"id": [1, 2, 3]}, {"id": ("fixed", [2], "int64")}, ["id", "3"]),
    ({"id": [b"x"]}, {"id": ("varlen", None, "float32")}, ["id", "string", "float"]),
    ({"id": [1, 2, 3]}, {"id": ("sequence", [2], "int64")}, ["id", "3"]),
])
def test_bad_data_is_an_invalid_argument_error_naming_the_key(tf1: Any, record: Any, features: Any,
                                                              names: list[str]) -> None:
    serialized = _example(tf1, record)

    def spec(lib: Any) -> dict[str, Any]:
        made = {}
        for key, (kind, shape, dtype) in features.items():
            if kind == "fixed":
                made[key] = lib.io.FixedLenFeature(shape, getattr(lib, dtype))
            elif kind == "varlen":
                made[key] = lib.io.VarLenFeature(getattr(lib, dtype))
            else:
                made[key] = lib.io.FixedLenSequenceFeature(shape, getattr(lib, dtype), allow_missing=True)
        return made

    for lib in (tf, tf1):
        with pytest.raises(lib.errors.InvalidArgumentError) as raised:
            _run(lib, lambda lib: lib.io.parse_example([serialized], spec(lib)))
        if lib is tf:
            for name in names:
                assert name in str(raised.value.message), (name, raised.value.message)


def test_bytes_that_are_not_an_example_are_an_invalid_argument_error(tf1: Any) -> None:
    for lib in (tf, tf1):
        with pytest.raises(lib.errors.InvalidArgumentError, match="Could not parse example input"):
            _run(lib, lambda lib: lib.io.parse_single_example(b"not a proto",
                                                              {"x": lib.io.VarLenFeature(lib.int64)}))


@pytest.mark.parametrize(("make", "message"), [
    (lambda lib: {"x": lib.io.FixedLenFeature(None, lib.int64)}, "x"),
    (lambda lib: {"x": lib.io.FixedLenFeature([None], lib.int64)}, "x"),
    (lambda lib: {"x": lib.io.FixedLenFeature([], lib.int32)}, "int32"),
    (lambda lib: {"x": lib.io.FixedLenSequenceFeature([], lib.int64)}, "allow_missing"),
    (lambda lib: {"x": lib.io.FixedLenFeature([2], lib.int64, default_value=[1, 2, 3])}, "x"),
])
def test_bad_specs_are_value_errors_when_the_graph_is_built(tf1: Any, make: Any, message: str) -> None:
    for lib in (tf, tf1):
        with lib.Graph().as_default():
            with pytest.raises((ValueError, TypeError)) as raised:
                lib.io.parse_example(lib.constant([b""]), make(lib))
        if lib is tf:
            assert message in str(raised.value)


# ---------------------------------------------------------------- decode_raw

@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64", "float32", "float64", "float16"])
@pytest.mark.parametrize("little_endian", [True, False])
def test_decode_raw_gives_tensorflows_numbers(tf1: Any, dtype: str, little_endian: bool) -> None:
    raw = [np.arange(6, dtype=dtype).tobytes(), (np.arange(6, dtype=dtype) * 3).tobytes()]

    def decode(lib: Any) -> Any:
        return lib.io.decode_raw(lib.constant(raw), getattr(lib, dtype), little_endian=little_endian)

    ours, theirs = _run(tf, decode), _run(tf1, decode)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape == (2, 6)
    np.testing.assert_array_equal(ours, theirs)


def test_decode_raw_of_strings_of_different_or_odd_lengths_is_an_error(tf1: Any) -> None:
    for lib in (tf, tf1):
        with pytest.raises(lib.errors.InvalidArgumentError, match="same size"):
            _run(lib, lambda lib: lib.io.decode_raw(lib.constant([b"abcd", b"abcdefgh"]), lib.int32))
        with pytest.raises(lib.errors.InvalidArgumentError, match="multiple of 4"):
            _run(lib, lambda lib: lib.io.decode_raw(lib.constant([b"abcde"]), lib.float32))
