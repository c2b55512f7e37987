"""``AdagradOptimizer``: ``accum += grad ** 2``; ``var -= lr * grad / sqrt(accum)``.

The accumulator is the slot ``accumulator``, named ``<var>/Adagrad`` and starting at
``initial_accumulator_value`` (0.1 by default, as in TF1). A sparse gradient updates
only its rows of the accumulator and the variable.
"""

from __future__ import annotations

from typing import Any, Sequence

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import tensor_conversion
from tensorgrid.ops import embedding_variable_ops
from tensorgrid.ops import init_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import training_ops
from tensorgrid.ops import variables
from tensorgrid.train import optimizer


class AdagradOptimizer(optimizer.Optimizer):
    def __init__(self, learning_rate: Any, initial_accumulator_value: float = 0.1, use_locking: bool = False,
                 name: str = "Adagrad") -> None:
        if initial_accumulator_value <= 0.0:
            raise ValueError(f"initial_accumulator_value must be positive: {initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value
        self._learning_rate_tensor: Any = None

    def _create_slots(self, var_list: Sequence[variables.Variable]) -> None:
        for v in var_list:
            dtype = v.dtype.base_dtype
            if not v.get_shape().is_fully_defined():
                raise ValueError(
                    f"AdagradOptimizer needs variables of a fully defined shape; {v.op.name} has {v.get_shape()}"
                )
            init = init_ops.constant_initializer(self._initial_accumulator_value, dtype=dtype)
            self._get_or_make_slot_with_initializer(v, init, v.get_shape(), dtype, "accumulator", self._name)

    def _prepare(self) -> None:
        self._learning_rate_tensor = tensor_conversion.convert_to_tensor(
            self._call_if_callable(self._learning_rate), name="learning_rate")

    def _apply_dense(self, grad: graph_lib.Tensor, var: variables.Variable) -> Any:
        accum = self.get_slot(var, "accumulator")
        lr = math_ops.cast(self._learning_rate_tensor, var.dtype.base_dtype)
        return training_ops.apply_adagrad(var, accum, lr, grad, use_locking=self._use_locking).op

    def _apply_sparse_duplicate_indices(self, grad: indexed_slices.IndexedSlices, var: variables.Variable) -> Any:
        accum = self.get_slot(var, "accumulator")
        lr = math_ops.cast(self._learning_rate_tensor, var.dtype.base_dtype)
        return training_ops.sparse_apply_adagrad(var, accum, lr, grad.values, grad.indices,
                                                 use_locking=self._use_locking).op

    _apply_sparse = _apply_sparse_duplicate_indices

    def _apply_embedding_variable(self, grad: Any, var: embedding_variable_ops.EmbeddingVariable,
                                  global_step: Any) -> Any:
        # The accumulator is kept per key in the table, saved as "<var>/<optimizer name>".
        slot = var.add_slot(self._name, self._initial_accumulator_value)
        return embedding_variable_ops.sparse_apply(
            var, "KvResourceSparseApplyAdagrad", self._learning_rate_tensor, grad, global_step,
            {"slot_name": slot.name, "initial_accumulator_value": slot.initial_value})
