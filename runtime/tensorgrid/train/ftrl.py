"""``FtrlOptimizer``: FTRL-proximal (McMahan et al., 2013), TF1's optimizer for linear models and the wide part.

Each weight keeps two slots: ``accum``, the sum of its squared gradients (``<var>/Ftrl``,
starting at ``initial_accumulator_value``), and ``linear``, the running sum of gradients
corrected by the change of learning rate (``<var>/Ftrl_1``, starting at zero). The weight
is solved from them in closed form each step, and is exactly zero while ``|linear|`` stays
within ``l1_regularization_strength``: L1 makes the model sparse. ``learning_rate_power``
sets how the per-coordinate learning rate decays (-0.5: as ``1 / sqrt(accum)``; 0: fixed).

``l2_regularization_strength`` is FTRL's stabilizing L2 (``beta / (2 * learning_rate)`` is
added to it, as TF does); ``l2_shrinkage_regularization_strength`` adds ``2 * l2_shrinkage * var``
to the gradient that ``linear`` sums (a magnitude penalty; TF's ``ApplyFtrlV2``). A sparse
gradient updates, and shrinks, only its rows; an embedding variable's ``accum`` and ``linear``
are kept per key in its table.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import tensor_conversion
from tensorgrid.ops import embedding_variable_ops
from tensorgrid.ops import init_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import training_ops
from tensorgrid.ops import variables
from tensorgrid.train import optimizer


class FtrlOptimizer(optimizer.Optimizer):
    def __init__(self, learning_rate: Any, learning_rate_power: float = -0.5, initial_accumulator_value: float = 0.1,
                 l1_regularization_strength: float = 0.0, l2_regularization_strength: float = 0.0,
                 use_locking: bool = False, name: str = "Ftrl", accum_name: Optional[str] = None,
                 linear_name: Optional[str] = None, l2_shrinkage_regularization_strength: float = 0.0,
                 beta: Optional[float] = None) -> None:
        super().__init__(use_locking, name)
        # TF1's checks and messages.
        if initial_accumulator_value < 0.0:
            raise ValueError(f"initial_accumulator_value {initial_accumulator_value:f} needs to be positive or zero")
        if learning_rate_power > 0.0:
            raise ValueError(f"learning_rate_power {learning_rate_power:f} needs to be negative or zero")
        if l1_regularization_strength < 0.0:
            raise ValueError(f"l1_regularization_strength {l1_regularization_strength:f} needs to be positive or zero")
        if l2_regularization_strength < 0.0:
            raise ValueError(f"l2_regularization_strength {l2_regularization_strength:f} needs to be positive or zero")
        if l2_shrinkage_regularization_strength < 0.0:
            raise ValueError(f"l2_shrinkage_regularization_strength {l2_shrinkage_regularization_strength:f} "
                             "needs to be positive or zero")
        self._learning_rate = learning_rate
        self._learning_rate_power = learning_rate_power
        self._initial_accumulator_value = initial_accumulator_value
        self._l1_regularization_strength = l1_regularization_strength
        self._l2_regularization_strength = l2_regularization_strength
        self._beta = 0.0 if beta is None else beta
        self._l2_shrinkage_regularization_strength = l2_shrinkage_regularization_strength
        self._accum_name = accum_name
        self._linear_name = linear_name
        self._hyper: dict[str, Any] = {}

    def _create_slots(self, var_list: Sequence[variables.Variable]) -> None:
        for v in var_list:
            dtype = v.dtype.base_dtype
            if not v.get_shape().is_fully_defined():
                raise ValueError(
                    f"FtrlOptimizer needs variables of a fully defined shape; {v.op.name} has {v.get_shape()}")
            init = init_ops.constant_initializer(self._initial_accumulator_value, dtype=dtype)
            self._get_or_make_slot_with_initializer(v, init, v.get_shape(), dtype, "accum",
                                                    self._accum_name or self._name)
            self._zeros_slot(v, "linear", self._linear_name or self._name)

    def _prepare(self) -> None:
        learning_rate = self._call_if_callable(self._learning_rate)
        hyper = self._hyper
        hyper["learning_rate"] = tensor_conversion.convert_to_tensor(learning_rate, name="learning_rate")
        hyper["l1_regularization_strength"] = tensor_conversion.convert_to_tensor(
            self._l1_regularization_strength, name="l1_regularization_strength")
        # TF1 builds beta's share of L2 from the learning rate as given (a Python float becomes a float32 tensor).
        beta_l2 = math_ops.truediv(self._beta, math_ops.multiply(2.0, math_ops.maximum(learning_rate, 1e-36)))
        hyper["adjusted_l2_regularization_strength"] = tensor_conversion.convert_to_tensor(
            math_ops.add(self._l2_regularization_strength, beta_l2), name="adjusted_l2_regularization_strength")
        hyper["l2_shrinkage_regularization_strength"] = tensor_conversion.convert_to_tensor(
            self._l2_shrinkage_regularization_strength, name="l2_shrinkage_regularization_strength")
        hyper["learning_rate_power"] = tensor_conversion.convert_to_tensor(
            self._learning_rate_power, name="learning_rate_power")

    def _cast(self, name: str, var: variables.Variable) -> graph_lib.Tensor:
        return math_ops.cast(self._hyper[name], var.dtype.base_dtype)

    def _apply_dense(self, grad: graph_lib.Tensor, var: variables.Variable) -> Any:
        accum, linear = self.get_slot(var, "accum"), self.get_slot(var, "linear")
        lr, l1, l2, lr_power = (self._cast(name, var) for name in (
            "learning_rate", "l1_regularization_strength", "adjusted_l2_regularization_strength",
            "learning_rate_power"))
        if self._l2_shrinkage_regularization_strength <= 0.0:
            return training_ops.apply_ftrl(var, accum, linear, grad, lr, l1, l2, lr_power,
                                           use_locking=self._use_locking).op
        shrinkage = self._cast("l2_shrinkage_regularization_strength", var)
        return training_ops.apply_ftrl_v2(var, accum, linear, grad, lr, l1, l2, shrinkage, lr_power,
                                          use_locking=self._use_locking).op

    def _apply_sparse_duplicate_indices(self, grad: indexed_slices.IndexedSlices, var: variables.Variable) -> Any:
        # One fused op: the kernel sums the rows of repeated indices, as TF1's optimizer does before applying.
        accum, linear = self.get_slot(var, "accum"), self.get_slot(var, "linear")
        lr, l1, l2, lr_power = (self._cast(name, var) for name in (
            "learning_rate", "l1_regularization_strength", "adjusted_l2_regularization_strength",
            "learning_rate_power"))
        if self._l2_shrinkage_regularization_strength <= 0.0:
            return training_ops.sparse_apply_ftrl(var, accum, linear, grad.values, grad.indices, lr, l1, l2,
                                                  lr_power, use_locking=self._use_locking).op
        shrinkage = self._cast("l2_shrinkage_regularization_strength", var)
        return training_ops.sparse_apply_ftrl_v2(var, accum, linear, grad.values, grad.indices, lr, l1, l2,
                                                 shrinkage, lr_power, use_locking=self._use_locking).op

    _apply_sparse = _apply_sparse_duplicate_indices

    def _apply_embedding_variable(self, grad: Any, var: embedding_variable_ops.EmbeddingVariable,
                                  global_step: Any) -> Any:
        # accum and linear are kept per key in the table, saved as "<var>/<accum name>" and "<var>/<linear name>".
        accum = var.add_slot(self._accum_name or self._name, self._initial_accumulator_value)
        linear = var.add_slot(self._linear_name or self._name + "_1", 0.0)
        return embedding_variable_ops.sparse_apply(
            var, "KvResourceSparseApplyFtrl", self._hyper["learning_rate"], grad, global_step,
            {"accum_slot_name": accum.name, "linear_slot_name": linear.name,
             "initial_accumulator_value": accum.initial_value},
            [self._hyper[name] for name in ("l1_regularization_strength", "adjusted_l2_regularization_strength",
                                             "l2_shrinkage_regularization_strength", "learning_rate_power")])
