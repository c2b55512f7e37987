"""Sub-graphs for functional control flow: a cond branch, a while loop's cond and body.

``tf.cond`` and ``tf.while_loop`` build their functions into a ``FuncGraph`` while it
is the default graph. A tensor of an enclosing graph used inside becomes an argument
(an ``_Arg`` op) of the function and an input of the functional op (If, While), so the
whole op runs on one device and a tensor from another task arrives by the normal
Send/Recv of an input (docs/architecture.md, "Control flow").

A function travels as an attribute of its op (``function_to_attr``): nested lists of
the values the graph codec already carries, so a partition holding an If or a While
crosses the wire like any other; ``function_from_attr`` rebuilds it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import graph_def as graph_def_lib
from tensorgrid.framework import graph_rebuild

ARG_OP_TYPE = "_Arg"
"""The op type of a function's argument; its ``index`` attribute is its position."""

_STATE_CREATING_OPS = frozenset({"VariableV2", "FIFOQueueV2", "ConditionalAccumulator"})


class FuncGraph(graph_lib.Graph):
    """The graph of one function: arguments first, then tensors captured from ``outer``."""

    def __init__(self, outer: graph_lib.Graph, name: str) -> None:
        super().__init__()
        self.outer = outer
        self.name = name
        self.seed = outer.seed
        self.args: list[graph_lib.Tensor] = []
        self.captured: list[graph_lib.Tensor] = []
        """The outer tensors captured, in the order of their arguments (after the explicit ones)."""
        self._arg_of_captured: dict[graph_lib.Tensor, graph_lib.Tensor] = {}
        self.outer_control_inputs: list[graph_lib.Operation] = []
        """Ops of enclosing graphs named in ``control_dependencies`` inside: the functional op
        runs after them."""

    def add_arg(self, dtype: dtypes.DType, shape: Any, name: str = "arg") -> graph_lib.Tensor:
        op = self.create_op(ARG_OP_TYPE, [], [(dtype, shape)], name=name, attrs={"index": len(self.args)})
        self.args.append(op.outputs[0])
        return op.outputs[0]

    def encloses(self, graph: graph_lib.Graph) -> bool:
        """Whether ``graph`` is this function's outer graph or one of its ancestors."""
        outer: Optional[graph_lib.Graph] = self.outer
        while outer is not None:
            if outer is graph:
                return True
            outer = outer.outer if isinstance(outer, FuncGraph) else None
        return False

    def capture(self, tensor: graph_lib.Tensor) -> graph_lib.Tensor:
        """The argument standing for an enclosing graph's ``tensor`` (created on first use)."""
        if tensor.graph is self:
            return tensor
        if not self.encloses(tensor.graph):
            raise ValueError(f"Tensor {tensor.name} is from a graph that does not enclose the function {self.name!r}")
        outer_tensor = tensor
        if isinstance(self.outer, FuncGraph) and tensor.graph is not self.outer:
            outer_tensor = self.outer.capture(tensor)
        existing = self._arg_of_captured.get(outer_tensor)
        if existing is not None:
            return existing
        with self.name_scope(None), self.control_dependencies(None):
            arg = self.add_arg(tensor.dtype, tensor.shape, name="captured")
        self._arg_of_captured[outer_tensor] = arg
        self.captured.append(outer_tensor)
        return arg

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs: Optional[Sequence[Any]]) -> Iterator[None]:
        """As the Graph's, except that tensors and ops of enclosing graphs become control
        inputs of the functional op (they run before it, whichever branch it takes)."""
        if control_inputs is None:
            with super().control_dependencies(None):
                yield
            return
        inner = []
        for c in control_inputs:
            element = c._as_graph_element() if callable(getattr(c, "_as_graph_element", None)) else c
            op = element.op if isinstance(element, graph_lib.Tensor) else element
            if isinstance(op, graph_lib.Operation) and op.graph is not self and self.encloses(op.graph):
                if op not in self.outer_control_inputs:
                    self.outer_control_inputs.append(op)
            else:
                inner.append(c)
        with super().control_dependencies(inner):
            yield

    def capture_operation(self, op: graph_lib.Operation) -> graph_lib.Operation:
        """An Operation the function returns: it must be built inside the function."""
        if op.graph is not self:
            raise ValueError(f"The function {self.name!r} returned the operation {op.name} of an enclosing graph; "
                             "it can return only operations created inside it")
        return op

    def create_op(
        self,
        op_type: str,
        inputs: Sequence[graph_lib.Tensor],
        output_specs: Sequence[tuple[dtypes.DType, Any]],
        name: Optional[str] = None,
        attrs: Optional[dict[str, Any]] = None,
        compute_device: bool = True,
    ) -> graph_lib.Operation:
        if op_type in _STATE_CREATING_OPS:
            raise ValueError(
                f"Cannot create a {op_type} ({name or op_type}) inside the function {self.name!r} of a "
                "tf.cond or tf.while_loop: create variables, queues and accumulators outside it and use them inside"
            )
        inputs = [self.capture(t) if isinstance(t, graph_lib.Tensor) and t.graph is not self else t for t in inputs]
        return super().create_op(op_type, inputs, output_specs, name, attrs, compute_device)


def function_to_attr(
    graph: graph_lib.Graph, outputs: Sequence[graph_lib.Tensor], targets: Sequence[graph_lib.Operation] = (),
) -> list[Any]:
    """The function as an attribute value: ``[nodes, output names, target names]``."""
    nodes = []
    for node in graph.as_graph_def().nodes:
        attrs = [[key, value] for key, value in sorted(node.attrs.items())]
        nodes.append([node.name, node.op, list(node.inputs), node.device, attrs,
                      list(node.output_dtypes), list(node.output_shapes)])
    return [nodes, [t.name for t in outputs], [op.name for op in targets]]


def function_from_attr(
    attr: Any, graph: Optional[graph_lib.Graph] = None, replay: bool = False,
) -> tuple[graph_lib.Graph, list[graph_lib.Tensor], list[graph_lib.Tensor], list[graph_lib.Operation]]:
    """The function's graph (imported into ``graph`` when given), its arguments by index,
    its outputs and its targets. ValueError naming the bad part when ``attr`` is malformed.

    ``replay`` (for a gradient pass, which recomputes values) drops control inputs and
    targets, so side effects that only ordered the forward pass do not happen again."""
    try:
        node_lists, output_names, target_names = attr
        if replay:
            target_names = []
        nodes = [graph_def_lib.NodeDef(name=name, op=op, device=device,
                                       inputs=[i for i in inputs if not (replay and i.startswith("^"))],
                                       attrs={key: value for key, value in attr_pairs},
                                       output_dtypes=list(out_dtypes), output_shapes=list(out_shapes))
                 for name, op, inputs, device, attr_pairs, out_dtypes, out_shapes in node_lists]
    except (TypeError, ValueError) as e:
        raise ValueError(f"malformed function attribute: {e}; expected [nodes, outputs, targets]") from None
    graph = graph_rebuild.rebuild_graph(graph_def_lib.GraphDef(nodes=nodes), graph)
    for node in nodes:  # names created later (gradients) must not collide with imported ones
        parts = node.name.split("/")
        for end in range(1, len(parts) + 1):
            graph.unique_name("/".join(parts[:end]))
    args: dict[int, graph_lib.Tensor] = {}
    for op in graph.get_operations():
        if op.type == ARG_OP_TYPE:
            index = op.get_attr("index")
            if not isinstance(index, int) or index in args:
                raise ValueError(f"function argument {op.name!r} has a bad or repeated index {index!r}")
            args[index] = op.outputs[0]
    if sorted(args) != list(range(len(args))):
        raise ValueError(f"function arguments have indices {sorted(args)}; expected 0..{len(args) - 1}")
    try:
        outputs = [graph.get_tensor_by_name(name) for name in output_names]
        targets = [graph.get_operation_by_name(name) for name in target_names]
    except (KeyError, ValueError, TypeError) as e:
        raise ValueError(f"malformed function attribute: {e}") from None
    ordered_args = [args[i] for i in range(len(args))]
    if isinstance(graph, FuncGraph):
        graph.args = list(ordered_args)
    return graph, ordered_args, outputs, targets
