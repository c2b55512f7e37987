"""``tf.data.FixedLengthRecordDataset``: fixed-size records between a header and a footer, plain or
compressed, decoded with ``tf.io.decode_raw`` (a CIFAR-10-style binary file), with TensorFlow's
``tf.compat.v1`` as the oracle: the same records in the same order, the same errors for a body
that is not whole records, clear errors for bad arguments and short files."""

from __future__ import annotations

import gzip
import zlib
from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf

RECORD = 7  # 1 label byte + 6 pixel bytes
HEADER, FOOTER = 5, 3


def _write(path: Any, records: int, compression: str = "", extra: bytes = b"", seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    body = rng.integers(0, 256, records * RECORD, dtype=np.uint8).tobytes()
    content = b"H" * HEADER + body + extra + b"F" * FOOTER
    data = gzip.compress(content) if compression == "GZIP" else zlib.compress(content) if compression == "ZLIB" \
        else content
    path.write_bytes(data)
    return body


def _elements(lib: Any, make: Callable[[Any], Any]) -> list[Any]:
    with lib.Graph().as_default():
        element = lib.data.make_one_shot_iterator(make(lib)).get_next()
        out = []
        with lib.Session() as sess:
            while True:
                try:
                    out.append(sess.run(element))
                except lib.errors.OutOfRangeError:
                    return out


@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_records_between_header_and_footer_as_tensorflow_reads_them(tf1: Any, tmp_path: Any, compression: str) -> None:
    paths = [tmp_path / "a.bin", tmp_path / "b.bin"]
    bodies = [_write(paths[0], 4, compression, seed=1), _write(paths[1], 2, compression, seed=2)]

    def make(lib: Any) -> Any:
        return lib.data.FixedLengthRecordDataset([str(p) for p in paths], RECORD, header_bytes=HEADER,
                                                 footer_bytes=FOOTER, compression_type=compression)

    ours, theirs = _elements(tf, make), _elements(tf1, make)
    assert ours == theirs
    assert b"".join(ours) == b"".join(bodies)


def test_a_small_buffer_size_reads_the_same_records(tmp_path: Any) -> None:
    path = tmp_path / "a.bin"
    body = _write(path, 9)
    ours = _elements(tf, lambda lib: lib.data.FixedLengthRecordDataset(str(path), RECORD, HEADER, FOOTER,
                                                                       buffer_size=2))
    assert b"".join(ours) == body and all(len(r) == RECORD for r in ours)


@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_a_body_that_is_not_whole_records_is_an_error_as_in_tensorflow(tf1: Any, tmp_path: Any,
                                                                       compression: str) -> None:
    # TensorFlow: InvalidArgumentError before any record of an uncompressed file (its size is known),
    # DataLossError after the whole records of a compressed one.
    path = tmp_path / "ragged.bin"
    _write(path, 3, compression, extra=b"xyz")
    expected = {"": "InvalidArgumentError", "GZIP": "DataLossError"}[compression]
    for lib in (tf, tf1):
        with lib.Graph().as_default():
            dataset = lib.data.FixedLengthRecordDataset(str(path), RECORD, header_bytes=HEADER, footer_bytes=FOOTER,
                                                        compression_type=compression)
            element = lib.data.make_one_shot_iterator(dataset).get_next()
            read = []
            with lib.Session() as sess:
                with pytest.raises(getattr(lib.errors, expected), match="not an exact multiple of the record length"):
                    while True:
                        read.append(sess.run(element))
            assert len(read) == (3 if compression else 0)


def test_decoding_cifar_style_records_into_labels_and_images(tf1: Any, tmp_path: Any) -> None:
    path = tmp_path / "cifar.bin"
    _write(path, 5)

    def make(lib: Any) -> Any:
        def decode(record: Any) -> Any:
            raw = lib.io.decode_raw(record, lib.uint8)
            return lib.cast(raw[0], lib.int32), lib.reshape(raw[1:], [2, 3])
        return lib.data.FixedLengthRecordDataset(str(path), RECORD, HEADER, FOOTER).map(decode).batch(2)

    ours, theirs = _elements(tf, make), _elements(tf1, make)
    assert len(ours) == len(theirs) == 3
    for (label, image), (label_tf, image_tf) in zip(ours, theirs):
        np.testing.assert_array_equal(label, label_tf)
        np.testing.assert_array_equal(image, image_tf)
        assert image.dtype == image_tf.dtype == np.uint8


def test_file_names_from_a_placeholder_fed_at_initialization(tmp_path: Any) -> None:
    path = tmp_path / "a.bin"
    body = _write(path, 2)
    with tf.Graph().as_default():
        names = tf.placeholder(tf.string, [None])
        iterator = tf.data.FixedLengthRecordDataset(names, RECORD, HEADER, FOOTER).make_initializable_iterator()
        element = iterator.get_next()
        with tf.Session() as sess:
            sess.run(iterator.initializer, {names: [str(path)]})
            assert sess.run(element) + sess.run(element) == body


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"record_bytes": 0}, "record_bytes"),
    ({"record_bytes": RECORD, "header_bytes": -1}, "header_bytes"),
    ({"record_bytes": RECORD, "footer_bytes": -2}, "footer_bytes"),
    ({"record_bytes": RECORD, "compression_type": "LZ4"}, "compression_type"),
    ({"record_bytes": RECORD, "buffer_size": -5}, "buffer_size"),
])
def test_bad_arguments_name_the_argument(kwargs: dict[str, Any], message: str) -> None:
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=message):
            tf.data.FixedLengthRecordDataset("x.bin", **kwargs)


def test_a_missing_file_is_not_found_and_a_short_one_is_an_error_naming_it(tmp_path: Any) -> None:
    with pytest.raises(tf.errors.NotFoundError, match="nowhere.bin"):
        _elements(tf, lambda lib: lib.data.FixedLengthRecordDataset(str(tmp_path / "nowhere.bin"), RECORD))
    short = tmp_path / "short.bin"
    short.write_bytes(b"HHH")
    with pytest.raises(tf.errors.InvalidArgumentError, match="short.bin.*shorter than its header"):
        _elements(tf, lambda lib: lib.data.FixedLengthRecordDataset(str(short), RECORD, HEADER, FOOTER))
    short.write_bytes(gzip.compress(b"HHH"))
    with pytest.raises(tf.errors.DataLossError, match="short.bin.*shorter than its header"):
        _elements(tf, lambda lib: lib.data.FixedLengthRecordDataset(str(short), RECORD, HEADER, FOOTER, None, "GZIP"))
