"""``RMSPropOptimizer`` (Hinton's RMSProp, TF1's formulation with momentum and an optional centering).

``ms = decay * ms + (1 - decay) * grad ** 2``; ``mom = momentum * mom + lr * grad / sqrt(ms + epsilon)``;
``var -= mom``. With ``centered=True`` the mean gradient ``mg`` is tracked too and the step
divides by ``sqrt(ms - mg ** 2 + epsilon)``, an estimate of the variance.

Slots as TF1 names and orders them: ``rms`` (``<var>/RMSProp``, starting at one), then
``mg`` when centered, then ``momentum`` (``<var>/RMSProp_1``, or ``<var>/RMSProp_2`` when
centered). A sparse gradient moves only its rows of the variable and the slots.
"""

from __future__ import annotations

from typing import Any, Sequence

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import tensor_conversion
from tensorgrid.ops import array_ops
from tensorgrid.ops import init_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import training_ops
from tensorgrid.ops import variables
from tensorgrid.train import optimizer


class RMSPropOptimizer(optimizer.Optimizer):
    def __init__(self, learning_rate: Any, decay: Any = 0.9, momentum: Any = 0.0, epsilon: Any = 1e-10,
                 use_locking: bool = False, centered: bool = False, name: str = "RMSProp") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._decay = decay
        self._momentum = momentum
        self._epsilon = epsilon
        self._centered = centered
        self._hyper: dict[str, Any] = {}

    def _create_slots(self, var_list: Sequence[variables.Variable]) -> None:
        for v in var_list:
            dtype = v.dtype.base_dtype
            if v.get_shape().is_fully_defined():
                self._get_or_make_slot_with_initializer(v, init_ops.ones_initializer(dtype=dtype), v.get_shape(),
                                                        dtype, "rms", self._name)
            else:
                with v.graph.as_default():
                    ones = array_ops.ones_like(v.initialized_value())
                self._get_or_make_slot(v, ones, "rms", self._name)
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self) -> None:
        for name, value in (("learning_rate", self._learning_rate), ("decay", self._decay),
                            ("momentum", self._momentum), ("epsilon", self._epsilon)):
            self._hyper[name] = tensor_conversion.convert_to_tensor(self._call_if_callable(value), name=name)

    def _hyper_parameters(self, var: variables.Variable) -> tuple[graph_lib.Tensor, graph_lib.Tensor, graph_lib.Tensor, graph_lib.Tensor]:
        dtype = var.dtype.base_dtype
        hyper = self._hyper
        return (math_ops.cast(hyper["learning_rate"], dtype), math_ops.cast(hyper["decay"], dtype),
                math_ops.cast(hyper["momentum"], dtype), math_ops.cast(hyper["epsilon"], dtype))

    def _apply_dense(self, grad: graph_lib.Tensor, var: variables.Variable) -> Any:
        rms, mom = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        if self._centered:
            return training_ops.apply_centered_rms_prop(var, self.get_slot(var, "mg"), rms, mom,
                                                        *self._hyper_parameters(var), grad,
                                                        use_locking=self._use_locking).op
        return training_ops.apply_rms_prop(var, rms, mom, *self._hyper_parameters(var), grad,
                                           use_locking=self._use_locking).op

    def _apply_sparse_duplicate_indices(self, grad: indexed_slices.IndexedSlices, var: variables.Variable) -> Any:
        rms, mom = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        if self._centered:
            return training_ops.sparse_apply_centered_rms_prop(
                var, self.get_slot(var, "mg"), rms, mom, *self._hyper_parameters(var), grad.values, grad.indices,
                use_locking=self._use_locking).op
        return training_ops.sparse_apply_rms_prop(var, rms, mom, *self._hyper_parameters(var), grad.values,
                                                  grad.indices, use_locking=self._use_locking).op

    _apply_sparse = _apply_sparse_duplicate_indices
