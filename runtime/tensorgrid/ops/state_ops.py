"""Stateful ops on variables: the variable itself, assign, assign_add, assign_sub, and the
row-wise scatter_add, scatter_sub and scatter_update.

A ``VariableV2`` op outputs a reference (dtype ``*_ref``) to a buffer kept in the
task's resource manager under (container, shared_name); assign ops take that
reference and update the buffer in place. Scatter ops update only the rows named by
their indices (a sparse gradient step on an embedding table), repeated indices adding up.
"""

from __future__ import annotations

from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import op_util

op_registry.register_op("VariableV2", stateful=True, ref_outputs=(0,))
op_registry.register_op("Assign", stateful=True, ref_inputs=(0,), ref_outputs=(0,))
op_registry.register_op("AssignAdd", stateful=True, ref_inputs=(0,), ref_outputs=(0,))
op_registry.register_op("AssignSub", stateful=True, ref_inputs=(0,), ref_outputs=(0,))
op_registry.register_op("IsVariableInitialized", stateful=True, ref_inputs=(0,))
op_registry.register_op("CountUpTo", stateful=True, ref_inputs=(0,))
for _op_type in ("ScatterAdd", "ScatterSub", "ScatterUpdate"):
    op_registry.register_op(_op_type, stateful=True, ref_inputs=(0,), ref_outputs=(0,))
for _op_type in ("VariableV2", "Assign", "AssignAdd", "AssignSub", "IsVariableInitialized", "ScatterAdd",
                 "ScatterSub", "ScatterUpdate", "CountUpTo"):
    op_registry.NotDifferentiable(_op_type)


def variable_op(shape: Any, dtype: Any, name: str = "Variable", container: Optional[str] = None,
                shared_name: Optional[str] = None) -> graph_lib.Tensor:
    """The raw variable op; most programs use ``tf.Variable`` or ``tf.get_variable``."""
    dt = dtypes.as_dtype(dtype).base_dtype
    static = tensor_shape.as_shape(shape)
    graph = graph_lib.get_default_graph()
    op = graph.create_op("VariableV2", [], [(dt._as_ref, static)], name=name, attrs={
        "dtype": dt.name,
        "shape": static.as_tuple_or_none(),
        "container": graph.current_container if container is None else container,
        "shared_name": shared_name or "",
    })
    return op.outputs[0]


def _ref_of(ref: Any) -> graph_lib.Tensor:
    as_ref = getattr(ref, "_ref", None)
    t = as_ref() if callable(as_ref) else ref
    if not isinstance(t, graph_lib.Tensor) or not t.dtype.is_ref_dtype:
        raise TypeError(f"Assign ops need a variable (a reference tensor), got {ref!r}")
    return t


def _assign_like(op_type: str, ref: Any, value: Any, use_locking: Optional[bool], name: Optional[str],
                 extra: Optional[dict[str, Any]] = None) -> graph_lib.Tensor:
    r = _ref_of(ref)
    v = op_util.to_tensor(value, dtype=r.dtype.base_dtype)
    attrs = {"use_locking": bool(use_locking)}
    attrs.update(extra or {})
    validate = attrs.get("validate_shape", True)
    if validate and not r.shape.is_compatible_with(v.shape):
        raise ValueError(
            f"{op_type}: shapes of variable {r.op.name} {r.shape} and value {v.name} {v.shape} must be equal"
        )
    out_shape = r.shape if validate else v.shape
    with r.graph.colocate_with(r.op):
        return op_util.make_tensor(op_type, [r, v], r.dtype, out_shape, name or op_type, attrs)


def assign(ref: Any, value: Any, validate_shape: Optional[bool] = None, use_locking: Optional[bool] = None,
           name: Optional[str] = None) -> graph_lib.Tensor:
    """Stores ``value`` into the variable; returns the variable (a reference)."""
    validate = True if validate_shape is None else bool(validate_shape)
    return _assign_like("Assign", ref, value, use_locking, name, {"validate_shape": validate})


def assign_add(ref: Any, value: Any, use_locking: Optional[bool] = None, name: Optional[str] = None) -> graph_lib.Tensor:
    return _assign_like("AssignAdd", ref, value, use_locking, name)


def assign_sub(ref: Any, value: Any, use_locking: Optional[bool] = None, name: Optional[str] = None) -> graph_lib.Tensor:
    return _assign_like("AssignSub", ref, value, use_locking, name)


def _scatter(op_type: str, ref: Any, indices: Any, updates: Any, use_locking: bool,
             name: Optional[str]) -> graph_lib.Tensor:
    r = _ref_of(ref)
    i = op_util.to_tensor(indices, dtype=None if op_util.is_tensor_like(indices) else dtypes.int32)
    op_util.check_dtype_in(op_type, i, op_util.INDICES)
    u = op_util.to_tensor(updates, dtype=r.dtype.base_dtype)
    if r.shape.ndims is not None and i.shape.ndims is not None:
        if r.shape.ndims == 0:
            raise ValueError(f"{op_type}: variable {r.op.name} must have rank >= 1, got a scalar")
        expected = i.shape.concatenate(r.shape[1:])
        if not u.shape.is_compatible_with(expected):
            raise ValueError(
                f"{op_type}: updates {u.name} with shape {u.shape} must have shape indices.shape + "
                f"variable.shape[1:] = {expected} (indices {i.name}, variable {r.op.name} {r.shape})"
            )
    with r.graph.colocate_with(r.op):
        return op_util.make_tensor(op_type, [r, i, u], r.dtype, r.shape, name or op_type,
                                   {"use_locking": bool(use_locking)})


def scatter_add(ref: Any, indices: Any, updates: Any, use_locking: bool = False,
                name: Optional[str] = None) -> graph_lib.Tensor:
    """``ref[indices[i]] += updates[i]``; repeated indices all add (``tf.scatter_add``)."""
    return _scatter("ScatterAdd", ref, indices, updates, use_locking, name)


def scatter_sub(ref: Any, indices: Any, updates: Any, use_locking: bool = False,
                name: Optional[str] = None) -> graph_lib.Tensor:
    """``ref[indices[i]] -= updates[i]``; repeated indices all subtract (``tf.scatter_sub``)."""
    return _scatter("ScatterSub", ref, indices, updates, use_locking, name)


def scatter_update(ref: Any, indices: Any, updates: Any, use_locking: bool = True,
                   name: Optional[str] = None) -> graph_lib.Tensor:
    """``ref[indices[i]] = updates[i]`` (``tf.scatter_update``); with repeated indices one of them wins."""
    return _scatter("ScatterUpdate", ref, indices, updates, use_locking, name)


def is_variable_initialized(ref: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    as_ref = getattr(ref, "_ref", None)
    handle = as_ref() if callable(as_ref) else None
    # An embedding variable's reference is its table's handle (a resource), which knows it too.
    r = handle if isinstance(handle, graph_lib.Tensor) and handle.dtype == dtypes.resource else _ref_of(ref)
    with r.graph.colocate_with(r.op):
        return op_util.make_tensor("IsVariableInitialized", [r], dtypes.bool_, [], name or "IsVariableInitialized")


def count_up_to(ref: Any, limit: int, name: Optional[str] = None) -> graph_lib.Tensor:
    """Adds one to an int32 or int64 variable and returns its value before; once it has
    reached ``limit`` each run fails with OutOfRangeError (``tf.count_up_to``, how
    ``num_epochs`` ends an input pipeline)."""
    r = _ref_of(ref)
    op_util.check_dtype_in("CountUpTo", r, op_util.INDICES)
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"count_up_to: limit must be an int, got {limit!r}")
    with r.graph.colocate_with(r.op):
        return op_util.make_tensor("CountUpTo", [r], r.dtype.base_dtype, r.shape, name or "CountUpTo",
                                   {"limit": limit})
