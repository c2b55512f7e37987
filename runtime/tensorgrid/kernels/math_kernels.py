"""Kernels of math ops: element-wise arithmetic, matmul, reductions, comparisons."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Iterator

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels.registry import register_kernel


def _binary(op_type: str, fn_name: str) -> None:
    def kernel(k: context.KernelContext, step: context.StepContext, x: Any, y: Any) -> Any:
        return getattr(k.xp, fn_name)(x, y)

    kernel.__name__ = f"_{fn_name}"
    kernel.xp_function = fn_name  # type: ignore[attr-defined]  # exactly xp.<fn_name>: a CallProgram calls it directly
    register_kernel(op_type)(kernel)


def _unary(op_type: str, fn_name: str) -> None:
    def kernel(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
        return getattr(k.xp, fn_name)(x)

    kernel.__name__ = f"_{fn_name}"
    kernel.xp_function = fn_name  # type: ignore[attr-defined]  # exactly xp.<fn_name>: a CallProgram calls it directly
    register_kernel(op_type)(kernel)


for _op_type, _fn in {
    "AddV2": "add", "Sub": "subtract", "Mul": "multiply", "RealDiv": "true_divide",
    "Pow": "power", "Maximum": "maximum", "Minimum": "minimum",
    "Equal": "equal", "NotEqual": "not_equal", "Less": "less", "LessEqual": "less_equal",
    "Greater": "greater", "GreaterEqual": "greater_equal", "LogicalAnd": "logical_and", "LogicalOr": "logical_or",
}.items():
    _binary(_op_type, _fn)

for _op_type, _fn in {
    "Neg": "negative", "Square": "square", "Sqrt": "sqrt", "Exp": "exp", "Log": "log", "Abs": "abs",
    "Sign": "sign", "Reciprocal": "reciprocal", "LogicalNot": "logical_not", "Tanh": "tanh", "Floor": "floor",
}.items():
    _unary(_op_type, _fn)


def _integer_divisor_check(y: Any) -> None:
    if y.dtype.kind in "iu" and not y.all():
        raise errors.InvalidArgumentError(None, None, "Integer division by zero")


@register_kernel("Range")
def _range(k: context.KernelContext, step: context.StepContext, start: Any, limit: Any, delta: Any) -> Any:
    # Python scalars: the bounds may be 0-d device arrays, which arange does not take everywhere.
    first, last, step_size = start.item(), limit.item(), delta.item()
    if step_size == 0:
        raise errors.InvalidArgumentError(None, None, f"Requires delta != 0: {step_size} (op {k.name})")
    return k.xp.arange(first, last, step_size, dtype=k.output_dtypes[0])


@register_kernel("FloorDiv")
def _floordiv(k: context.KernelContext, step: context.StepContext, x: Any, y: Any) -> Any:
    _integer_divisor_check(y)
    return k.xp.floor_divide(x, y)


@register_kernel("FloorMod")
def _floormod(k: context.KernelContext, step: context.StepContext, x: Any, y: Any) -> Any:
    _integer_divisor_check(y)
    return k.xp.mod(x, y)


@register_kernel("Rsqrt")
def _rsqrt(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    return 1 / k.xp.sqrt(x)


@register_kernel("Sigmoid")
def _sigmoid(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    # exp(-log(1 + exp(-x))) never overflows, unlike 1 / (1 + exp(-x)) for very negative x.
    return k.xp.exp(-k.xp.logaddexp(x.dtype.type(0), -x))


@register_kernel("AddN")
def _add_n(k: context.KernelContext, step: context.StepContext, *xs: Any) -> Any:
    total = xs[0] + xs[1]
    for x in xs[2:]:
        total += x
    return total


@register_kernel("Cast")
def _cast(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    return x.astype(k.output_dtypes[0])


@register_kernel("MatMul")
def _matmul(k: context.KernelContext, step: context.StepContext, a: Any, b: Any) -> Any:
    if k.attrs["transpose_a"]:
        a = a.T
    if k.attrs["transpose_b"]:
        b = b.T
    if a.shape[1] != b.shape[0]:
        raise errors.InvalidArgumentError(
            None, None, f"Matrix size-incompatible: In[0]: {list(a.shape)}, In[1]: {list(b.shape)}"
        )
    return k.xp.matmul(a, b)


def _axis(k: context.KernelContext) -> Any:
    axis = k.attrs["axis"]
    return None if axis is None else tuple(axis)


def _reduction(op_type: str, fn_name: str) -> None:
    def kernel(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
        axis = _axis(k)
        keep = k.attrs["keep_dims"]
        if fn_name in ("max", "min") and x.size == 0:
            raise errors.InvalidArgumentError(None, None, f"Reduction {op_type} of an empty tensor of shape {x.shape}")
        result = getattr(k.xp, fn_name)(x, axis=axis, keepdims=keep)
        return k.xp.asarray(result, dtype=k.output_dtypes[0])

    kernel.__name__ = f"_reduce_{fn_name}"
    register_kernel(op_type)(kernel)


for _op_type, _fn in {"Sum": "sum", "Max": "max", "Min": "min", "Prod": "prod"}.items():
    _reduction(_op_type, _fn)


@register_kernel("Mean")
def _mean(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
    axis = _axis(k)
    if x.dtype.kind in "iu":
        total = k.xp.sum(x, axis=axis, keepdims=k.attrs["keep_dims"])
        count = x.size // max(total.size, 1) if x.size else 1
        return k.xp.asarray(total // max(count, 1), dtype=x.dtype)
    with _quiet(k):
        return k.xp.asarray(k.xp.mean(x, axis=axis, keepdims=k.attrs["keep_dims"]), dtype=x.dtype)


@contextlib.contextmanager
def _quiet(k: context.KernelContext) -> Iterator[None]:
    """Silences numpy's 'mean of empty slice' warning; TF returns NaN without a warning."""
    # cupy has no errstate (it never warns); numpy needs one.
    errstate = getattr(k.xp, "errstate", None)
    with errstate(invalid="ignore", divide="ignore") if errstate else contextlib.nullcontext():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            yield


def _arg_reduction(op_type: str, fn_name: str) -> None:
    def kernel(k: context.KernelContext, step: context.StepContext, x: Any) -> Any:
        axis = k.attrs["axis"]
        if x.ndim and x.shape[axis] == 0:
            raise errors.InvalidArgumentError(None, None, f"{op_type} over an empty dimension of shape {x.shape}")
        return getattr(k.xp, fn_name)(x, axis=axis).astype(k.output_dtypes[0])

    kernel.__name__ = f"_{fn_name}"
    register_kernel(op_type)(kernel)


_arg_reduction("ArgMax", "argmax")
_arg_reduction("ArgMin", "argmin")
