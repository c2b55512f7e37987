"""``tf.compat``: the string helpers TF1 programs call (``as_bytes``, ``as_str``, ``as_text``),
and ``tf.compat.v1``, which is ``tensorgrid`` itself (``compat/v1.py``).

Most TF1 code today is written ``import tensorflow.compat.v1 as tf`` followed by
``tf.disable_v2_behavior()``; with ``import tensorgrid.compat.v1 as tf`` the rest runs
unchanged. There is no ``tf.compat.v2``: tensorgrid implements the TF1 API only.
"""

from __future__ import annotations

import os
from typing import Any, Union

from tensorgrid.compat import v1


def as_bytes(bytes_or_text: Union[bytes, bytearray, str], encoding: str = "utf-8") -> bytes:
    """``bytes`` as they are, text encoded; anything else is a TypeError, as in TensorFlow."""
    if isinstance(bytes_or_text, bytearray):
        return bytes(bytes_or_text)
    if isinstance(bytes_or_text, str):
        return bytes_or_text.encode(encoding)
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


def as_text(bytes_or_text: Union[bytes, str], encoding: str = "utf-8") -> str:
    """Text as it is, ``bytes`` decoded; anything else is a TypeError, as in TensorFlow."""
    if isinstance(bytes_or_text, str):
        return bytes_or_text
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text.decode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


as_str = as_text


def as_str_any(value: Any, encoding: str = "utf-8") -> str:
    """``as_str`` of bytes, ``str()`` of anything else."""
    return as_str(value, encoding) if isinstance(value, bytes) else str(value)


def path_to_str(path: Any) -> Any:
    """The string of an ``os.PathLike`` (``pathlib.Path``); anything else as it is."""
    return os.fspath(path) if isinstance(path, os.PathLike) else path


__all__ = ["as_bytes", "as_str", "as_str_any", "as_text", "path_to_str", "v1"]
