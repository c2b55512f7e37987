"""The header frames ``wire.header_frame_of`` writes by hand are protobuf's, byte for byte.

Tensors whose shape changes every step (a sparse step's ids and rows) miss the header
cache, so their frames are written without protobuf objects; the receiver parses them with
protobuf. Checked against ``TensorFrame(header=...).SerializeToString()`` for every dtype
that travels, scalar, empty and large shapes, names with non-ASCII characters, payload
sizes across varint boundaries; and what ``encode_headers`` sends parses back.
"""

from __future__ import annotations

import numpy as np
import pytest

from tensorgrid.distributed.rpc.transport import wire

SHAPES = [(), (0,), (1,), (3, 0, 2), (731, 64), (2**20,), (127, 128, 129), (1,) * 6, (2**35,)]
NAMES = ["", "x:0", "ps/ünï;0;1:0" * 20]
SIZES = [0, 1, 127, 128, 16383, 16384, 2**31 + 5]


@pytest.mark.parametrize("dtype", sorted(wire._NATIVE_WIRE_DTYPES, key=str), ids=str)
def test_hand_written_header_frames_are_protobufs(dtype: np.dtype) -> None:
    for shape in SHAPES:
        # A zero-strided view: any shape without its memory.
        array = np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape=shape, strides=(0,) * len(shape))
        for name in NAMES:
            for size in SIZES:
                expected = wire.header_frame(wire.header_for(array, size, name))
                assert wire.header_frame_of(array, size, name) == expected, (shape, name, size)


def test_encoded_headers_parse_back_with_their_shapes() -> None:
    arrays: list[np.ndarray] = [np.arange(12, dtype=np.int64).reshape(3, 4), np.array(2.5, np.float32), np.zeros((0, 7), np.float16),
              np.array([b"a", "b\u00e9"], dtype=object), np.ones((5, 1), bool)]
    bundle, payloads = wire.encode_headers([(f"t{i}", a) for i, a in enumerate(arrays)])
    headers = list(wire.decode_headers(bundle, 1 << 20))
    assert len(headers) == len(arrays) == len(payloads)
    for i, (array, (header, dtype, shape)) in enumerate(zip(arrays, headers)):
        assert (header.name, dtype, shape) == (f"t{i}", array.dtype, array.shape)
        assert header.byte_size == len(payloads[i])
    assert bytes(payloads[0]) == arrays[0].tobytes()


def test_arrays_not_ready_to_travel_are_converted_or_refused() -> None:
    swapped = np.arange(4, dtype=">i4")
    assert wire.as_wire_array(swapped).dtype == np.dtype("<i4")
    strided = np.arange(10, dtype=np.float32)[::2]
    converted = wire.as_wire_array(strided)
    assert converted.flags.c_contiguous and converted.tolist() == strided.tolist()
    with pytest.raises(TypeError):
        wire.as_wire_array(np.zeros(2, np.complex64))
