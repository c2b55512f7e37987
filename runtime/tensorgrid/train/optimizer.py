"""The ``Optimizer`` base class: gradients, slots, and the update ops of one training step.

``minimize`` is ``compute_gradients`` (``tf.gradients`` of the loss with respect to
the trainable variables) followed by ``apply_gradients``, which builds one update
per variable, colocated with the variable and named ``<Optimizer>/update_<var>``,
so that in distributed training each update runs on the parameter server holding
the variable and only the gradient travels. The global step is incremented after
all updates, next to the global step variable.

A gradient that is an IndexedSlices (an embedding lookup's) is applied sparsely,
with TF1's semantics: ``_apply_sparse_duplicate_indices`` sums the rows of repeated
indices and hands the result to ``_apply_sparse``; the built-in optimizers do both in
one fused op that touches only those rows. An embedding variable (``tf.get_embedding_variable``)
is updated by ``_apply_embedding_variable``, its slots kept per key in its table.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import tensor_conversion
from tensorgrid.ops import array_ops
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import embedding_variable_ops
from tensorgrid.ops import gradients_impl
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import sparse_ops
from tensorgrid.ops import state_ops
from tensorgrid.ops import variables as variables_lib
from tensorgrid.train import slot_creator

GraphKeys = graph_lib.GraphKeys

_VALID_DTYPES = (dtypes.float16, dtypes.float32, dtypes.float64)
_UPDATABLE = (variables_lib.Variable, embedding_variable_ops.EmbeddingVariable)


def _var_key(var: variables_lib.Variable) -> tuple[graph_lib.Graph, str]:
    return (var.op.graph, var.op.name)


def _flatten(items: Any) -> list[Any]:
    if isinstance(items, (list, tuple)):
        return [x for item in items for x in _flatten(item)]
    if isinstance(items, dict):
        return [x for item in items.values() for x in _flatten(item)]
    return [items]


class Optimizer:
    """Base class of optimizers; subclasses implement ``_create_slots``, ``_prepare``, ``_apply_dense``."""

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    def __init__(self, use_locking: bool, name: str) -> None:
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = use_locking
        self._name = name
        self._slots: dict[str, dict[tuple[graph_lib.Graph, str], variables_lib.Variable]] = {}
        self._non_slot_dict: dict[tuple[str, graph_lib.Graph], variables_lib.Variable] = {}

    def get_name(self) -> str:
        return self._name

    # ------------------------------------------------------------------ the step
    def minimize(
        self,
        loss: Any,
        global_step: Any = None,
        var_list: Any = None,
        gate_gradients: int = GATE_OP,
        aggregation_method: Any = None,
        colocate_gradients_with_ops: bool = False,
        name: Optional[str] = None,
        grad_loss: Any = None,
    ) -> graph_lib.Operation:
        """Adds the ops that compute the gradients of ``loss`` and apply them; returns the train op."""
        grads_and_vars = self.compute_gradients(
            loss, var_list=var_list, gate_gradients=gate_gradients, aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss,
        )
        if not [v for g, v in grads_and_vars if g is not None]:
            raise ValueError(
                "No gradients provided for any variable, check your graph for ops that do not support "
                f"gradients, between variables {[str(v) for _, v in grads_and_vars]} and loss {loss}."
            )
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def compute_gradients(
        self,
        loss: Any,
        var_list: Any = None,
        gate_gradients: int = GATE_OP,
        aggregation_method: Any = None,
        colocate_gradients_with_ops: bool = False,
        grad_loss: Any = None,
    ) -> list[tuple[Optional[graph_lib.Tensor], variables_lib.Variable]]:
        """``[(gradient or None, variable)]`` for ``var_list`` (default: the trainable variables)."""
        if callable(loss):
            raise TypeError(
                "loss must be a Tensor; a callable loss is only for eager execution, which tensorgrid "
                "(a TF1 graph runtime) does not have"
            )
        if gate_gradients not in (Optimizer.GATE_NONE, Optimizer.GATE_OP, Optimizer.GATE_GRAPH):
            raise ValueError(
                "gate_gradients must be one of: Optimizer.GATE_NONE, Optimizer.GATE_OP, "
                f"Optimizer.GATE_GRAPH.  Not {gate_gradients}"
            )
        loss_tensor = tensor_conversion.convert_to_tensor(loss)
        self._assert_valid_dtypes([loss_tensor])
        if grad_loss is not None:
            self._assert_valid_dtypes([tensor_conversion.convert_to_tensor(grad_loss)])
        graph = loss_tensor.graph
        if var_list is None:
            var_list = graph.get_collection(GraphKeys.TRAINABLE_VARIABLES)
        else:
            var_list = _flatten(var_list)
        if not var_list:
            raise ValueError("No variables to optimize.")
        for v in var_list:
            if not isinstance(v, _UPDATABLE):
                raise TypeError(f"Optimizers update tf.Variable objects only; {v!r} is not one")
        grads = gradients_impl.gradients(
            loss_tensor, [v._ref() for v in var_list], grad_ys=grad_loss,
            gate_gradients=(gate_gradients == Optimizer.GATE_OP), aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops,
        )
        if gate_gradients == Optimizer.GATE_GRAPH:
            with graph.as_default():
                grads = control_flow_ops.tuple_(grads)
        grads_and_vars = list(zip(grads, var_list))
        self._assert_valid_dtypes([v for g, v in grads_and_vars if g is not None])
        return grads_and_vars

    def apply_gradients(self, grads_and_vars: Any, global_step: Any = None,
                        name: Optional[str] = None) -> graph_lib.Operation:
        """Adds one update per (gradient, variable) pair, then the global step increment."""
        grads_and_vars = tuple(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("No variables provided.")
        converted: list[tuple[Any, Any]] = []  # (gradient, Variable or EmbeddingVariable)
        for g, v in grads_and_vars:
            if g is not None:
                try:
                    g = indexed_slices.convert_to_tensor_or_indexed_slices(g)
                except (TypeError, ValueError):
                    raise TypeError(f"Gradient must be convertible to a Tensor or IndexedSlices, or None: {g!r}") from None
                if not isinstance(g, (graph_lib.Tensor, indexed_slices.IndexedSlices)):
                    raise TypeError(f"Gradient must be a Tensor, IndexedSlices, or None: {g!r}")
            if not isinstance(v, _UPDATABLE):
                raise TypeError(f"Optimizers update tf.Variable objects only; {v!r} is not one")
            converted.append((g, v))
        var_list = [v for g, v in converted if g is not None]
        if not var_list:
            raise ValueError(f"No gradients provided for any variable: {[str(v) for _, v in converted]}.")
        if type(self)._apply_embedding_variable is Optimizer._apply_embedding_variable:
            for var in var_list:
                if isinstance(var, embedding_variable_ops.EmbeddingVariable):
                    self._apply_embedding_variable(None, var, None)
        graph = var_list[0].graph
        with graph.as_default():
            # Slots are state, not part of the step: no control dependencies of the caller.
            with graph.control_dependencies(None):
                self._create_slots([v for v in var_list if isinstance(v, variables_lib.Variable)])
                tables = [v for v in var_list if isinstance(v, embedding_variable_ops.EmbeddingVariable)]
                if tables:
                    self._create_embedding_variable_slots(tables)
            update_ops: list[Any] = []
            with graph.name_scope(name or self._name) as scope_name:
                self._prepare()
                for grad, var in converted:
                    if grad is None:
                        continue
                    with graph.name_scope("update_" + var.op.name), graph.colocate_with(var.op):
                        update_ops.append(self._update_op(grad, var, global_step))
                if global_step is None:
                    apply_updates = self._finish(update_ops, scope_name)
                else:
                    with graph.control_dependencies([self._finish(update_ops, "update")]):
                        with graph.colocate_with(_as_op(global_step)):
                            apply_updates = state_ops.assign_add(global_step, 1, name=scope_name).op
            if isinstance(apply_updates, graph_lib.Tensor):
                apply_updates = apply_updates.op
            train_ops = graph.get_collection_ref(GraphKeys.TRAIN_OP)
            if apply_updates not in train_ops:
                train_ops.append(apply_updates)
        return apply_updates

    def _update_op(self, grad: Any, var: Any, global_step: Any = None) -> Any:
        if isinstance(var, embedding_variable_ops.EmbeddingVariable):
            return self._apply_embedding_variable(grad, var, global_step)
        if isinstance(grad, indexed_slices.IndexedSlices):
            if var.constraint is not None:
                raise RuntimeError(f"Cannot use a constraint function on a sparse variable ({var.op.name}).")
            return self._apply_sparse_duplicate_indices(grad, var)
        update = self._apply_dense(grad, var)
        if var.constraint is None:
            return update
        with var.graph.control_dependencies([update]):
            return var.assign(var.constraint(var))

    # ------------------------------------------------------------------ slots
    def get_slot(self, var: variables_lib.Variable, name: str) -> Optional[variables_lib.Variable]:
        """The slot ``name`` of ``var`` (see ``get_slot_names``), or None."""
        named_slots = self._slots.get(name)
        if not named_slots:
            return None
        return named_slots.get(_var_key(var))

    def get_slot_names(self) -> list[str]:
        return sorted(self._slots)

    def variables(self) -> list[variables_lib.Variable]:
        """The optimizer's own variables in the default graph (slots and non-slots), by name."""
        graph = graph_lib.get_default_graph()
        found = [v for (_, g), v in self._non_slot_dict.items() if g is graph]
        for named_slots in self._slots.values():
            found.extend(v for v in named_slots.values() if v.graph is graph)
        return sorted(found, key=lambda v: v.name)

    def _slot_dict(self, slot_name: str) -> dict[tuple[graph_lib.Graph, str], variables_lib.Variable]:
        return self._slots.setdefault(slot_name, {})

    def _zeros_slot(self, var: variables_lib.Variable, slot_name: str, op_name: str) -> variables_lib.Variable:
        named_slots = self._slot_dict(slot_name)
        key = _var_key(var)
        if key not in named_slots:
            named_slots[key] = slot_creator.create_zeros_slot(var, op_name)
        return named_slots[key]

    def _get_or_make_slot(self, var: variables_lib.Variable, val: Any, slot_name: str,
                          op_name: str) -> variables_lib.Variable:
        """The slot ``slot_name`` of ``var``, made from the tensor ``val`` the first time."""
        named_slots = self._slot_dict(slot_name)
        key = _var_key(var)
        if key not in named_slots:
            named_slots[key] = slot_creator.create_slot(var, val, op_name)
        return named_slots[key]

    def _get_or_make_slot_with_initializer(self, var: variables_lib.Variable, initializer: Any, shape: Any, dtype: Any,
                                           slot_name: str, op_name: str) -> variables_lib.Variable:
        named_slots = self._slot_dict(slot_name)
        key = _var_key(var)
        if key not in named_slots:
            named_slots[key] = slot_creator.create_slot_with_initializer(var, initializer, shape, dtype, op_name)
        return named_slots[key]

    def _create_non_slot_variable(self, initial_value: Any, name: str,
                                  colocate_with: variables_lib.Variable) -> variables_lib.Variable:
        """A per-optimizer variable (Adam's beta powers) next to ``colocate_with``, once per graph."""
        graph = colocate_with.graph
        key = (name, graph)
        v = self._non_slot_dict.get(key)
        if v is None:
            with graph.as_default(), graph.colocate_with(colocate_with.op):
                v = variables_lib.Variable(initial_value, name=name, trainable=False)
            self._non_slot_dict[key] = v
        return v

    def _get_non_slot_variable(self, name: str, graph: Optional[graph_lib.Graph] = None) -> Optional[variables_lib.Variable]:
        return self._non_slot_dict.get((name, graph or graph_lib.get_default_graph()))

    # ------------------------------------------------------------------ for subclasses
    def _create_slots(self, var_list: Sequence[variables_lib.Variable]) -> None:
        """Creates the slots of every variable in ``var_list`` (none by default)."""

    def _create_embedding_variable_slots(self, tables: Sequence[embedding_variable_ops.EmbeddingVariable]) -> None:
        """Creates what updating ``tables`` needs besides the per-key slots kept in them (nothing by default)."""

    def _prepare(self) -> None:
        """Converts hyper-parameters to tensors, inside the optimizer's name scope."""

    def _apply_dense(self, grad: graph_lib.Tensor, var: variables_lib.Variable) -> Any:
        raise NotImplementedError

    def _apply_sparse_duplicate_indices(self, grad: indexed_slices.IndexedSlices, var: variables_lib.Variable) -> Any:
        """Sums the rows of repeated indices, then ``_apply_sparse`` (TF's default)."""
        unique_indices, positions = sparse_ops.unique(grad.indices)
        summed = indexing_ops.unsorted_segment_sum(grad.values, positions, indexing_ops.strided_slice_from_key(array_ops.shape(unique_indices), 0))
        return self._apply_sparse(indexed_slices.IndexedSlices(summed, unique_indices, grad.dense_shape), var)

    def _apply_sparse(self, grad: indexed_slices.IndexedSlices, var: variables_lib.Variable) -> Any:
        """Applies a gradient whose indices are unique; optimizers with sparse updates implement it."""
        raise NotImplementedError(f"{type(self).__name__} does not apply sparse gradients (IndexedSlices)")

    def _apply_embedding_variable(self, grad: Any, var: embedding_variable_ops.EmbeddingVariable,
                                  global_step: Any) -> Any:
        """Updates the rows of an embedding variable that ``grad`` (an IndexedSlices) touches."""
        raise NotImplementedError(f"{type(self).__name__} does not update embedding variables such as "
                                  f"{var.op.name} (GradientDescentOptimizer, AdagradOptimizer, AdamOptimizer and "
                                  "FtrlOptimizer do)")

    def _finish(self, update_ops: list[Any], name_scope: str) -> graph_lib.Operation:
        return control_flow_ops.group(*update_ops, name=name_scope)

    @staticmethod
    def _call_if_callable(param: Any) -> Any:
        return param() if callable(param) else param

    def _assert_valid_dtypes(self, tensors: Sequence[Any]) -> None:
        for t in tensors:
            dtype = t.dtype.base_dtype
            if dtype not in _VALID_DTYPES:
                raise ValueError(
                    f"Invalid type {dtype.name} for {t.name}, expected: {[d.name for d in _VALID_DTYPES]}."
                )


def _as_op(value: Any) -> graph_lib.Operation:
    op = getattr(value, "op", None)
    if isinstance(op, graph_lib.Operation):
        return op
    if isinstance(value, graph_lib.Operation):
        return value
    raise TypeError(f"global_step must be a Variable or Tensor, got {value!r}")

