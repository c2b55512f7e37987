"""Ops that only order work: ``no_op``, ``group``, ``tuple``, ``with_dependencies``."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.ops import array_ops
from tensorgrid.ops import op_util

op_registry.register_op("NoOp")
op_registry.NotDifferentiable("NoOp")


def no_op(name: Optional[str] = None) -> graph_lib.Operation:
    return op_util.make_op("NoOp", [], [], name or "NoOp", graph=graph_lib.get_default_graph())


def _as_op(x: Any) -> graph_lib.Operation:
    element = getattr(x, "_as_graph_element", None)
    x = element() if callable(element) else x
    if isinstance(x, graph_lib.Tensor):
        return x.op
    if isinstance(x, graph_lib.Operation):
        return x
    raise TypeError(f"group() expects Operations or Tensors, got {x!r}")


def group(*inputs: Any, name: Optional[str] = None) -> graph_lib.Operation:
    """An op that runs after all ``inputs`` (nested lists allowed)."""
    flat: list[graph_lib.Operation] = []

    def collect(items: Sequence[Any]) -> None:
        for item in items:
            if isinstance(item, (list, tuple)):
                collect(item)
            elif isinstance(item, dict):
                collect(list(item.values()))
            elif item is not None:
                flat.append(_as_op(item))

    collect(inputs)
    graph = flat[0].graph if flat else graph_lib.get_default_graph()
    with graph.as_default(), graph.control_dependencies(flat):
        return no_op(name=name or "group_deps")


def with_dependencies(dependencies: Sequence[Any], output_tensor: Any, name: Optional[str] = None) -> graph_lib.Tensor:
    t = op_util.to_tensor(output_tensor)
    with t.graph.as_default(), t.graph.control_dependencies([_as_op(d) for d in dependencies]):
        return array_ops.identity(t, name=name)


def tuple_(tensors: Sequence[Any], name: Optional[str] = None, control_inputs: Any = None) -> list[Any]:
    """Tensors that are available only when all of ``tensors`` (and ``control_inputs``) are."""
    ops = [_as_op(t) for t in tensors if t is not None] + [_as_op(c) for c in (control_inputs or [])]
    gate = group(*ops)
    return [with_dependencies([gate], t) if t is not None else None for t in tensors]
