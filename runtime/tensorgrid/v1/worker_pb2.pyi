from tensorgrid.v1 import config_pb2 as _config_pb2
from tensorgrid.v1 import graph_pb2 as _graph_pb2
from tensorgrid.v1 import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("device", "data_port")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    DATA_PORT_FIELD_NUMBER: _ClassVar[int]
    device: _containers.RepeatedCompositeFieldContainer[_config_pb2.DeviceAttributes]
    data_port: int
    def __init__(self, device: _Optional[_Iterable[_Union[_config_pb2.DeviceAttributes, _Mapping]]] = ..., data_port: _Optional[int] = ...) -> None: ...

class RegisterGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_def", "config", "feed", "fetch", "target", "peer_addresses", "registering_task", "registering_incarnation")
    class PeerAddressesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    FEED_FIELD_NUMBER: _ClassVar[int]
    FETCH_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    REGISTERING_TASK_FIELD_NUMBER: _ClassVar[int]
    REGISTERING_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_def: _graph_pb2.GraphDef
    config: _config_pb2.SessionConfig
    feed: _containers.RepeatedScalarFieldContainer[str]
    fetch: _containers.RepeatedScalarFieldContainer[str]
    target: _containers.RepeatedScalarFieldContainer[str]
    peer_addresses: _containers.ScalarMap[str, str]
    registering_task: str
    registering_incarnation: int
    def __init__(self, session_handle: _Optional[str] = ..., graph_def: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ..., config: _Optional[_Union[_config_pb2.SessionConfig, _Mapping]] = ..., feed: _Optional[_Iterable[str]] = ..., fetch: _Optional[_Iterable[str]] = ..., target: _Optional[_Iterable[str]] = ..., peer_addresses: _Optional[_Mapping[str, str]] = ..., registering_task: _Optional[str] = ..., registering_incarnation: _Optional[int] = ...) -> None: ...

class RegisterGraphResponse(_message.Message):
    __slots__ = ("graph_handle",)
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    def __init__(self, graph_handle: _Optional[str] = ...) -> None: ...

class DeregisterGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_handle")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_handle: str
    def __init__(self, session_handle: _Optional[str] = ..., graph_handle: _Optional[str] = ...) -> None: ...

class DeregisterGraphResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RunGraphFrame(_message.Message):
    __slots__ = ("header", "chunk", "request", "response")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    header: _tensor_pb2.TensorHeader
    chunk: bytes
    request: RunGraphRequest
    response: RunGraphResponse
    def __init__(self, header: _Optional[_Union[_tensor_pb2.TensorHeader, _Mapping]] = ..., chunk: _Optional[bytes] = ..., request: _Optional[_Union[RunGraphRequest, _Mapping]] = ..., response: _Optional[_Union[RunGraphResponse, _Mapping]] = ...) -> None: ...

class RunGraphBundle(_message.Message):
    __slots__ = ("frame",)
    FRAME_FIELD_NUMBER: _ClassVar[int]
    frame: _containers.RepeatedCompositeFieldContainer[RunGraphFrame]
    def __init__(self, frame: _Optional[_Iterable[_Union[RunGraphFrame, _Mapping]]] = ...) -> None: ...

class RunGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_handle", "step_id", "send", "recv_key", "options")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    SEND_FIELD_NUMBER: _ClassVar[int]
    RECV_KEY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_handle: str
    step_id: int
    send: _containers.RepeatedScalarFieldContainer[str]
    recv_key: _containers.RepeatedScalarFieldContainer[str]
    options: _config_pb2.RunOptions
    def __init__(self, session_handle: _Optional[str] = ..., graph_handle: _Optional[str] = ..., step_id: _Optional[int] = ..., send: _Optional[_Iterable[str]] = ..., recv_key: _Optional[_Iterable[str]] = ..., options: _Optional[_Union[_config_pb2.RunOptions, _Mapping]] = ...) -> None: ...

class RunGraphResponse(_message.Message):
    __slots__ = ("step_id",)
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    def __init__(self, step_id: _Optional[int] = ...) -> None: ...

class PushTensorsFrame(_message.Message):
    __slots__ = ("header", "chunk", "request")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    header: _tensor_pb2.TensorHeader
    chunk: bytes
    request: PushTensorsRequest
    def __init__(self, header: _Optional[_Union[_tensor_pb2.TensorHeader, _Mapping]] = ..., chunk: _Optional[bytes] = ..., request: _Optional[_Union[PushTensorsRequest, _Mapping]] = ...) -> None: ...

class PushTensorsBundle(_message.Message):
    __slots__ = ("frame",)
    FRAME_FIELD_NUMBER: _ClassVar[int]
    frame: _containers.RepeatedCompositeFieldContainer[PushTensorsFrame]
    def __init__(self, frame: _Optional[_Iterable[_Union[PushTensorsFrame, _Mapping]]] = ...) -> None: ...

class PushTensorsRequest(_message.Message):
    __slots__ = ("step_id", "from_task")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_TASK_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    from_task: str
    def __init__(self, step_id: _Optional[int] = ..., from_task: _Optional[str] = ...) -> None: ...

class PushTensorsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RecvTensorRequest(_message.Message):
    __slots__ = ("step_id", "rendezvous_key", "options")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    RENDEZVOUS_KEY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    rendezvous_key: _containers.RepeatedScalarFieldContainer[str]
    options: _config_pb2.RunOptions
    def __init__(self, step_id: _Optional[int] = ..., rendezvous_key: _Optional[_Iterable[str]] = ..., options: _Optional[_Union[_config_pb2.RunOptions, _Mapping]] = ...) -> None: ...

class CleanupGraphRequest(_message.Message):
    __slots__ = ("step_id", "abort_reason")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    ABORT_REASON_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    abort_reason: str
    def __init__(self, step_id: _Optional[int] = ..., abort_reason: _Optional[str] = ...) -> None: ...

class CleanupGraphResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CleanupAllRequest(_message.Message):
    __slots__ = ("container",)
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    container: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, container: _Optional[_Iterable[str]] = ...) -> None: ...

class CleanupAllResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ShutdownRequest(_message.Message):
    __slots__ = ("reason", "exit_code", "finished_task", "finished_task_is_chief")
    REASON_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    FINISHED_TASK_FIELD_NUMBER: _ClassVar[int]
    FINISHED_TASK_IS_CHIEF_FIELD_NUMBER: _ClassVar[int]
    reason: str
    exit_code: int
    finished_task: str
    finished_task_is_chief: bool
    def __init__(self, reason: _Optional[str] = ..., exit_code: _Optional[int] = ..., finished_task: _Optional[str] = ..., finished_task_is_chief: _Optional[bool] = ...) -> None: ...

class ShutdownResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
