"""Kernels of random ops; each op keeps its own generator across steps, like TF's kernels."""

from __future__ import annotations

from typing import Any

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels.array_kernels import host_ints
from tensorgrid.kernels.registry import register_kernel


def _generator(k: context.KernelContext) -> Any:
    rng = k.state.get("rng")
    if rng is None or k.state.get("rng_backend") is not k.backend:
        seed, seed2 = k.attrs["seed"], k.attrs["seed2"]
        rng = k.backend.random_generator([seed, seed2] if (seed or seed2) else None)
        k.state["rng"] = rng
        k.state["rng_backend"] = k.backend
    return rng


@register_kernel("RandomStandardNormal", host_inputs=(0,))
def _standard_normal(k: context.KernelContext, step: context.StepContext, shape: Any) -> Any:
    return _generator(k).standard_normal(host_ints(shape), dtype=k.output_dtypes[0])


@register_kernel("TruncatedNormal", host_inputs=(0,))
def _truncated_normal(k: context.KernelContext, step: context.StepContext, shape: Any) -> Any:
    rng = _generator(k)
    dtype = k.output_dtypes[0]
    values = rng.standard_normal(host_ints(shape), dtype=dtype)
    outside = k.xp.abs(values) > 2
    while outside.any():
        values[outside] = rng.standard_normal(int(outside.sum()), dtype=dtype)
        outside = k.xp.abs(values) > 2
    return values


@register_kernel("RandomUniform", host_inputs=(0,))
def _uniform(k: context.KernelContext, step: context.StepContext, shape: Any) -> Any:
    return _generator(k).random(host_ints(shape), dtype=k.output_dtypes[0])


@register_kernel("RandomUniformInt", host_only=True)
def _uniform_int(k: context.KernelContext, step: context.StepContext, shape: Any, minval: Any, maxval: Any) -> Any:
    low, high = int(minval), int(maxval)
    if low >= high:
        raise errors.InvalidArgumentError(None, None, f"Need minval < maxval: {low} >= {high}")
    return _generator(k).integers(low, high, size=host_ints(shape), dtype=k.output_dtypes[0])


@register_kernel("RandomShuffle", host_only=True)
def _shuffle(k: context.KernelContext, step: context.StepContext, value: Any) -> Any:
    """The rows of ``value`` in a random order (a scalar is returned as it is, as in TensorFlow)."""
    if value.ndim == 0:
        return value.copy()
    return value[_generator(k).permutation(value.shape[0])]
