"""Kernel registry: op type -> the function that computes it.

A kernel is called as ``fn(k, step, *inputs)``: ``k`` is the per-node context
(attrs, backend, ``xp``, persistent per-kernel state), ``step`` the per-step context
(resource manager, rendezvous, step id, function library) that the executor provides;
both are typed in ``kernels/context.py``. It returns one value, or a tuple when the op
has several outputs.

An asynchronous kernel (Recv, queue dequeue) is called as ``fn(k, step, done, *inputs)``
and later calls ``done(result)`` or ``done(failure=exc)`` from any thread.

Inputs reach a kernel on its own device (the executor copies them there), except for
kernels registered with ``any_input_device`` (Send), which pass values on untouched:
a tensor sent from a GPU is staged to host memory once, by the transport; and except for
the ``host_inputs`` of a kernel (shapes, sizes, multiples: what it reads as Python ints,
TensorFlow's ``HostMemory`` arguments), which a GPU op takes where they are, so a shape
made on the host is never copied to the device and read back (each read back waits for
every kernel queued on the device).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

KernelFn = Callable[..., Any]

_KERNELS: dict[str, KernelFn] = {}
_ASYNC: set[str] = set()
_HOST_ONLY: set[str] = set()
_ANY_INPUT_DEVICE: set[str] = set()
_FORWARDS_INPUT: set[str] = set()
_HOST_INPUTS: dict[str, frozenset[int]] = {}


def register_kernel(*op_types: str, is_async: bool = False, host_only: bool = False,
                    any_input_device: bool = False, forwards_input: bool = False,
                    host_inputs: tuple[int, ...] = ()) -> Callable[[KernelFn], KernelFn]:
    """Registers ``fn`` for ``op_types``; ``host_only`` kernels always run on the CPU backend;
    ``any_input_device`` kernels take their inputs on whatever device produced them;
    ``forwards_input`` kernels may return one of their inputs, or a view of one, without a copy
    (so a fetched output of theirs may share a variable's memory: the executor copies it);
    ``host_inputs`` are the positions of inputs the kernel reads on the host (``host_ints``):
    they are not copied to a GPU op's device."""

    def decorate(fn: KernelFn) -> KernelFn:
        for op_type in op_types:
            if op_type in _KERNELS:
                raise KeyError(f"A kernel for op type {op_type!r} is already registered")
            _KERNELS[op_type] = fn
            if is_async:
                _ASYNC.add(op_type)
            if host_only:
                _HOST_ONLY.add(op_type)
            if any_input_device:
                _ANY_INPUT_DEVICE.add(op_type)
            if forwards_input:
                _FORWARDS_INPUT.add(op_type)
            if host_inputs:
                _HOST_INPUTS[op_type] = frozenset(host_inputs)
        return fn

    return decorate


def forwards_input(op_type: str) -> bool:
    """Whether the kernel of ``op_type`` may return an input or a view of one (no copy)."""
    _load_all()
    return op_type in _FORWARDS_INPUT


def host_inputs(op_type: str) -> frozenset[int]:
    """Positions of the inputs the kernel of ``op_type`` reads on the host (see the module)."""
    _load_all()
    return _HOST_INPUTS.get(op_type, frozenset())


def is_async(op_type: str) -> bool:
    return op_type in _ASYNC


def takes_any_input_device(op_type: str) -> bool:
    _load_all()
    return op_type in _ANY_INPUT_DEVICE


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


def all_kernels() -> dict[str, KernelFn]:
    """Every registered kernel by op type (for checks of the kernel contract)."""
    _load_all()
    return dict(_KERNELS)


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
            array_kernels, control_flow_kernels, data_flow_kernels, dataset_kernels, logging_kernels, math_kernels,
            nn_kernels, parsing_kernels, proximal_training_kernels, random_kernels, reader_kernels, script_kernels,
            sparse_accumulator_kernels, sparse_kernels, state_kernels, summary_kernels, summary_media_kernels,
            tensor_array_kernels, training_kernels, transfer_kernels,
        )
        from tensorgrid.kernels import lookup_kernels, sparse_cross_kernels, string_hash_kernels  # noqa: F401
        from tensorgrid.kernels import candidate_sampling_kernels, embedding_variable_kernels  # noqa: F401
        _loaded = True
