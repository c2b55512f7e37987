"""What ``tf.cond`` and ``tf.while_loop`` share: building a Python function into a
``FuncGraph``, nested structures of tensors, and the gradient function of a function.

A functional op (If, While) holds its functions as attributes and runs them whole on
its own device; the executor's ``_Arg`` kernel hands a function its arguments.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import func_graph
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_conversion
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import gradients_impl

op_registry.register_op(func_graph.ARG_OP_TYPE)
op_registry.NotDifferentiable(func_graph.ARG_OP_TYPE)


# ---------------------------------------------------------------- nested structures

def flatten(structure: Any) -> list[Any]:
    """The leaves of nested lists, tuples (named too) and dicts (by sorted key), in order."""
    if isinstance(structure, dict):
        return [leaf for key in sorted(structure) for leaf in flatten(structure[key])]
    if isinstance(structure, (list, tuple)):
        return [leaf for item in structure for leaf in flatten(item)]
    return [structure]


def pack_as(structure: Any, leaves: Sequence[Any]) -> Any:
    """``leaves`` arranged as ``structure`` (the inverse of ``flatten``)."""
    remaining = list(leaves)

    def build(node: Any) -> Any:
        if isinstance(node, dict):
            built = {key: build(node[key]) for key in sorted(node)}
            return type(node)((key, built[key]) for key in node)
        if isinstance(node, (list, tuple)):
            items = [build(item) for item in node]
            if isinstance(node, tuple) and hasattr(node, "_fields"):
                return type(node)(*items)
            return type(node)(items)
        return remaining.pop(0)

    result = build(structure)
    if remaining:
        raise ValueError(f"{len(leaves)} values do not fit the structure {structure!r}")
    return result


def assert_same_structure(first: Any, second: Any, what: str) -> None:
    def shape_of(node: Any) -> Any:
        if isinstance(node, dict):
            return ("dict", tuple((key, shape_of(node[key])) for key in sorted(node)))
        if isinstance(node, (list, tuple)):
            return ("seq", tuple(shape_of(item) for item in node))
        return "leaf"

    if shape_of(first) != shape_of(second):
        raise ValueError(f"{what} must have the same nested structure: {first!r} against {second!r}")


# ---------------------------------------------------------------- building functions

@dataclasses.dataclass
class Function:
    """A Python function built into a FuncGraph: its outputs (flat) and their structure."""

    graph: func_graph.FuncGraph
    outputs: list[graph_lib.Tensor]
    targets: list[graph_lib.Operation]
    structure: Any
    """What the Python function returned, with each output replaced by its position's leaf."""

    def as_attr(self) -> list[Any]:
        return func_graph.function_to_attr(self.graph, self.outputs, self.targets)


def build(outer: graph_lib.Graph, name: str, fn: Callable[..., Any],
          arg_specs: Sequence[tuple[dtypes.DType, tensor_shape.TensorShape]],
          arg_structure: Any = None, allow_operations: bool = False) -> Function:
    """Calls ``fn`` on new arguments (packed as ``arg_structure``) inside a new FuncGraph.

    A returned tensor of an enclosing graph is captured, a Python value becomes a constant,
    a variable reference is read; an Operation (``allow_operations``) becomes a target.
    """
    graph = func_graph.FuncGraph(outer, name)
    with graph.as_default():
        args = [graph.add_arg(dtype, shape, name=f"arg{i}") for i, (dtype, shape) in enumerate(arg_specs)]
        packed = pack_as(arg_structure, args) if arg_structure is not None else args
        result = fn(*packed) if isinstance(packed, (list, tuple)) else fn(packed)
        outputs: list[graph_lib.Tensor] = []
        targets: list[graph_lib.Operation] = []
        leaves: list[Any] = []
        for leaf in flatten(result):
            if isinstance(leaf, graph_lib.Operation):
                if not allow_operations:
                    raise TypeError(f"{name} returned the Operation {leaf.name}; it must return tensors")
                targets.append(graph.capture_operation(leaf))
                leaves.append(leaf)
                continue
            if leaf is None:
                raise ValueError(f"{name} returned None where a tensor is expected")
            t = tensor_conversion.convert_to_tensor(leaf)
            if t.graph is not graph:
                t = graph.capture(t)
            if t.dtype.is_ref_dtype:
                t = array_ops.identity(t)
            outputs.append(t)
            leaves.append(t)
    return Function(graph, outputs, targets, pack_as(result, leaves) if leaves else result)


def unify_captures(graphs: Sequence[func_graph.FuncGraph], first_arg: int) -> list[graph_lib.Tensor]:
    """Gives every graph an argument for every tensor any of them captured, at the same index
    (from ``first_arg`` on); returns those outer tensors in argument order."""
    union: list[graph_lib.Tensor] = []
    for graph in graphs:
        for t in graph.captured:
            if t not in union:
                union.append(t)
    for graph in graphs:
        for t in union:
            graph.capture(t)
        position = {t: first_arg + union.index(t) for t in graph.captured}
        explicit = graph.args[:first_arg]
        captured_args = [graph.capture(t) for t in graph.captured]
        for t, arg in zip(graph.captured, captured_args):
            arg.op._set_attr("index", position[t])
        graph.args = explicit + sorted(captured_args, key=lambda a: int(a.op.get_attr("index")))
        graph.captured = sorted(graph.captured, key=lambda t: position[t])
    return union


def add_outer_control_inputs(op: graph_lib.Operation, graphs: Sequence[func_graph.FuncGraph]) -> None:
    """Makes ``op`` run after the enclosing graphs' ops its functions named as control dependencies
    (those of graphs further out go on to the function ``op`` itself is built in)."""
    for graph in graphs:
        for control in graph.outer_control_inputs:
            if control.graph is op.graph:
                op._add_control_input(control)
            elif isinstance(op.graph, func_graph.FuncGraph) and control not in op.graph.outer_control_inputs:
                op.graph.outer_control_inputs.append(control)


def ref_device(captured: Sequence[graph_lib.Tensor], op_name: str) -> Optional[str]:
    """The device of the variables captured by reference (the op must run beside them), or None."""
    devices = {t.op.device for t in captured if t.dtype.is_ref_dtype}
    if len(devices) > 1:
        raise ValueError(f"{op_name} updates variables on several devices ({', '.join(sorted(devices))}); "
                         "a tf.cond or tf.while_loop can update variables of one device only")
    return devices.pop() if devices else None


# ---------------------------------------------------------------- gradients of functions

def gradient_attr(outer: graph_lib.Graph, function_attr: Any, name: str) -> tuple[list[Any], int]:
    """The gradient function of a function: arguments (the function's, then one incoming
    gradient per output), outputs (the gradient of every argument, zeros where none flows).
    Returns its attribute and the number of the function's own arguments."""
    graph = func_graph.FuncGraph(outer, name)
    _, args, outputs, _ = func_graph.function_from_attr(function_attr, graph, replay=True)
    with graph.as_default():
        grad_ys = [graph.add_arg(t.dtype.base_dtype, t.shape, name=f"grad_y{i}") for i, t in enumerate(outputs)]
        differentiable = [a for a in args if a.dtype.base_dtype.is_floating]
        float_outputs = [(y, g) for y, g in zip(outputs, grad_ys) if y.dtype.base_dtype.is_floating]
        grads: dict[graph_lib.Tensor, Any] = {}
        if differentiable and float_outputs:
            found = gradients_impl.gradients([y for y, _ in float_outputs], differentiable,
                                             grad_ys=[g for _, g in float_outputs])
            grads = {a: g for a, g in zip(differentiable, found) if g is not None}
        results = []
        for a in args:
            g = grads.get(a)
            if g is None:
                g = array_ops.zeros_like(a, dtype=a.dtype.base_dtype)
            results.append(tensor_conversion.convert_to_tensor(g))
    return func_graph.function_to_attr(graph, results), len(args)


def most_specific_shape(a: tensor_shape.TensorShape, b: tensor_shape.TensorShape) -> tensor_shape.TensorShape:
    """The shape both branches' values have: dimensions that differ become unknown."""
    if a.ndims is None or b.ndims is None or a.ndims != b.ndims:
        return tensor_shape.unknown_shape()
    return tensor_shape.TensorShape([x if x == y else None for x, y in zip(a.as_list(), b.as_list())])
