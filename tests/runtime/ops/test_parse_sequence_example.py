"""``tf.io.parse_single_sequence_example`` on serialized ``tf.train.SequenceExample`` protos,
with TensorFlow's ``tf.compat.v1`` as the oracle.

The records are built with TensorFlow's message classes and with tensorgrid's: each parses
the other's bytes. Context features (FixedLenFeature with and without a default,
VarLenFeature) and feature lists (FixedLenSequenceFeature, allow_missing, VarLenFeature) of
every dtype a SequenceExample holds give TensorFlow's values, shapes and dtypes, also in
``Dataset.map``; bad data is an InvalidArgumentError naming the key, bad specs a ValueError.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid


def _feature(lib: Any, values: list[Any]) -> Any:
    if values and isinstance(values[0], bytes):
        return lib.train.Feature(bytes_list=lib.train.BytesList(value=values))
    if values and isinstance(values[0], float):
        return lib.train.Feature(float_list=lib.train.FloatList(value=values))
    return lib.train.Feature(int64_list=lib.train.Int64List(value=values))


def _sequence_example(lib: Any, context: dict[str, list[Any]], lists: dict[str, list[list[Any]]]) -> bytes:
    message = lib.train.SequenceExample(
        context=lib.train.Features(feature={key: _feature(lib, values) for key, values in context.items()}),
        feature_lists=lib.train.FeatureLists(feature_list={
            key: lib.train.FeatureList(feature=[_feature(lib, step) for step in steps]) for key, steps in lists.items()}))
    return bytes(message.SerializeToString())


RECORDS = [
    ({"length": [3], "label": [0.5, 1.5], "user": [b"ann"]},
     {"tokens": [[4], [8], [15]], "frames": [[0.5, 1.0], [2.0, 3.5], [-1.0, 0.0]], "tags": [[1, 2], [], [3]],
      "words": [[b"a"], [b"bc", b"d"], [b""]]}),
    ({"length": [1], "label": [2.0, -1.0]},
     {"tokens": [[16]], "frames": [[9.0, 8.0]], "tags": [[]], "words": [[b"only"]]}),
    ({"length": [0], "label": [0.0, 0.0], "user": [b"zed"], "ids": [5, 6, 7]},
     {"tokens": [], "frames": [], "tags": [], "words": []}),
]


def _specs(lib: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    context = {
        "length": lib.io.FixedLenFeature([], lib.int64),
        "label": lib.io.FixedLenFeature([2], lib.float32),
        "user": lib.io.FixedLenFeature([], lib.string, default_value=b"nobody"),
        "ids": lib.io.VarLenFeature(lib.int64),
    }
    sequences = {
        "tokens": lib.io.FixedLenSequenceFeature([], lib.int64),
        "frames": lib.io.FixedLenSequenceFeature([2], lib.float32),
        "tags": lib.io.VarLenFeature(lib.int64),
        "words": lib.io.VarLenFeature(lib.string),
        "absent": lib.io.FixedLenSequenceFeature([1, 2], lib.float32, allow_missing=True),
    }
    return context, sequences


def _flat(parsed: tuple[dict[str, Any], dict[str, Any]]) -> list[Any]:
    """The parsed values in a fixed order, a SparseTensor as its three parts."""
    out = []
    for part in parsed:
        for key in sorted(part):
            value = part[key]
            out += [value.indices, value.values, value.dense_shape] if hasattr(value, "indices") else [value]
    return out


def _parse(lib: Any, record: bytes) -> list[Any]:
    with lib.Graph().as_default():
        serialized = lib.placeholder(lib.string, [])
        context, sequences = _specs(lib)
        parsed = lib.io.parse_single_sequence_example(serialized, context_features=context, sequence_features=sequences)
        with lib.Session() as sess:
            return sess.run(_flat(parsed), {serialized: record})  # type: ignore[no-any-return]


@pytest.mark.parametrize("index", range(len(RECORDS)))
@pytest.mark.parametrize("writer", ["tensorflow", "tensorgrid"])
def test_parsed_values_agree_with_tensorflow(tf1: Any, index: int, writer: str) -> None:
    record = _sequence_example(tf1 if writer == "tensorflow" else tensorgrid, *RECORDS[index])
    expected, actual = _parse(tf1, record), _parse(tensorgrid, record)
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual):
        assert np.asarray(got).dtype == np.asarray(want).dtype
        assert np.shape(got) == np.shape(want)
        assert np.asarray(got).tolist() == np.asarray(want).tolist()


def test_parsing_inside_a_dataset_map_agrees_with_tensorflow(tf1: Any) -> None:
    records = [_sequence_example(tensorgrid, *r) for r in RECORDS]

    def run(lib: Any) -> list[Any]:
        def parse(record: Any) -> Any:
            context, sequences = lib.io.parse_single_sequence_example(
                record, context_features={"length": lib.io.FixedLenFeature([], lib.int64)},
                sequence_features={"frames": lib.io.FixedLenSequenceFeature([2], lib.float32)})
            return context["length"], lib.reduce_sum(sequences["frames"])

        with lib.Graph().as_default():
            element = lib.data.make_one_shot_iterator(lib.data.Dataset.from_tensor_slices(records).map(parse)).get_next()
            with lib.Session() as sess:
                return [sess.run(element) for _ in records]

    assert np.asarray(run(tensorgrid)).tolist() == np.asarray(run(tf1)).tolist()


BAD_RECORDS = {
    # the record, what both errors say, what tensorgrid's says besides
    "missing_required_list": (
        ({"length": [1], "label": [1.0, 2.0]}, {"frames": [[1.0, 2.0]], "tags": [], "words": []}),
        "Feature list 'tokens' is required but could not be found", ""),
    "wrong_number_of_values": (
        ({"length": [1], "label": [1.0, 2.0]}, {"tokens": [[1]], "frames": [[1.0, 2.0, 3.0]]}),
        "Feature list 'frames' has an unexpected number of values.  Total values size: 3 is not consistent with "
        "output shape: [?,2]", ""),
    "steps_of_uneven_sizes": (
        ({"length": [2], "label": [1.0, 2.0]}, {"tokens": [[1], [4]], "frames": [[1.0], [2.0, 3.0, 4.0]]}),
        "Key: frames, Index: 0.  Number of values != expected.  values size: 1 but output shape: [2]", ""),
    "wrong_kind_in_a_step": (
        ({"length": [1], "label": [1.0, 2.0]}, {"tokens": [[1.5]], "frames": [[1.0, 2.0]]}),
        "Data types don't match", "Feature: tokens"),
    "missing_required_context": (
        ({"label": [1.0, 2.0]}, {"tokens": [[1]], "frames": [[1.0, 2.0]]}),
        "length", "Feature: length (data type: int64) is required but could not be found"),
}


@pytest.mark.parametrize("name", sorted(BAD_RECORDS))
def test_bad_data_fails_as_tensorflow_does(tf1: Any, name: str) -> None:
    (context, lists), both_say, tensorgrid_says = BAD_RECORDS[name]
    record = _sequence_example(tensorgrid, context, lists)
    for lib in (tf1, tensorgrid):
        with pytest.raises(lib.errors.InvalidArgumentError) as caught:
            _parse(lib, record)
        text = getattr(caught.value, "message", "") + str(caught.value)
        assert both_say in text
        if lib is tensorgrid:
            assert tensorgrid_says in text


def test_a_record_that_is_not_a_sequence_example_is_named() -> None:
    with pytest.raises(tensorgrid.errors.InvalidArgumentError, match="not a serialized tf.train.SequenceExample"):
        _parse(tensorgrid, b"\xff\xff not a proto")


@pytest.mark.parametrize("context, sequences, message", [
    (None, None, "Missing features"),
    ({"x": tensorgrid.io.FixedLenSequenceFeature([], tensorgrid.int64)}, None,
     r"Unsupported feature type for context_features\['x'\]"),
    (None, {"x": tensorgrid.io.FixedLenSequenceFeature([], tensorgrid.int64, allow_missing=True, default_value=0)},
     r"sequence_features\['x'\]: a sequence feature takes no default_value"),
    (None, {"x": tensorgrid.io.FixedLenSequenceFeature([None], tensorgrid.float32)}, "must be fully defined"),
    (None, {"x": tensorgrid.io.VarLenFeature(tensorgrid.int32)}, "Unsupported dtype int32 of feature 'x'"),
])
def test_bad_specs_are_named(context: Any, sequences: Any, message: str) -> None:
    with tensorgrid.Graph().as_default(), pytest.raises(ValueError, match=message):
        tensorgrid.io.parse_single_sequence_example(b"", context_features=context, sequence_features=sequences)
