"""What a queue-fed input pipeline decodes one record at a time, with TensorFlow's ``tf.compat.v1``
as the oracle: ``decode_raw`` of one string (a scalar constant, or what ``parse_single_example``
gives) in either byte order, ``parse_single_example`` / ``parse_example`` of keys with several
values, defaults among present values, wrong counts; and a queue's node used by two sessions.

These are the kernels' short paths (one string read in place, a key's values gathered into one
list per batch, the queue found once per session): each must give what the general path gives,
bit for bit, and the same error classes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: Any, tf1: Any) -> Any:
    return tf if request.param == "tensorgrid" else tf1


def _run(lib: Any, build: Any) -> Any:
    with lib.Graph().as_default():
        fetches = build(lib)
        with lib.Session() as sess:
            return sess.run(fetches)


def _both(tf1: Any, build: Any) -> tuple[Any, Any]:
    return _run(tf, build), _run(tf1, build)


def _example(lib: Any, **features: Any) -> bytes:
    feature = {}
    for key, values in features.items():
        if isinstance(values[0], bytes):
            feature[key] = lib.train.Feature(bytes_list=lib.train.BytesList(value=values))
        elif isinstance(values[0], float):
            feature[key] = lib.train.Feature(float_list=lib.train.FloatList(value=values))
        else:
            feature[key] = lib.train.Feature(int64_list=lib.train.Int64List(value=values))
    return bytes(lib.train.Example(features=lib.train.Features(feature=feature)).SerializeToString())


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint16", "int32", "int64", "float16", "float32", "float64"])
@pytest.mark.parametrize("little_endian", [True, False])
def test_one_string_decodes_to_tensorflows_numbers(tf1: Any, dtype: str, little_endian: bool) -> None:
    raw = (np.arange(-5, 7).astype(dtype) * 7).tobytes()

    def decode(lib: Any) -> Any:
        return lib.io.decode_raw(lib.constant(raw), getattr(lib, dtype), little_endian=little_endian)

    ours, theirs = _both(tf1, decode)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape == (12,)
    np.testing.assert_array_equal(ours, theirs)
    assert ours.flags.writeable


@pytest.mark.parametrize("little_endian", [True, False])
def test_a_parsed_string_decodes_to_tensorflows_numbers(tf1: Any, little_endian: bool) -> None:
    image = np.array([1, 255, 256, -1, 70000], dtype=">i4" if not little_endian else "<i4").tobytes()

    def decode(lib: Any) -> Any:
        parsed = lib.parse_single_example(lib.constant(_example(lib, image=[image])),
                                          {"image": lib.FixedLenFeature([], lib.string)})
        return lib.decode_raw(parsed["image"], lib.int32, little_endian=little_endian)

    ours, theirs = _both(tf1, decode)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(ours, [1, 255, 256, -1, 70000])


def test_an_empty_string_decodes_to_no_numbers(tf1: Any) -> None:
    ours, theirs = _both(tf1, lambda lib: lib.io.decode_raw(lib.constant(b""), lib.float32))
    assert ours.shape == theirs.shape == (0,) and ours.dtype == theirs.dtype


@pytest.mark.parametrize("length", [1, 3, 7])
def test_one_string_of_an_odd_length_is_an_invalid_argument(lib: Any, length: int) -> None:
    with pytest.raises(lib.errors.InvalidArgumentError, match="multiple of 4"):
        _run(lib, lambda lib: lib.io.decode_raw(lib.constant(b"x" * length), lib.int32))


def test_a_parsed_string_of_an_odd_length_is_an_invalid_argument(lib: Any) -> None:
    def decode(lib: Any) -> Any:
        parsed = lib.parse_single_example(lib.constant(_example(lib, image=[b"abc"])),
                                          {"image": lib.FixedLenFeature([], lib.string)})
        return lib.decode_raw(parsed["image"], lib.float64)

    with pytest.raises(lib.errors.InvalidArgumentError, match="multiple of 8"):
        _run(lib, decode)


def _spec(lib: Any) -> dict[str, Any]:
    return {
        "pixels": lib.FixedLenFeature([2, 2], lib.int64),
        "scores": lib.FixedLenFeature([3], lib.float32, default_value=[0.1, -0.0, 1e-30]),
        "words": lib.FixedLenFeature([2], lib.string, default_value=[b"", b"none"]),
        "label": lib.FixedLenFeature([], lib.int64, default_value=-1),
    }


EXAMPLES = [
    {"pixels": [2**63 - 1, -2**63, 0, 5], "scores": [0.1, 3.4028234663852886e38, -1.5], "words": [b"a\x00b", b""]},
    {"pixels": [1, 2, 3, 4], "label": [9]},
    {"pixels": [-1, -2, -3, -4], "words": [b"x", b"yz"], "label": [0]},
]


def test_one_example_of_several_values_per_key_is_tensorflows(tf1: Any) -> None:
    for example in EXAMPLES:
        ours, theirs = _both(tf1, lambda lib: lib.parse_single_example(lib.constant(_example(lib, **example)),
                                                                         _spec(lib)))
        for key in theirs:
            assert ours[key].dtype == theirs[key].dtype and ours[key].shape == theirs[key].shape, key
            np.testing.assert_array_equal(ours[key], theirs[key])


def test_a_batch_with_defaults_among_present_values_is_tensorflows(tf1: Any) -> None:
    ours, theirs = _both(tf1, lambda lib: lib.parse_example(
        lib.constant([_example(lib, **example) for example in EXAMPLES]), _spec(lib)))
    for key in theirs:
        assert ours[key].dtype == theirs[key].dtype and ours[key].shape == theirs[key].shape, key
        np.testing.assert_array_equal(ours[key], theirs[key])
    assert ours["scores"].view(np.uint32).tolist() == theirs["scores"].view(np.uint32).tolist()  # -0.0 and 1e-30


@pytest.mark.parametrize("single", [True, False])
def test_a_wrong_number_of_values_is_an_invalid_argument(lib: Any, single: bool) -> None:
    def parse(lib: Any) -> Any:
        serialized = _example(lib, pixels=[1, 2, 3])
        if single:
            return lib.parse_single_example(lib.constant(serialized), _spec(lib))
        return lib.parse_example(lib.constant([_example(lib, pixels=[1, 2, 3, 4]), serialized]), _spec(lib))

    with pytest.raises(lib.errors.InvalidArgumentError):
        _run(lib, parse)


def test_a_missing_required_key_is_an_invalid_argument(lib: Any) -> None:
    with pytest.raises(lib.errors.InvalidArgumentError):
        _run(lib, lambda lib: lib.parse_single_example(lib.constant(_example(lib, label=[1])), _spec(lib)))


def test_a_queue_node_run_by_two_sessions_serves_each_its_own_queue(lib: Any) -> None:
    with lib.Graph().as_default():
        queue = lib.FIFOQueue(10, [lib.int64], shapes=[[]])
        enqueue = queue.enqueue([lib.constant(3, lib.int64)])
        size = queue.size()
        with lib.Session() as first:
            first.run(enqueue)
            first.run(enqueue)
            assert first.run(size) == 2
        with lib.Session() as second:
            assert second.run(size) == 0
            second.run(enqueue)
            assert second.run(size) == 1
