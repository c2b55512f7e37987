from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReplicaRows(_message.Message):
    __slots__ = ("container", "name", "dtype", "shape", "rows", "row_start", "row_count", "values", "updates")
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    ROW_START_FIELD_NUMBER: _ClassVar[int]
    ROW_COUNT_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    container: str
    name: str
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    rows: _containers.RepeatedScalarFieldContainer[int]
    row_start: int
    row_count: int
    values: bytes
    updates: int
    def __init__(self, container: _Optional[str] = ..., name: _Optional[str] = ..., dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., rows: _Optional[_Iterable[int]] = ..., row_start: _Optional[int] = ..., row_count: _Optional[int] = ..., values: _Optional[bytes] = ..., updates: _Optional[int] = ...) -> None: ...

class ReplicaArray(_message.Message):
    __slots__ = ("dtype", "shape", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class ReplicaTableRows(_message.Message):
    __slots__ = ("container", "name", "whole", "definition", "pending_included", "arrays")
    class ArraysEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ReplicaArray
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ReplicaArray, _Mapping]] = ...) -> None: ...
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    WHOLE_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    PENDING_INCLUDED_FIELD_NUMBER: _ClassVar[int]
    ARRAYS_FIELD_NUMBER: _ClassVar[int]
    container: str
    name: str
    whole: bool
    definition: str
    pending_included: bool
    arrays: _containers.MessageMap[str, ReplicaArray]
    def __init__(self, container: _Optional[str] = ..., name: _Optional[str] = ..., whole: _Optional[bool] = ..., definition: _Optional[str] = ..., pending_included: _Optional[bool] = ..., arrays: _Optional[_Mapping[str, ReplicaArray]] = ...) -> None: ...

class ReplicaBatch(_message.Message):
    __slots__ = ("primary_task", "primary_incarnation", "sequence", "full", "rows", "tables")
    PRIMARY_TASK_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    FULL_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    primary_task: str
    primary_incarnation: int
    sequence: int
    full: bool
    rows: _containers.RepeatedCompositeFieldContainer[ReplicaRows]
    tables: _containers.RepeatedCompositeFieldContainer[ReplicaTableRows]
    def __init__(self, primary_task: _Optional[str] = ..., primary_incarnation: _Optional[int] = ..., sequence: _Optional[int] = ..., full: _Optional[bool] = ..., rows: _Optional[_Iterable[_Union[ReplicaRows, _Mapping]]] = ..., tables: _Optional[_Iterable[_Union[ReplicaTableRows, _Mapping]]] = ...) -> None: ...

class ReplicaAck(_message.Message):
    __slots__ = ("sequence", "needs_full")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    NEEDS_FULL_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    needs_full: bool
    def __init__(self, sequence: _Optional[int] = ..., needs_full: _Optional[bool] = ...) -> None: ...

class FetchReplicaRequest(_message.Message):
    __slots__ = ("primary_task", "requester_incarnation")
    PRIMARY_TASK_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    primary_task: str
    requester_incarnation: int
    def __init__(self, primary_task: _Optional[str] = ..., requester_incarnation: _Optional[int] = ...) -> None: ...

class ReplicaSnapshot(_message.Message):
    __slots__ = ("primary_incarnation", "sequence", "age_seconds", "rows", "table")
    PRIMARY_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    AGE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    primary_incarnation: int
    sequence: int
    age_seconds: float
    rows: ReplicaRows
    table: ReplicaTableRows
    def __init__(self, primary_incarnation: _Optional[int] = ..., sequence: _Optional[int] = ..., age_seconds: _Optional[float] = ..., rows: _Optional[_Union[ReplicaRows, _Mapping]] = ..., table: _Optional[_Union[ReplicaTableRows, _Mapping]] = ...) -> None: ...
