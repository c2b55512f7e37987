from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class SessionConfig(_message.Message):
    __slots__ = ("device_filters", "operation_timeout_in_ms", "allow_soft_placement", "log_device_placement", "isolate_session_state")
    DEVICE_FILTERS_FIELD_NUMBER: _ClassVar[int]
    OPERATION_TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_SOFT_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    LOG_DEVICE_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    ISOLATE_SESSION_STATE_FIELD_NUMBER: _ClassVar[int]
    device_filters: _containers.RepeatedScalarFieldContainer[str]
    operation_timeout_in_ms: int
    allow_soft_placement: bool
    log_device_placement: bool
    isolate_session_state: bool
    def __init__(self, device_filters: _Optional[_Iterable[str]] = ..., operation_timeout_in_ms: _Optional[int] = ..., allow_soft_placement: _Optional[bool] = ..., log_device_placement: _Optional[bool] = ..., isolate_session_state: _Optional[bool] = ...) -> None: ...

class RunOptions(_message.Message):
    __slots__ = ("timeout_in_ms", "allow_data_channel")
    TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_DATA_CHANNEL_FIELD_NUMBER: _ClassVar[int]
    timeout_in_ms: int
    allow_data_channel: bool
    def __init__(self, timeout_in_ms: _Optional[int] = ..., allow_data_channel: _Optional[bool] = ...) -> None: ...

class DeviceAttributes(_message.Message):
    __slots__ = ("name", "device_type", "memory_limit", "incarnation")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TYPE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    device_type: str
    memory_limit: int
    incarnation: int
    def __init__(self, name: _Optional[str] = ..., device_type: _Optional[str] = ..., memory_limit: _Optional[int] = ..., incarnation: _Optional[int] = ...) -> None: ...
