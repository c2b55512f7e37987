from tensorgrid.v1 import config_pb2 as _config_pb2
from tensorgrid.v1 import graph_pb2 as _graph_pb2
from tensorgrid.v1 import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateSessionRequest(_message.Message):
    __slots__ = ("graph_def", "config", "target")
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    graph_def: _graph_pb2.GraphDef
    config: _config_pb2.SessionConfig
    target: str
    def __init__(self, graph_def: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ..., config: _Optional[_Union[_config_pb2.SessionConfig, _Mapping]] = ..., target: _Optional[str] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ("session_handle", "graph_version", "data_port")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    DATA_PORT_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_version: int
    data_port: int
    def __init__(self, session_handle: _Optional[str] = ..., graph_version: _Optional[int] = ..., data_port: _Optional[int] = ...) -> None: ...

class ExtendSessionRequest(_message.Message):
    __slots__ = ("session_handle", "graph_def", "current_graph_version")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    CURRENT_GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_def: _graph_pb2.GraphDef
    current_graph_version: int
    def __init__(self, session_handle: _Optional[str] = ..., graph_def: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ..., current_graph_version: _Optional[int] = ...) -> None: ...

class ExtendSessionResponse(_message.Message):
    __slots__ = ("new_graph_version",)
    NEW_GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    new_graph_version: int
    def __init__(self, new_graph_version: _Optional[int] = ...) -> None: ...

class RunStepFrame(_message.Message):
    __slots__ = ("header", "chunk", "request", "response")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    header: _tensor_pb2.TensorHeader
    chunk: bytes
    request: RunStepRequest
    response: RunStepResponse
    def __init__(self, header: _Optional[_Union[_tensor_pb2.TensorHeader, _Mapping]] = ..., chunk: _Optional[bytes] = ..., request: _Optional[_Union[RunStepRequest, _Mapping]] = ..., response: _Optional[_Union[RunStepResponse, _Mapping]] = ...) -> None: ...

class RunStepBundle(_message.Message):
    __slots__ = ("frame",)
    FRAME_FIELD_NUMBER: _ClassVar[int]
    frame: _containers.RepeatedCompositeFieldContainer[RunStepFrame]
    def __init__(self, frame: _Optional[_Iterable[_Union[RunStepFrame, _Mapping]]] = ...) -> None: ...

class RunStepRequest(_message.Message):
    __slots__ = ("session_handle", "feed", "fetch", "target", "options")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    FEED_FIELD_NUMBER: _ClassVar[int]
    FETCH_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    feed: _containers.RepeatedScalarFieldContainer[str]
    fetch: _containers.RepeatedScalarFieldContainer[str]
    target: _containers.RepeatedScalarFieldContainer[str]
    options: _config_pb2.RunOptions
    def __init__(self, session_handle: _Optional[str] = ..., feed: _Optional[_Iterable[str]] = ..., fetch: _Optional[_Iterable[str]] = ..., target: _Optional[_Iterable[str]] = ..., options: _Optional[_Union[_config_pb2.RunOptions, _Mapping]] = ...) -> None: ...

class RunStepResponse(_message.Message):
    __slots__ = ("step_id",)
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    def __init__(self, step_id: _Optional[int] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_handle",)
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    def __init__(self, session_handle: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDevicesRequest(_message.Message):
    __slots__ = ("session_handle",)
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    def __init__(self, session_handle: _Optional[str] = ...) -> None: ...

class ListDevicesResponse(_message.Message):
    __slots__ = ("local_device", "remote_device")
    LOCAL_DEVICE_FIELD_NUMBER: _ClassVar[int]
    REMOTE_DEVICE_FIELD_NUMBER: _ClassVar[int]
    local_device: _containers.RepeatedCompositeFieldContainer[_config_pb2.DeviceAttributes]
    remote_device: _containers.RepeatedCompositeFieldContainer[_config_pb2.DeviceAttributes]
    def __init__(self, local_device: _Optional[_Iterable[_Union[_config_pb2.DeviceAttributes, _Mapping]]] = ..., remote_device: _Optional[_Iterable[_Union[_config_pb2.DeviceAttributes, _Mapping]]] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("container", "device_filters")
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FILTERS_FIELD_NUMBER: _ClassVar[int]
    container: _containers.RepeatedScalarFieldContainer[str]
    device_filters: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, container: _Optional[_Iterable[str]] = ..., device_filters: _Optional[_Iterable[str]] = ...) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
