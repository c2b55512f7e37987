"""Graphs to and from the wire: ``framework.graph_def.GraphDef`` <-> ``tensorgrid.v1.GraphDef``.

Sessions send graphs to masters (CreateSession, ExtendSession) and masters send
partitions to workers (RegisterGraph) in protobuf form; this module is the one
mapping between the two, lossless for every attribute kind a graph holds, so that
``graph_rebuild.rebuild_graph(from_proto(to_proto(g.as_graph_def())))`` rebuilds the same nodes.

Attribute values map by Python type (graph.proto, AttrValue): None, bool, int,
float, str, bytes, DType (a dtype *name* is a str and stays one), tuples of sizes
and Nones (shapes), numpy arrays and numpy scalars of every tensorgrid dtype
(0-d and empty included), and lists or tuples nesting any of these. Decoding
checks everything a sender could get wrong and raises ValueError naming the node,
the attribute and the bad value.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import numpy as np

from tensorgrid.distributed.rpc.transport import wire
from tensorgrid.framework import dtypes
from tensorgrid.framework import graph_def as graph_def_lib
from tensorgrid.v1 import graph_pb2

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# "producer:index" or "^producer"; a producer name has no ':' and does not start with '^'.
_DATA_INPUT = re.compile(r"[^:^][^:]*:\d+")
_CONTROL_INPUT = re.compile(r"\^[^:^][^:]*")
_SUPPORTED = ("None, bool, int, float, str, bytes, DType, tuple of ints >= 0 and Nones, numpy array or scalar "
              "of dtype " + dtypes.SUPPORTED + ", and lists or tuples of these")


def to_proto(graph_def: graph_def_lib.GraphDef) -> graph_pb2.GraphDef:
    """The protobuf form of a graph. TypeError or ValueError naming the node and
    attribute if an attribute value has no wire form."""
    proto = graph_pb2.GraphDef(version=graph_def.version)
    for node in graph_def.nodes:
        node_to_proto(node, proto.node.add())
    return proto


SIZE_ONLY_PAYLOAD_BYTES = 1024
"""Tensor attributes from this many bytes up are not serialized by ``serialized_size``."""


def serialized_size(graph_def: graph_def_lib.GraphDef) -> int:
    """The bytes of ``to_proto(graph_def)`` serialized, as a RegisterGraph or CreateSession
    request's ``ByteSize`` counts them, without copying the payloads of tensor attributes
    (a 256 MB constant would take seconds and its size again in memory): each one of
    ``SIZE_ONLY_PAYLOAD_BYTES`` or more is counted by its length, so the result is exact
    up to a few bytes per such tensor (its header and length prefixes)."""
    proto = graph_pb2.GraphDef(version=graph_def.version)
    payloads = 0
    for node in graph_def.nodes:
        attrs = {}
        for key, value in node.attrs.items():
            attrs[key], payload = _without_payloads(value)
            payloads += payload
        lean = graph_def_lib.NodeDef(node.name, node.op, node.inputs, node.device, attrs, node.output_dtypes,
                                     node.output_shapes)
        node_to_proto(lean, proto.node.add())
    return int(proto.ByteSize()) + payloads


def _without_payloads(value: Any) -> tuple[Any, int]:
    """``value`` with its large numeric arrays (nested in lists too) made empty, and the
    bytes their payloads and length prefixes take on the wire."""
    if isinstance(value, np.ndarray) and value.dtype != np.object_ and value.nbytes >= SIZE_ONLY_PAYLOAD_BYTES:
        return np.empty((0,), value.dtype), value.nbytes + 1 + _varint_bytes(value.nbytes)
    if isinstance(value, (list, tuple)) and not (isinstance(value, tuple) and _is_shape(value)):
        parts = [_without_payloads(item) for item in value]
        lean = [item for item, _ in parts]
        return (tuple(lean) if isinstance(value, tuple) else lean), sum(payload for _, payload in parts)
    return value, 0


def _varint_bytes(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def from_proto(proto: graph_pb2.GraphDef) -> graph_def_lib.GraphDef:
    """The framework form of a received graph. ValueError naming the node and the bad
    value for an empty or repeated node name, an empty op, an input that is not
    "op:N" or "^op", an unknown dtype, a bad shape, or an attribute with no value."""
    seen: set[str] = set()
    nodes = []
    for node_proto in proto.node:
        node = node_from_proto(node_proto)
        if node.name in seen:
            raise ValueError(f"GraphDef has two nodes named {node.name!r}; node names must be unique")
        seen.add(node.name)
        nodes.append(node)
    return graph_def_lib.GraphDef(nodes=nodes, version=proto.version)


def node_to_proto(node: graph_def_lib.NodeDef, out: Optional[graph_pb2.NodeDef] = None) -> graph_pb2.NodeDef:
    """Fills ``out`` (or a new NodeDef proto) from a framework NodeDef."""
    proto = out if out is not None else graph_pb2.NodeDef()
    if len(node.output_dtypes) != len(node.output_shapes):
        raise ValueError(f"node {node.name!r} has {len(node.output_dtypes)} output dtypes but "
                         f"{len(node.output_shapes)} output shapes")
    proto.name = node.name
    proto.op = node.op
    proto.input.extend(node.inputs)
    proto.device = node.device
    for key, value in node.attrs.items():
        attr_to_proto(value, proto.attr[key], f"attr {key!r} of node {node.name!r}")
    proto.output_dtypes.extend(wire.dtype_to_proto(dt) for dt in node.output_dtypes)
    for shape in node.output_shapes:
        proto.output_shapes.append(wire.shape_to_proto(shape))
    return proto


def node_from_proto(proto: graph_pb2.NodeDef) -> graph_def_lib.NodeDef:
    """The framework NodeDef of a received node proto (validated; see ``from_proto``)."""
    where = f"node {proto.name!r}"
    if not proto.name:
        raise ValueError(f"a node of op {proto.op!r} has an empty name")
    if not proto.op:
        raise ValueError(f"{where} has an empty op type")
    for name in proto.input:
        if not (_DATA_INPUT.fullmatch(name) or _CONTROL_INPUT.fullmatch(name)):
            raise ValueError(f"{where} has input {name!r}; valid inputs are 'producer:index' or '^producer'")
    if len(proto.output_dtypes) != len(proto.output_shapes):
        raise ValueError(f"{where} has {len(proto.output_dtypes)} output dtypes but "
                         f"{len(proto.output_shapes)} output shapes")
    output_dtypes = [wire.dtype_from_proto(dt, f"output {i} of {where}").name
                     for i, dt in enumerate(proto.output_dtypes)]
    output_shapes = [wire.shape_from_proto(shape, f"output shape {i} of {where}")
                     for i, shape in enumerate(proto.output_shapes)]
    attrs = {key: attr_from_proto(proto.attr[key], f"attr {key!r} of {where}") for key in sorted(proto.attr)}
    return graph_def_lib.NodeDef(name=proto.name, op=proto.op, inputs=list(proto.input), device=proto.device,
                                 attrs=attrs, output_dtypes=output_dtypes, output_shapes=output_shapes)


def attr_to_proto(value: Any, out: Optional[graph_pb2.AttrValue] = None, where: str = "attr") -> graph_pb2.AttrValue:
    """Fills ``out`` (or a new AttrValue) with one attribute value; ``where`` names it in errors."""
    proto = out if out is not None else graph_pb2.AttrValue()
    # numpy scalars first: np.float64 is a float and np.bool_ is not a bool.
    if isinstance(value, (np.ndarray, np.generic)):
        _tensor_to_proto(value, proto.tensor, where)
    elif value is None:
        proto.none = graph_pb2.NULL_VALUE
    elif isinstance(value, bool):
        proto.b = value
    elif isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"{where} is {value}, outside the int64 range of an integer attribute")
        proto.i = value
    elif isinstance(value, float):
        proto.f = value
    elif isinstance(value, str):
        try:
            proto.text = value
        except ValueError as e:  # unpaired surrogates have no UTF-8 form
            raise ValueError(f"{where} is a str that is not valid Unicode text: {e}") from None
    elif isinstance(value, bytes):
        proto.s = value
    elif isinstance(value, dtypes.DType):
        proto.type = value.enum  # type: ignore[assignment]
    elif isinstance(value, tuple) and _is_shape(value):
        proto.shape.CopyFrom(wire.shape_to_proto(value))
    elif isinstance(value, (list, tuple)):
        proto.list.is_tuple = isinstance(value, tuple)
        proto.list.SetInParent()
        for i, item in enumerate(value):
            attr_to_proto(item, proto.list.value.add(), f"{where}[{i}]")
    else:
        raise TypeError(f"{where} is {value!r} of type {type(value).__name__}, which has no wire form; "
                        f"supported are {_SUPPORTED}")
    return proto


def attr_from_proto(proto: graph_pb2.AttrValue, where: str = "attr") -> Any:
    """The Python value of one attribute; ValueError naming ``where`` if malformed."""
    kind = proto.WhichOneof("value")
    if kind is None:
        raise ValueError(f"{where} has no value set (one field of AttrValue.value is required)")
    if kind == "none":
        return None
    if kind == "type":
        return wire.dtype_from_proto(proto.type, where)
    if kind == "shape":
        return wire.shape_from_proto(proto.shape, where)
    if kind == "tensor":
        return _tensor_from_proto(proto.tensor, where)
    if kind == "list":
        items = [attr_from_proto(item, f"{where}[{i}]") for i, item in enumerate(proto.list.value)]
        return tuple(items) if proto.list.is_tuple else items
    return getattr(proto, kind)  # s, i, f, b, text: the Python value as is


def _is_shape(value: tuple[Any, ...]) -> bool:
    """A tuple that reads back identically from a TensorShapeProto (sizes >= 0 or None)."""
    return all(d is None or (type(d) is int and 0 <= d <= _INT64_MAX) for d in value)


def _tensor_to_proto(value: Any, out: graph_pb2.TensorValue, where: str) -> None:
    try:
        array = wire.as_wire_array(value)
    except TypeError:
        raise TypeError(f"{where} is a numpy value of dtype {np.asarray(value).dtype}, which has no wire form; "
                        f"valid dtypes are {dtypes.SUPPORTED}") from None
    try:
        payload = wire.wire_payload(array)
    except TypeError as e:
        raise TypeError(f"{where}: {e}") from None
    out.header.CopyFrom(wire.header_for(array, len(payload)))
    out.content = payload.tobytes()
    out.is_scalar = isinstance(value, np.generic)


def _tensor_from_proto(proto: graph_pb2.TensorValue, where: str) -> Any:
    header = proto.header
    if header.HasField("data_channel"):
        raise ValueError(f"tensor of {where} refers to a data channel; a constant carries its content inline")
    try:
        dtype, shape = wire.check_header(header, max_bytes=1 << 62)  # the message size bounds it
    except wire.TransportError as e:
        raise ValueError(f"tensor of {where}: {e}") from None
    if header.byte_size != len(proto.content):
        raise ValueError(f"tensor of {where} declares byte_size {header.byte_size} but has "
                         f"{len(proto.content)} content bytes")
    if proto.is_scalar and shape != ():
        raise ValueError(f"tensor of {where} is marked scalar but has shape {list(shape)}")
    if dtype == np.object_:
        try:
            array = wire.decode_strings(proto.content, shape)
        except wire.TransportError as e:
            raise ValueError(f"tensor of {where}: {e}") from None
    else:
        array = np.frombuffer(proto.content, dtype).reshape(shape).copy()
    return array[()] if proto.is_scalar else array
