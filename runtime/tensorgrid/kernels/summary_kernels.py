"""Kernels of the summary ops: values into TensorBoard's ``Summary`` protocol buffer.

A summary op outputs a serialized ``tensorflow.Summary`` (a string scalar), byte for byte
what TensorFlow's ops produce, so event files written from it read back with
TensorBoard's and TensorFlow's readers. The few fields needed are encoded here by hand
(protobuf's wire format), which keeps TensorFlow's protos out of the runtime.
"""

from __future__ import annotations

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


def _default_bucket_limits() -> np.ndarray:
    """TensorFlow's histogram buckets: +-1e-12 growing by 10% up to 1e20, zero, +-DBL_MAX."""
    positive = []
    v = 1.0e-12
    while v < 1.0e20:
        positive.append(v)
        v *= 1.1
    positive.append(_DOUBLE_MAX)
    return np.array([-p for p in reversed(positive)] + [0.0] + positive)


_BUCKET_LIMITS = _default_bucket_limits()


def _sequential_sum(values: np.ndarray) -> float:
    """The sum added in order, one value at a time (as TensorFlow's histogram does): the
    same last bits, where numpy's pairwise sum may differ."""
    return float(np.cumsum(values)[-1]) if values.size else 0.0


def _histogram_proto(values: np.ndarray) -> bytes:
    values = values.astype(np.float64).reshape(-1)
    if values.size and not np.all(np.isfinite(values)):
        raise errors.InvalidArgumentError(None, None, "Nan in summary histogram: the values must be finite")
    counts = np.bincount(np.searchsorted(_BUCKET_LIMITS, values, side="right"), minlength=len(_BUCKET_LIMITS))
    low = float(values.min()) if values.size else _DOUBLE_MAX
    high = float(values.max()) if values.size else -_DOUBLE_MAX
    out = [double_field(1, low), double_field(2, high), double_field(3, float(values.size)),
           double_field(4, _sequential_sum(values)), double_field(5, _sequential_sum(values * values))]
    limits: list[float] = []
    buckets: list[float] = []
    i = 0
    while i < len(_BUCKET_LIMITS):  # runs of empty buckets collapse into one, as TensorFlow encodes them
        end, count = _BUCKET_LIMITS[i], counts[i]
        i += 1
        if count <= 0:
            while i < len(_BUCKET_LIMITS) and counts[i] <= 0:
                end, count = _BUCKET_LIMITS[i], counts[i]
                i += 1
        limits.append(float(end))
        buckets.append(float(count))
    out.append(length_delimited(6, struct.pack(f"<{len(limits)}d", *limits)))
    out.append(length_delimited(7, struct.pack(f"<{len(buckets)}d", *buckets)))
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
    histogram = _histogram_proto(k.backend.to_numpy(values))
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
