"""``ProximalAdagradOptimizer``: Adagrad's per-coordinate step, then the proximal step of L1 and L2 (FOBOS).

``accum += grad ** 2``; ``alpha = learning_rate / sqrt(accum)``; ``prox = var - alpha * grad``;
``var = sign(prox) * max(|prox| - alpha * l1, 0) / (1 + alpha * l2)``. The accumulator is
the slot ``accumulator`` (``<var>/ProximalAdagrad``, starting at ``initial_accumulator_value``).
A sparse gradient moves only its rows of the variable and the accumulator.
"""

from __future__ import annotations

from typing import Any, Sequence

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.ops import init_ops
from tensorgrid.ops import training_ops
from tensorgrid.ops import variables
from tensorgrid.train import proximal_gradient_descent


class ProximalAdagradOptimizer(proximal_gradient_descent.ProximalOptimizer):
    def __init__(self, learning_rate: Any, initial_accumulator_value: float = 0.1,
                 l1_regularization_strength: Any = 0.0, l2_regularization_strength: Any = 0.0,
                 use_locking: bool = False, name: str = "ProximalAdagrad") -> None:
        if initial_accumulator_value <= 0.0:
            raise ValueError(f"initial_accumulator_value must be positive: {initial_accumulator_value}")
        super().__init__(learning_rate, l1_regularization_strength, l2_regularization_strength, use_locking, name)
        self._initial_accumulator_value = initial_accumulator_value

    def _create_slots(self, var_list: Sequence[variables.Variable]) -> None:
        for v in var_list:
            dtype = v.dtype.base_dtype
            if not v.get_shape().is_fully_defined():
                raise ValueError(f"ProximalAdagradOptimizer needs variables of a fully defined shape; "
                                 f"{v.op.name} has {v.get_shape()}")
            init = init_ops.constant_initializer(self._initial_accumulator_value, dtype=dtype)
            self._get_or_make_slot_with_initializer(v, init, v.get_shape(), dtype, "accumulator", self._name)

    def _apply_dense(self, grad: graph_lib.Tensor, var: variables.Variable) -> Any:
        return training_ops.apply_proximal_adagrad(var, self.get_slot(var, "accumulator"),
                                                   *self._hyper_parameters(var), grad,
                                                   use_locking=self._use_locking).op

    def _apply_sparse_duplicate_indices(self, grad: indexed_slices.IndexedSlices, var: variables.Variable) -> Any:
        return training_ops.sparse_apply_proximal_adagrad(
            var, self.get_slot(var, "accumulator"), *self._hyper_parameters(var), grad.values, grad.indices,
            use_locking=self._use_locking).op

    _apply_sparse = _apply_sparse_duplicate_indices
