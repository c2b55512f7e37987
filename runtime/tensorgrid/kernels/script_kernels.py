"""The kernel of ``tf.py_func`` / ``tf.numpy_function``: call the op's Python function on numpy arrays.

The function is looked up by the op's token in this process's registry
(``framework/python_callables.py``). Exceptions it raises become TensorFlow's error
classes, as TF's ``PyFunc`` kernel maps them: ValueError and TypeError
InvalidArgumentError, StopIteration OutOfRangeError, MemoryError ResourceExhaustedError,
NotImplementedError UnimplementedError, an ``OpError`` itself, anything else
UnknownError. Returned values are converted as TF converts them (``np.asarray``; str
and bytes to string tensors) and must already have the op's output dtypes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.framework import python_callables
from tensorgrid.kernels import context
from tensorgrid.kernels.registry import register_kernel

_ERROR_CLASSES: list[tuple[type[BaseException], type[errors.OpError]]] = [
    (ValueError, errors.InvalidArgumentError),
    (TypeError, errors.InvalidArgumentError),
    (StopIteration, errors.OutOfRangeError),
    (MemoryError, errors.ResourceExhaustedError),
    (NotImplementedError, errors.UnimplementedError),
]


def _error_of(k: context.KernelContext, exc: Exception) -> errors.OpError:
    if isinstance(exc, errors.OpError):
        return exc
    error_class = next((cls for kind, cls in _ERROR_CLASSES if isinstance(exc, kind)), errors.UnknownError)
    return error_class(None, None, f"{type(exc).__name__}: {exc} (in the Python function of {k.op_type} op {k.name})")


def _dtype_name(array: np.ndarray) -> str:
    if array.dtype.kind in "USO":
        return "string"
    try:
        return dtypes.as_dtype(array.dtype).name
    except (TypeError, ValueError, KeyError):
        return str(array.dtype)


def _as_string_array(value: Any) -> np.ndarray:
    array = np.asarray(value, dtype=object)
    encode = np.vectorize(lambda v: v.encode() if isinstance(v, str) else v, otypes=[object])
    return encode(array) if array.size else array


def _output(k: context.KernelContext, index: int, value: Any) -> np.ndarray:
    expected = dtypes.as_dtype(k.output_dtypes[index])
    array = np.asarray(value)
    if expected == dtypes.string and array.dtype.kind in "USO":
        return _as_string_array(value)
    if array.dtype != np.dtype(k.output_dtypes[index]):
        raise errors.InvalidArgumentError(
            None, None, f"{index}-th value returned by the Python function of {k.op_type} op {k.name} is "
            f"{_dtype_name(array)}, but expects {expected.name}")
    return array


@register_kernel("PyFunc", "PyFuncStateless", host_only=True, forwards_input=True)
def _py_func(k: context.KernelContext, step: context.StepContext, *inputs: Any) -> Any:
    reason = python_callables.not_runnable_here(k.op_type, k.name, k.attrs, "this task")
    if reason is not None:
        raise errors.InvalidArgumentError(None, None, reason)
    func = python_callables.lookup(k.attrs["token"])
    try:
        result = func(*[np.asarray(x) for x in inputs])
    except Exception as exc:  # every exception of user code becomes one of TF's error classes
        raise _error_of(k, exc) from exc
    values = [] if result is None else list(result) if isinstance(result, (list, tuple)) else [result]
    if len(values) != len(k.output_dtypes):
        raise errors.InvalidArgumentError(
            None, None, f"the Python function of {k.op_type} op {k.name} returns {len(values)} values, but "
            f"expects to see {len(k.output_dtypes)} values")
    outputs = [_output(k, i, v) for i, v in enumerate(values)]
    if not outputs:
        return None
    return outputs[0] if len(outputs) == 1 else tuple(outputs)
