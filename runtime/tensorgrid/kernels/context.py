"""The contract every kernel is written against, as TensorFlow's ``op_kernel.h``.

A kernel is called as ``fn(k, step, *inputs)``: ``k`` is the node's ``KernelContext``
(its attributes, backend and persistent state, made once per node of a plan). Kernels
import this module, never the execution layer that makes the contexts.
"""

from __future__ import annotations

from typing import Any

from tensorgrid.framework import graph as graph_lib
from tensorgrid.kernels import backend as backend_lib


class KernelContext:
    """Per-node facts a kernel needs: attributes, backend, and persistent state."""

    __slots__ = ("op", "name", "op_type", "attrs", "backend", "xp", "state", "output_dtypes", "output_shapes")

    def __init__(self, op: graph_lib.Operation, backend: backend_lib.Backend, state: dict[str, Any]) -> None:
        self.op = op
        self.name = op.name
        self.op_type = op.type
        self.attrs = op._attrs
        self.backend = backend
        self.xp = backend.xp
        self.state = state
        self.output_dtypes = [t.dtype.base_dtype.as_numpy_dtype for t in op.outputs]
        self.output_shapes = [t.shape for t in op.outputs]
