from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ShardsSpec(_message.Message):
    __slots__ = ("files", "num_records", "shard_size", "num_epochs", "shuffle", "seed", "max_attempts", "lease_seconds")
    FILES_FIELD_NUMBER: _ClassVar[int]
    NUM_RECORDS_FIELD_NUMBER: _ClassVar[int]
    SHARD_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_EPOCHS_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedScalarFieldContainer[str]
    num_records: int
    shard_size: int
    num_epochs: int
    shuffle: bool
    seed: int
    max_attempts: int
    lease_seconds: float
    def __init__(self, files: _Optional[_Iterable[str]] = ..., num_records: _Optional[int] = ..., shard_size: _Optional[int] = ..., num_epochs: _Optional[int] = ..., shuffle: _Optional[bool] = ..., seed: _Optional[int] = ..., max_attempts: _Optional[int] = ..., lease_seconds: _Optional[float] = ...) -> None: ...

class Shard(_message.Message):
    __slots__ = ("epoch", "index", "file", "start", "end")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    index: int
    file: str
    start: int
    end: int
    def __init__(self, epoch: _Optional[int] = ..., index: _Optional[int] = ..., file: _Optional[str] = ..., start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class NextShardRequest(_message.Message):
    __slots__ = ("dataset", "spec", "task", "client", "finished_lease")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_LEASE_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    spec: ShardsSpec
    task: str
    client: str
    finished_lease: int
    def __init__(self, dataset: _Optional[str] = ..., spec: _Optional[_Union[ShardsSpec, _Mapping]] = ..., task: _Optional[str] = ..., client: _Optional[str] = ..., finished_lease: _Optional[int] = ...) -> None: ...

class NextShardResponse(_message.Message):
    __slots__ = ("outcome", "shard", "lease", "retry_after_seconds", "reason")
    class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SHARD: _ClassVar[NextShardResponse.Outcome]
        WAIT: _ClassVar[NextShardResponse.Outcome]
        END: _ClassVar[NextShardResponse.Outcome]
    SHARD: NextShardResponse.Outcome
    WAIT: NextShardResponse.Outcome
    END: NextShardResponse.Outcome
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    outcome: NextShardResponse.Outcome
    shard: Shard
    lease: int
    retry_after_seconds: float
    reason: str
    def __init__(self, outcome: _Optional[_Union[NextShardResponse.Outcome, str]] = ..., shard: _Optional[_Union[Shard, _Mapping]] = ..., lease: _Optional[int] = ..., retry_after_seconds: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class RenewLeasesRequest(_message.Message):
    __slots__ = ("dataset", "client", "leases", "release")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    client: str
    leases: _containers.RepeatedScalarFieldContainer[int]
    release: bool
    def __init__(self, dataset: _Optional[str] = ..., client: _Optional[str] = ..., leases: _Optional[_Iterable[int]] = ..., release: _Optional[bool] = ...) -> None: ...

class RenewLeasesResponse(_message.Message):
    __slots__ = ("lost_leases",)
    LOST_LEASES_FIELD_NUMBER: _ClassVar[int]
    lost_leases: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, lost_leases: _Optional[_Iterable[int]] = ...) -> None: ...

class OpenShardsRequest(_message.Message):
    __slots__ = ("dataset", "spec", "state")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    spec: ShardsSpec
    state: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dataset: _Optional[str] = ..., spec: _Optional[_Union[ShardsSpec, _Mapping]] = ..., state: _Optional[_Iterable[int]] = ...) -> None: ...

class OpenShardsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ShardsStateRequest(_message.Message):
    __slots__ = ("dataset", "known_version")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    KNOWN_VERSION_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    known_version: int
    def __init__(self, dataset: _Optional[str] = ..., known_version: _Optional[int] = ...) -> None: ...

class ShardsStateResponse(_message.Message):
    __slots__ = ("state", "epoch", "fraction_done", "failed_shards", "waiting_clients", "version", "unchanged")
    STATE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FRACTION_DONE_FIELD_NUMBER: _ClassVar[int]
    FAILED_SHARDS_FIELD_NUMBER: _ClassVar[int]
    WAITING_CLIENTS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    state: _containers.RepeatedScalarFieldContainer[int]
    epoch: int
    fraction_done: float
    failed_shards: _containers.RepeatedScalarFieldContainer[int]
    waiting_clients: int
    version: int
    unchanged: bool
    def __init__(self, state: _Optional[_Iterable[int]] = ..., epoch: _Optional[int] = ..., fraction_done: _Optional[float] = ..., failed_shards: _Optional[_Iterable[int]] = ..., waiting_clients: _Optional[int] = ..., version: _Optional[int] = ..., unchanged: _Optional[bool] = ...) -> None: ...
