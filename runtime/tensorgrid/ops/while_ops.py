"""``tf.while_loop``: one functional While op that runs its body until its cond is false.

The cond and the body are FuncGraphs over the loop variables (first) and the tensors
either captured (after). ``maximum_iterations`` adds a counter loop variable, as TF1
does. The gradient is a WhileGrad op: it runs the loop forward again keeping every
iteration's loop variables, then the body's gradient function backwards over them.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import functional_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import tensor_array_ops

op_registry.register_op("While", stateful=True, ref_inputs=op_registry.EVERY_POSITION)
op_registry.register_op("WhileGrad", stateful=True, ref_inputs=op_registry.EVERY_POSITION)
op_registry.NotDifferentiable("WhileGrad")


def while_loop(
    cond: Callable[..., Any],
    body: Callable[..., Any],
    loop_vars: Any,
    shape_invariants: Any = None,
    parallel_iterations: int = 10,
    back_prop: bool = True,
    swap_memory: bool = False,
    name: Optional[str] = None,
    maximum_iterations: Any = None,
    return_same_structure: bool = False,
) -> Any:
    """Repeats ``loop_vars = body(*loop_vars)`` while ``cond(*loop_vars)`` (TF1's ``tf.while_loop``).

    Iterations run one after another (``parallel_iterations`` is accepted and validated);
    ``swap_memory`` has nothing to swap here.
    """
    if not callable(cond):
        raise TypeError(f"cond must be callable, got {cond!r}")
    if not callable(body):
        raise TypeError(f"body must be callable, got {body!r}")
    if not isinstance(parallel_iterations, int) or isinstance(parallel_iterations, bool) or parallel_iterations < 1:
        raise ValueError(f"parallel_iterations must be a positive integer, got {parallel_iterations!r}")
    if loop_vars is None or (isinstance(loop_vars, (list, tuple, dict)) and not functional_ops.flatten(loop_vars)):
        raise ValueError("No loop variables provided: loop_vars must hold at least one tensor")
    single = not isinstance(loop_vars, (list, tuple, dict))
    structure = [loop_vars] if single else loop_vars
    leaves = functional_ops.flatten(structure)
    arrays = {i: v for i, v in enumerate(leaves) if isinstance(v, tensor_array_ops.TensorArray)}
    flat = [_loop_tensor(v.flow if i in arrays else v) for i, v in enumerate(leaves)]
    invariants = _invariants(flat, structure, shape_invariants, single)
    outer = op_util.graph_of(*flat)
    counted = maximum_iterations is not None
    if counted:
        limit = op_util.to_tensor(maximum_iterations)
        if limit.dtype.base_dtype not in op_util.INDICES or limit.shape.ndims not in (None, 0):
            raise ValueError(f"maximum_iterations must be a scalar int32 or int64, got {maximum_iterations!r}")
        flat = [array_ops.zeros([], dtype=limit.dtype.base_dtype, name="iteration_counter"), *flat]
        invariants = [tensor_shape.TensorShape([]), *invariants]
    skip = 1 if counted else 0

    def user_args(args: tuple[Any, ...]) -> Any:
        return functional_ops.pack_as(structure, _as_arrays(arrays, args[skip:]))

    def call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        packed = user_args(args)
        return fn(*packed) if isinstance(packed, (list, tuple)) else fn(packed)

    def flat_cond(*args: Any) -> Any:
        keep_going = op_util.to_tensor(call(cond, args))
        if keep_going.dtype.base_dtype != dtypes.bool_ or keep_going.shape.ndims not in (None, 0):
            raise TypeError(f"cond must return a boolean scalar, got {keep_going!r}")
        if counted:
            keep_going = math_ops.logical_and(math_ops.less(args[0], limit), keep_going)
        return keep_going

    def flat_body(*args: Any) -> Any:
        result = call(body, args)
        if not isinstance(result, (list, tuple, dict)) and isinstance(structure, (list, tuple)) and len(structure) == 1:
            result = [result]
        if not single and isinstance(structure, list) and isinstance(result, tuple):
            result = list(result)
        functional_ops.assert_same_structure(structure, result, "loop_vars and the body's result")
        leaves = [v.flow if isinstance(v, tensor_array_ops.TensorArray) else v for v in functional_ops.flatten(result)]
        return ([math_ops.add(args[0], 1)] if counted else []) + leaves

    specs = [(t.dtype.base_dtype, shape) for t, shape in zip(flat, invariants)]
    cond_fn = functional_ops.build(outer, "cond", flat_cond, specs)
    body_fn = functional_ops.build(outer, "body", flat_body, specs)
    for var, out, shape in zip(flat, body_fn.outputs, invariants):
        if out.dtype.base_dtype != var.dtype.base_dtype:
            raise TypeError(f"Loop variable {var.name} enters the loop as {var.dtype.name} but the body returns "
                            f"{out.dtype.name}")
        if not shape.is_compatible_with(out.shape) or (shape.ndims is not None and out.shape.ndims is None):
            raise ValueError(
                f"Input tensor {var.name!r} enters the loop with shape {shape}, but has shape {out.shape} after "
                "one iteration. To allow the shape to vary across iterations, use the `shape_invariants` argument "
                "of tf.while_loop to specify a less-specific shape."
            )
    captured = functional_ops.unify_captures([cond_fn.graph, body_fn.graph], first_arg=len(flat))
    op = op_util.make_op(
        "While", [*flat, *captured], specs, name=name or "while", graph=outer,
        attrs={"cond": cond_fn.as_attr(), "body": body_fn.as_attr(), "num_loop_vars": len(flat),
               "shape_invariants": [s.as_tuple_or_none() for s in invariants],
               "parallel_iterations": parallel_iterations, "back_prop": bool(back_prop)})
    functional_ops.add_outer_control_inputs(op, [cond_fn.graph, body_fn.graph])
    device = functional_ops.ref_device(captured, op.name)
    if device is not None:
        op._set_device(device)
    outputs = _as_arrays(arrays, op.outputs[skip:])
    if not return_same_structure and len(outputs) == 1:
        return outputs[0]
    return functional_ops.pack_as(structure, outputs)


def _as_arrays(arrays: dict[int, tensor_array_ops.TensorArray], values: Any) -> list[Any]:
    """The loop's tensors with a TensorArray's flow turned back into the TensorArray."""
    return [tensor_array_ops.with_flow(arrays[i], v) if i in arrays else v for i, v in enumerate(values)]


def _loop_tensor(value: Any) -> graph_lib.Tensor:
    t = op_util.to_tensor(value)
    return array_ops.identity(t) if t.dtype.is_ref_dtype else t


def _invariants(flat: list[graph_lib.Tensor], structure: Any, shape_invariants: Any,
                single: bool) -> list[tensor_shape.TensorShape]:
    if shape_invariants is None:
        return [t.shape for t in flat]
    wanted = [shape_invariants] if single else shape_invariants
    leaves = functional_ops.flatten(_shapes_as_leaves(wanted))
    if len(leaves) != len(flat):
        raise ValueError(f"shape_invariants has {len(leaves)} shapes for {len(flat)} loop variables")
    shapes = [tensor_shape.as_shape(s) for s in leaves]
    for t, shape in zip(flat, shapes):
        if not shape.is_compatible_with(t.shape):
            raise ValueError(f"The shape invariant specified for {t.name} is not compatible with the initial shape "
                             f"of the loop variable. It enters the loop with shape {t.shape}, but the specified "
                             f"shape invariant is {shape}.")
    return shapes


def _shapes_as_leaves(structure: Any) -> Any:
    """Shape invariants with each shape (a TensorShape, a list of sizes, None) as one leaf."""
    if isinstance(structure, tensor_shape.TensorShape) or structure is None:
        return structure
    if isinstance(structure, dict):
        return {key: _shapes_as_leaves(value) for key, value in structure.items()}
    if isinstance(structure, (list, tuple)) and all(d is None or isinstance(d, int) for d in structure):
        return tensor_shape.TensorShape(list(structure))
    if isinstance(structure, (list, tuple)):
        return type(structure)(_shapes_as_leaves(item) for item in structure)
    return structure


@op_registry.RegisterGradient("While")
def _while_grad(op: graph_lib.Operation, *grads: Any) -> list[Any]:
    if not op.get_attr("back_prop"):
        return [None] * len(op.inputs)
    body_grad, _ = functional_ops.gradient_attr(op.graph, op.get_attr("body"), "body_grad")
    specs = [(t.dtype.base_dtype, t.shape) for t in op.inputs]
    attrs = {key: op.get_attr(key) for key in ("cond", "body", "num_loop_vars", "shape_invariants")}
    attrs["body_grad"] = body_grad
    grad_op = op_util.make_op("WhileGrad", [*op.inputs, *grads], specs, name="while_grad", graph=op.graph, attrs=attrs)
    device = functional_ops.ref_device(op.inputs, grad_op.name)
    if device is not None:
        grad_op._set_device(device)
    return [g if t.dtype.base_dtype.is_floating else None for t, g in zip(op.inputs, grad_op.outputs)]
