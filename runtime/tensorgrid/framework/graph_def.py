"""The serializable form of a graph (``GraphDef`` of ``NodeDef``s).

Sessions send graphs to masters and masters send partitions to workers in this
form; the distributed layer maps it to protobuf. Attribute values are limited to
what crosses the wire: None, bool, int, float, str, bytes, DType names, shapes
(tuples), numpy arrays, and lists of these.

TF1 programs walk it by TensorFlow's field names (``graph_def.node``, ``node.name``, ``node.op``,
``node.input``, ``node.device``, ``node.attr``), which are aliases of the runtime's own.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence


@dataclasses.dataclass
class NodeDef:
    """One op: its name, type, inputs (``op:index`` or ``^op`` for control), device, attrs."""

    name: str
    op: str
    inputs: list[str]
    device: str
    attrs: dict[str, Any]
    output_dtypes: list[str]
    """Dtype name of each output, so a receiver needs no shape or type inference."""
    output_shapes: list[Optional[tuple[Optional[int], ...]]]
    """Static shape of each output (None for unknown rank)."""

    @property
    def input(self) -> tuple[str, ...]:
        """The inputs as TensorFlow's ``NodeDef.input`` spells them: ``op`` for an op's first output,
        ``op:N`` for the others, ``^op`` for a control input. Read-only: assign a new list to change them."""
        return tuple(name[:-2] if name.endswith(":0") and not name.startswith("^") else name
                     for name in self.inputs)

    @input.setter  # noqa: A003 - TensorFlow's field name (NodeDef.input)
    def input(self, names: Sequence[str]) -> None:
        self.inputs = [name if name.startswith("^") or ":" in name else f"{name}:0" for name in names]

    @property
    def attr(self) -> dict[str, Any]:
        """The attributes (TensorFlow's ``NodeDef.attr``), as plain values rather than ``AttrValue`` messages."""
        return self.attrs


@dataclasses.dataclass
class GraphDef:
    nodes: list[NodeDef]
    version: int = 0
    """The id of the newest op; ``Graph.as_graph_def(from_version=...)`` sends only newer ops."""

    @property
    def node(self) -> list[NodeDef]:
        """The nodes in creation order, by TensorFlow's field name (``graph_def.node``)."""
        return self.nodes
