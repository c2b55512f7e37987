"""``ProximalGradientDescentOptimizer``: a gradient step, then the proximal step of L1 and L2 penalties.

``prox = var - lr * grad``; ``var = sign(prox) * max(|prox| - lr * l1, 0) / (1 + lr * l2)``
(FOBOS, Duchi and Singer): L1 drives small weights to exactly zero. No slots. A sparse
gradient moves (and shrinks) only its rows, as TF1's ``SparseApplyProximalGradientDescent``.
"""

from __future__ import annotations

from typing import Any

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import tensor_conversion
from tensorgrid.ops import math_ops
from tensorgrid.ops import training_ops
from tensorgrid.ops import variables
from tensorgrid.train import optimizer


class ProximalOptimizer(optimizer.Optimizer):
    """What the proximal optimizers share: a learning rate and L1/L2 strengths, made tensors once
    per ``apply_gradients`` and cast to each variable's dtype (TF1 passes them uncast, so a
    float64 variable fails there: docs/differences.md)."""

    def __init__(self, learning_rate: Any, l1_regularization_strength: Any, l2_regularization_strength: Any,
                 use_locking: bool, name: str) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._l1_regularization_strength = l1_regularization_strength
        self._l2_regularization_strength = l2_regularization_strength
        self._hyper: dict[str, Any] = {}

    def _prepare(self) -> None:
        for name, value in (("learning_rate", self._learning_rate),
                            ("l1_regularization_strength", self._l1_regularization_strength),
                            ("l2_regularization_strength", self._l2_regularization_strength)):
            self._hyper[name] = tensor_conversion.convert_to_tensor(self._call_if_callable(value), name=name)

    def _hyper_parameters(self, var: variables.Variable) -> tuple[graph_lib.Tensor, graph_lib.Tensor, graph_lib.Tensor]:
        dtype = var.dtype.base_dtype
        hyper = self._hyper
        return (math_ops.cast(hyper["learning_rate"], dtype), math_ops.cast(hyper["l1_regularization_strength"], dtype),
                math_ops.cast(hyper["l2_regularization_strength"], dtype))


class ProximalGradientDescentOptimizer(ProximalOptimizer):
    def __init__(self, learning_rate: Any, l1_regularization_strength: Any = 0.0,
                 l2_regularization_strength: Any = 0.0, use_locking: bool = False,
                 name: str = "ProximalGradientDescent") -> None:
        super().__init__(learning_rate, l1_regularization_strength, l2_regularization_strength, use_locking, name)


    def _apply_dense(self, grad: graph_lib.Tensor, var: variables.Variable) -> Any:
        return training_ops.apply_proximal_gradient_descent(var, *self._hyper_parameters(var), grad,
                                                            use_locking=self._use_locking).op

    def _apply_sparse_duplicate_indices(self, grad: indexed_slices.IndexedSlices, var: variables.Variable) -> Any:
        return training_ops.sparse_apply_proximal_gradient_descent(
            var, *self._hyper_parameters(var), grad.values, grad.indices, use_locking=self._use_locking).op

    _apply_sparse = _apply_sparse_duplicate_indices
