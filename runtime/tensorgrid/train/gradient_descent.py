"""``GradientDescentOptimizer``: ``var -= learning_rate * grad``.

A sparse gradient is a ``scatter_sub`` of ``learning_rate * values`` at its indices, as
in TF1: only those rows move, and repeated indices all subtract.
"""

from __future__ import annotations

from typing import Any

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import tensor_conversion
from tensorgrid.ops import embedding_variable_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import training_ops
from tensorgrid.ops import variables
from tensorgrid.train import optimizer


class GradientDescentOptimizer(optimizer.Optimizer):
    def __init__(self, learning_rate: Any, use_locking: bool = False, name: str = "GradientDescent") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._learning_rate_tensor: Any = None

    def _prepare(self) -> None:
        lr = self._call_if_callable(self._learning_rate)
        self._learning_rate_tensor = tensor_conversion.convert_to_tensor(lr, name="learning_rate")

    def _apply_dense(self, grad: graph_lib.Tensor, var: variables.Variable) -> Any:
        lr = math_ops.cast(self._learning_rate_tensor, var.dtype.base_dtype)
        return training_ops.apply_gradient_descent(var, lr, grad, use_locking=self._use_locking).op

    def _apply_sparse_duplicate_indices(self, grad: indexed_slices.IndexedSlices, var: variables.Variable) -> Any:
        lr = math_ops.cast(self._learning_rate_tensor, var.dtype.base_dtype)
        delta = indexed_slices.IndexedSlices(math_ops.multiply(grad.values, lr), grad.indices, grad.dense_shape)
        return var.scatter_sub(delta, use_locking=self._use_locking)

    _apply_sparse = _apply_sparse_duplicate_indices

    def _apply_embedding_variable(self, grad: Any, var: embedding_variable_ops.EmbeddingVariable,
                                  global_step: Any) -> Any:
        return embedding_variable_ops.sparse_apply(var, "KvResourceSparseApplyGradientDescent",
                                                   self._learning_rate_tensor, grad, global_step)
