"""Kernels of the functional control-flow ops: If, While, WhileGrad and a function's ``_Arg``.

Running a branch or a loop body is running a graph: each function is prepared from its
op's attribute once, by the step's function library (the executor makes it a ``Plan``
whose ops all run on the functional op's device), and kept in the op's kernel state.
A call runs it with a step context that carries the call's arguments.
"""

from __future__ import annotations

import threading
from typing import Any, Optional, Sequence

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.framework import func_graph
from tensorgrid.kernels import context
from tensorgrid.kernels import registry as kernel_registry


_compile_lock = threading.Lock()


def _function(k: context.KernelContext, step: context.StepContext, attr_name: str, replay: bool = False,
              recompute: bool = False) -> Any:
    key = f"function {attr_name} replay={replay} recompute={recompute}"
    compiled = k.state.get(key)
    if compiled is None:
        with _compile_lock:
            compiled = k.state.get(key)
            if compiled is None:
                compiled = k.state[key] = step.functions.instantiate(k.attrs[attr_name], k.backend, replay, recompute)
    return compiled


def _truth(k: context.KernelContext, value: Any, what: str) -> bool:
    if type(value) is np.bool_:  # what a comparison on the host makes: a boolean scalar already
        return bool(value)
    array = k.backend.to_numpy(value)
    if array.shape != () or array.dtype != np.bool_:
        raise errors.InvalidArgumentError(
            None, None, f"{k.name}: {what} must be a boolean scalar, got shape {list(array.shape)} of {array.dtype}")
    return bool(array)


def _results(values: list[Any]) -> Any:
    return values[0] if len(values) == 1 else tuple(values)


@kernel_registry.register_kernel(func_graph.ARG_OP_TYPE)
def _arg(k: context.KernelContext, step: context.StepContext) -> Any:
    return step.args[k.attrs["index"]]


@kernel_registry.register_kernel("If", forwards_input=True)
def _if(k: context.KernelContext, step: context.StepContext, pred: Any, *args: Any) -> Any:
    branch = "then_branch" if _truth(k, pred, "the predicate") else "else_branch"
    return _results(_function(k, step, branch, recompute=bool(k.attrs.get("gradient", False)))(step, args))


def _shape_invariants(k: context.KernelContext) -> list[tuple[int, Sequence[Optional[int]]]]:
    """(loop variable, its shape invariant) for each loop variable whose shape is checked."""
    checked = k.state.get("checked shape invariants")
    if checked is None:
        checked = k.state["checked shape invariants"] = [
            (i, tuple(shape)) for i, shape in enumerate(k.attrs["shape_invariants"]) if shape is not None]
    return checked


def _run_loop(k: context.KernelContext, step: context.StepContext, loop_vars: list[Any], captured: Sequence[Any],
              history: list[list[Any]] | None = None) -> list[Any]:
    replay = history is not None
    cond, body = _function(k, step, "cond", replay), _function(k, step, "body", replay)
    invariants = _shape_invariants(k)
    cancelled = step.cancelled
    captured = list(captured)
    while True:
        keep_going = cond(step, loop_vars + captured)[0]
        if not (keep_going if type(keep_going) is np.bool_ else _truth(k, keep_going, "the loop condition")):
            break
        if cancelled.is_set():
            raise errors.CancelledError(None, None, f"{k.name}: the step was cancelled")
        if history is not None:
            history.append(loop_vars)
        loop_vars = body(step, loop_vars + captured)
        for i, shape in invariants:
            value_shape = loop_vars[i].shape
            if value_shape != shape and (len(value_shape) != len(shape) or
                                         any(d is not None and d != v for d, v in zip(shape, value_shape))):
                raise errors.InvalidArgumentError(
                    None, None, f"{k.name}: loop variable {i} has shape {list(value_shape)} after an iteration, "
                    f"outside its shape invariant {list(shape)}")
    return loop_vars


@kernel_registry.register_kernel("While", forwards_input=True)
def _while(k: context.KernelContext, step: context.StepContext, *inputs: Any) -> Any:
    count = k.attrs["num_loop_vars"]
    return _results(_run_loop(k, step, list(inputs[:count]), inputs[count:]))


@kernel_registry.register_kernel("WhileGrad")
def _while_grad(k: context.KernelContext, step: context.StepContext, *inputs: Any) -> Any:
    """Replays the loop keeping each iteration's loop variables (a stateful body runs again),
    then applies the body's gradient function from the last iteration to the first."""
    count = k.attrs["num_loop_vars"]
    forward = inputs[:len(inputs) - count]
    loop_vars, captured = list(forward[:count]), forward[count:]
    history: list[list[Any]] = []
    _run_loop(k, step, loop_vars, captured, history)
    body_grad = _function(k, step, "body_grad", recompute=True)
    grads = list(inputs[len(inputs) - count:])
    captured_grads: list[Any] = [None] * len(captured)
    for state in reversed(history):
        found = body_grad(step, [*state, *captured, *grads])
        grads = found[:count]
        for j, g in enumerate(found[count:]):
            captured_grads[j] = g if captured_grads[j] is None else captured_grads[j] + g
    for j, g in enumerate(captured_grads):
        if g is None:
            value = captured[j].read() if hasattr(captured[j], "read") else captured[j]
            captured_grads[j] = k.xp.zeros_like(value, dtype=k.output_dtypes[count + j])
    return _results([*grads, *captured_grads])
