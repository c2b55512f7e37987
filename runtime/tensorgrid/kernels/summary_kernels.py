"""Kernels of the summary ops: values into TensorBoard's ``Summary`` protocol buffer.

A summary op outputs a serialized ``tensorflow.Summary`` (a string scalar), byte for byte
what TensorFlow's ops produce, so event files written from it read back with
TensorBoard's and TensorFlow's readers. The few fields needed are encoded here by hand
(protobuf's wire format), which keeps TensorFlow's protos out of the runtime.
"""

from __future__ import annotations

import functools
import math
import struct
import sys
from typing import Any, Iterator

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels.registry import register_kernel

_DOUBLE_MAX = sys.float_info.max


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def length_delimited(field: int, payload: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def double_field(field: int, value: float) -> bytes:
    """A double field; empty for +0.0, which proto3 leaves out (as TensorFlow's encoder does)."""
    packed = struct.pack("<d", value)
    return b"" if packed == bytes(8) else varint(field << 3 | 1) + packed


def _positive_bucket_limits() -> np.ndarray:
    """TensorFlow's positive histogram limits: 1e-12 growing by 10% (each the last times 1.1,
    rounded as C++ rounds it) up to 1e20, then DBL_MAX."""
    positive = []
    v = 1.0e-12
    while v < 1.0e20:
        positive.append(v)
        v *= 1.1
    positive.append(_DOUBLE_MAX)
    return np.array(positive)


_POSITIVE_LIMITS = _positive_bucket_limits()
_BUCKET_LIMITS = np.concatenate([-_POSITIVE_LIMITS[::-1], [0.0], _POSITIVE_LIMITS])
# A finite double's sign, exponent and first _CELL_MANTISSA_BITS mantissa bits name its cell:
# a range of values less than 1/64 wide relative to its ends, so narrower than the 10% between
# two limits, and holding at most one of them.
_CELL_MANTISSA_BITS = 6
_CELL_SHIFT = np.uint64(52 - _CELL_MANTISSA_BITS)


@functools.cache
def _cell_tables() -> tuple[np.ndarray, np.ndarray]:
    """For each cell: how many limits are <= its lowest value, and the next limit (+inf if
    none): a value of the cell is then past that many limits, plus one if it is >= the next."""
    cells = np.arange(1 << (64 - int(_CELL_SHIFT)), dtype=np.uint64) << _CELL_SHIFT
    negative = cells >= np.uint64(1 << 63)
    # a negative cell's lowest value has every bit below the cell's set (the largest magnitude)
    lowest = np.where(negative, cells | np.uint64((1 << int(_CELL_SHIFT)) - 1), cells).view(np.float64)
    with np.errstate(invalid="ignore"):
        below = np.searchsorted(_BUCKET_LIMITS, np.nan_to_num(lowest, nan=np.inf), side="right")
    next_limit = np.append(_BUCKET_LIMITS, np.inf)[below]
    return below.astype(np.int32), next_limit


def _bucket_indices(values: np.ndarray) -> np.ndarray:
    """For each finite float64 value, how many limits are <= it: the bucket TensorFlow's
    ``std::upper_bound`` puts it in, the same as ``np.searchsorted(_BUCKET_LIMITS, values,
    side="right")`` without a binary search per value (each value's cell, from its bits,
    holds the answer up to one comparison)."""
    below, next_limit = _cell_tables()
    cells = values.view(np.uint64) >> _CELL_SHIFT
    indices: np.ndarray = below[cells] + (values >= next_limit[cells])
    return indices


# TensorFlow's CPU threads run with denormals flushed: a denormal operand counts as a zero of
# its sign (DAZ: in comparisons, sums, and float32 -> float64 conversions) and a denormal result
# becomes zero (FTZ). The histogram is computed as those threads compute it.
_FLOAT32_TINY = float(np.finfo(np.float32).tiny)
_FLOAT64_TINY = float(np.finfo(np.float64).tiny)
# every double at least this large is a multiple of 2**-1021, and so is any sum of them: a
# running sum of such values is zero or normal, never denormal, and needs no flushing
_SUMMAND_FLOOR = 2.0**-969


def _flush_denormals(values: np.ndarray, tiny: float) -> np.ndarray:
    """``values`` with each value below ``tiny`` in magnitude replaced by a zero of its sign."""
    denormal = np.abs(values) < tiny
    return np.where(denormal, values * 0.0, values) if denormal.any() else values


def _sequential_sum(values: np.ndarray) -> float:
    """The sum added in order, one value at a time, as TensorFlow's histogram adds it (the same
    last bits, where numpy's pairwise sum may differ), a denormal running sum flushed to zero."""
    if not values.size:
        return 0.0
    magnitudes = np.abs(values)
    if not np.any((magnitudes > 0) & (magnitudes < _SUMMAND_FLOOR)):
        return float(np.cumsum(values)[-1])
    total = 0.0
    for value in values.tolist():  # values so small that a running sum may be denormal: rare
        total += value
        if abs(total) < _FLOAT64_TINY:
            total = math.copysign(0.0, total)
    return total


def _check_finite(values: np.ndarray, name: str) -> None:
    """TensorFlow's histogram refuses NaN and infinities, naming the first one it meets."""
    if np.isfinite(values).all():
        return
    first = values[np.argmin(np.isfinite(values))]
    what = "Nan in summary histogram" if np.isnan(first) else "Infinity in Histogram"
    raise errors.InvalidArgumentError(None, None, f"{what} for: {name}")


def _histogram_proto(values: np.ndarray, name: str = "HistogramSummary") -> bytes:
    """A serialized ``HistogramProto`` of ``values``, field for field TensorFlow's: min and max
    (the first of equal extremes, as ``std::min`` keeps it), count, the sum and the sum of
    squares added in order, and the non-empty buckets with each run of empty ones as one."""
    values = np.asarray(values)
    converted = values.astype(np.float64).reshape(-1)
    if values.dtype == np.float32:
        converted = _flush_denormals(converted, _FLOAT32_TINY)  # widened under DAZ: a float32 denormal is 0
    _check_finite(converted, name)
    seen = _flush_denormals(converted, _FLOAT64_TINY)  # what comparisons and sums see under DAZ
    counts = np.zeros(len(_BUCKET_LIMITS), np.float64)
    if seen.size:
        # a value of exactly DBL_MAX is past the last limit: TensorFlow's own count overflows there
        counts += np.bincount(_bucket_indices(seen), minlength=len(_BUCKET_LIMITS) + 1)[:len(_BUCKET_LIMITS)]
        low, high = float(converted[np.argmin(seen)]), float(converted[np.argmax(seen)])
    else:
        low, high = _DOUBLE_MAX, -_DOUBLE_MAX
    with np.errstate(over="ignore"):
        squares = seen * seen
    squares[squares < _FLOAT64_TINY] = 0.0  # FTZ: a denormal square is zero
    out = [double_field(1, low), double_field(2, high), double_field(3, float(seen.size)),
           double_field(4, _sequential_sum(seen)), double_field(5, _sequential_sum(squares))]
    # every non-empty bucket, and of each run of empty buckets only its last limit (count 0),
    # as TensorFlow's EncodeToProto collapses them
    empty = counts <= 0
    keep = ~empty | np.append(~empty[1:], True)
    out.append(length_delimited(6, _BUCKET_LIMITS[keep].astype("<f8").tobytes()))
    out.append(length_delimited(7, counts[keep].astype("<f8").tobytes()))
    return b"".join(out)


def _text(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


@register_kernel("ScalarSummary", host_only=True)
def _scalar_summary(k: context.KernelContext, step: context.StepContext, value: Any) -> Any:
    value = k.backend.to_numpy(value)
    if value.shape != ():
        raise errors.InvalidArgumentError(None, None, f"{k.name}: a scalar summary needs a scalar, got shape "
                                          f"{list(value.shape)}")
    return np.array(scalar_summary(k.attrs["tag"], float(value)), dtype=object)


def scalar_summary(tag: Any, value: float) -> bytes:
    """A serialized ``Summary`` holding one ``simple_value`` (what ``tf.summary.scalar`` makes)."""
    # simple_value is a member of a oneof: encoded even when it is 0.0
    entry = length_delimited(1, _text(tag)) + varint(2 << 3 | 5) + struct.pack("<f", value)
    return length_delimited(1, entry)


@register_kernel("HistogramSummary", host_only=True)
def _histogram_summary(k: context.KernelContext, step: context.StepContext, values: Any) -> Any:
    histogram = _histogram_proto(k.backend.to_numpy(values), k.name)
    entry = length_delimited(1, _text(k.attrs["tag"])) + length_delimited(5, histogram)
    return np.array(length_delimited(1, entry), dtype=object)


def _tags(summary: bytes) -> list[bytes]:
    """The tag of each Value of a serialized Summary (for the duplicate check of MergeSummary)."""
    return [tag for value in fields_of(summary, 1) for tag in fields_of(value, 1)[:1]]


def scalar_values(summary: bytes) -> list[tuple[str, float]]:
    """The (tag, simple_value) of each scalar Value of a serialized Summary; other values,
    and bytes that are not a Summary, give nothing."""
    found = []
    try:
        for value in fields_of(summary, 1):
            tags = fields_of(value, 1)
            numbers = _fixed32_fields(value, 2)
            if tags and numbers:
                found.append((tags[-1].decode("utf-8", "replace"), numbers[-1]))
    except (IndexError, ValueError, struct.error):
        return []
    return found


def _walk(message: bytes) -> Iterator[tuple[int, int, int, int]]:
    """(field, wire type, start, end) of each field of a serialized message, in order."""
    position = 0
    while position < len(message):
        key, position = _read_varint(message, position)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, end = _read_varint(message, position)
        elif wire == 1:
            end = position + 8
        elif wire == 2:
            length, position = _read_varint(message, position)
            end = position + length
        elif wire == 5:
            end = position + 4
        else:
            raise ValueError(f"field {field} has wire type {wire}, which a Summary or Event does not use")
        if end > len(message):
            raise IndexError(f"field {field} runs past the end of the message")
        yield field, wire, position, end
        position = end


def fields_of(message: bytes, wanted: int) -> list[bytes]:
    """The length-delimited fields numbered ``wanted`` of a serialized message (a Summary's
    values, an Event's summary), other fields skipped."""
    return [message[start:end] for field, wire, start, end in _walk(message) if field == wanted and wire == 2]


def _fixed32_fields(message: bytes, wanted: int) -> list[float]:
    return [struct.unpack_from("<f", message, start)[0] for field, wire, start, _ in _walk(message)
            if field == wanted and wire == 5]


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, position


@register_kernel("MergeSummary", host_only=True)
def _merge_summary(k: context.KernelContext, step: context.StepContext, *summaries: Any) -> Any:
    seen: set[bytes] = set()
    parts = []
    for summary in summaries:
        data = _text(np.asarray(summary)[()])
        for tag in _tags(data):
            if tag in seen:
                raise errors.InvalidArgumentError(None, None, f"Duplicate tag {tag.decode()} found in summary inputs")
            seen.add(tag)
        parts.append(data)
    return np.array(b"".join(parts), dtype=object)
