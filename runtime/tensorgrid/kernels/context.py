"""The contract every kernel is written against, as TensorFlow's ``op_kernel.h``.

A kernel is called as ``fn(k, step, *inputs)``: ``k`` is the node's ``KernelContext``
(its attributes, backend and persistent state, made once per node of a plan), ``step``
a ``StepContext`` (the step's id, resource manager, rendezvous, cancellation and
function library). Kernels import this module, never the execution layer: it
implements the Protocols here (``execution/executor.py``, ``execution/resources.py``,
the worker's rendezvous) and hands them to each kernel call, so a kernel that runs a
function (If, While, a dataset's ``map``) asks the step's function library for it
instead of building a plan itself.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Protocol, Sequence, TypeVar

from tensorgrid.framework import graph as graph_lib
from tensorgrid.kernels import backend as backend_lib

R = TypeVar("R")


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


class ResourceManager(Protocol):
    """Named containers of the task's resources (variables, queues, accumulators, iterators),
    shared by every step and session on the task (TensorFlow's ``ResourceMgr``)."""

    @property
    def generation(self) -> int:
        """Changes when containers are cleared, so a kernel drops the resources it cached."""

    @property
    def variable_type(self) -> type[Any]:
        """The class of variables, made as ``variable_type(name, dtype, shape, backend)``."""

    def lookup_or_create(self, container: str, name: str, kind: type, create: Callable[[], R]) -> R:
        """The resource ``name`` in ``container``, made by ``create`` when absent; an error
        when the one there is not a ``kind``."""


class Rendezvous(Protocol):
    """Where a ``_Send`` leaves a tensor for the ``_Recv`` of another partition (TensorFlow's
    ``Rendezvous``); keys name the edge and the tasks at its ends."""

    def send(self, step_id: int, key: str, value: Any, recv_task: Optional[str] = None) -> None:
        """Hands ``value`` to the receiver of ``key`` in ``step_id``, on ``recv_task``."""

    def recv_async(self, step_id: int, key: str, send_task: str, done: Callable[..., None]) -> None:
        """Calls ``done(value)`` (or ``done(failure=exc)``) once ``key``'s value arrives."""

    def flush(self, step_id: int) -> None:
        """Sends what the step left for other tasks (the executor calls it before waiting)."""


class Function(Protocol):
    """A function attribute (a branch, a loop body, a dataset's ``map``) ready to run."""

    def __call__(self, step: StepContext, args: Sequence[Any]) -> list[Any]:
        """The function's outputs for ``args``, run within ``step``."""


class FunctionLibrary(Protocol):
    """Prepares functions for kernels that run them (TensorFlow's ``FunctionLibraryRuntime``)."""

    def instantiate(self, attr: Any, backend: backend_lib.Backend, replay: bool = False,
                    recompute: bool = False) -> Function:
        """The function ``attr`` describes, its ops on ``backend`` where they have a kernel
        for it; ``replay`` and ``recompute`` as in ``framework.func_graph`` and ``StepContext``."""


class StepContext(Protocol):
    """Per-step facts a kernel needs: where state lives and how tensors arrive from other tasks."""

    @property
    def step_id(self) -> int: ...

    @property
    def resources(self) -> ResourceManager: ...

    @property
    def rendezvous(self) -> Optional[Rendezvous]:
        """None in a step that exchanges no tensors with other tasks (a local session)."""

    @property
    def cancelled(self) -> threading.Event:
        """Set when the step failed or was cancelled: waiting kernels give up."""

    @property
    def args(self) -> Sequence[Any]:
        """The arguments of the function call this step runs (``_Arg`` reads them)."""

    @property
    def recompute(self) -> bool:
        """A gradient pass recomputing forward values: what the forward pass read is read again
        (a TensorArray read neither checks nor clears the element; docs/architecture.md)."""

    @property
    def functions(self) -> FunctionLibrary: ...

    def detached(self) -> StepContext:
        """A step with this one's id and resources but a cancellation of its own, no
        rendezvous and no arguments: for work that runs ahead of the steps (prefetching)."""
