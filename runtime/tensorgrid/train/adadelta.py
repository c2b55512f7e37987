"""``AdadeltaOptimizer`` (Zeiler, 2012): a step size from the ratio of two running averages.

``accum = rho * accum + (1 - rho) * grad ** 2``;
``update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad``; ``var -= lr * update``;
``accum_update = rho * accum_update + (1 - rho) * update ** 2``.
The slots are ``accum`` (``<var>/Adadelta``) and ``accum_update`` (``<var>/Adadelta_1``), both
starting at zero, as in TF1. A sparse gradient moves only its rows of the variable and the slots.
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


class AdadeltaOptimizer(optimizer.Optimizer):
    def __init__(self, learning_rate: Any = 0.001, rho: Any = 0.95, epsilon: Any = 1e-8, use_locking: bool = False,
                 name: str = "Adadelta") -> None:
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._rho = rho
        self._epsilon = epsilon
        self._hyper: dict[str, Any] = {}

    def _create_slots(self, var_list: Sequence[variables.Variable]) -> None:
        for v in var_list:
            self._zeros_slot(v, "accum", self._name)
            self._zeros_slot(v, "accum_update", self._name)

    def _prepare(self) -> None:
        for name, value in (("lr", self._lr), ("rho", self._rho), ("epsilon", self._epsilon)):
            self._hyper[name] = tensor_conversion.convert_to_tensor(self._call_if_callable(value), name=name)

    def _hyper_parameters(self, var: variables.Variable) -> tuple[graph_lib.Tensor, graph_lib.Tensor, graph_lib.Tensor]:
        dtype = var.dtype.base_dtype
        hyper = self._hyper
        return (math_ops.cast(hyper["lr"], dtype), math_ops.cast(hyper["rho"], dtype),
                math_ops.cast(hyper["epsilon"], dtype))

    def _apply_dense(self, grad: graph_lib.Tensor, var: variables.Variable) -> Any:
        return training_ops.apply_adadelta(var, self.get_slot(var, "accum"), self.get_slot(var, "accum_update"),
                                           *self._hyper_parameters(var), grad, use_locking=self._use_locking).op

    def _apply_sparse_duplicate_indices(self, grad: indexed_slices.IndexedSlices, var: variables.Variable) -> Any:
        return training_ops.sparse_apply_adadelta(
            var, self.get_slot(var, "accum"), self.get_slot(var, "accum_update"), *self._hyper_parameters(var),
            grad.values, grad.indices, use_locking=self._use_locking).op

    _apply_sparse = _apply_sparse_duplicate_indices
