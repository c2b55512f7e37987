"""Initializers: objects that build the initial value of a variable of a given shape.

``tf.get_variable`` calls ``initializer(shape, dtype=..., partition_info=...)`` and
gets back a Tensor; the random ones pass their ``seed`` to the random ops, so TF1's
seeding rules (graph seed plus op seed) make initial values reproducible. The
default initializer of ``get_variable`` is ``glorot_uniform_initializer``.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import random_ops

# The standard deviation of a unit normal truncated to [-2, 2]
# (scipy.stats.truncnorm.std(a=-2, b=2)): dividing by it keeps the requested variance.
_TRUNCATED_NORMAL_STDDEV = 0.87962566103423978


def _as_dims(shape: Any) -> list[int]:
    static = tensor_shape.as_shape(shape)
    if not static.is_fully_defined():
        raise ValueError(f"Initializers need a fully defined shape, got {static}")
    return [int(d) for d in static.as_list() if d is not None]


def _pick(dtype: Any, default: dtypes.DType) -> dtypes.DType:
    return dtypes.as_dtype(dtype if dtype is not None else default).base_dtype


def _float_dtype(dtype: Any, who: str) -> dtypes.DType:
    dt = dtypes.as_dtype(dtype).base_dtype
    if not dt.is_floating:
        raise ValueError(f"{who} only supports floating point dtypes, got {dt.name}")
    return dt


class Initializer:
    """Base of initializers: ``init(shape, dtype=None, partition_info=None) -> Tensor``."""

    dtype: dtypes.DType

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> graph_lib.Tensor:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Initializer":
        return cls(**config)


class Zeros(Initializer):
    def __init__(self, dtype: Any = dtypes.float32) -> None:
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> graph_lib.Tensor:
        return array_ops.zeros(_as_dims(shape), _pick(dtype, self.dtype))

    def get_config(self) -> dict[str, Any]:
        return {"dtype": self.dtype.name}


class Ones(Initializer):
    def __init__(self, dtype: Any = dtypes.float32) -> None:
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> graph_lib.Tensor:
        return array_ops.ones(_as_dims(shape), _pick(dtype, self.dtype))

    def get_config(self) -> dict[str, Any]:
        return {"dtype": self.dtype.name}


class Constant(Initializer):
    """A scalar fills the shape; a list fills it in row-major order, padded with its last value."""

    def __init__(self, value: Any = 0, dtype: Any = dtypes.float32, verify_shape: bool = False) -> None:
        if not np.isscalar(value) and not isinstance(value, (list, tuple, np.ndarray)):
            raise TypeError(
                f"Invalid type for initial value: {type(value).__name__} (expected a Python scalar, "
                "list or tuple of values, or a numpy.ndarray)"
            )
        self.value = value
        self.dtype = dtypes.as_dtype(dtype)
        self._verify_shape = verify_shape

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None,
                 verify_shape: Optional[bool] = None) -> graph_lib.Tensor:
        dt = _pick(dtype, self.dtype)
        dims = _as_dims(shape)
        verify = self._verify_shape if verify_shape is None else verify_shape
        value = np.asarray(self.value)
        if verify and value.shape != tuple(dims):
            raise TypeError(f"Expected Tensor's shape: {tuple(dims)}, got {value.shape}.")
        flat = value.reshape(-1)
        needed = int(np.prod(dims)) if dims else 1
        if flat.size > needed and flat.size != 1:
            raise ValueError(f"Too many elements provided. Needed at most {needed}, but received {flat.size}")
        if flat.size == 0:
            raise ValueError(f"Cannot initialize a variable of shape {dims} from an empty value")
        if flat.size == 1 and needed > array_ops.SMALL_CONSTANT_ELEMENTS:
            # A Fill op, not a constant of the variable's size in the graph (an Adagrad slot of a
            # 1M x 64 embedding table would otherwise ship 256 MB of 0.1 in the GraphDef).
            return array_ops.fill(dims, array_ops.constant(flat[0], dtype=dt))
        if flat.size < needed:
            flat = np.concatenate([flat, np.full(needed - flat.size, flat[-1], dtype=flat.dtype)])
        return array_ops.constant(flat[:needed].reshape(dims), dtype=dt)

    def get_config(self) -> dict[str, Any]:
        return {"value": self.value, "dtype": self.dtype.name, "verify_shape": self._verify_shape}


class RandomNormal(Initializer):
    def __init__(self, mean: float = 0.0, stddev: float = 1.0, seed: Optional[int] = None,
                 dtype: Any = dtypes.float32) -> None:
        self.mean = mean
        self.stddev = stddev
        self.seed = seed
        self.dtype = _float_dtype(dtype, "random_normal_initializer")

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> graph_lib.Tensor:
        dt = _float_dtype(_pick(dtype, self.dtype), "random_normal_initializer")
        return random_ops.random_normal(_as_dims(shape), self.mean, self.stddev, dt, seed=self.seed)

    def get_config(self) -> dict[str, Any]:
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed, "dtype": self.dtype.name}


class TruncatedNormal(Initializer):
    """Normal samples, with those more than two standard deviations out redrawn."""

    def __init__(self, mean: float = 0.0, stddev: float = 1.0, seed: Optional[int] = None,
                 dtype: Any = dtypes.float32) -> None:
        self.mean = mean
        self.stddev = stddev
        self.seed = seed
        self.dtype = _float_dtype(dtype, "truncated_normal_initializer")

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> graph_lib.Tensor:
        dt = _float_dtype(_pick(dtype, self.dtype), "truncated_normal_initializer")
        return random_ops.truncated_normal(_as_dims(shape), self.mean, self.stddev, dt, seed=self.seed)

    def get_config(self) -> dict[str, Any]:
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed, "dtype": self.dtype.name}


class RandomUniform(Initializer):
    def __init__(self, minval: float = 0.0, maxval: Optional[float] = None, seed: Optional[int] = None,
                 dtype: Any = dtypes.float32) -> None:
        self.minval = minval
        self.maxval = maxval
        self.seed = seed
        self.dtype = _float_dtype(dtype, "random_uniform_initializer")

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> graph_lib.Tensor:
        dt = _float_dtype(_pick(dtype, self.dtype), "random_uniform_initializer")
        return random_ops.random_uniform(_as_dims(shape), self.minval, self.maxval, dt, seed=self.seed)

    def get_config(self) -> dict[str, Any]:
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed, "dtype": self.dtype.name}


def _compute_fans(dims: list[int]) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight shape; convolution kernels are (..., in_depth, out_depth)."""
    if len(dims) < 1:
        return 1, 1
    if len(dims) == 1:
        return dims[0], dims[0]
    if len(dims) == 2:
        return dims[0], dims[1]
    receptive_field = int(np.prod(dims[:-2]))
    return dims[-2] * receptive_field, dims[-1] * receptive_field


class VarianceScaling(Initializer):
    """Samples with variance ``scale / n``, n being fan_in, fan_out or their average.

    ``distribution`` is ``truncated_normal`` (``normal`` is TF1's alias for it),
    ``untruncated_normal`` or ``uniform`` (within ``[-sqrt(3 * scale / n), +...]``).
    """

    def __init__(self, scale: float = 1.0, mode: str = "fan_in", distribution: str = "truncated_normal",
                 seed: Optional[int] = None, dtype: Any = dtypes.float32) -> None:
        if scale <= 0.0:
            raise ValueError(f"Argument `scale` must be a positive float. Received: {scale}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"Argument `mode` should be one of ('fan_in', 'fan_out', 'fan_avg'). Received: {mode}")
        distribution = distribution.lower()
        if distribution not in ("normal", "uniform", "truncated_normal", "untruncated_normal"):
            raise ValueError(
                "Argument `distribution` should be one of ('normal', 'uniform', 'truncated_normal', "
                f"'untruncated_normal'). Received: {distribution}"
            )
        self.scale = scale
        self.mode = mode
        self.distribution = distribution
        self.seed = seed
        self.dtype = _float_dtype(dtype, "variance_scaling_initializer")

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> graph_lib.Tensor:
        dt = _float_dtype(_pick(dtype, self.dtype), "variance_scaling_initializer")
        dims = _as_dims(shape)
        full_dims = _as_dims(partition_info.full_shape) if partition_info is not None else dims
        fan_in, fan_out = _compute_fans(full_dims)
        scale = float(self.scale)
        if self.mode == "fan_in":
            scale /= max(1.0, fan_in)
        elif self.mode == "fan_out":
            scale /= max(1.0, fan_out)
        else:
            scale /= max(1.0, (fan_in + fan_out) / 2.0)
        if self.distribution in ("normal", "truncated_normal"):
            stddev = math.sqrt(scale) / _TRUNCATED_NORMAL_STDDEV
            return random_ops.truncated_normal(dims, 0.0, stddev, dt, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_ops.random_normal(dims, 0.0, math.sqrt(scale), dt, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_ops.random_uniform(dims, -limit, limit, dt, seed=self.seed)

    def get_config(self) -> dict[str, Any]:
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution,
                "seed": self.seed, "dtype": self.dtype.name}


class GlorotUniform(VarianceScaling):
    """Uniform in ``[-sqrt(6 / (fan_in + fan_out)), +...]``: the default of ``get_variable``."""

    def __init__(self, seed: Optional[int] = None, dtype: Any = dtypes.float32) -> None:
        super().__init__(scale=1.0, mode="fan_avg", distribution="uniform", seed=seed, dtype=dtype)

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "dtype": self.dtype.name}


class GlorotNormal(VarianceScaling):
    """Truncated normal with variance ``2 / (fan_in + fan_out)``."""

    def __init__(self, seed: Optional[int] = None, dtype: Any = dtypes.float32) -> None:
        super().__init__(scale=1.0, mode="fan_avg", distribution="truncated_normal", seed=seed, dtype=dtype)

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "dtype": self.dtype.name}


# TF1's public names: the classes themselves, called to make an initializer.
zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
random_uniform_initializer = RandomUniform
variance_scaling_initializer = VarianceScaling
glorot_uniform_initializer = GlorotUniform
glorot_normal_initializer = GlorotNormal


def he_normal(seed: Optional[int] = None) -> VarianceScaling:
    return VarianceScaling(scale=2.0, mode="fan_in", distribution="truncated_normal", seed=seed)


def he_uniform(seed: Optional[int] = None) -> VarianceScaling:
    return VarianceScaling(scale=2.0, mode="fan_in", distribution="uniform", seed=seed)


def lecun_normal(seed: Optional[int] = None) -> VarianceScaling:
    return VarianceScaling(scale=1.0, mode="fan_in", distribution="truncated_normal", seed=seed)


def lecun_uniform(seed: Optional[int] = None) -> VarianceScaling:
    return VarianceScaling(scale=1.0, mode="fan_in", distribution="uniform", seed=seed)
