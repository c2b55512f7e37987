"""Element types of tensors (``tf.float32`` and friends) and their reference variants.

A ``DType`` names a numpy dtype; ``float32_ref`` is the type of a variable's own
output, which assign ops update in place (TF1 reference semantics).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class DType:
    """One element type; compares equal to its name and numpy dtype for convenience."""

    __slots__ = ("name", "as_numpy_dtype", "_is_ref", "enum")

    def __init__(self, name: str, numpy_dtype: Any, is_ref: bool, enum: int) -> None:
        self.name = name
        self.as_numpy_dtype = numpy_dtype
        self._is_ref = is_ref
        self.enum = enum

    @property
    def is_ref_dtype(self) -> bool:
        return self._is_ref

    @property
    def base_dtype(self) -> "DType":
        return _BASE_BY_REF[self] if self._is_ref else self

    @property
    def real_dtype(self) -> "DType":
        return self.base_dtype

    @property
    def _as_ref(self) -> "DType":
        return self if self._is_ref else _REF_BY_BASE[self]

    @property
    def is_floating(self) -> bool:
        return np.issubdtype(self.as_numpy_dtype, np.floating)

    @property
    def is_integer(self) -> bool:
        return np.issubdtype(self.as_numpy_dtype, np.integer)

    @property
    def is_bool(self) -> bool:
        return self.base_dtype is bool_

    @property
    def is_numpy_compatible(self) -> bool:
        return True

    @property
    def size(self) -> int:
        """Bytes per element (8 for string and resource: the size of a reference)."""
        return int(np.dtype(self.as_numpy_dtype).itemsize)

    @property
    def min(self) -> Any:
        info = np.finfo if self.is_floating else np.iinfo
        return info(self.as_numpy_dtype).min

    @property
    def max(self) -> Any:
        info = np.finfo if self.is_floating else np.iinfo
        return info(self.as_numpy_dtype).max

    def __repr__(self) -> str:
        return f"tf.{self.name}"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DType):
            return self is other
        try:
            return as_dtype(other) is self
        except TypeError:
            return False

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.name)

    def __reduce__(self) -> tuple[Any, ...]:
        return (as_dtype, (self.name,))


float16 = DType("float16", np.float16, False, 19)
float32 = DType("float32", np.float32, False, 1)
float64 = DType("float64", np.float64, False, 2)
int32 = DType("int32", np.int32, False, 3)
int64 = DType("int64", np.int64, False, 9)
int8 = DType("int8", np.int8, False, 6)
int16 = DType("int16", np.int16, False, 5)
uint8 = DType("uint8", np.uint8, False, 4)
uint16 = DType("uint16", np.uint16, False, 17)
uint32 = DType("uint32", np.uint32, False, 22)
uint64 = DType("uint64", np.uint64, False, 23)
bool_ = DType("bool", np.bool_, False, 10)
string = DType("string", np.object_, False, 7)
"""Python str / bytes objects; used for names (report_uninitialized_variables) and queue payloads."""
resource = DType("resource", np.object_, False, 20)
"""A handle to a resource (queue, accumulator) in a task's resource manager."""
half = float16
double = float64

_NUMERIC = (float16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool_)
_BASES = (*_NUMERIC, string, resource)
_REF_BY_BASE = {b: DType(b.name + "_ref", b.as_numpy_dtype, True, b.enum + 100) for b in _BASES}
_BASE_BY_REF = {r: b for b, r in _REF_BY_BASE.items()}
float32_ref = _REF_BY_BASE[float32]
float64_ref = _REF_BY_BASE[float64]
int32_ref = _REF_BY_BASE[int32]
int64_ref = _REF_BY_BASE[int64]
bool_ref = _REF_BY_BASE[bool_]

_BY_NAME: dict[str, DType] = {d.name: d for d in (*_BASES, *_REF_BY_BASE.values())}
_BY_NAME.update({"half": float16, "double": float64, "float": float32})
_BY_ENUM: dict[int, DType] = {d.enum: d for d in (*_BASES, *_REF_BY_BASE.values())}
_BY_NUMPY: dict[Any, DType] = {np.dtype(b.as_numpy_dtype): b for b in _NUMERIC}
_BY_NUMPY[np.dtype(np.object_)] = string

SUPPORTED = ", ".join(b.name for b in _BASES)


def as_dtype(type_value: Any) -> DType:
    """Converts a DType, name, enum, numpy dtype or python type into a ``DType``."""
    if isinstance(type_value, DType):
        return type_value
    if isinstance(type_value, np.dtype):  # the common case (every tensor's dtype): one lookup
        found = _BY_NUMPY.get(type_value)
        if found is not None:
            return found
    if isinstance(type_value, str):
        if type_value in _BY_NAME:
            return _BY_NAME[type_value]
        raise TypeError(f"Unknown dtype name {type_value!r}; valid dtypes are: {SUPPORTED}")
    if isinstance(type_value, int) and not isinstance(type_value, bool) and type_value in _BY_ENUM:
        return _BY_ENUM[type_value]
    if type_value is float:
        return float32
    if type_value is int:
        return int32
    if type_value is bool:
        return bool_
    if type_value in (str, bytes):
        return string
    try:
        np_dtype = np.dtype(type_value)
    except TypeError:
        np_dtype = None
    if np_dtype is not None and np_dtype in _BY_NUMPY:
        return _BY_NUMPY[np_dtype]
    raise TypeError(f"Cannot convert {type_value!r} to a tensorgrid dtype; valid dtypes are: {SUPPORTED}")
