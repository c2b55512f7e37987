"""``tf.gradients``: reverse-mode autodiff over the graph.

One reverse walk: find the ops on a path from ``xs`` to ``ys``, then visit them
from the ``ys`` end once all of an op's output gradients are known, summing partial
gradients with ``add_n`` and asking each op type's registered rule for the
gradients of its inputs.

A gradient may be an ``IndexedSlices`` (a gather's gradient for its params), as in
TF. Several IndexedSlices for one tensor are concatenated, not summed; with a dense
partial among them the sum is dense. Rules that pass an IndexedSlices on unchanged
receive it as it is; every other rule gets it densified.
"""

from __future__ import annotations

import collections
import contextlib
from typing import Any, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_conversion
from tensorgrid.ops import array_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import sparse_ops  # noqa: F401 - registers the densifying conversion of IndexedSlices

_RULES_TAKING_INDEXED_SLICES = frozenset({"Identity", "PlaceholderWithDefault", "AddN", "DynamicStitch",
                                          "ParallelDynamicStitch", "ConcatV2"})
"""Op types whose gradient rule handles an IndexedSlices output gradient itself (TF's do too)."""


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _as_tensor(value: Any, as_ref: bool) -> graph_lib.Tensor:
    return tensor_conversion.convert_to_tensor(value, as_ref=as_ref)


def gradients(
    ys: Any,
    xs: Any,
    grad_ys: Any = None,
    name: str = "gradients",
    colocate_gradients_with_ops: bool = False,
    gate_gradients: bool = False,
    aggregation_method: Any = None,
    stop_gradients: Any = None,
) -> list[Any]:
    """Symbolic d(sum ys)/d(x) for each x: a Tensor, an IndexedSlices (as TF returns for a gathered
    x), or None where an x does not affect any y."""
    y_list = [_as_tensor(y, as_ref=False) for y in _as_list(ys)]
    x_list = [_as_tensor(x, as_ref=True) for x in _as_list(xs)]
    stops = {_as_tensor(s, as_ref=False) for s in _as_list(stop_gradients)} if stop_gradients is not None else set()
    graph = y_list[0].graph
    if grad_ys is None:
        grad_y_list: list[Any] = [None] * len(y_list)
    else:
        grad_y_list = _as_list(grad_ys)
        if len(grad_y_list) != len(y_list):
            raise ValueError(f"Passed {len(grad_y_list)} grad_ys for {len(y_list)} ys")

    with graph.as_default(), graph.name_scope(name):
        between = _ops_between(y_list, x_list, stops)
        grads: dict[graph_lib.Tensor, list[Any]] = collections.defaultdict(list)
        for y, gy in zip(y_list, grad_y_list):
            if gy is None:
                with graph.colocate_with(y.op) if colocate_gradients_with_ops else contextlib.nullcontext():
                    gy = array_ops.ones_like(y, name=f"grad_ys_{len(grads)}")
            else:
                gy = tensor_conversion.convert_to_tensor(gy, dtype=y.dtype.base_dtype)
                if not y.shape.is_compatible_with(gy.shape):
                    raise ValueError(f"grad_ys shape {gy.shape} is incompatible with {y.name} shape {y.shape}")
            grads[y].append(gy)

        pending = {op: 0 for op in between}
        for op in between:
            for t in op.inputs:
                if t.op in pending and t not in stops:
                    pending[t.op] += 1
        ready = collections.deque(op for op in between if pending[op] == 0)
        visited: set[graph_lib.Operation] = set()
        while ready:
            op = ready.popleft()
            if op in visited:
                continue
            visited.add(op)
            out_grads = [_aggregate(grads.get(t)) for t in op.outputs]
            has_grad = any(g is not None for g in out_grads)
            in_grads: list[Any] = [None] * len(op.inputs)
            if has_grad:
                in_grads = _call_gradient_rule(graph, op, out_grads, colocate_gradients_with_ops)
            for t, g in zip(op.inputs, in_grads):
                if t.op not in pending or t in stops:
                    continue
                if g is not None and t.dtype.base_dtype == dtypes.resource:
                    grads[t].append(g)  # an embedding variable's handle: its rows' IndexedSlices
                elif g is not None and t.dtype.base_dtype.is_floating:
                    if not t.shape.is_compatible_with(g.shape):
                        raise ValueError(
                            f"Gradient of {op.type} op {op.name} for input {t.name} has shape {g.shape}, "
                            f"expected {t.shape}"
                        )
                    grads[t].append(g)
                pending[t.op] -= 1
                if pending[t.op] == 0:
                    ready.append(t.op)
        return [_aggregate(grads.get(x)) for x in x_list]


def _call_gradient_rule(graph: graph_lib.Graph, op: graph_lib.Operation, out_grads: list[Any],
                        colocate: bool) -> list[Any]:
    op_type = op._attrs.get("_gradient_op_type", op.type)
    try:
        rule = op_registry.gradient_function(op_type)
    except LookupError:
        raise LookupError(
            f"No gradient defined for operation {op.name!r} (op type: {op.type}); "
            "wrap its input in tf.stop_gradient if no gradient should flow through it"
        ) from None
    if rule is None:
        return [None] * len(op.inputs)
    filled = [g if g is not None else array_ops.zeros_like(t) for g, t in zip(out_grads, op.outputs)]
    if op_type not in _RULES_TAKING_INDEXED_SLICES:
        filled = [tensor_conversion.convert_to_tensor(g) if isinstance(g, indexed_slices.IndexedSlices) else g
                  for g in filled]
    with graph.name_scope(op.name + "_grad"), graph.colocate_with(op) if colocate else contextlib.nullcontext():
        result = rule(op, *filled)
    result = list(result) if isinstance(result, (list, tuple)) else [result]
    if len(result) != len(op.inputs):
        raise ValueError(
            f"Gradient rule for {op.type} returned {len(result)} gradients for {len(op.inputs)} inputs"
        )
    return [None if g is None else indexed_slices.convert_to_tensor_or_indexed_slices(g) for g in result]


def _aggregate(partials: Optional[list[Any]]) -> Any:
    """The sum of the partial gradients of one tensor (TF's ``_AggregatedGrads``)."""
    if not partials:
        return None
    if len(partials) == 1:
        return partials[0]
    if any(isinstance(g, graph_lib.Tensor) for g in partials):
        return math_ops.add_n(partials)  # IndexedSlices among them are densified
    return aggregate_indexed_slices(partials)


def aggregate_indexed_slices(grads: list[indexed_slices.IndexedSlices]) -> indexed_slices.IndexedSlices:
    """One IndexedSlices holding all the slices of ``grads`` (their values and indices concatenated).

    Indices of mixed dtypes are all made int64 first, as TF does.
    """
    index_dtypes = {g.indices.dtype.base_dtype for g in grads}
    if len(index_dtypes) > 1:
        grads = [g if g.indices.dtype.base_dtype == dtypes.int64 else
                 indexed_slices.IndexedSlices(g.values, math_ops.cast(g.indices, dtypes.int64), g.dense_shape)
                 for g in grads]
    return indexed_slices.IndexedSlices(array_ops.concat([g.values for g in grads], 0),
                                        array_ops.concat([g.indices for g in grads], 0), grads[0].dense_shape)


def _ops_between(ys: Sequence[graph_lib.Tensor], xs: Sequence[graph_lib.Tensor],
                 stops: set[graph_lib.Tensor]) -> set[graph_lib.Operation]:
    """Ops that lie on some path from an x to a y (the only ones that need a gradient)."""
    forward: set[graph_lib.Operation] = set()
    stack = [x.op for x in xs]
    while stack:
        op = stack.pop()
        if op in forward:
            continue
        forward.add(op)
        for t in op.outputs:
            stack.extend(t._consumers)
    between: set[graph_lib.Operation] = set()
    stack = [y.op for y in ys]
    seen: set[graph_lib.Operation] = set()
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        if op in forward:
            between.add(op)
        for t in op.inputs:
            if t not in stops:
                stack.append(t.op)
    return between
