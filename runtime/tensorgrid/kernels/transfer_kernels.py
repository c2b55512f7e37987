"""Kernels of ``_Send`` and ``_Recv``: hand a tensor to the step's rendezvous, or wait for one.

The rendezvous (provided by the task running the step) decides how the bytes move;
these kernels only name the edge. A Send takes its tensor on the device that produced
it (a GPU tensor is staged to host memory by the transport, once, into a reused
pinned buffer); a Recv yields host memory, copied to a device by the executor when an
op placed there consumes it.
"""

from __future__ import annotations

from typing import Any, Callable

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels import tensor_array_kernels
from tensorgrid.kernels.registry import register_kernel


@register_kernel("_Send", host_only=True, any_input_device=True)
def _send(k: context.KernelContext, step: context.StepContext, value: Any) -> None:
    if isinstance(value, tensor_array_kernels.TensorArrayValue) and k.attrs["send_task"] != k.attrs["recv_task"]:
        raise errors.InvalidArgumentError(
            None, None, f"{k.name}: the flow of TensorArray {value.name} would go from {k.attrs['send_task']} to "
            f"{k.attrs['recv_task']}, but a TensorArray stays on the task that created it: place the ops that "
            "use it, and the tf.while_loop or tf.cond that carries it, on that task")
    _rendezvous(k, step).send(step.step_id, k.attrs["key"], value, k.attrs["recv_task"])


@register_kernel("_Recv", is_async=True, host_only=True)
def _recv(k: context.KernelContext, step: context.StepContext, done: Callable[..., None]) -> None:
    _rendezvous(k, step).recv_async(step.step_id, k.attrs["key"], k.attrs["send_task"], done)


def _rendezvous(k: context.KernelContext, step: context.StepContext) -> context.Rendezvous:
    if step.rendezvous is None:
        raise errors.InternalError(None, None, f"{k.name}: a {k.op_type} runs only in a step that exchanges tensors "
                                   "with other tasks (a partition of a distributed graph), and this step has none")
    return step.rendezvous
