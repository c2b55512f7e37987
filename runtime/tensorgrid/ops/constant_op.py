"""Constants: ``tf.constant`` and the conversion of Python and numpy values to a ``Const``
tensor (``tf.convert_to_tensor`` of a number, a nested list of numbers or text, a numpy array, a
``range``), with TensorFlow's dtype rules (Python floats become float32, ints int32). Kept apart
from ``array_ops``, which packs a list holding tensors with ``tf.stack`` on top of this.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_conversion
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import op_util

op_registry.register_op("Const")


def as_string_array(array: np.ndarray) -> np.ndarray:
    """Text as TensorFlow holds it: an object array of bytes (str encoded as UTF-8)."""
    items = [v.encode() if isinstance(v, str) else bytes(v) for v in array.reshape(-1).tolist()]
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out.reshape(array.shape)


def _dimensions_as_ints(value: Any) -> Any:
    """A (nested) list's ``Dimension``s as Python ints, as TF converts a known dimension."""
    if isinstance(value, (list, tuple)):
        return [_dimensions_as_ints(v) for v in value]
    if isinstance(value, tensor_shape.Dimension):
        if value.value is None:
            raise ValueError(f"Cannot convert an unknown Dimension to a Tensor: {value!r}")
        return value.value
    return value


def _as_numpy(value: Any, dtype: Optional[dtypes.DType]) -> np.ndarray:
    value = _dimensions_as_ints(value)
    if isinstance(value, (str, bytes)) or np.asarray(value).dtype.kind in "US":
        if dtype is not None and dtype.base_dtype != dtypes.string:
            raise TypeError(f"Expected {dtype.base_dtype.name}, got {value!r}: text makes a string constant")
        # An object array keeps each bytes value whole: numpy's "S" arrays drop trailing NUL bytes.
        return as_string_array(value if isinstance(value, np.ndarray) else np.asarray(value, dtype=object))
    if dtype is not None:
        wanted = dtype.base_dtype.as_numpy_dtype
        array = np.asarray(value)
        if array.dtype.kind in "fc" and np.dtype(wanted).kind in "iub" and array.size and not np.all(
            np.isfinite(array) & (array == np.round(array))
        ):
            raise TypeError(
                f"Expected {dtype.base_dtype.name}, got {value!r} of type {array.dtype.name} instead: "
                "the values are not integers"
            )
        if array.dtype == object:
            raise TypeError(f"Cannot convert {value!r} to a constant of dtype {dtype.base_dtype.name}")
        return np.array(array, dtype=wanted)
    array = np.asarray(value)
    if array.dtype == object and not all(isinstance(v, (str, bytes)) for v in array.reshape(-1).tolist()):
        # numpy keeps anything in an object array; only text is a tensor's value (tf.string).
        raise TypeError(
            f"Failed to convert elements of {value!r} to Tensor: elements must be numbers, booleans, "
            "text or tensors (a list of tensors is packed by tf.convert_to_tensor and tf.stack)"
        )
    if array.dtype == np.float64 and not isinstance(value, np.ndarray) and not isinstance(value, np.generic):
        array = array.astype(np.float32)  # Python floats become float32, as in TF
    elif array.dtype == np.int64 and not isinstance(value, (np.ndarray, np.generic)):
        array = array.astype(np.int32)  # Python ints become int32, as in TF
    dtypes.as_dtype(array.dtype)  # raises a clear TypeError for unsupported element types
    return np.array(array)


def constant(value: Any, dtype: Any = None, shape: Any = None, name: str = "Const",
             verify_shape: bool = False) -> graph_lib.Tensor:
    """A tensor with a fixed value (``tf.constant``); ``shape`` broadcasts a scalar or list."""
    wanted = dtypes.as_dtype(dtype) if dtype is not None else None
    if _holds_range(value):
        # TensorFlow's graph-mode tf.constant refuses a range (TF 1.x took it); convert_to_tensor takes it.
        raise ValueError(
            f"tf.constant does not take a Python range, got {value!r}: pass list(...) of it, "
            "or use tf.range or tf.convert_to_tensor"
        )
    if holds_tensors(value):
        raise TypeError(
            f"tf.constant expected any non-tensor type, but got a tensor instead in {value!r}: "
            "tf.stack (or tf.convert_to_tensor) packs a list of tensors"
        )
    array = _as_numpy(value, wanted)
    if shape is not None:
        dims = tensor_shape.as_shape(shape).as_list()
        if None in dims:
            raise ValueError(f"A constant's shape must be fully defined, got {shape!r}")
        shape = tuple(int(d) for d in dims if d is not None)
        if array.shape != shape:
            if verify_shape:
                raise TypeError(f"Expected Tensor's shape: {shape}, got {array.shape}.")
            if array.size == 1:
                array = np.full(shape, array.reshape(()), dtype=array.dtype)
            elif array.size == int(np.prod(shape)):
                array = array.reshape(shape)
            else:
                raise ValueError(
                    f"Cannot make a constant of shape {shape} from {array.size} values {value!r}"
                )
    dt = dtypes.as_dtype(array.dtype)
    return op_util.make_tensor("Const", [], dt, array.shape, name, {"value": array, "dtype": dt.name})


def constant_conversion(value: Any, dtype: Any = None, name: Optional[str] = None, as_ref: bool = False) -> graph_lib.Tensor:
    return constant(value, dtype=dtype, name=name or "Const")


for _base in (np.ndarray, np.generic, list, tuple, float, int, bool, str, bytes):
    tensor_conversion.register_tensor_conversion_function(_base, constant_conversion)


def _range_conversion(value: range, dtype: Any = None, name: Optional[str] = None, as_ref: bool = False) -> graph_lib.Tensor:
    if dtype is None and not value:
        dtype = dtypes.int32  # a range holds integers even when empty (an empty list is float32)
    return constant(list(value), dtype=dtype, name=name or "Const")


tensor_conversion.register_tensor_conversion_function(range, _range_conversion)

_PLAIN_VALUES = (np.ndarray, np.generic, int, float, complex, bool, str, bytes, type(None), tensor_shape.Dimension)


def _holds_range(value: Any) -> bool:
    """Whether a value is, or a (nested) list or tuple holds, a Python ``range``."""
    if isinstance(value, (list, tuple)):
        return any(_holds_range(v) for v in value)
    return isinstance(value, range)


def holds_tensors(value: Any) -> bool:
    """Whether a (nested) list or tuple holds a Tensor, Variable or other non-plain value."""
    if isinstance(value, (list, tuple)):
        return any(holds_tensors(v) for v in value)
    return not isinstance(value, _PLAIN_VALUES)
