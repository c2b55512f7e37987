"""The GPU backend: cupy arrays on one CUDA device, imported only when asked for.

Nothing in tensorgrid imports cupy at module import time; this backend is created
when an op is placed on ``/device:GPU:n`` and a CUDA device exists. The kernels are
the same as on CPU (they use ``xp``); this module only supplies what differs, and
every copy between host and device is explicit here: ``asarray`` (host to device),
``to_numpy`` and ``copy_to_host`` (device to host). A cupy array refuses implicit
conversion to numpy, so code above the kernels never touches one as host memory.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Optional, Sequence

import numpy as np

from tensorgrid.kernels import backend


def _import_cupy() -> Any:
    return _import_cupy_or_why()[0]


def _import_cupy_or_why() -> tuple[Any, str]:
    """cupy, or None and why it cannot be imported."""
    try:
        return importlib.import_module("cupy"), ""
    except ModuleNotFoundError as e:
        if e.name == "cupy":
            return None, "cupy is not installed (pip install 'tensorgrid[gpu]')"
        return None, f"cupy cannot be imported: {e}"
    except Exception as e:  # noqa: BLE001 - a broken CUDA install (missing libraries) also means "no GPU"
        return None, f"cupy cannot be imported: {type(e).__name__}: {e}"


@dataclasses.dataclass(frozen=True)
class GpuDevice:
    """A CUDA device as a server on this machine exposes it (``/device:GPU:<index>``)."""

    index: int
    name: str
    memory_bytes: int


def probe() -> tuple[list[GpuDevice], str]:
    """The CUDA devices a server on this machine would use, and, when there are none,
    why: cupy is not installed or cannot load, no CUDA device is visible, or the CUDA
    driver failed (its error)."""
    cupy, why = _import_cupy_or_why()
    if cupy is None:
        return [], why
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
        devices = []
        for index in range(count):
            properties = cupy.cuda.runtime.getDeviceProperties(index)
            name = properties["name"]
            devices.append(GpuDevice(index, name.decode() if isinstance(name, bytes) else str(name),
                                     int(properties["totalGlobalMem"])))
    except Exception as e:  # noqa: BLE001 - reported to the user as is
        if "NoDevice" in str(e):
            return [], f"no CUDA device is visible ({e})"
        return [], f"the CUDA driver failed: {type(e).__name__}: {e}"
    if not devices:
        return [], "no CUDA device is visible (CUDA_VISIBLE_DEVICES, or the pod has no nvidia.com/gpu limit)"
    return devices, ""


def device_count() -> int:
    """Number of CUDA devices cupy sees; 0 without cupy or without a driver."""
    cupy = _import_cupy()
    if cupy is None:
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - any CUDA runtime failure means "no GPU"
        return 0


class CupyBackend(backend.Backend):
    """Arrays on CUDA device ``index``.

    ``array_module`` is the cupy module to use (default: ``import cupy``); tests pass a
    stand-in with cupy's API and strictness (``tests/runtime/support/strict_cupy.py``).
    """

    name = "cupy"
    device_type = "GPU"

    def __init__(self, index: int = 0, array_module: Any = None) -> None:
        cupy = array_module if array_module is not None else _import_cupy()
        if cupy is None:
            raise RuntimeError(
                f"Cannot place ops on /device:GPU:{index}: cupy is not installed "
                "(pip install 'tensorgrid[gpu]') or no CUDA device is visible"
            )
        count = int(cupy.cuda.runtime.getDeviceCount())
        if index >= count:
            raise RuntimeError(f"Cannot place ops on /device:GPU:{index}: only {count} CUDA device(s) visible")
        self.xp = cupy
        self.index = index

    def asarray(self, value: Any, dtype: Any = None) -> Any:
        with self.xp.cuda.Device(self.index):
            return self.xp.asarray(value, dtype=dtype)

    def to_numpy(self, array: Any) -> np.ndarray:
        if isinstance(array, self.xp.ndarray):
            return np.asarray(self.xp.asnumpy(array))
        return np.asarray(array)

    def is_native(self, value: Any) -> bool:
        return isinstance(value, self.xp.ndarray)

    def host_buffer(self, nbytes: int) -> np.ndarray:
        """Pinned (page-locked) host memory: the device copies into it by DMA, without
        staging through a driver buffer."""
        memory = self.xp.cuda.alloc_pinned_memory(nbytes)
        return np.frombuffer(memory, np.uint8, nbytes)

    def copy_to_host(self, array: Any, out: np.ndarray) -> None:
        with self.xp.cuda.Device(self.index):
            array.get(out=out)

    def scatter_add(self, target: Any, indices: Any, updates: Any) -> None:
        self.xp.add.at(target, indices, updates)

    def random_generator(self, seed: Optional[Sequence[int]]) -> Any:
        return self.xp.random.default_rng(seed)

    def memory_in_use(self) -> int:
        return int(self.xp.get_default_memory_pool().used_bytes())
