"""``GradientDescentOptimizer``: ``var -= learning_rate * grad``."""

from __future__ import annotations

from typing import Any

from tensorgrid.framework import graph as graph_lib
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
        self._learning_rate_tensor = graph_lib.convert_to_tensor(lr, name="learning_rate")

    def _apply_dense(self, grad: graph_lib.Tensor, var: variables.Variable) -> Any:
        lr = math_ops.cast(self._learning_rate_tensor, var.dtype.base_dtype)
        return training_ops.apply_gradient_descent(var, lr, grad, use_locking=self._use_locking).op
