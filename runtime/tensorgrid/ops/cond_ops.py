"""``tf.cond``: one functional If op that runs only the branch its predicate picks.

Each branch is built into its own FuncGraph; the If op's inputs are the predicate and
every tensor either branch captured, its outputs the branch's outputs. Only the taken
branch runs, side effects included (an assign in the other branch does not happen).
The gradient is another If over the branches' gradient functions.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.ops import functional_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import tensor_array_ops

op_registry.register_op("If", stateful=True, ref_inputs=op_registry.EVERY_POSITION)


def cond(
    pred: Any,
    true_fn: Optional[Callable[[], Any]] = None,
    false_fn: Optional[Callable[[], Any]] = None,
    strict: bool = False,
    name: Optional[str] = None,
    fn1: Optional[Callable[[], Any]] = None,
    fn2: Optional[Callable[[], Any]] = None,
) -> Any:
    """``true_fn()`` if ``pred`` else ``false_fn()`` (TF1's ``tf.cond``): both must return the
    same structure of tensors of the same dtypes (or Operations at the same places)."""
    true_fn = true_fn if true_fn is not None else fn1
    false_fn = false_fn if false_fn is not None else fn2
    for label, fn in (("true_fn", true_fn), ("false_fn", false_fn)):
        if not callable(fn):
            raise TypeError(f"{label} must be callable, got {fn!r}")
    if isinstance(pred, bool):
        raise TypeError(f"pred must not be a Python bool (got {pred}); use a boolean scalar tensor")
    pred_t = op_util.to_tensor(pred)
    if pred_t.dtype.base_dtype != dtypes.bool_:
        raise TypeError(f"pred must be a boolean tensor, got {pred_t.name} of dtype {pred_t.dtype.name}")
    if pred_t.shape.ndims not in (None, 0):
        raise ValueError(f"pred must be a scalar, got {pred_t.name} of shape {pred_t.shape}")
    outer = op_util.graph_of(pred_t)
    assert true_fn is not None and false_fn is not None
    arrays: dict[int, tensor_array_ops.TensorArray] = {}
    then_fn = functional_ops.build(outer, "true_fn", _arrays_as_flows(true_fn, arrays), [], allow_operations=True)
    else_fn = functional_ops.build(outer, "false_fn", _arrays_as_flows(false_fn, arrays), [], allow_operations=True)
    functional_ops.assert_same_structure(then_fn.structure, else_fn.structure, "true_fn and false_fn results")
    for a, b in zip(functional_ops.flatten(then_fn.structure), functional_ops.flatten(else_fn.structure)):
        if isinstance(a, graph_lib.Operation) != isinstance(b, graph_lib.Operation):
            raise TypeError(f"true_fn returned {a!r} where false_fn returned {b!r}: both must be tensors or both operations")
    for a, b in zip(then_fn.outputs, else_fn.outputs):
        if a.dtype.base_dtype != b.dtype.base_dtype:
            raise TypeError(f"true_fn and false_fn must return the same dtypes: {a.dtype.name} against {b.dtype.name}")
    captured = functional_ops.unify_captures([then_fn.graph, else_fn.graph], first_arg=0)
    specs = [(a.dtype.base_dtype, functional_ops.most_specific_shape(a.shape, b.shape))
             for a, b in zip(then_fn.outputs, else_fn.outputs)]
    op = op_util.make_op("If", [pred_t, *captured], specs, name=name or "cond", graph=outer,
                         attrs={"then_branch": then_fn.as_attr(), "else_branch": else_fn.as_attr()})
    functional_ops.add_outer_control_inputs(op, [then_fn.graph, else_fn.graph])
    device = functional_ops.ref_device(captured, op.name)
    if device is not None:
        op._set_device(device)
    results = iter(op.outputs)
    leaves: list[Any] = [op if isinstance(leaf, graph_lib.Operation) else next(results)
                         for leaf in functional_ops.flatten(then_fn.structure)]
    leaves = [tensor_array_ops.with_flow(arrays[i], leaf) if i in arrays and isinstance(leaf, graph_lib.Tensor)
              else leaf for i, leaf in enumerate(leaves)]
    packed = functional_ops.pack_as(then_fn.structure, leaves)
    if not strict and isinstance(packed, (list, tuple)) and len(packed) == 1:
        return packed[0]
    return packed


def _arrays_as_flows(fn: Callable[[], Any], arrays: dict[int, tensor_array_ops.TensorArray]) -> Callable[[], Any]:
    """``fn`` returning each TensorArray as its flow; ``arrays`` notes the TensorArray at each
    position of the flattened result, so the cond's output there becomes one again."""

    def call() -> Any:
        result = fn()
        leaves = functional_ops.flatten(result)
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, tensor_array_ops.TensorArray):
                arrays.setdefault(i, leaf)
        if not any(isinstance(leaf, tensor_array_ops.TensorArray) for leaf in leaves):
            return result
        flows = [leaf.flow if isinstance(leaf, tensor_array_ops.TensorArray) else leaf for leaf in leaves]
        return flows[0] if len(leaves) == 1 and not isinstance(result, (list, tuple, dict)) else \
            functional_ops.pack_as(result, flows)

    return call


@op_registry.RegisterGradient("If")
def _if_grad(op: graph_lib.Operation, *grads: Any) -> list[Any]:
    then_attr, _ = functional_ops.gradient_attr(op.graph, op.get_attr("then_branch"), "true_fn_grad")
    else_attr, _ = functional_ops.gradient_attr(op.graph, op.get_attr("else_branch"), "false_fn_grad")
    captured = op.inputs[1:]
    specs = [(t.dtype.base_dtype, t.shape) for t in captured]
    grad_op = op_util.make_op("If", [op.inputs[0], *captured, *grads], specs, name="cond_grad", graph=op.graph,
                              attrs={"then_branch": then_attr, "else_branch": else_attr, "gradient": True})
    device = functional_ops.ref_device(captured, grad_op.name)
    if device is not None:
        grad_op._set_device(device)
    return [None] + [g if t.dtype.base_dtype.is_floating else None for t, g in zip(captured, grad_op.outputs)]
