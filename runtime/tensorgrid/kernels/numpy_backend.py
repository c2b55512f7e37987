"""The CPU backend: numpy arrays in host memory, and the size of its BLAS thread pool."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tensorgrid.kernels import backend


class NumpyBackend(backend.Backend):
    name = "numpy"
    device_type = "CPU"
    xp = np

    def asarray(self, value: Any, dtype: Any = None) -> Any:
        return np.asarray(value, dtype=dtype)

    def to_numpy(self, array: Any) -> np.ndarray:
        return np.asarray(array)

    def is_native(self, value: Any) -> bool:
        return isinstance(value, (np.ndarray, np.generic))

    def scatter_add(self, target: Any, indices: Any, updates: Any) -> None:
        np.add.at(target, indices, updates)

    def random_generator(self, seed: Optional[int]) -> Any:
        return np.random.default_rng(seed)


def limit_threads(count: int) -> None:
    """Runs numpy's BLAS (matmul) on at most ``count`` threads in this process.

    TF's ``intra_op_parallelism_threads``: a ``tf.train.Server`` sets it for its task.
    """
    if count < 1:
        raise ValueError(f"the thread count must be >= 1, got {count}")
    import threadpoolctl

    threadpoolctl.threadpool_limits(limits=count, user_api="blas")
