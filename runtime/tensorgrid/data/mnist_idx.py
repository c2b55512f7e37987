"""The IDX file format of MNIST (and Fashion-MNIST, EMNIST, KMNIST), read and written.

An IDX file is a 4-byte magic number (two zero bytes, a type code, the number of
dimensions), one big-endian uint32 per dimension, then the values in row-major,
big-endian order. MNIST's images are ``idx3-ubyte`` (N, 28, 28) and its labels
``idx1-ubyte`` (N,), usually gzip-compressed. Readers check the magic number, the
dimensions and the file size, and name the file in every error, so a truncated
download fails at load time rather than as a bad shape deep inside a model.
"""

from __future__ import annotations

import gzip
import os
import pathlib
import zlib
from typing import Union

import numpy as np

from tensorgrid.data import digits

PathLike = Union[str, "os.PathLike[str]"]

_GZIP_MAGIC = b"\x1f\x8b"
# IDX type code -> big-endian numpy dtype, as in the format's description on yann.lecun.com.
_TYPE_CODES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CODE_OF_KIND = {(dt.kind, dt.itemsize): code for code, dt in _TYPE_CODES.items()}
_MNIST_CLASSES = 10
_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


class IdxFormatError(ValueError):
    """A file is not a well-formed IDX file (the message names the file and the problem)."""


def _read_bytes(path: PathLike) -> bytes:
    with open(path, "rb") as stream:
        raw = stream.read()
    if not raw.startswith(_GZIP_MAGIC):
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise IdxFormatError(f"{os.fspath(path)}: corrupt or truncated gzip data ({exc})") from exc


def read_idx(path: PathLike) -> np.ndarray:
    """The array stored in an IDX file (gzip-compressed or not), in native byte order."""
    name = os.fspath(path)
    raw = _read_bytes(path)
    if len(raw) < 4:
        raise IdxFormatError(f"{name}: {len(raw)} bytes is too short for an IDX header (4-byte magic number)")
    if raw[0] != 0 or raw[1] != 0:
        raise IdxFormatError(
            f"{name}: bad magic number 0x{raw[:4].hex()}: an IDX file starts with two zero bytes"
        )
    code, ndim = raw[2], raw[3]
    if code not in _TYPE_CODES:
        known = ", ".join(f"0x{c:02X} ({dt.name})" for c, dt in _TYPE_CODES.items())
        raise IdxFormatError(f"{name}: unknown IDX type code 0x{code:02X} in magic number; valid codes: {known}")
    header_size = 4 + 4 * ndim
    if len(raw) < header_size:
        raise IdxFormatError(f"{name}: truncated header: {ndim} dimensions need {header_size} bytes, file has {len(raw)}")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = _TYPE_CODES[code]
    expected = header_size + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        problem = "truncated" if len(raw) < expected else "has trailing bytes"
        raise IdxFormatError(
            f"{name}: {problem}: dimensions {shape} of {dtype.name} need {expected} bytes "
            f"(header included), file has {len(raw)}"
        )
    values = np.frombuffer(raw, dtype=dtype, offset=header_size).reshape(shape)
    return values.astype(dtype.newbyteorder("="))


def write_idx(path: PathLike, array: np.ndarray) -> None:
    """Writes ``array`` as an IDX file, gzip-compressed when ``path`` ends in ``.gz``."""
    array = np.asarray(array)
    code = _CODE_OF_KIND.get((array.dtype.kind, array.dtype.itemsize))
    if code is None:
        valid = ", ".join(dt.newbyteorder("=").name for dt in _TYPE_CODES.values())
        raise TypeError(f"IDX cannot store {array.dtype.name} values (writing {os.fspath(path)}); valid: {valid}")
    if array.ndim > 255 or any(d > 0xFFFFFFFF for d in array.shape):
        raise ValueError(f"IDX cannot store shape {array.shape} (writing {os.fspath(path)})")
    header = bytes([0, 0, code, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    payload = header + np.ascontiguousarray(array, dtype=_TYPE_CODES[code]).tobytes()
    if os.fspath(path).endswith(".gz"):
        payload = gzip.compress(payload)
    with open(path, "wb") as stream:
        stream.write(payload)


def read_mnist_images(path: PathLike) -> np.ndarray:
    """uint8 images (N, rows, cols) from an ``idx3-ubyte`` file."""
    images = read_idx(path)
    if images.dtype != np.uint8 or images.ndim != 3:
        raise IdxFormatError(
            f"{os.fspath(path)}: expected idx3-ubyte images (uint8, 3 dimensions), "
            f"got {images.dtype.name} with shape {images.shape}"
        )
    return images


def read_mnist_labels(path: PathLike, num_classes: int = _MNIST_CLASSES) -> np.ndarray:
    """uint8 labels (N,) from an ``idx1-ubyte`` file, each checked to be below ``num_classes``."""
    labels = read_idx(path)
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise IdxFormatError(
            f"{os.fspath(path)}: expected idx1-ubyte labels (uint8, 1 dimension), "
            f"got {labels.dtype.name} with shape {labels.shape}"
        )
    if labels.size and int(labels.max()) >= num_classes:
        raise IdxFormatError(f"{os.fspath(path)}: label {int(labels.max())} is not below num_classes={num_classes}")
    return labels


def _find(directory: pathlib.Path, stem: str) -> pathlib.Path:
    for candidate in (directory / stem, directory / f"{stem}.gz"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{directory}: neither {stem} nor {stem}.gz exists")


def _load_split(directory: pathlib.Path, image_stem: str, label_stem: str) -> tuple[digits.Examples, tuple[int, int]]:
    image_path, label_path = _find(directory, image_stem), _find(directory, label_stem)
    images, labels = read_mnist_images(image_path), read_mnist_labels(label_path)
    if images.shape[0] != labels.shape[0]:
        raise IdxFormatError(f"{image_path} holds {images.shape[0]} images but {label_path} holds {labels.shape[0]} labels")
    flat = images.reshape(images.shape[0], -1).astype(np.float32) / np.float32(255.0)
    return digits.Examples(flat, labels.astype(np.int64)), (int(images.shape[1]), int(images.shape[2]))


def load_mnist(directory: PathLike) -> digits.TrainTestSplit:
    """MNIST from a directory of the four standard IDX files (each may end in ``.gz``).

    Images become float32 (N, rows * cols) scaled to [0, 1] and labels int64, as with
    :func:`tensorgrid.data.load_digits`. Nothing is downloaded.
    """
    directory = pathlib.Path(directory)
    train, train_shape = _load_split(directory, *_MNIST_FILES["train"])
    test, test_shape = _load_split(directory, *_MNIST_FILES["test"])
    if train_shape != test_shape:
        raise IdxFormatError(f"{directory}: train images are {train_shape} but test images are {test_shape}")
    return digits.TrainTestSplit(train=train, test=test, num_classes=_MNIST_CLASSES, image_shape=train_shape)
