"""Kernel registry: op type -> the function that computes it.

A kernel is called as ``fn(k, step, *inputs)``: ``k`` is the per-node context
(attrs, backend, ``xp``, persistent per-kernel state), ``step`` the per-step context
(resource manager, rendezvous, step id) that the executor provides. It returns one
value, or a tuple when the op has several outputs.

An asynchronous kernel (Recv, queue dequeue) is called as ``fn(k, step, done, *inputs)``
and later calls ``done(result)`` or ``done(failure=exc)`` from any thread.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

KernelFn = Callable[..., Any]

_KERNELS: dict[str, KernelFn] = {}
_ASYNC: set[str] = set()
_HOST_ONLY: set[str] = set()


def register_kernel(*op_types: str, is_async: bool = False, host_only: bool = False) -> Callable[[KernelFn], KernelFn]:
    """Registers ``fn`` for ``op_types``; ``host_only`` kernels always run on the CPU backend."""

    def decorate(fn: KernelFn) -> KernelFn:
        for op_type in op_types:
            if op_type in _KERNELS:
                raise KeyError(f"A kernel for op type {op_type!r} is already registered")
            _KERNELS[op_type] = fn
            if is_async:
                _ASYNC.add(op_type)
            if host_only:
                _HOST_ONLY.add(op_type)
        return fn

    return decorate


def is_async(op_type: str) -> bool:
    return op_type in _ASYNC


def has_gpu_kernel(op_type: str) -> bool:
    _load_all()
    return op_type in _KERNELS and op_type not in _HOST_ONLY


def get_kernel(op_type: str) -> KernelFn:
    _load_all()
    try:
        return _KERNELS[op_type]
    except KeyError:
        raise KeyError(f"No kernel registered for op type {op_type!r}") from None


def has_kernel(op_type: str) -> bool:
    _load_all()
    return op_type in _KERNELS


_loaded = False
_load_lock = threading.Lock()


def _load_all() -> None:
    """Imports every kernel module once; thread-safe (RPC threads may race to the first use)."""
    global _loaded
    if _loaded:
        return
    with _load_lock:
        if _loaded:
            return
        from tensorgrid.kernels import (  # noqa: F401
            array_kernels, data_flow_kernels, math_kernels, nn_kernels, random_kernels, sparse_kernels,
            state_kernels, training_kernels, transfer_kernels,
        )
        _loaded = True
