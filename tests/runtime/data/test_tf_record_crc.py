"""The CRC-32C of TFRecord files: Google's C implementation where its wheel is installed (a
dependency, so everywhere this project installs), the Python table as the fallback, both
giving the checksums of RFC 3720's test vectors and agreeing on arbitrary data."""

from __future__ import annotations

import numpy as np
import pytest

from tensorgrid.kernels import tf_record

RFC_3720_VECTORS = [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


def test_the_compiled_crc_is_the_one_in_use() -> None:
    # google-crc32c is a dependency: an install without its compiled extension is a broken one.
    assert tf_record.CRC32C_IMPLEMENTATION == "c"


@pytest.mark.parametrize(("data", "expected"), RFC_3720_VECTORS)
def test_both_implementations_give_the_rfc_3720_checksums(data: bytes, expected: int) -> None:
    assert tf_record.crc32c(data) == expected
    assert tf_record.python_crc32c(data) == expected


def test_both_implementations_agree_on_random_data_of_every_alignment() -> None:
    rng = np.random.default_rng(0)
    for size in [*range(1, 40), 1000, 4097, 65536 + 3]:
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        assert tf_record.crc32c(data) == tf_record.python_crc32c(data), size


def test_a_frame_carries_the_masked_checksums_tensorflow_checks() -> None:
    # The masked CRC of TensorFlow's record writer (crc32c::Mask) of the 8-byte length 5.
    framed = tf_record.frame(b"hello")
    length_crc = int.from_bytes(framed[8:12], "little")
    assert length_crc == tf_record.masked_crc((5).to_bytes(8, "little"))
    crc = tf_record.python_crc32c((5).to_bytes(8, "little"))
    assert length_crc == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
