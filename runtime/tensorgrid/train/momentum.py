"""``MomentumOptimizer``: ``accum = momentum * accum + grad``; ``var -= lr * accum``.

With ``use_nesterov=True`` the step looks ahead: ``var -= lr * (grad + momentum * accum)``.
The accumulator is the slot ``momentum``, named ``<var>/Momentum``. A sparse gradient
moves only its rows of the accumulator and the variable (TF1's ``SparseApplyMomentum``):
the momentum of rows absent from a batch does not carry them further.
"""

from __future__ import annotations

from typing import Any, Sequence

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import tensor_conversion
from tensorgrid.ops import math_ops
from tensorgrid.ops import training_ops
from tensorgrid.ops import variables
from tensorgrid.train import optimizer


class MomentumOptimizer(optimizer.Optimizer):
    def __init__(self, learning_rate: Any, momentum: Any, use_locking: bool = False, name: str = "Momentum",
                 use_nesterov: bool = False) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov
        self._learning_rate_tensor: Any = None
        self._momentum_tensor: Any = None

    def _create_slots(self, var_list: Sequence[variables.Variable]) -> None:
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self) -> None:
        self._learning_rate_tensor = tensor_conversion.convert_to_tensor(
            self._call_if_callable(self._learning_rate), name="learning_rate")
        self._momentum_tensor = tensor_conversion.convert_to_tensor(self._call_if_callable(self._momentum), name="momentum")

    def _apply_dense(self, grad: graph_lib.Tensor, var: variables.Variable) -> Any:
        accum = self.get_slot(var, "momentum")
        dtype = var.dtype.base_dtype
        return training_ops.apply_momentum(
            var, accum, math_ops.cast(self._learning_rate_tensor, dtype), grad,
            math_ops.cast(self._momentum_tensor, dtype), use_locking=self._use_locking,
            use_nesterov=self._use_nesterov,
        ).op

    def _apply_sparse_duplicate_indices(self, grad: indexed_slices.IndexedSlices, var: variables.Variable) -> Any:
        accum = self.get_slot(var, "momentum")
        dtype = var.dtype.base_dtype
        return training_ops.sparse_apply_momentum(
            var, accum, math_ops.cast(self._learning_rate_tensor, dtype), grad.values, grad.indices,
            math_ops.cast(self._momentum_tensor, dtype), use_locking=self._use_locking,
            use_nesterov=self._use_nesterov,
        ).op

    _apply_sparse = _apply_sparse_duplicate_indices
