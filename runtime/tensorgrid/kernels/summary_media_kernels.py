"""Kernels of the image, audio, text and tensor summaries: pixels into PNG, samples into WAV,
strings into a tensor-valued ``Summary`` with the text plugin's metadata, any tensor into a
TensorProto with the metadata given (``tensor_summary``).

TensorBoard shows these as TensorFlow's own ops write them: the Summary's fields,
tags (``name/image``, ``name/image/0``, ...), the float-to-pixel and float-to-sample
conversions and the WAV container are TensorFlow's (``summary_image_op.cc``,
``summary_audio_op.cc``, ``wav_io.cc``). The PNG stream is encoded here with zlib and no
row filters: the pixels are the same, its compressed bytes differ from libpng's.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels.registry import register_kernel
from tensorgrid.kernels.summary_kernels import length_delimited, varint

_BAD_COLOR = np.array([255, 0, 0, 255], dtype=np.uint8)  # TensorFlow's default for non-finite pixels
_ZERO_THRESHOLD = 1e-6
_PNG_COLOR_TYPES = {1: 0, 3: 2, 4: 6}  # channels -> PNG color type: gray, RGB, RGBA
_TEXT_PLUGIN_METADATA = length_delimited(1, length_delimited(1, b"text"))  # SummaryMetadata.plugin_data
_DT_STRING = 7


def varint_field(field: int, value: int) -> bytes:
    """An integer field; empty for 0, which proto3 leaves out."""
    return varint(field << 3) + varint(value) if value else b""


def _tags(base: str, count: int, max_outputs: int, kind: str) -> list[str]:
    """``base/image`` when at most one output is asked for, else ``base/image/0``, ... as TF."""
    return [f"{base}/{kind}" if max_outputs == 1 else f"{base}/{kind}/{i}" for i in range(count)]


def _summary(values: list[bytes]) -> Any:
    return np.array(b"".join(length_delimited(1, value) for value in values), dtype=object)


# ------------------------------------------------------------------------------- images

def float_image_to_uint8(image: np.ndarray) -> np.ndarray:
    """One [height, width, channels] float image as TensorFlow draws it: all >= 0 scaled so
    the maximum is 255, otherwise scaled so the largest magnitude is 127 around 128;
    pixels with a non-finite channel painted in the bad color."""
    pixels = image.reshape(-1, image.shape[-1]).astype(np.float32)
    finite = np.all(np.isfinite(pixels), axis=1)
    good = pixels[finite]
    low = float(good.min()) if good.size else np.inf
    high = float(good.max()) if good.size else -np.inf
    if low < 0:
        magnitude = max(abs(low), abs(high))
        scale, offset = (0.0 if magnitude < _ZERO_THRESHOLD else 127.0 / magnitude), 128.0
    else:
        scale, offset = (0.0 if high < _ZERO_THRESHOLD else 255.0 / high), 0.0
    out = np.empty(pixels.shape, dtype=np.uint8)
    with np.errstate(invalid="ignore"):
        out[finite] = (good * np.float32(scale) + np.float32(offset)).astype(np.uint8)  # truncates, as Eigen's cast
    out[~finite] = _BAD_COLOR[: pixels.shape[1]]
    return out.reshape(image.shape)


def encode_png(image: np.ndarray) -> bytes:
    """A [height, width, channels] uint8 image as an 8-bit PNG (no filters, zlib's default level)."""
    height, width, channels = image.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, _PNG_COLOR_TYPES[channels], 0, 0, 0)
    rows = np.concatenate([np.zeros((height, 1), np.uint8), image.reshape(height, width * channels)], axis=1)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes()))
            + chunk(b"IEND", b""))


@register_kernel("ImageSummary", host_only=True)
def _image_summary(k: context.KernelContext, step: context.StepContext, images: Any) -> Any:
    images = k.backend.to_numpy(images)
    if images.ndim != 4 or images.shape[-1] not in _PNG_COLOR_TYPES:
        raise errors.InvalidArgumentError(None, None, f"{k.name}: the images must be 4-D [batch, height, width, "
                                          f"channels] with 1, 3 or 4 channels, got shape {list(images.shape)}")
    if images.dtype != np.uint8 and images.dtype.kind != "f":
        raise errors.InvalidArgumentError(None, None, f"{k.name}: images must be uint8 or floating point, "
                                          f"got {images.dtype}")
    _, height, width, channels = images.shape
    if height * width == 0 or height >= 2 ** 29 or width >= 2 ** 29:
        raise errors.InvalidArgumentError(None, None, f"{k.name}: an image of {height} x {width} pixels cannot be "
                                          "encoded: both sides must be positive and below 2^29")
    max_images = int(k.attrs["max_images"])
    count = min(max_images, images.shape[0])
    values = []
    for tag, image in zip(_tags(k.attrs["tag"], count, max_images, "image"), images[:count]):
        pixels = image if image.dtype == np.uint8 else float_image_to_uint8(image)
        proto = (varint_field(1, height) + varint_field(2, width) + varint_field(3, channels)
                 + length_delimited(4, encode_png(pixels)))
        values.append(length_delimited(1, tag.encode()) + length_delimited(4, proto))
    return _summary(values)


# -------------------------------------------------------------------------------- audio

def encode_wav(samples: np.ndarray, sample_rate: int) -> bytes:
    """[frames, channels] float samples in [-1, 1] as 16-bit PCM WAV (TensorFlow's rounding
    and clamping: round(x * 32768), within int16)."""
    frames, channels = samples.shape
    scaled = samples.astype(np.float32) * np.float32(1 << 15)
    rounded = np.sign(scaled) * np.floor(np.abs(scaled) + np.float32(0.5))  # roundf: halves away from zero
    pcm = np.clip(rounded, -(1 << 15), (1 << 15) - 1).astype("<i2")
    data: bytes = pcm.tobytes()
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE"
            + b"fmt " + struct.pack("<IHHIIHH", 16, 1, channels, sample_rate, sample_rate * channels * 2,
                                    channels * 2, 16)
            + b"data" + struct.pack("<I", len(data)) + data)


@register_kernel("AudioSummaryV2", host_only=True)
def _audio_summary(k: context.KernelContext, step: context.StepContext, audio: Any, sample_rate: Any) -> Any:
    audio = k.backend.to_numpy(audio)
    rate = float(k.backend.to_numpy(sample_rate))
    if not rate > 0:
        raise errors.InvalidArgumentError(None, None, f"{k.name}: sample_rate must be > 0, got {rate}")
    if audio.ndim not in (2, 3):
        raise errors.InvalidArgumentError(None, None, f"{k.name}: the audio must be 3-D [batch, frames, channels] "
                                          f"or 2-D [batch, frames], got shape {list(audio.shape)}")
    if audio.ndim == 2:
        audio = audio[:, :, np.newaxis]
    if not np.all(np.isfinite(audio)):
        raise errors.InvalidArgumentError(None, None, f"{k.name}: the audio samples must be finite")
    max_outputs = int(k.attrs["max_outputs"])
    count = min(max_outputs, audio.shape[0])
    frames, channels = audio.shape[1], audio.shape[2]
    values = []
    for tag, clip in zip(_tags(k.attrs["tag"], count, max_outputs, "audio"), audio[:count]):
        proto = (varint(1 << 3 | 5) + struct.pack("<f", rate) + varint_field(2, channels) + varint_field(3, frames)
                 + length_delimited(4, encode_wav(clip, int(rate))) + length_delimited(5, b"audio/wav"))
        values.append(length_delimited(1, tag.encode()) + length_delimited(6, proto))
    return _summary(values)


# --------------------------------------------------------------------------------- text

def _text_bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _tensor_proto(array: np.ndarray) -> bytes:
    """TensorFlow's TensorProto of ``array`` as its TensorSummaryV2 writes it: dtype, shape, then the
    bytes of a numeric tensor (``tensor_content``, little-endian) or each string (``string_val``)."""
    shape = b"".join(length_delimited(2, varint_field(1, size)) for size in array.shape)
    if array.dtype == object:
        return (varint_field(1, _DT_STRING) + length_delimited(2, shape)
                + b"".join(length_delimited(8, _text_bytes(s)) for s in array.reshape(-1)))
    content = array.astype(array.dtype.newbyteorder("<")).tobytes()
    return (varint_field(1, dtypes.as_dtype(array.dtype).enum) + length_delimited(2, shape)
            + (length_delimited(4, content) if content else b""))


@register_kernel("TensorSummaryV2", host_only=True)
def _tensor_summary(k: context.KernelContext, step: context.StepContext, tensor: Any) -> Any:
    metadata = k.attrs["metadata"]
    if k.attrs["display_name"]:
        metadata += length_delimited(2, _text_bytes(k.attrs["display_name"]))
    if k.attrs["summary_description"]:
        metadata += length_delimited(3, _text_bytes(k.attrs["summary_description"]))
    value = (length_delimited(1, _text_bytes(k.attrs["tag"])) + length_delimited(8, _tensor_proto(np.asarray(tensor)))
             + length_delimited(9, metadata))
    return _summary([value])


@register_kernel("TextSummary", host_only=True)
def _text_summary(k: context.KernelContext, step: context.StepContext, text: Any) -> Any:
    strings = np.asarray(text, dtype=object)
    shape = b"".join(length_delimited(2, varint_field(1, size)) for size in strings.shape)
    tensor = (varint_field(1, _DT_STRING) + length_delimited(2, shape)
              + b"".join(length_delimited(8, _text_bytes(s)) for s in strings.reshape(-1)))
    value = length_delimited(1, _text_bytes(k.attrs["tag"])) + length_delimited(8, tensor) + length_delimited(
        9, _TEXT_PLUGIN_METADATA)
    return _summary([value])
