"""A graph in TensorFlow's own ``GraphDef`` layout, for TensorBoard's graph view.

tensorgrid's wire form of a graph (protos/tensorgrid/v1/graph.proto) numbers its fields
for the runtime; TensorBoard reads ``tensorflow.GraphDef``. This writes that layout by
hand (protobuf's wire format, as the summary kernels do): every node's name, op type,
inputs and device, and the attributes TensorFlow's ``AttrValue`` can hold (strings,
numbers, booleans, dtypes, shapes, small constant tensors and homogeneous lists of
these), plus ``_output_shapes`` for the edges' shapes. Attributes only tensorgrid has
(sub-graphs of control flow, Python-only values) and constants over ``MAX_TENSOR_BYTES``
are left out: TensorBoard draws the graph without them.
"""

from __future__ import annotations

import re
import struct
from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph_def as graph_def_lib
from tensorgrid.kernels.summary_kernels import length_delimited, varint

MAX_TENSOR_BYTES = 64 * 1024
"""Larger constants are not copied into the event file (TensorBoard shows their shape)."""

_GRAPH_PRODUCER = 27  # VersionDef.producer of the graphs TensorFlow 1.15 writes
_DTYPE_KEY = re.compile(r"T\w*|\w*dtypes?|\w*_types?")
"""Attributes that name dtypes (``dtype``, ``T``, ``out_type``, ``component_types``): tensorgrid
keeps a dtype's name there, TensorFlow's ``AttrValue.type``."""


def _int_field(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value & 0xFFFFFFFFFFFFFFFF)


def _shape(dims: Optional[tuple[Optional[int], ...]]) -> bytes:
    """A ``TensorShapeProto``: unknown rank, or one ``dim`` per dimension (-1 when unknown)."""
    if dims is None:
        return _int_field(3, 1)
    return b"".join(length_delimited(2, _int_field(1, -1 if size is None else size) if size != 0 else b"")
                    for size in dims)


def _dtype(value: Any) -> Optional[int]:
    try:
        return dtypes.as_dtype(value).enum
    except (TypeError, ValueError, KeyError):
        return None


def _tensor(array: np.ndarray) -> Optional[bytes]:
    """A ``TensorProto`` of a small constant, or None (too large, or a dtype TF lacks)."""
    enum = _dtype(array.dtype)
    if enum is None or array.nbytes > MAX_TENSOR_BYTES:
        return None
    header = _int_field(1, enum) + length_delimited(2, _shape(tuple(array.shape)))
    if array.dtype == object:
        items = [item if isinstance(item, bytes) else str(item).encode() for item in array.reshape(-1)]
        if sum(len(item) for item in items) > MAX_TENSOR_BYTES:
            return None
        return header + b"".join(length_delimited(8, item) for item in items)
    return header + length_delimited(4, np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes())


def _is_shape(value: Any) -> bool:
    return isinstance(value, tuple) and all(d is None or (isinstance(d, int) and not isinstance(d, bool) and d >= 0)
                                            for d in value)


def _list(values: list[Any]) -> Optional[bytes]:
    """A homogeneous list as ``AttrValue.ListValue``, or None for lists TF cannot hold."""
    if not values:
        return b""
    if all(isinstance(v, bool) for v in values):
        return length_delimited(5, b"".join(varint(int(v)) for v in values))
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return length_delimited(3, b"".join(varint(v & 0xFFFFFFFFFFFFFFFF) for v in values))
    if all(isinstance(v, float) for v in values):
        return length_delimited(4, struct.pack(f"<{len(values)}f", *values))
    if all(isinstance(v, (str, bytes)) for v in values):
        return b"".join(length_delimited(2, v if isinstance(v, bytes) else v.encode()) for v in values)
    if all(isinstance(v, dtypes.DType) for v in values):
        return length_delimited(6, b"".join(varint(v.enum) for v in values))
    if all(_is_shape(v) for v in values):
        return b"".join(length_delimited(7, _shape(v)) for v in values)
    return None


def _as_dtypes(key: str, value: Any) -> Any:
    """A dtype name (or list of them) under a dtype attribute, as ``DType`` objects."""
    if not _DTYPE_KEY.fullmatch(key):
        return value
    names = value if isinstance(value, (list, tuple)) else [value]
    if not names or not all(isinstance(name, str) and _dtype(name) is not None for name in names):
        return value
    found = [dtypes.as_dtype(name) for name in names]
    return found if isinstance(value, (list, tuple)) else found[0]


def attr_value(value: Any) -> Optional[bytes]:
    """``value`` as a serialized ``tensorflow.AttrValue``, or None when TF has no form for it."""
    if isinstance(value, bool):
        return _int_field(5, int(value))
    if isinstance(value, int):
        return _int_field(3, value) if -(1 << 63) <= value < (1 << 63) else None
    if isinstance(value, float):
        return varint(4 << 3 | 5) + struct.pack("<f", value)
    if isinstance(value, bytes):
        return length_delimited(2, value)
    if isinstance(value, str):
        return length_delimited(2, value.encode())
    if isinstance(value, dtypes.DType):
        return _int_field(6, value.enum)
    if _is_shape(value):
        return length_delimited(7, _shape(value))
    if isinstance(value, (np.ndarray, np.generic)):
        tensor = _tensor(np.asarray(value))
        return None if tensor is None else length_delimited(8, tensor)
    if isinstance(value, (list, tuple)):
        items = _list(list(value))
        return None if items is None else length_delimited(1, items)
    return None


def node_def(node: graph_def_lib.NodeDef) -> bytes:
    """One ``tensorflow.NodeDef``."""
    out = [length_delimited(1, node.name.encode()), length_delimited(2, node.op.encode())]
    out += [length_delimited(3, name.encode()) for name in node.inputs]
    if node.device:
        out.append(length_delimited(4, node.device.encode()))
    attrs = dict(node.attrs)
    if node.output_shapes:
        attrs["_output_shapes"] = list(node.output_shapes)
    for key in sorted(attrs):
        value = attrs[key]
        encoded: Optional[bytes]
        if key == "_output_shapes":
            encoded = length_delimited(1, b"".join(length_delimited(7, _shape(dims)) for dims in value))
        else:
            encoded = attr_value(_as_dtypes(key, value))
        if encoded is not None:
            out.append(length_delimited(5, length_delimited(1, key.encode()) + length_delimited(2, encoded)))
    return b"".join(out)


def serialized_graph_def(graph: Any) -> bytes:
    """The graph (a ``tf.Graph`` or a tensorgrid ``GraphDef``) as a serialized ``tensorflow.GraphDef``."""
    graph_def = graph if isinstance(graph, graph_def_lib.GraphDef) else graph.as_graph_def()
    nodes = b"".join(length_delimited(1, node_def(node)) for node in graph_def.nodes)
    return nodes + length_delimited(4, _int_field(1, _GRAPH_PRODUCER))
