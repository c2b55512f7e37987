"""``tf.import_graph_def`` as TF1 users call it: a GraphDef's nodes added to the default graph
under a name prefix (``import/`` unless ``name`` says otherwise), with ``input_map``
replacing the graph's inputs by tensors of this graph and ``return_elements`` naming what
to hand back.

(The runtime's own rebuilding of a graph it was sent, which keeps node names exactly and
applies no scope, is ``graph_rebuild.rebuild_graph``.)
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import graph_def as graph_def_lib


def _tensor_name(name: str) -> str:
    return name if ":" in name else f"{name}:0"


def import_graph_def(graph_def: graph_def_lib.GraphDef, input_map: Optional[dict[str, Any]] = None,
                     return_elements: Optional[Sequence[str]] = None, name: Optional[str] = None,
                     op_dict: Any = None, producer_op_list: Any = None) -> Optional[list[Any]]:
    """Imports ``graph_def`` into the default graph; returns the ``return_elements`` (Tensors for
    ``"op:N"``, Operations for ``"op"``) or None. ``op_dict`` and ``producer_op_list`` are
    accepted, as TF1 accepts these deprecated arguments, and not used."""
    if not isinstance(graph_def, graph_def_lib.GraphDef):
        raise TypeError(f"graph_def must be a GraphDef (from graph.as_graph_def()), got {type(graph_def).__name__}")
    graph = graph_lib.get_default_graph()
    mapped: dict[str, graph_lib.Tensor] = {}
    for key, value in (input_map or {}).items():
        if not isinstance(key, str):
            raise TypeError(f"input_map keys must be tensor names, got {key!r}")
        tensor = graph.as_graph_element(value, allow_operation=False)
        mapped[_tensor_name(key)] = tensor
    missing = sorted(key for key in mapped if output_dtype_name(graph_def, key) is None)
    if missing:
        raise ValueError(f"Attempted to map inputs that were not found in graph_def: [{', '.join(missing)}]")
    for key, tensor in mapped.items():
        declared = dtypes.as_dtype(output_dtype_name(graph_def, key)).base_dtype
        if declared != tensor.dtype.base_dtype:
            raise ValueError(f"Input {key} was of type {declared.name} in graph_def, but the input_map gives "
                             f"{tensor.name} of type {tensor.dtype.base_dtype.name}")
    imported: dict[str, graph_lib.Operation] = {}
    with graph.name_scope("" if name == "" else (name or "import")) as scope:
        for node in graph_def.nodes:
            inputs: list[graph_lib.Tensor] = []
            controls: list[graph_lib.Operation] = []
            for input_name in node.inputs:
                if input_name.startswith("^"):
                    controls.append(_imported(imported, input_name[1:], node.name))
                    continue
                if _tensor_name(input_name) in mapped:
                    inputs.append(mapped[_tensor_name(input_name)])
                    continue
                op_name, _, index = _tensor_name(input_name).rpartition(":")
                producer_op = _imported(imported, op_name, node.name)
                if not index.isdigit() or int(index) >= len(producer_op.outputs):
                    raise ValueError(f"Node {node.name!r} has an invalid input {input_name!r}")
                inputs.append(producer_op.outputs[int(index)])
            specs = [(dtypes.as_dtype(dt), shape) for dt, shape in zip(node.output_dtypes, node.output_shapes)]
            full_name = scope + node.name
            graph.unique_name(full_name)  # marks it used, so later ops do not take it
            op = graph_lib.Operation(graph, node.op, full_name, inputs, specs, node.attrs, controls, node.device)
            graph._add_op(op)
            imported[node.name] = op
    if return_elements is None:
        return None
    results: list[Any] = []
    for element in return_elements:
        op_name, _, index = element.partition(":")
        found = imported.get(op_name)
        if found is None:
            raise ValueError(f"Requested return_element {element!r} not found in graph_def.")
        if not index:
            results.append(found)
        elif not index.isdigit() or int(index) >= len(found.outputs):
            raise ValueError(f"Requested return_element {element!r} not found in graph_def.")
        else:
            results.append(found.outputs[int(index)])
    return results


def output_dtype_name(graph_def: graph_def_lib.GraphDef, tensor_name: str) -> Optional[str]:
    """The dtype name of a tensor of ``graph_def`` ("op:N"), or None when no node makes it."""
    op_name, _, index = tensor_name.rpartition(":")
    for node in graph_def.nodes:
        if node.name == op_name and index.isdigit() and int(index) < len(node.output_dtypes):
            return node.output_dtypes[int(index)]
    return None


def _imported(imported: dict[str, graph_lib.Operation], op_name: str, consumer: str) -> graph_lib.Operation:
    op = imported.get(op_name)
    if op is None:
        raise ValueError(f"Node {consumer!r} has input {op_name!r}, which is not defined before it in the graph_def")
    return op
