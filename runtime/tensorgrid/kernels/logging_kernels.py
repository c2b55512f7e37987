"""The kernels of ``tf.Print`` (the first input passes through, the rest are printed) and
``tf.Assert`` (a false condition fails the step, its data in the message).

The line is TensorFlow's: the message, then each data tensor in brackets, at most
``summarize`` elements of each (nested brackets per dimension, ``...`` where cut), on
standard error.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels.registry import register_kernel


def _element(value: Any) -> str:
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode(errors="replace")
    if isinstance(value, np.floating):
        short, full = ("%.6g", "%.9g") if value.dtype.itemsize <= 4 else ("%.15g", "%.17g")
        text = short % value
        return text if type(value)(text) == value or np.isnan(value) else full % value
    if isinstance(value, np.bool_):
        return "1" if value else "0"
    return str(value)


def summarize(array: np.ndarray, limit: int) -> str:
    """TensorFlow's ``Tensor::SummarizeValue`` (the TF1 form used by ``tf.Print``)."""
    flat = array.reshape(-1)
    limit = flat.size if limit < 0 else min(limit, flat.size)
    parts: list[str] = []
    if array.ndim == 0:
        parts.extend(_element(v) for v in flat[:limit])
    else:
        index = [0]

        def one_dim(dim: int) -> None:
            if index[0] >= limit:
                return
            if dim == array.ndim - 1:
                for i in range(array.shape[dim]):
                    if index[0] >= limit:
                        if dim != 0:
                            parts.append("...")
                        return
                    if i > 0:
                        parts.append(" ")
                    parts.append(_element(flat[index[0]]))
                    index[0] += 1
                return
            for _ in range(array.shape[dim]):
                opened = index[0] < limit
                if opened:
                    parts.append("[")
                one_dim(dim + 1)
                if index[0] < limit or opened:
                    parts.append("]")

        one_dim(0)
    if flat.size > limit:
        parts.append("...")
    return "".join(parts)


@register_kernel("Print", host_only=True, forwards_input=True)
def _print(k: context.KernelContext, step: context.StepContext, value: Any, *data: Any) -> Any:
    first_n = k.attrs["first_n"]
    with k.state.setdefault("lock", threading.Lock()):
        printed = k.state.get("printed", 0)
        if first_n >= 0 and printed >= first_n:
            return value
        k.state["printed"] = printed + 1
    line = k.attrs["message"] + "".join(f"[{summarize(np.asarray(d), k.attrs['summarize'])}]" for d in data)
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    return value


@register_kernel("Assert", host_only=True)
def _assert(k: context.KernelContext, step: context.StepContext, condition: Any, *data: Any) -> None:
    if bool(np.asarray(condition)):
        return None
    shown = " ".join(f"[{summarize(np.asarray(d), k.attrs['summarize'])}]" for d in data)
    raise errors.InvalidArgumentError(None, None, f"assertion failed: {shown}")
