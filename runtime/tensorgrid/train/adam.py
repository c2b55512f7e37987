"""``AdamOptimizer`` (Kingma and Ba), with TF1's bias correction folded into the step size.

Slots ``m`` and ``v`` are named ``<var>/Adam`` and ``<var>/Adam_1``. The running
powers ``beta1_power`` and ``beta2_power`` are two non-slot variables per graph,
colocated with the first variable by name, multiplied by beta1 and beta2 after
every step's updates.

A sparse gradient follows TF1's ``_apply_sparse``: every row of ``m`` and ``v``
decays, the gradient rows are added at their indices, and every row of the variable
moves (so rows absent from a batch still drift with their momentum). One fused op.

An embedding variable (``tf.get_embedding_variable``) is updated lazily, as DeepRec's AdamAsync:
only the keys of the batch move, ``m`` and ``v`` kept per key in its table (saved as
``<var>/Adam`` and ``<var>/Adam_1``), the beta powers shared with the dense variables.
"""

from __future__ import annotations

from typing import Any, Sequence

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import tensor_conversion
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import embedding_variable_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import training_ops
from tensorgrid.ops import variables
from tensorgrid.train import optimizer


class AdamOptimizer(optimizer.Optimizer):
    def __init__(self, learning_rate: Any = 0.001, beta1: Any = 0.9, beta2: Any = 0.999, epsilon: Any = 1e-08,
                 use_locking: bool = False, name: str = "Adam") -> None:
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon
        self._lr_t: Any = None
        self._beta1_t: Any = None
        self._beta2_t: Any = None
        self._epsilon_t: Any = None

    def _get_beta_accumulators(self) -> tuple[variables.Variable, variables.Variable]:
        graph = graph_lib.get_default_graph()
        beta1_power = self._get_non_slot_variable("beta1_power", graph)
        beta2_power = self._get_non_slot_variable("beta2_power", graph)
        assert beta1_power is not None and beta2_power is not None
        return beta1_power, beta2_power

    def _create_slots(self, var_list: Sequence[variables.Variable]) -> None:
        if var_list:
            self._create_beta_powers(min(var_list, key=lambda v: v.name))
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name + "_1")

    def _create_beta_powers(self, colocate_with: Any) -> None:
        self._create_non_slot_variable(self._beta1, "beta1_power", colocate_with)
        self._create_non_slot_variable(self._beta2, "beta2_power", colocate_with)

    def _create_embedding_variable_slots(self, tables: Sequence[embedding_variable_ops.EmbeddingVariable]) -> None:
        # Made once per graph: a no-op when dense variables made them already.
        self._create_beta_powers(min(tables, key=lambda t: t.name))

    def _apply_embedding_variable(self, grad: Any, var: embedding_variable_ops.EmbeddingVariable,
                                  global_step: Any) -> Any:
        m = var.add_slot(self._name, 0.0)
        v = var.add_slot(self._name + "_1", 0.0)
        beta1_power, beta2_power = self._get_beta_accumulators()
        return embedding_variable_ops.sparse_apply(
            var, "KvResourceSparseApplyAdam", self._lr_t, grad, global_step,
            {"m_slot_name": m.name, "v_slot_name": v.name},
            [beta1_power, beta2_power, self._beta1_t, self._beta2_t, self._epsilon_t])

    def _prepare(self) -> None:
        self._lr_t = tensor_conversion.convert_to_tensor(self._call_if_callable(self._lr), name="learning_rate")
        self._beta1_t = tensor_conversion.convert_to_tensor(self._call_if_callable(self._beta1), name="beta1")
        self._beta2_t = tensor_conversion.convert_to_tensor(self._call_if_callable(self._beta2), name="beta2")
        self._epsilon_t = tensor_conversion.convert_to_tensor(self._call_if_callable(self._epsilon), name="epsilon")

    def _apply_dense(self, grad: graph_lib.Tensor, var: variables.Variable) -> Any:
        m = self.get_slot(var, "m")
        v = self.get_slot(var, "v")
        beta1_power, beta2_power = self._get_beta_accumulators()
        dtype = var.dtype.base_dtype
        return training_ops.apply_adam(
            var, m, v, math_ops.cast(beta1_power, dtype), math_ops.cast(beta2_power, dtype),
            math_ops.cast(self._lr_t, dtype), math_ops.cast(self._beta1_t, dtype),
            math_ops.cast(self._beta2_t, dtype), math_ops.cast(self._epsilon_t, dtype), grad,
            use_locking=self._use_locking,
        ).op

    def _apply_sparse_duplicate_indices(self, grad: indexed_slices.IndexedSlices, var: variables.Variable) -> Any:
        m = self.get_slot(var, "m")
        v = self.get_slot(var, "v")
        beta1_power, beta2_power = self._get_beta_accumulators()
        dtype = var.dtype.base_dtype
        return training_ops.sparse_apply_adam(
            var, m, v, math_ops.cast(beta1_power, dtype), math_ops.cast(beta2_power, dtype),
            math_ops.cast(self._lr_t, dtype), math_ops.cast(self._beta1_t, dtype),
            math_ops.cast(self._beta2_t, dtype), math_ops.cast(self._epsilon_t, dtype), grad.values, grad.indices,
            use_locking=self._use_locking,
        ).op

    _apply_sparse = _apply_sparse_duplicate_indices

    def _finish(self, update_ops: list[Any], name_scope: str) -> graph_lib.Operation:
        graph = graph_lib.get_default_graph()
        with graph.control_dependencies(update_ops):
            beta1_power, beta2_power = self._get_beta_accumulators()
            with graph.colocate_with(beta1_power.op):
                update_beta1 = beta1_power.assign(beta1_power * self._beta1_t, use_locking=self._use_locking)
                update_beta2 = beta2_power.assign(beta2_power * self._beta2_t, use_locking=self._use_locking)
        return control_flow_ops.group(*update_ops, update_beta1, update_beta2, name=name_scope)
