"""Kernels of array ops: constants, placeholders, identity, shapes, reshape, fills."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.kernels.registry import register_kernel


@register_kernel("Const")
def _const(k: Any, step: Any) -> Any:
    cached = k.state.get("device_value")
    if cached is None or cached[0] is not k.backend:
        cached = (k.backend, k.backend.asarray(k.attrs["value"]))
        k.state["device_value"] = cached
    return cached[1]


@register_kernel("Placeholder")
def _placeholder(k: Any, step: Any) -> Any:
    shape = k.attrs.get("shape")
    shown = "<unknown>" if shape is None else "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"
    raise errors.InvalidArgumentError(
        None, None,
        f"You must feed a value for placeholder tensor '{k.name}' with dtype {k.attrs['dtype']} and shape {shown}",
    )


@register_kernel("PlaceholderWithDefault", "Identity", "StopGradient")
def _identity(k: Any, step: Any, x: Any) -> Any:
    return x


@register_kernel("Shape")
def _shape(k: Any, step: Any, x: Any) -> Any:
    return k.xp.asarray(x.shape, dtype=k.output_dtypes[0])


@register_kernel("Size")
def _size(k: Any, step: Any, x: Any) -> Any:
    return k.xp.asarray(x.size, dtype=k.output_dtypes[0])


@register_kernel("Rank")
def _rank(k: Any, step: Any, x: Any) -> Any:
    return k.xp.asarray(x.ndim, dtype=np.int32)


def host_ints(value: Any) -> list[int]:
    """A small shape/axis tensor as Python ints (it may live on the GPU)."""
    getter = getattr(value, "get", None)
    array = getter() if callable(getter) and not isinstance(value, np.ndarray) else np.asarray(value)
    return [int(v) for v in array.reshape(-1)]


@register_kernel("Reshape")
def _reshape(k: Any, step: Any, x: Any, shape: Any) -> Any:
    dims = host_ints(shape)
    try:
        return x.reshape(dims)
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, f"Input to reshape is a tensor with {x.size} values, but the requested shape is {dims}"
        ) from None


@register_kernel("Fill")
def _fill(k: Any, step: Any, dims: Any, value: Any) -> Any:
    shape = host_ints(dims)
    if any(d < 0 for d in shape):
        raise errors.InvalidArgumentError(None, None, f"Fill dimensions must be >= 0, got {shape}")
    return k.xp.full(shape, value, dtype=k.output_dtypes[0])


@register_kernel("ZerosLike")
def _zeros_like(k: Any, step: Any, x: Any) -> Any:
    return k.xp.zeros(x.shape, dtype=k.output_dtypes[0])


@register_kernel("OnesLike")
def _ones_like(k: Any, step: Any, x: Any) -> Any:
    return k.xp.ones(x.shape, dtype=k.output_dtypes[0])


@register_kernel("BroadcastTo")
def _broadcast_to(k: Any, step: Any, x: Any, shape: Any) -> Any:
    return k.xp.broadcast_to(x, host_ints(shape))


@register_kernel("UnbroadcastTo")
def _unbroadcast_to(k: Any, step: Any, grad: Any, shape: Any) -> Any:
    target = host_ints(shape)
    extra = grad.ndim - len(target)
    if extra < 0:
        raise errors.InvalidArgumentError(None, None, f"Cannot reduce shape {grad.shape} to {target}")
    axes = tuple(range(extra)) + tuple(
        extra + i for i, d in enumerate(target) if d == 1 and grad.shape[extra + i] != 1
    )
    result = grad.sum(axis=axes, keepdims=True) if axes else grad
    return result.reshape(target)


@register_kernel("NoOp")
def _no_op(k: Any, step: Any) -> None:
    return None
