"""Kernels of variable ops: lookup-or-create in the resource manager, assign and scatter in place."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels import row_writes
from tensorgrid.kernels.registry import register_kernel

row_writes.reports_rows(("ScatterAdd", "ScatterSub", "ScatterUpdate"), positions=(0,))
row_writes.writes_no_variable("IsVariableInitialized", "VariableChangedRows")


@register_kernel("VariableV2")
def _variable(k: context.KernelContext, step: context.StepContext) -> Any:
    cached = k.state.get("variable")
    if cached is not None and cached[0] is step.resources and cached[1] == step.resources.generation:
        return cached[2]
    shape = k.attrs["shape"]
    name = k.attrs["shared_name"] or k.name
    dtype = k.output_dtypes[0]
    variable = step.resources.lookup_or_create(
        k.attrs["container"], name, step.resources.variable_type,
        lambda: step.resources.variable_type(name, dtype, shape, k.backend),
    )
    if getattr(variable, "awaits_its_op", False):
        with variable.lock:
            if variable.awaits_its_op:  # a PS's variable loaded from its replica: onto this op's device
                if variable.value is not None and variable.backend is not k.backend:
                    variable.value = k.backend.asarray(variable.backend.to_numpy(variable.value))
                variable.backend = k.backend
                variable.awaits_its_op = False
    k.state["variable"] = (step.resources, step.resources.generation, variable)
    return variable


def _locked(variable: Any, use_locking: bool) -> Any:
    return variable.lock if use_locking else _NO_LOCK


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_NO_LOCK = _NoLock()


@register_kernel("Assign")
def _assign(k: context.KernelContext, step: context.StepContext, variable: Any, value: Any) -> Any:
    with _locked(variable, k.attrs["use_locking"]):
        variable.assign(value, k.attrs["validate_shape"])
    return variable


@register_kernel("AssignAdd")
def _assign_add(k: context.KernelContext, step: context.StepContext, variable: Any, delta: Any) -> Any:
    with _locked(variable, k.attrs["use_locking"]):
        buffer = variable.read()
        k.xp.add(buffer, delta, out=buffer)
        variable.updates += 1
    return variable


@register_kernel("AssignSub")
def _assign_sub(k: context.KernelContext, step: context.StepContext, variable: Any, delta: Any) -> Any:
    with _locked(variable, k.attrs["use_locking"]):
        buffer = variable.read()
        k.xp.subtract(buffer, delta, out=buffer)
        variable.updates += 1
    return variable


def _scatter_rows(k: context.KernelContext, buffer: Any, indices: Any, updates: Any) -> tuple[Any, Any]:
    """Flat indices and the update rows, checked against the variable as TF's scatter kernels do."""
    if buffer.ndim < 1:
        raise errors.InvalidArgumentError(None, None, f"{k.name}: the variable must be at least 1-D")
    if updates.shape != indices.shape + buffer.shape[1:]:
        raise errors.InvalidArgumentError(
            None, None,
            f"{k.name}: must have updates.shape = indices.shape + params.shape[1:], got updates.shape "
            f"{list(updates.shape)}, indices.shape {list(indices.shape)}, params.shape {list(buffer.shape)}",
        )
    flat = indices.reshape(-1)
    if flat.size:
        low, high = int(flat.min()), int(flat.max())
        if low < 0 or high >= buffer.shape[0]:
            bad = low if low < 0 else high
            raise errors.InvalidArgumentError(
                None, None, f"{k.name}: indices[...] = {bad} is not in [0, {buffer.shape[0]})")
    return flat, updates.reshape((flat.shape[0],) + buffer.shape[1:])


@register_kernel("ScatterAdd")
def _scatter_add(k: context.KernelContext, step: context.StepContext, variable: Any, indices: Any, updates: Any) -> Any:
    return _scatter_accumulate(k, variable, indices, updates, negate=False)


@register_kernel("ScatterSub")
def _scatter_sub(k: context.KernelContext, step: context.StepContext, variable: Any, indices: Any, updates: Any) -> Any:
    return _scatter_accumulate(k, variable, indices, updates, negate=True)


def _scatter_accumulate(k: context.KernelContext, variable: Any, indices: Any, updates: Any, negate: bool) -> Any:
    """``variable[indices] += updates`` (or ``-=``), repeated indices summed."""
    with _locked(variable, k.attrs["use_locking"]):
        buffer = variable.read()
        flat, rows = _scatter_rows(k, buffer, indices, updates)
        k.backend.scatter_add(buffer, flat, -rows if negate else rows)
        variable.updates += 1
        row_writes.wrote_rows(k, flat, variable)
    return variable


@register_kernel("ScatterUpdate")
def _scatter_update(k: context.KernelContext, step: context.StepContext, variable: Any, indices: Any,
                    updates: Any) -> Any:
    with _locked(variable, k.attrs["use_locking"]):
        buffer = variable.read()
        flat, rows = _scatter_rows(k, buffer, indices, updates)
        buffer[flat] = rows
        variable.updates += 1
        row_writes.wrote_rows(k, flat, variable)
    return variable


@register_kernel("CountUpTo")
def _count_up_to(k: context.KernelContext, step: context.StepContext, variable: Any) -> Any:
    limit = k.attrs["limit"]
    with variable.lock:
        buffer = variable.read()
        before = buffer.copy()
        if int(k.backend.to_numpy(before)) >= limit:
            raise errors.OutOfRangeError(None, None, f"Reached limit of {limit}")
        buffer += 1
        variable.updates += 1
    return before


# On the host, taking the variable where it is: any kind of variable (an EmbeddingVariable
# lives on the host), and the answer is read on the host (report_uninitialized_variables).
@register_kernel("IsVariableInitialized", host_only=True, any_input_device=True)
def _is_initialized(k: context.KernelContext, step: context.StepContext, variable: Any) -> Any:
    return np.asarray(variable.initialized)


@register_kernel("UninitializedVariableNames", host_only=True)
def _uninitialized_names(k: context.KernelContext, step: context.StepContext, *initialized: Any) -> Any:
    import numpy

    names = [n for n, ok in zip(k.attrs["names"], initialized) if not bool(ok)]
    return numpy.array(names, dtype=object)


@register_kernel("VariableChangedRows")
def _variable_changed_rows(k: context.KernelContext, step: context.StepContext, variable: Any, since: Any) -> Any:
    """(baseline now, whether the whole value is given, the rows written after baseline ``since``,
    their values): an incremental checkpoint's read of one variable, on the variable's task."""
    xp = k.xp
    buffer = variable.read()
    wanted = [int(x) for x in k.backend.to_numpy(since).reshape(-1)]
    if len(wanted) != 2:
        raise errors.InvalidArgumentError(None, None, f"{k.name}: since must be [incarnation, version], got {wanted}")
    num_rows = buffer.shape[0] if buffer.ndim else 1
    token, rows = variable.written.changed_since(wanted[0], wanted[1], num_rows)
    if buffer.ndim == 0:
        rows = None  # a scalar has no rows: it is saved whole
    # The values are read after the baseline is taken (see WrittenRows.changed_since).
    if rows is None:
        return xp.asarray(token, dtype="int64"), xp.asarray(True), xp.zeros(0, dtype="int64"), buffer.copy()
    device_rows = xp.asarray(rows, dtype="int64")
    return xp.asarray(token, dtype="int64"), xp.asarray(False), device_rows, buffer[device_rows]
