"""The serializable form of a graph (``GraphDef`` of ``NodeDef``s).

Sessions send graphs to masters and masters send partitions to workers in this
form; the distributed layer maps it to protobuf. Attribute values are limited to
what crosses the wire: None, bool, int, float, str, bytes, DType names, shapes
(tuples), numpy arrays, and lists of these.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional


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


@dataclasses.dataclass
class GraphDef:
    nodes: list[NodeDef]
    version: int = 0
    """The id of the newest op; ``Graph.as_graph_def(from_version=...)`` sends only newer ops."""
