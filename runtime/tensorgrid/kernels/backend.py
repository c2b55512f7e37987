"""The backend interface and the choice of backend for a device.

A backend owns an array module (``xp``), host<->device conversion, and the few
operations that differ between numpy and cupy (scatter-add, random generators).
Every copy between host and device memory goes through a backend's methods
(``asarray``, ``to_numpy``, ``copy_to_host``): a device array is never handed to
code that would read it as host memory.
"""

from __future__ import annotations

import abc
from typing import Any, Optional, Sequence

import numpy as np


class Backend(abc.ABC):
    """What kernels may use besides ``xp``; one instance per device."""

    name: str
    device_type: str
    xp: Any

    @abc.abstractmethod
    def asarray(self, value: Any, dtype: Any = None) -> Any:
        """Moves a host value (numpy or Python) onto this backend's device."""

    @abc.abstractmethod
    def to_numpy(self, array: Any) -> np.ndarray:
        """Brings an array of this backend back to host memory as numpy."""

    @abc.abstractmethod
    def is_native(self, value: Any) -> bool:
        """True when ``value`` already lives on this backend's device."""

    def host_buffer(self, nbytes: int) -> np.ndarray:
        """``nbytes`` of host memory (uint8) that ``copy_to_host`` fills fastest: pinned
        memory on a GPU, ordinary memory on the CPU."""
        return np.empty(nbytes, np.uint8)

    def copy_to_host(self, array: Any, out: np.ndarray) -> None:
        """Copies ``array`` (of this backend) into ``out``, a C-contiguous host array of
        its dtype and shape."""
        out[...] = array

    @abc.abstractmethod
    def scatter_add(self, target: Any, indices: Any, updates: Any) -> None:
        """``target[indices] += updates`` with repeated indices accumulated."""

    def take_rows(self, table: Any, rows: Any) -> Any:
        """A new array of the rows ``rows`` (a 1-D index array) of ``table``'s first dimension."""
        return table[rows]

    def put_rows(self, table: Any, rows: Any, values: Any) -> None:
        """``table[rows] = values`` for distinct ``rows`` (a 1-D index array)."""
        table[rows] = values

    def unique_sums(self, indices: Any, rows: Any) -> tuple[Any, Any]:
        """(the distinct values of the 1-D ``indices``, sorted; the sum of the ``rows`` of each):
        the deduplication of a sparse gradient before a sparse update. Both are new arrays
        that the caller may overwrite."""
        unique, inverse = self.xp.unique(indices, return_inverse=True)
        sums = self.xp.zeros((unique.shape[0],) + rows.shape[1:], dtype=rows.dtype)
        self.scatter_add(sums, inverse.reshape(-1), rows)
        return unique, sums

    @abc.abstractmethod
    def random_generator(self, seed: Optional[Sequence[int]]) -> Any:
        """A generator with ``standard_normal(size, dtype)`` and ``random(size, dtype)``."""

    def memory_in_use(self) -> int:
        """Bytes of device memory held by this backend's allocator (0 when untracked)."""
        return 0


_backends: dict[str, Backend] = {}


def gpu_available() -> bool:
    """True when cupy is importable and sees at least one CUDA device."""
    from tensorgrid.kernels import cupy_backend

    return cupy_backend.device_count() > 0


def for_device(device_type: Optional[str], device_index: Optional[int] = None) -> Backend:
    """The backend that runs ops placed on ``/device:<type>:<index>``."""
    if device_type in (None, "CPU"):
        key = "CPU"
        if key not in _backends:
            from tensorgrid.kernels import numpy_backend

            _backends[key] = numpy_backend.NumpyBackend()
        return _backends[key]
    if device_type == "GPU":
        index = device_index or 0
        key = f"GPU:{index}"
        if key not in _backends:
            from tensorgrid.kernels import cupy_backend

            _backends[key] = cupy_backend.CupyBackend(index)
        return _backends[key]
    raise ValueError(f"Unknown device type {device_type!r}; valid device types are CPU and GPU")


def device_backend_of(value: Any) -> Optional[Backend]:
    """The backend of a device (not host) array among the backends in use, or None when
    ``value`` is host memory (numpy, Python values) or of no backend."""
    if isinstance(value, (np.ndarray, np.generic)):
        return None
    for backend in list(_backends.values()):
        if backend.device_type != "CPU" and backend.is_native(value):
            return backend
    return None


def gpu_backend_in_use() -> Optional[Backend]:
    """A GPU backend this process has already made (ops were placed on a GPU), else None;
    never imports cupy."""
    for backend in list(_backends.values()):
        if backend.device_type != "CPU":
            return backend
    return None


def register_backend(key: str, backend: Backend) -> None:
    """Installs a backend for a device key such as ``GPU:0`` (used by backend tests)."""
    _backends[key] = backend


def unregister_backend(key: str) -> None:
    _backends.pop(key, None)
