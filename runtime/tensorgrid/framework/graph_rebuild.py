"""``rebuild_graph``: a serialized graph's nodes recreated in a Graph exactly as they were.

Used where a graph arrives as a GraphDef (a worker's registered partition, a master's
session graph, a function's body, a meta graph's nodes): the nodes keep their exact
names and devices, and no construction-time scope applies to them. TF1's public
``tf.import_graph_def``, which adds a name prefix and maps inputs, is
``import_graph_def.py``.
"""

from __future__ import annotations

from typing import Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import graph_def as graph_def_lib


def rebuild_graph(graph_def: graph_def_lib.GraphDef, graph: Optional[graph_lib.Graph] = None) -> graph_lib.Graph:
    """Recreates the nodes of ``graph_def`` in ``graph`` with their exact names and devices."""
    graph = graph if graph is not None else graph_lib.Graph()
    for node in graph_def.nodes:
        inputs: list[graph_lib.Tensor] = []
        controls: list[graph_lib.Operation] = []
        for name in node.inputs:
            if name.startswith("^"):
                controls.append(_lookup_op(graph, name[1:], node.name))
            else:
                op_name, _, index = name.rpartition(":")
                producer = _lookup_op(graph, op_name, node.name)
                if not index.isdigit() or int(index) >= len(producer.outputs):
                    raise ValueError(f"Node {node.name!r} has an invalid input {name!r}")
                inputs.append(producer.outputs[int(index)])
        specs = [(dtypes.as_dtype(dt), shape) for dt, shape in zip(node.output_dtypes, node.output_shapes)]
        op = graph_lib.Operation(graph, node.op, node.name, inputs, specs, node.attrs, controls, node.device)
        graph._add_op(op)
    return graph


def _lookup_op(graph: graph_lib.Graph, name: str, consumer: str) -> graph_lib.Operation:
    try:
        return graph.get_operation_by_name(name)
    except KeyError:
        raise ValueError(
            f"Node {consumer!r} has input {name!r}, which is not defined before it in the graph"
        ) from None
