"""TFRecord and text files in ``tf.data``, and padded_batch/concatenate/flat_map/interleave.

TensorFlow's ``tf.compat.v1`` is the oracle: it reads the TFRecord files tensorgrid
writes and tensorgrid reads the ones it writes (uncompressed, GZIP, ZLIB), and each
pipeline here gives the same elements, in the same order, in both. Bad input (a
missing file, a corrupted or truncated record, an element larger than its padded
shape) is an error naming the bad value.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf

RECORDS = [b"first", b"", b"\x00\xff binary \n bytes", b"x" * 3000]


def _elements(lib: Any, make: Callable[[Any], Any], feed: Any = None) -> list[Any]:
    """Every element of the dataset ``make(lib)`` builds, read to the end with a one-shot iterator."""
    with lib.Graph().as_default():
        dataset = make(lib)
        iterator = dataset.make_initializable_iterator()
        element = iterator.get_next()
        out = []
        with lib.Session() as sess:
            sess.run(iterator.initializer, feed(lib) if feed else None)
            while True:
                try:
                    out.append(sess.run(element))
                except lib.errors.OutOfRangeError:
                    return out


def _assert_same(ours: list[Any], theirs: list[Any]) -> None:
    assert len(ours) == len(theirs), (ours, theirs)
    for mine, oracle in zip(ours, theirs):
        if isinstance(oracle, dict):
            assert sorted(mine) == sorted(oracle)
            for key in oracle:
                np.testing.assert_array_equal(np.asarray(mine[key]), np.asarray(oracle[key]))
        elif isinstance(oracle, tuple):
            for a, b in zip(mine, oracle):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        else:
            np.testing.assert_array_equal(np.asarray(mine), np.asarray(oracle))


# ---------------------------------------------------------------- TFRecord files both ways

@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_tensorflow_reads_the_tfrecord_files_tensorgrid_writes(tf1: Any, tmp_path: Any, compression: str) -> None:
    path = str(tmp_path / "ours.tfrecord")
    with tf.io.TFRecordWriter(path, options=tf.io.TFRecordOptions(compression)) as writer:
        for record in RECORDS:
            writer.write(record)
    assert list(tf1.io.tf_record_iterator(path, options=tf1.io.TFRecordOptions(compression))) == RECORDS
    theirs = _elements(tf1, lambda lib: lib.data.TFRecordDataset(path, compression_type=compression))
    assert theirs == RECORDS


@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_tensorgrid_reads_the_tfrecord_files_tensorflow_writes(tf1: Any, tmp_path: Any, compression: str) -> None:
    path = str(tmp_path / "theirs.tfrecord")
    with tf1.io.TFRecordWriter(path, options=tf1.io.TFRecordOptions(compression)) as writer:
        for record in RECORDS:
            writer.write(record)
    assert list(tf.python_io.tf_record_iterator(path, options=compression or None)) == RECORDS
    ours = _elements(tf, lambda lib: lib.data.TFRecordDataset([path], compression_type=compression or None))
    assert ours == RECORDS


def test_parallel_reads_interleave_files_record_by_record_as_tensorflow(tf1: Any, tmp_path: Any) -> None:
    paths = []
    for f, count in enumerate((3, 1, 4)):
        paths.append(str(tmp_path / f"part{f}.tfrecord"))
        with tf.python_io.TFRecordWriter(paths[-1]) as writer:
            for r in range(count):
                writer.write(f"file{f}-record{r}")
    def make(lib: Any) -> Any:
        return lib.data.TFRecordDataset(paths, num_parallel_reads=2)
    ours, theirs = _elements(tf, make), _elements(tf1, make)
    assert ours == theirs
    assert ours[:5] == [b"file0-record0", b"file1-record0", b"file0-record1", b"file0-record2", b"file2-record0"]


def test_file_names_can_be_fed_when_the_iterator_is_initialized(tmp_path: Any) -> None:
    paths = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    for path in paths:
        with tf.io.TFRecordWriter(path) as writer:
            writer.write(os.path.basename(path))
    names = tf.placeholder(tf.string, [None])
    iterator = tf.data.TFRecordDataset(names).make_initializable_iterator()
    element = iterator.get_next()
    with tf.Session() as sess:
        for order in (paths, paths[::-1]):
            sess.run(iterator.initializer, {names: order})
            assert [sess.run(element), sess.run(element)] == [os.path.basename(p).encode() for p in order]


# ---------------------------------------------------------------- text files

@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_text_lines_match_tensorflow(tf1: Any, tmp_path: Any, compression: str) -> None:
    import gzip

    content = b"alpha\r\nbeta\n\n  gamma with spaces \nlast line without newline"
    path = str(tmp_path / "lines.txt")
    with (gzip.open(path, "wb") if compression else open(path, "wb")) as f:
        f.write(content)
    other = str(tmp_path / "other.txt")
    with open(other, "wb") as f:
        f.write(b"second file\n")
    def make(lib: Any) -> Any:
        first = lib.data.TextLineDataset(path, compression_type=compression)
        return first.concatenate(lib.data.TextLineDataset([other]))
    ours, theirs = _elements(tf, make), _elements(tf1, make)
    assert ours == theirs
    assert ours[0] == b"alpha" and ours[2] == b"" and ours[-1] == b"second file"


# ---------------------------------------------------------------- bad files and arguments

def test_a_missing_file_is_not_found_naming_it(tmp_path: Any) -> None:
    missing = str(tmp_path / "missing.tfrecord")
    element = tf.data.TFRecordDataset(missing).make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(tf.errors.NotFoundError, match="missing.tfrecord"):
        sess.run(element)


@pytest.mark.parametrize("damage, error", [
    (lambda data: data[:12] + b"HELLO" + data[17:], "corrupted record at 0 .*checksum does not match"),
    (lambda data: data[:-3], "truncated record at 0"),
    (lambda data: b"not a tfrecord file at all", "corrupted record at 0 .*Is this even a TFRecord file"),
])
def test_damaged_records_are_data_loss(tmp_path: Any, damage: Callable[[bytes], bytes], error: str) -> None:
    path = str(tmp_path / "damaged.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(b"hello")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(damage(data))
    element = tf.data.TFRecordDataset(path).make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(tf.errors.DataLossError, match=error):
        sess.run(element)
    with pytest.raises(tf.errors.DataLossError, match=error):
        list(tf.io.tf_record_iterator(path))


def test_bad_arguments_are_rejected_naming_the_value(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="Not a valid compression_type: 'LZ4'; valid are None, '', 'GZIP' and 'ZLIB'"):
        tf.data.TFRecordDataset("x", compression_type="LZ4")
    with pytest.raises(ValueError, match="Not a valid compression_type: 'LZ4'"):
        tf.io.TFRecordWriter(str(tmp_path / "x"), options="LZ4")
    with pytest.raises(ValueError, match="buffer_size must be a non-negative integer or None, got -2"):
        tf.data.TextLineDataset("x", buffer_size=-2)
    with pytest.raises(TypeError, match="filenames must be a string scalar or vector"):
        tf.data.TFRecordDataset([["a", "b"]])
    writer = tf.io.TFRecordWriter(str(tmp_path / "w"))
    with pytest.raises(TypeError, match="takes bytes .* got int"):
        writer.write(5)
    writer.close()
    with pytest.raises(ValueError, match="is closed"):
        writer.write(b"late")


# ---------------------------------------------------------------- padded_batch, concatenate, flat_map, interleave

def _ragged(lib: Any) -> Any:
    """Elements 1, 2, 3, 4 as vectors [n] * n (one component) and a dict element with a string."""
    return lib.data.Dataset.range(1, 6).map(lambda n: lib.fill(lib.reshape(n, [1]), n))


PIPELINES: dict[str, Callable[[Any], Any]] = {
    "padded_batch to the longest": lambda lib: _ragged(lib).padded_batch(2, padded_shapes=[None]),
    "padded_batch to a fixed size with a padding value": lambda lib: _ragged(lib).padded_batch(
        3, padded_shapes=[6], padding_values=lib.constant(-1, lib.int64), drop_remainder=True),
    "padded_batch of a dict with strings": lambda lib: lib.data.Dataset.range(1, 4).map(
        lambda n: {"ids": lib.fill(lib.reshape(n, [1]), n), "word": lib.constant("w")}).padded_batch(
        2, padded_shapes={"ids": [None], "word": []}),
    "concatenate": lambda lib: lib.data.Dataset.range(3).concatenate(lib.data.Dataset.range(10, 12)),
    "flat_map": lambda lib: lib.data.Dataset.range(1, 4).flat_map(
        lambda n: lib.data.Dataset.from_tensor_slices(lib.fill(lib.reshape(n, [1]), n))),
    "interleave 2 x 3": lambda lib: lib.data.Dataset.range(1, 4).interleave(
        lambda n: lib.data.Dataset.from_tensor_slices(lib.fill(lib.reshape(n * 2, [1]), n)),
        cycle_length=2, block_length=3),
    "interleave of tuples with a captured tensor": lambda lib: lib.data.Dataset.from_tensor_slices(
        (np.array([1, 2, 3]), np.array([10.0, 20.0, 30.0]))).interleave(
        lambda n, x: lib.data.Dataset.from_tensors((n, x + lib.constant(0.5, lib.float64))).repeat(2),
        cycle_length=3),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_pipelines_give_what_tensorflow_gives(tf1: Any, name: str) -> None:
    _assert_same(_elements(tf, PIPELINES[name]), _elements(tf1, PIPELINES[name]))


def test_padded_batch_static_shapes() -> None:
    batched = _ragged(tf).padded_batch(2, padded_shapes=[7], drop_remainder=True)
    assert batched.output_shapes.as_list() == [2, 7]
    assert _ragged(tf).padded_batch(2, padded_shapes=[None]).output_shapes.as_list() == [None, None]


def test_padding_to_a_smaller_size_is_an_error_naming_the_sizes() -> None:
    element = _ragged(tf).padded_batch(5, padded_shapes=[3]).make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError,
                                             match="pad to a smaller size .* has size 4 in dimension 0, the padded "
                                                   "shape 3"):
        sess.run(element)


def test_bad_transformation_arguments_are_rejected() -> None:
    with pytest.raises(TypeError, match="Types of the datasets to concatenate differ"):
        tf.data.Dataset.range(3).concatenate(tf.data.Dataset.from_tensors(1.0))
    with pytest.raises(TypeError, match="map_func` of interleave must return a Dataset, got Tensor"):
        tf.data.Dataset.range(3).interleave(lambda n: n * 2, cycle_length=1)
    with pytest.raises(ValueError, match="cycle_length must be a positive integer, got 0"):
        tf.data.Dataset.range(3).interleave(lambda n: tf.data.Dataset.from_tensors(n), cycle_length=0)
    with pytest.raises(ValueError, match="padding_values must hold one scalar per component"):
        _ragged(tf).padded_batch(2, padded_shapes=[None], padding_values=tf.constant([1, 2], tf.int64))
