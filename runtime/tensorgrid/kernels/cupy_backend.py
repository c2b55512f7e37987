"""The GPU backend: cupy arrays on one CUDA device, imported only when asked for.

Nothing in tensorgrid imports cupy at module import time; this backend is created
when an op is placed on ``/device:GPU:n`` and a CUDA device exists. The kernels are
the same as on CPU (they use ``xp``); this module only supplies what differs.
"""

from __future__ import annotations

import importlib
from typing import Any, Optional

import numpy as np

from tensorgrid.kernels import backend


def _import_cupy() -> Any:
    try:
        return importlib.import_module("cupy")
    except Exception:  # noqa: BLE001 - a broken CUDA install (missing libraries) also means "no GPU"
        return None


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

    ``array_module`` exists so tests can drive this class through its whole interface
    on machines without a GPU; in production it is always the real cupy module.
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
        if array_module is None and index >= device_count():
            raise RuntimeError(
                f"Cannot place ops on /device:GPU:{index}: only {device_count()} CUDA device(s) visible"
            )
        self.xp = cupy
        self.index = index
        self._is_real_cupy = array_module is None

    def _device(self) -> Any:
        return self.xp.cuda.Device(self.index) if self._is_real_cupy else _NullContext()

    def asarray(self, value: Any, dtype: Any = None) -> Any:
        with self._device():
            return self.xp.asarray(value, dtype=dtype)

    def to_numpy(self, array: Any) -> np.ndarray:
        if self._is_real_cupy and isinstance(array, self.xp.ndarray):
            return np.asarray(self.xp.asnumpy(array))
        return np.asarray(array)

    def is_native(self, value: Any) -> bool:
        return isinstance(value, self.xp.ndarray)

    def scatter_add(self, target: Any, indices: Any, updates: Any) -> None:
        if self._is_real_cupy:
            importlib.import_module("cupyx").scatter_add(target, indices, updates)
        else:
            self.xp.add.at(target, indices, updates)

    def random_generator(self, seed: Optional[int]) -> Any:
        return self.xp.random.default_rng(seed)

    def memory_in_use(self) -> int:
        if not self._is_real_cupy:
            return 0
        return int(self.xp.get_default_memory_pool().used_bytes())


class _NullContext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None
