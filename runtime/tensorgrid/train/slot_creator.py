"""Slot variables: per-variable optimizer state (momentum, Adam's m and v, Adagrad's sums).

A slot of variable ``w`` is named ``w/<OptimizerName>`` (``w/Adam_1`` for a second
slot), has ``w``'s shape, is colocated with ``w`` (so the update runs where ``w``
lives), is not trainable, and is in GLOBAL_VARIABLES so savers include it. A slot of
one part of a partitioned variable (``emb/part_1/Adam``) is itself never partitioned,
and is saved as the same part of the logical slot ``emb/Adam``, as in TF.
"""

from __future__ import annotations

from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import init_ops
from tensorgrid.ops import variable_scope
from tensorgrid.ops import variables


def _create_slot_var(primary: variables.Variable, val: Any, shape: Any, dtype: Any,
                     validate_shape: bool) -> variables.Variable:
    # With a value rather than an initializer, the shape comes from the value.
    shape = shape if callable(val) else None
    scope = variable_scope.get_variable_scope()
    partitioner = scope.partitioner
    scope.set_partitioner(None)
    try:
        slot: variables.Variable = variable_scope.get_variable(
            "", initializer=val, trainable=False, shape=shape, dtype=dtype, validate_shape=validate_shape,
        )
    finally:
        scope.set_partitioner(partitioner)
    slice_info = primary._get_save_slice_info()
    rank = slot.get_shape().ndims
    if slice_info is not None and (rank is None or rank > 0):
        slot_name = slot.op.name[len(primary.op.name + "/"):]
        slot._set_save_slice_info(variables.SaveSliceInfo(
            slice_info.full_name + "/" + slot_name, slice_info.full_shape[:rank], slice_info.var_offset[:rank],
            slice_info.var_shape[:rank]))
    return slot


def create_slot(primary: variables.Variable, val: Any, name: str,
                colocate_with_primary: bool = True) -> variables.Variable:
    """A slot for ``primary`` initialized from the tensor ``val``."""
    validate_shape = val.get_shape().is_fully_defined()
    graph = primary.graph
    with graph.as_default(), variable_scope.variable_scope(None, primary.op.name + "/" + name):
        if colocate_with_primary:
            with graph.colocate_with(primary.op):
                return _create_slot_var(primary, val, None, None, validate_shape)
        return _create_slot_var(primary, val, None, None, validate_shape)


def create_slot_with_initializer(primary: variables.Variable, initializer: Any, shape: Any, dtype: Any, name: str,
                                 colocate_with_primary: bool = True) -> variables.Variable:
    """A slot for ``primary`` of the given shape and dtype, initialized by ``initializer``."""
    static = tensor_shape.as_shape(shape)
    validate_shape = static.is_fully_defined()
    graph = primary.graph
    with graph.as_default(), variable_scope.variable_scope(None, primary.op.name + "/" + name):
        if colocate_with_primary:
            with graph.colocate_with(primary.op):
                return _create_slot_var(primary, initializer, static, dtype, validate_shape)
        return _create_slot_var(primary, initializer, static, dtype, validate_shape)


def create_zeros_slot(primary: variables.Variable, name: str, dtype: Optional[Any] = None,
                      colocate_with_primary: bool = True) -> variables.Variable:
    """A slot for ``primary`` that starts at zero."""
    dt = dtypes.as_dtype(dtype if dtype is not None else primary.dtype).base_dtype
    slot_shape = primary.get_shape()
    if slot_shape.is_fully_defined():
        return create_slot_with_initializer(primary, init_ops.zeros_initializer(), slot_shape, dt, name,
                                            colocate_with_primary=colocate_with_primary)
    graph = primary.graph
    with graph.as_default():
        val = array_ops.zeros(array_ops.shape(primary.initialized_value()), dtype=dt)
    return create_slot(primary, val, name, colocate_with_primary=colocate_with_primary)
