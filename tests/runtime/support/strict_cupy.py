"""A strict stand-in for cupy, so that CI catches code that would break on a real GPU.

This is not a GPU and not an emulation of one: its arrays wrap numpy arrays in host
memory and its math is numpy's. What it copies from cupy is the contract that matters
for correctness on a GPU node: a device array never turns into host memory
implicitly. As with cupy:

- ``np.asarray(x)``, ``np.array(x)`` and anything else that calls ``x.__array__``
  raise ``TypeError`` with cupy's message ("Implicit conversion to a NumPy array is
  not allowed. Please use `.get()` to construct a NumPy array explicitly.");
- ``x`` exports no buffer (``memoryview(x)``, ``socket.sendall(x)`` fail) and has no
  ``__array_interface__``; ``x.data`` is a ``MemoryPointer`` (``.ptr``), not a buffer;
- numpy functions and ufuncs called on ``x`` dispatch here (``__array_function__``,
  ``__array_ufunc__``) or fail; a numpy array mixed with a device array in one call
  is a ``TypeError`` ("Unsupported type"), as cupy's kernels answer it;
- device functions return device arrays, reductions 0-d arrays, never numpy scalars;
- the explicit copies work and are counted in ``COUNTERS``: host to device
  (``asarray`` of host data, ``ndarray.set``), device to host (``get``, ``asnumpy``,
  and what cupy implements with ``get``: ``tobytes``, ``bytes()``, ``item``,
  ``tolist``, ``int()``, ``float()``, ``bool()``, ``repr``), device to host into pinned
  memory (``get(out=<pinned>)``), and pinned allocations
  (``cuda.alloc_pinned_memory``).

Only what tensorgrid's cupy backend, kernels and transport use is implemented; a
function missing here raises AttributeError naming it. Tests load it in-process
(``conftest.strict_gpu``); task processes started with ``TENSORGRID_FAKE_GPU=strict``
import it as ``cupy`` (``tests/runtime/support/strict_gpu/cupy.py``, see ``cluster_processes``). The
package itself never sees it.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from typing import Any, Callable, Iterator, Optional

import numpy as np

_IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. "
             "Please use `.get()` to construct a NumPy array explicitly.")


@dataclasses.dataclass
class Counters:
    """Copies between host and device and pinned allocations, since the last ``reset``."""

    host_to_device: int = 0
    host_to_device_bytes: int = 0
    device_to_host: int = 0
    device_to_host_bytes: int = 0
    device_to_host_pinned: int = 0
    """Of ``device_to_host``, those into pinned host memory (``get(out=<pinned>)``)."""
    pinned_allocations: int = 0
    pinned_bytes: int = 0

    def reset(self) -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, 0)


COUNTERS = Counters()
_counter_lock = threading.Lock()


def _count_h2d(nbytes: int) -> None:
    with _counter_lock:
        COUNTERS.host_to_device += 1
        COUNTERS.host_to_device_bytes += nbytes


def _count_d2h(nbytes: int, pinned: bool) -> None:
    with _counter_lock:
        COUNTERS.device_to_host += 1
        COUNTERS.device_to_host_bytes += nbytes
        COUNTERS.device_to_host_pinned += int(pinned)


# ---------------------------------------------------------------------------- device memory

class _MemoryPool:
    """``cupy.get_default_memory_pool()``: bytes of device arrays alive."""

    def __init__(self) -> None:
        self._used = 0
        self._lock = threading.Lock()

    def _track(self, host: np.ndarray) -> None:
        with self._lock:
            self._used += host.nbytes
        weakref.finalize(host, self._release, host.nbytes)

    def _release(self, nbytes: int) -> None:
        with self._lock:
            self._used -= nbytes

    def used_bytes(self) -> int:
        return self._used


_POOL = _MemoryPool()


def get_default_memory_pool() -> _MemoryPool:
    return _POOL


class MemoryPointer:
    """``ndarray.data``: where the array's memory is. Here a host address, never a buffer."""

    def __init__(self, ptr: int, device_id: int = 0) -> None:
        self.ptr = ptr
        self.device_id = device_id


# ---------------------------------------------------------------------------- arrays

def _device(host: np.ndarray) -> "ndarray":
    array = ndarray.__new__(ndarray)
    array._host = host
    return array


def _new_device(host: np.ndarray) -> "ndarray":
    """A device array owning ``host`` (fresh memory, counted in the memory pool)."""
    if host.base is None:
        _POOL._track(host)
    return _device(host)


def _check_dtype(dtype: np.dtype) -> None:
    if dtype.kind in "OSUVMm":
        raise ValueError(f"Unsupported dtype {dtype}")


def _unwrap(value: Any) -> Any:
    """A device function's argument as numpy sees it: device arrays unwrapped, host
    arrays refused (cupy kernels take no numpy arrays), sequences walked."""
    if type(value) is ndarray:
        return value._host
    if isinstance(value, np.ndarray):
        raise TypeError(f"Unsupported type {type(value)}")
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    return value


def _wrap(result: Any) -> Any:
    if isinstance(result, np.ndarray):
        return _new_device(result)
    if isinstance(result, np.generic):
        return _new_device(np.asarray(result))
    if isinstance(result, (list, tuple)):
        return type(result)(_wrap(r) for r in result)
    return result


def _call(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    out = kwargs.get("out")
    host_args = [_unwrap(a) for a in args]
    host_kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
    with np.errstate(all="ignore"):  # cupy never warns about overflow, division by zero or NaN
        result = function(*host_args, **host_kwargs)
    if type(out) is ndarray and result is out._host:
        return out
    for arg in args:  # a function that returned its input (ascontiguousarray of a contiguous array)
        if type(arg) is ndarray and result is arg._host:
            return arg
    return _wrap(result)


class ndarray:  # noqa: N801 - cupy's name
    """A device array: a numpy array that refuses to be one implicitly."""

    __slots__ = ("_host", "__weakref__")
    _host: np.ndarray

    def __init__(self, shape: Any, dtype: Any = float) -> None:
        _check_dtype(np.dtype(dtype))
        self._host = np.empty(shape, dtype)
        _POOL._track(self._host)

    # -- what cupy refuses
    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError(_IMPLICIT)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        device_ufunc = globals().get(ufunc.__name__)
        if not isinstance(device_ufunc, _Ufunc):
            return NotImplemented
        if "out" in kwargs:
            (kwargs["out"],) = kwargs["out"]
        if method == "__call__":
            return device_ufunc(*inputs, **kwargs)
        if method == "at":
            return device_ufunc.at(*inputs, **kwargs)
        return NotImplemented

    def __array_function__(self, func: Callable[..., Any], types: Any, args: Any, kwargs: Any) -> Any:
        target: Any = _THIS_MODULE
        for part in func.__module__.split(".")[1:]:
            target = getattr(target, part, None)
        device_function = getattr(target, func.__name__, None)
        if device_function is None or device_function is func:
            return NotImplemented
        if not all(issubclass(t, (ndarray, np.ndarray)) for t in types):
            return NotImplemented
        return device_function(*args, **kwargs)

    # -- explicit copies
    def get(self, stream: Any = None, order: str = "C", out: Optional[np.ndarray] = None,
            blocking: bool = True) -> np.ndarray:
        if out is not None:
            if not isinstance(out, np.ndarray):
                raise TypeError("Only numpy.ndarray can be obtained fromcupy.ndarray")
            if out.dtype != self.dtype:
                raise TypeError(f"{out.dtype} array cannot be obtained from {self.dtype} array")
            if out.shape != self.shape:
                raise ValueError(f"Shape mismatch. Expected shape: {self.shape}, actual shape: {out.shape}")
            out[...] = self._host
            _count_d2h(self.nbytes, _is_pinned(out))
            return out
        _count_d2h(self.nbytes, False)
        return np.array(self._host, order=order, copy=True)

    def set(self, arr: np.ndarray, stream: Any = None) -> None:
        if not isinstance(arr, np.ndarray):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if arr.dtype != self.dtype:
            raise TypeError(f"{arr.dtype} array cannot be set to {self.dtype} array")
        if arr.shape != self.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self.shape}, new shape: {arr.shape}")
        self._host[...] = arr
        _count_h2d(self.nbytes)

    def tobytes(self, order: str = "C") -> bytes:
        return self.get().tobytes(order)

    def __bytes__(self) -> bytes:
        return bytes(self.get())

    def item(self) -> Any:
        if self.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return self.get().item()

    def tolist(self) -> Any:
        return self.get().tolist()

    def __int__(self) -> int:
        return int(self.get())

    def __float__(self) -> float:
        return float(self.get())

    def __complex__(self) -> complex:
        return complex(self.get())

    def __bool__(self) -> bool:
        if self.size == 0:
            return False
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous. "
                             "Use a.any() or a.all()")
        return bool(self.get())

    def __repr__(self) -> str:
        return repr(self.get())

    def __str__(self) -> str:
        return str(self.get())

    # -- attributes
    @property
    def shape(self) -> tuple[int, ...]:
        return self._host.shape

    @property
    def dtype(self) -> np.dtype:
        return self._host.dtype

    @property
    def ndim(self) -> int:
        return self._host.ndim

    @property
    def size(self) -> int:
        return self._host.size

    @property
    def nbytes(self) -> int:
        return self._host.nbytes

    @property
    def itemsize(self) -> int:
        return self._host.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        return self._host.strides

    @property
    def flags(self) -> Any:
        return self._host.flags

    @property
    def T(self) -> "ndarray":  # noqa: N802 - numpy's name
        return _device(self._host.T)

    @property
    def data(self) -> MemoryPointer:
        return MemoryPointer(self._host.ctypes.data)

    @property
    def device(self) -> "Device":
        return Device(0)

    def __len__(self) -> int:
        return len(self._host)

    def __iter__(self) -> Iterator["ndarray"]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, key: Any) -> "ndarray":
        return _wrap(self._host[_unwrap_key(key)])  # type: ignore[no-any-return]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._host[_unwrap_key(key)] = _unwrap(value)

    # -- methods (numpy's, on the device)
    def astype(self, dtype: Any, order: str = "K", casting: Any = None, subok: Any = None,
               copy: bool = True) -> "ndarray":
        _check_dtype(np.dtype(dtype))
        result = self._host.astype(dtype, copy=copy)
        return self if result is self._host else _new_device(result)

    def copy(self, order: str = "C") -> "ndarray":
        return _new_device(self._host.copy(order))

    def reshape(self, *shape: Any, order: str = "C") -> "ndarray":
        return _wrap(self._host.reshape(*shape, order=order))  # type: ignore[no-any-return]

    def view(self, dtype: Any = None) -> "ndarray":
        return _device(self._host.view() if dtype is None else self._host.view(dtype))

    def ravel(self) -> "ndarray":
        return _wrap(self._host.ravel())  # type: ignore[no-any-return]

    def transpose(self, *axes: Any) -> "ndarray":
        return _device(self._host.transpose(*axes))

    def squeeze(self, axis: Any = None) -> "ndarray":
        return _device(self._host.squeeze(axis))

    def fill(self, value: Any) -> None:
        self._host.fill(_unwrap(value))

    def dot(self, other: Any) -> Any:
        return _call(np.dot, (self, other), {})

    def __pos__(self) -> Any:
        return self.copy()

    # Reductions (sum, mean, ...) and the arithmetic and comparison operators are set
    # below, once the device ufuncs exist (``_method``, ``_operator``).
    __hash__ = None  # type: ignore[assignment]


def _unwrap_key(key: Any) -> Any:
    if type(key) is ndarray:
        return key._host
    if isinstance(key, tuple):
        return tuple(k._host if type(k) is ndarray else k for k in key)
    if isinstance(key, np.ndarray):
        raise TypeError(f"Unsupported type {type(key)}")
    return key


# ---------------------------------------------------------------------------- host <-> device

def asarray(a: Any, dtype: Any = None, order: Any = None, *, copy: Any = None, blocking: bool = False) -> ndarray:
    """A device array of ``a``: ``a`` itself when it is one (cast if asked), else a host to device copy."""
    if type(a) is ndarray:
        return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
    host = np.array(a, dtype=dtype, copy=True)  # raises for objects that refuse host conversion
    _check_dtype(host.dtype)
    if not host.dtype.isnative:
        host = host.astype(host.dtype.newbyteorder("="))
    _count_h2d(host.nbytes)
    return _new_device(host)


def array(obj: Any, dtype: Any = None, copy: bool = True) -> ndarray:
    if type(obj) is ndarray:
        return obj.astype(dtype or obj.dtype, copy=copy)
    return asarray(obj, dtype)


def asnumpy(a: Any, stream: Any = None, order: str = "C", out: Optional[np.ndarray] = None,
            blocking: bool = True) -> np.ndarray:
    if type(a) is ndarray:
        return a.get(stream, order, out, blocking)
    return np.asarray(a, order=order)


# ---------------------------------------------------------------------------- functions

class _Ufunc:
    """A device ufunc: numpy's, on device arrays (``__call__`` and ``at``)."""

    def __init__(self, host_ufunc: np.ufunc) -> None:
        self._host_ufunc = host_ufunc
        self.__name__ = host_ufunc.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call(self._host_ufunc, args, kwargs)

    def at(self, a: ndarray, indices: Any, b: Any = None) -> None:
        if type(a) is not ndarray:
            raise TypeError(f"Unsupported type {type(a)}")
        self._host_ufunc.at(a._host, _unwrap_key(indices), _unwrap(b))


def _function(host_function: Callable[..., Any]) -> Callable[..., Any]:
    def device_function(*args: Any, **kwargs: Any) -> Any:
        return _call(host_function, args, kwargs)

    device_function.__name__ = host_function.__name__
    return device_function


_UFUNCS = (
    "abs", "absolute", "add", "bitwise_and", "bitwise_or", "bitwise_xor", "divide", "equal", "exp", "floor",
    "floor_divide", "greater", "greater_equal", "invert", "isfinite", "less", "less_equal", "log", "logaddexp",
    "logical_and", "logical_not", "logical_or", "matmul", "maximum", "minimum", "mod", "multiply", "negative",
    "not_equal", "power", "reciprocal", "sign", "sqrt", "square", "subtract", "tanh", "true_divide",
)
_FUNCTIONS = (
    "arange", "argmax", "argmin", "argsort", "argwhere", "ascontiguousarray", "broadcast_to", "clip", "concatenate", "empty",
    "empty_like", "expand_dims", "full", "max", "mean", "min", "moveaxis", "ones", "ones_like", "pad", "prod",
    "split", "squeeze", "stack", "sum", "take", "take_along_axis", "tensordot", "tile", "transpose", "where",
    "unique", "zeros", "zeros_like",
)
for _name in _UFUNCS:
    globals()[_name] = _Ufunc(getattr(np, _name))
for _name in _FUNCTIONS:
    globals()[_name] = _function(getattr(np, _name))
def _method(name: str) -> Callable[..., Any]:
    def method(self: ndarray, *args: Any, **kwargs: Any) -> Any:
        return _call(getattr(self._host, name), args, kwargs)

    method.__name__ = name
    return method


def _operator(ufunc: _Ufunc, reflected: bool = False, in_place: bool = False) -> Callable[..., Any]:
    if reflected:
        return lambda self, other: ufunc(other, self)
    if in_place:
        return lambda self, other: ufunc(self, other, out=self)
    return lambda self, *other: ufunc(self, *other)


for _name in ("sum", "mean", "max", "min", "prod", "all", "any", "argmax", "argmin"):
    setattr(ndarray, _name, _method(_name))
for _ufunc_name, _operators in {
    "add": ("add", "radd", "iadd"), "subtract": ("sub", "rsub", "isub"), "multiply": ("mul", "rmul", "imul"),
    "true_divide": ("truediv", "rtruediv", "itruediv"), "floor_divide": ("floordiv", "rfloordiv", None),
    "mod": ("mod", None, None), "power": ("pow", "rpow", None), "matmul": ("matmul", None, None),
    "bitwise_and": ("and", "rand", None), "bitwise_or": ("or", "ror", None), "bitwise_xor": ("xor", None, None),
    "equal": ("eq", None, None), "not_equal": ("ne", None, None), "less": ("lt", None, None),
    "less_equal": ("le", None, None), "greater": ("gt", None, None), "greater_equal": ("ge", None, None),
    "negative": ("neg", None, None), "absolute": ("abs", None, None), "invert": ("invert", None, None),
}.items():
    _plain, _reflected, _in_place = _operators
    setattr(ndarray, f"__{_plain}__", _operator(globals()[_ufunc_name]))
    if _reflected:
        setattr(ndarray, f"__{_reflected}__", _operator(globals()[_ufunc_name], reflected=True))
    if _in_place:
        setattr(ndarray, f"__{_in_place}__", _operator(globals()[_ufunc_name], in_place=True))


class _StrideTricks:
    @staticmethod
    def as_strided(x: ndarray, shape: Any = None, strides: Any = None) -> ndarray:
        if type(x) is not ndarray:
            raise TypeError(f"Unsupported type {type(x)}")
        return _device(np.lib.stride_tricks.as_strided(x._host, shape=shape, strides=strides, writeable=False))


class _Lib:
    stride_tricks = _StrideTricks()


lib = _Lib()


class _Generator:
    """``cupy.random.Generator``: numpy's generator, drawing onto the device."""

    def __init__(self, seed: Any) -> None:
        self._host = np.random.default_rng(seed)

    def standard_normal(self, size: Any = None, dtype: Any = np.float64) -> ndarray:
        return _new_device(np.asarray(self._host.standard_normal(size, dtype=dtype)))

    def random(self, size: Any = None, dtype: Any = np.float64) -> ndarray:
        return _new_device(np.asarray(self._host.random(size, dtype=dtype)))


class _Random:
    @staticmethod
    def default_rng(seed: Any = None) -> _Generator:
        return _Generator(seed)


random = _Random()


# ---------------------------------------------------------------------------- cuda

DEVICE_NAME = "strict cupy stand-in (host memory, not a GPU)"
DEVICE_MEMORY_BYTES = 16 << 30
"""What ``getDeviceProperties`` reports; nothing is allocated against it."""

_pinned: "weakref.WeakValueDictionary[int, PinnedMemoryPointer]" = weakref.WeakValueDictionary()


class PinnedMemoryPointer(bytearray):
    """``cuda.alloc_pinned_memory``: host memory (a buffer, as cupy's), registered as pinned."""

    ptr: int
    size: int


def _is_pinned(host: np.ndarray) -> bool:
    address = host.ctypes.data
    return any(p.ptr <= address < p.ptr + p.size for p in list(_pinned.values()))


class Device:
    def __init__(self, device: int = 0) -> None:
        if not 0 <= device < runtime.getDeviceCount():
            raise runtime.CUDARuntimeError(f"cudaErrorInvalidDevice: invalid device ordinal {device}")
        self.id = device

    def __enter__(self) -> "Device":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class _Runtime:
    class CUDARuntimeError(RuntimeError):
        pass

    @staticmethod
    def getDeviceCount() -> int:  # noqa: N802 - cupy's name
        return 1

    @staticmethod
    def getDeviceProperties(device: int) -> dict[str, Any]:  # noqa: N802 - cupy's name
        Device(device)
        return {"name": DEVICE_NAME.encode(), "totalGlobalMem": DEVICE_MEMORY_BYTES, "major": 0, "minor": 0}

    @staticmethod
    def runtimeGetVersion() -> int:  # noqa: N802 - cupy's name
        return 0

    @staticmethod
    def driverGetVersion() -> int:  # noqa: N802 - cupy's name
        return 0

    @staticmethod
    def deviceSynchronize() -> None:  # noqa: N802 - cupy's name
        """Nothing to wait for: the stand-in's "kernels" run synchronously on the CPU."""


runtime = _Runtime()


class _Cuda:
    Device = Device
    runtime = runtime

    @staticmethod
    def alloc_pinned_memory(nbytes: int) -> PinnedMemoryPointer:
        memory = PinnedMemoryPointer(int(nbytes) or 1)  # (this module's max is the device function)
        memory.ptr = np.frombuffer(memory, np.uint8).ctypes.data
        memory.size = len(memory)
        _pinned[id(memory)] = memory
        with _counter_lock:
            COUNTERS.pinned_allocations += 1
            COUNTERS.pinned_bytes += int(nbytes)
        return memory


cuda = _Cuda()

__version__ = "0.0.0+strict"

import sys as _sys  # noqa: E402 - the module object, for __array_function__'s lookup

_THIS_MODULE = _sys.modules[__name__]


def __getattr__(name: str) -> Any:
    raise AttributeError(f"the strict cupy stand-in (tests/runtime/support/strict_cupy.py) does not implement "
                         f"cupy.{name}; add it if tensorgrid's GPU code path needs it")
