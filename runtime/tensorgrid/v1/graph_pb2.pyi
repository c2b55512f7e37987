from tensorgrid.v1 import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NullValue(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NULL_VALUE: _ClassVar[NullValue]
NULL_VALUE: NullValue

class TensorValue(_message.Message):
    __slots__ = ("header", "content", "is_scalar")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IS_SCALAR_FIELD_NUMBER: _ClassVar[int]
    header: _tensor_pb2.TensorHeader
    content: bytes
    is_scalar: bool
    def __init__(self, header: _Optional[_Union[_tensor_pb2.TensorHeader, _Mapping]] = ..., content: _Optional[bytes] = ..., is_scalar: _Optional[bool] = ...) -> None: ...

class ListValue(_message.Message):
    __slots__ = ("value", "is_tuple")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    IS_TUPLE_FIELD_NUMBER: _ClassVar[int]
    value: _containers.RepeatedCompositeFieldContainer[AttrValue]
    is_tuple: bool
    def __init__(self, value: _Optional[_Iterable[_Union[AttrValue, _Mapping]]] = ..., is_tuple: _Optional[bool] = ...) -> None: ...

class AttrValue(_message.Message):
    __slots__ = ("s", "i", "f", "b", "type", "shape", "tensor", "list", "none", "text")
    S_FIELD_NUMBER: _ClassVar[int]
    I_FIELD_NUMBER: _ClassVar[int]
    F_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    NONE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    s: bytes
    i: int
    f: float
    b: bool
    type: _tensor_pb2.DataType
    shape: _tensor_pb2.TensorShapeProto
    tensor: TensorValue
    list: ListValue
    none: NullValue
    text: str
    def __init__(self, s: _Optional[bytes] = ..., i: _Optional[int] = ..., f: _Optional[float] = ..., b: _Optional[bool] = ..., type: _Optional[_Union[_tensor_pb2.DataType, str]] = ..., shape: _Optional[_Union[_tensor_pb2.TensorShapeProto, _Mapping]] = ..., tensor: _Optional[_Union[TensorValue, _Mapping]] = ..., list: _Optional[_Union[ListValue, _Mapping]] = ..., none: _Optional[_Union[NullValue, str]] = ..., text: _Optional[str] = ...) -> None: ...

class NodeDef(_message.Message):
    __slots__ = ("name", "op", "input", "device", "attr", "output_dtypes", "output_shapes")
    class AttrEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: AttrValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[AttrValue, _Mapping]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    ATTR_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_DTYPES_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SHAPES_FIELD_NUMBER: _ClassVar[int]
    name: str
    op: str
    input: _containers.RepeatedScalarFieldContainer[str]
    device: str
    attr: _containers.MessageMap[str, AttrValue]
    output_dtypes: _containers.RepeatedScalarFieldContainer[_tensor_pb2.DataType]
    output_shapes: _containers.RepeatedCompositeFieldContainer[_tensor_pb2.TensorShapeProto]
    def __init__(self, name: _Optional[str] = ..., op: _Optional[str] = ..., input: _Optional[_Iterable[str]] = ..., device: _Optional[str] = ..., attr: _Optional[_Mapping[str, AttrValue]] = ..., output_dtypes: _Optional[_Iterable[_Union[_tensor_pb2.DataType, str]]] = ..., output_shapes: _Optional[_Iterable[_Union[_tensor_pb2.TensorShapeProto, _Mapping]]] = ...) -> None: ...

class GraphDef(_message.Message):
    __slots__ = ("node", "version")
    NODE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    node: _containers.RepeatedCompositeFieldContainer[NodeDef]
    version: int
    def __init__(self, node: _Optional[_Iterable[_Union[NodeDef, _Mapping]]] = ..., version: _Optional[int] = ...) -> None: ...
