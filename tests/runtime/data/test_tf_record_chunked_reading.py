"""Reading TFRecord files a chunk at a time (``kernels/tf_record.read_records``), with
TensorFlow 2.21's ``tf_record_iterator`` as the oracle: records that straddle chunks or
are larger than one, headers that change size from record to record, and damaged files
(a bad checksum, a file cut in its header, data or checksum) give the same records in
the same order, then the same DataLossError, as TensorFlow reading the same bytes.

The chunk is made 100 bytes here (1 MiB in use) so that every case crosses chunks.
"""

from __future__ import annotations

import gzip
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import tensorgrid
from tensorgrid.kernels import tf_record

SIZES = [0, 5, 40, 250, 3, 3, 3, 97, 84, 1000, 12, 12]
"""Record lengths: empty, smaller and larger than the 100-byte chunk, runs of one size."""


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tf_record, "READ_CHUNK_BYTES", 100)


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


def records() -> list[bytes]:
    rng = np.random.default_rng(7)
    return [rng.integers(0, 256, size, dtype=np.uint8).tobytes() for size in SIZES]


def file_bytes() -> bytes:
    return b"".join(tf_record.frame(record) for record in records())


def read(lib: Any, path: str, options: Any = None) -> tuple[list[bytes], str]:
    """The records read before the iterator stopped, and the class of its error ("" at the end)."""
    got: list[bytes] = []
    try:
        for record in lib.io.tf_record_iterator(path, options):
            got.append(bytes(record))
    except lib.errors.OpError as exc:
        return got, type(exc).__name__
    return got, ""


def test_records_across_chunks_are_what_tensorflow_reads(lib: Any, tmp_path: Any) -> None:
    path = tmp_path / "records.tfrecord"
    path.write_bytes(file_bytes())
    assert read(lib, str(path)) == (records(), "")


def test_a_gzip_file_read_in_chunks_gives_every_record(lib: Any, tmp_path: Any) -> None:
    path = tmp_path / "records.tfrecord.gz"
    path.write_bytes(gzip.compress(file_bytes()))
    assert read(lib, str(path), lib.io.TFRecordOptions("GZIP")) == (records(), "")


def _flip(position: int) -> Callable[[bytes], bytes]:
    return lambda data: data[:position] + bytes([data[position] ^ 0x40]) + data[position + 1:]


def _offset_of(index: int) -> int:
    return sum(16 + size for size in SIZES[:index])


DAMAGE = {
    # the data of the 250-byte record (index 3), past the first chunk
    "a data byte of a record larger than a chunk": (_flip(_offset_of(3) + 12 + 200), 3),
    # the length of the second of three 3-byte records: a header like the one before, changed
    "the length of a record whose header repeats": (_flip(_offset_of(5)), 5),
    "the length's checksum": (_flip(_offset_of(6) + 9), 6),
    "the data's checksum of the last record": (_flip(_offset_of(11) + 12 + 12 + 1), 11),
    "cut in the data": (lambda data: data[:_offset_of(9) + 12 + 500], 9),
    "cut in the data's checksum": (lambda data: data[:_offset_of(10) + 12 + 12 + 2], 10),
}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_record_comes_after_the_good_ones_as_data_loss(lib: Any, tmp_path: Any, damage: str) -> None:
    change, bad_index = DAMAGE[damage]
    path = tmp_path / "damaged.tfrecord"
    path.write_bytes(change(file_bytes()))
    assert read(lib, str(path)) == (records()[:bad_index], "DataLossError")


def test_a_file_cut_in_a_header_is_data_loss(tmp_path: Any) -> None:
    """TensorFlow 2.21's tf_record_iterator ends quietly there (docs/differences.md)."""
    path = tmp_path / "cut.tfrecord"
    path.write_bytes(file_bytes()[:_offset_of(8) + 7])
    assert read(tensorgrid, str(path)) == (records()[:8], "DataLossError")


def test_the_error_names_the_file_and_the_bad_record_offset(tmp_path: Any) -> None:
    path = tmp_path / "damaged.tfrecord"
    path.write_bytes(_flip(_offset_of(9) + 12 + 600)(file_bytes()))
    with pytest.raises(tensorgrid.errors.DataLossError, match=f"corrupted record at {_offset_of(9)} in .*damaged"):
        list(tensorgrid.io.tf_record_iterator(str(path)))
