"""The shard queue behind ``tf.data.experimental.dynamic_shards``: which shard goes to whom, once per epoch.

Protocol-free (``rpc/shard_calls.py`` serves it on task 0's gRPC server). Per data set, a
``ShardQueue`` keeps the current epoch's to-do queue, the shards leased to workers, and a status
per shard: done, failed, or the number of times it was lost. A worker asks for the next shard and,
in the same call, reports the one it finished; a lease that is not renewed within
``lease_seconds`` (the worker died or left), or whose task comes back as another process, is lost:
its shard goes to the front of the queue, and after ``max_attempts`` losses it is reported failed
and not handed out again. The next epoch starts when every shard of this one is done or failed,
so an epoch is exactly its shards, each trained once by the worker whose report was accepted.

Its state (``state()``: version, epoch, number of shards, a status per shard) is a vector of
int64 that the chief saves in a variable, so a checkpoint holds it; shards in flight are not
part of it: after a restore they are handed out again.

``ShardsEndpoint`` is what a caller (a worker's pipeline, the chief's hook) holds of task 0's
service: ``LocalShards`` calls a ``ShardService`` of this process directly (no serialization, no
gRPC: the chief hosts the service it saves), ``rpc/shard_calls.ShardsClient`` calls another
process's; both answer alike, with the same errors.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
import threading
import time
from typing import Callable, Optional, Protocol, Sequence, TypeVar

import numpy as np

from tensorgrid import monitoring
from tensorgrid.framework import errors

log = logging.getLogger("tensorgrid.shards")

STATE_VERSION = 1
STATE_HEADER = 3
"""The state's first entries: version (0: never opened), epoch, number of shards."""
DONE = -1
FAILED = -2


@dataclasses.dataclass(frozen=True)
class ShardsSpec:
    """What a data set is made of and how it is handed out (every worker gives the same)."""

    files: tuple[str, ...] = ()
    """One shard per file (``num_records`` then 0)."""
    num_records: int = 0
    """Records ``0 .. num_records-1`` in shards of ``shard_size`` (``files`` then empty)."""
    shard_size: int = 0
    num_epochs: int = 1
    """0: repeat for ever."""
    shuffle: bool = False
    """Shuffle the shards' order, anew each epoch (``seed + epoch``)."""
    seed: int = 0
    max_attempts: int = 3
    """A shard whose lease is lost this many times is reported failed, not handed out again."""
    lease_seconds: float = 30.0
    """How long a worker's lease lasts without being renewed."""

    def __post_init__(self) -> None:
        if bool(self.files) == bool(self.num_records):
            raise ValueError(f"dynamic shards need either files or num_records, not both nor neither: got "
                             f"files={list(self.files)!r}, num_records={self.num_records!r}")
        if self.num_records < 0:
            raise ValueError(f"num_records must be positive, got {self.num_records}")
        if self.num_records and self.shard_size < 1:
            raise ValueError(f"shard_size must be a positive number of records, got {self.shard_size}")
        if self.files and self.shard_size:
            raise ValueError(f"with files, each file is one shard: shard_size must be left out, got {self.shard_size}")
        if self.num_epochs < 0:
            raise ValueError(f"num_epochs must be positive (or None: for ever), got {self.num_epochs}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if not self.lease_seconds > 0:
            raise ValueError(f"lease_seconds must be positive, got {self.lease_seconds}")

    @property
    def num_shards(self) -> int:
        return len(self.files) if self.files else -(-self.num_records // self.shard_size)

    def shard(self, index: int) -> tuple[str, int, int]:
        """``(file, start, end)`` of shard ``index``: records ``[start, end)``, or a whole file (0, -1)."""
        if self.files:
            return self.files[index], 0, -1
        start = index * self.shard_size
        return "", start, min(start + self.shard_size, self.num_records)

    def order(self, epoch: int) -> list[int]:
        """The order in which epoch ``epoch`` hands the shards out."""
        if not self.shuffle:
            return list(range(self.num_shards))
        return [int(i) for i in np.random.RandomState((self.seed + epoch) % 2**32).permutation(self.num_shards)]


@dataclasses.dataclass(frozen=True)
class Assignment:
    """The answer to a request for the next shard."""

    outcome: str
    """``shard``, ``wait`` (ask again after ``retry_after_seconds``) or ``end`` (every epoch is done)."""
    epoch: int = 0
    index: int = -1
    lease: int = 0
    retry_after_seconds: float = 0.0
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class ShardsSnapshot:
    """A data set's state as the chief reads it, all taken under the service's lock."""

    state: list[int]
    """``ShardQueue.state()``; empty when ``unchanged``."""
    epoch: int
    fraction_done: float
    failed_shards: list[int]
    """Empty when ``unchanged``."""
    waiting_clients: int
    version: int
    unchanged: bool
    """``version`` is the one the caller said it holds: ``state`` is left out."""


@dataclasses.dataclass
class _Lease:
    index: int
    client: str
    task: str
    deadline: float


class ShardQueue:
    """The shards of one data set: to do, leased, done or failed, in the current epoch."""

    def __init__(self, name: str, spec: ShardsSpec, state: Optional[Sequence[int]] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.spec = spec
        self._clock = clock
        self._leases: dict[int, _Lease] = {}
        self._lease_ids = itertools.count(1 + int(time.time_ns() % 2**40) * 1000)
        """Lease numbers unique across restarts of the service, so a report of a lease of a
        previous incarnation is never taken for one of this."""
        self._client_of_task: dict[str, str] = {}
        self._last_seen: dict[str, float] = {}
        self._told_end: set[str] = set()
        n = spec.num_shards
        if state is None or not any(state):
            self.epoch, self._status = 0, [0] * n
        else:
            state = [int(v) for v in state]
            if len(state) != STATE_HEADER + n or state[0] != STATE_VERSION or state[2] != n:
                raise ValueError(f"the saved state of dynamic shards {name!r} (version {state[0] if state else None}, "
                                 f"{state[2] if len(state) > 2 else None} shards) does not fit this data set: "
                                 f"version {STATE_VERSION} with {n} shards")
            self.epoch, self._status = state[1], state[STATE_HEADER:]
            if any(s < FAILED for s in self._status):
                raise ValueError(f"the saved state of dynamic shards {name!r} has an unknown shard status: {state}")
        self._todo = collections.deque(i for i in spec.order(self.epoch) if self._status[i] >= 0)
        self._unfinished = sum(1 for s in self._status if s >= 0)
        """Shards of this epoch neither done nor failed (kept, so that no request scans them all)."""
        self.version = 1
        """Grows with every change of ``state()``, so that the chief copies it only when it changed."""
        self._publish()

    # ------------------------------------------------------------------ requests
    def next_shard(self, task: str, client: str, finished_lease: int = 0) -> Assignment:
        """Accepts ``finished_lease`` as done (when it is still this client's), then leases the next shard."""
        now = self._clock()
        self._last_seen[client] = now
        previous = self._client_of_task.get(task)
        if previous is not None and previous != client:
            self._lose([lid for lid, lease in self._leases.items() if lease.client == previous],
                       f"{task} came back as another process")
        self._client_of_task[task] = client
        self._expire(now)
        if finished_lease:
            lease = self._leases.get(finished_lease)
            if lease is not None and lease.client == client:
                del self._leases[finished_lease]
                self._status[lease.index] = DONE
                self._unfinished -= 1
                self.version += 1
            else:
                log.info("dynamic shards %r: %s reported lease %d finished, which it no longer holds (lost, or "
                         "granted before a restart): the shard is trained again", self.name, task, finished_lease)
        self._start_next_epoch_if_done()
        if self.spec.num_epochs and self.epoch >= self.spec.num_epochs:
            self._told_end.add(client)
            self._publish()
            return Assignment("end", epoch=self.epoch)
        if not self._todo:
            self._publish()
            return Assignment("wait", epoch=self.epoch, retry_after_seconds=min(1.0, self.spec.lease_seconds / 4),
                              reason=f"the last {len(self._leases)} shards of epoch {self.epoch} are in flight")
        index = self._todo.popleft()
        lease_id = next(self._lease_ids)
        self._leases[lease_id] = _Lease(index, client, task, now + self.spec.lease_seconds)
        self._publish()
        return Assignment("shard", epoch=self.epoch, index=index, lease=lease_id)

    def renew(self, client: str, leases: Sequence[int]) -> list[int]:
        """Extends ``client``'s ``leases`` by ``lease_seconds``; returns those it no longer holds."""
        now = self._clock()
        self._last_seen[client] = now
        self._expire(now)
        lost = []
        for lease_id in leases:
            lease = self._leases.get(lease_id)
            if lease is None or lease.client != client:
                lost.append(lease_id)
            else:
                lease.deadline = now + self.spec.lease_seconds
        return lost

    def release(self, client: str, leases: Sequence[int]) -> None:
        """Takes ``client``'s ``leases`` back (the worker is leaving): their shards go to the front of
        the queue, not counted as lost."""
        for lease_id in leases:
            lease = self._leases.get(lease_id)
            if lease is not None and lease.client == client:
                del self._leases[lease_id]
                self._todo.appendleft(lease.index)
                log.info("dynamic shards %r: %s gave shard %d of epoch %d back", self.name, lease.task, lease.index,
                         self.epoch)

    # ------------------------------------------------------------------ state
    def state(self) -> list[int]:
        """What the chief saves: version, epoch, number of shards, a status per shard (in flight: to do)."""
        return [STATE_VERSION, self.epoch, self.spec.num_shards, *self._status]

    @property
    def fraction_done(self) -> float:
        return 1.0 - self._unfinished / len(self._status) if self._status else 1.0

    @property
    def failed_shards(self) -> list[int]:
        return [i for i, s in enumerate(self._status) if s == FAILED]

    def waiting_clients(self) -> int:
        """Clients that asked within a lease and were not told END yet (the chief waits for them before it ends)."""
        self._expire(self._clock())
        recent = self._clock() - self.spec.lease_seconds
        return sum(1 for client, seen in self._last_seen.items() if seen >= recent and client not in self._told_end)

    # ------------------------------------------------------------------ internals
    def _expire(self, now: float) -> None:
        self._lose([lid for lid, lease in self._leases.items() if lease.deadline < now],
                   f"its lease of {self.spec.lease_seconds:g} s ran out")

    def _lose(self, lease_ids: list[int], why: str) -> None:
        for lease_id in lease_ids:
            lease = self._leases.pop(lease_id)
            self._status[lease.index] += 1
            self.version += 1
            if self._status[lease.index] >= self.spec.max_attempts:
                self._status[lease.index] = FAILED
                self._unfinished -= 1
                monitoring.DATA_SHARDS_FAILED.labels(self.name).inc()
                log.error("dynamic shards %r: shard %d (%s) of epoch %d was lost %d times (last: %s held it, %s); "
                          "it is not handed out again", self.name, lease.index, self._describe(lease.index),
                          self.epoch, self.spec.max_attempts, lease.task, why)
            else:
                self._todo.appendleft(lease.index)
                log.warning("dynamic shards %r: shard %d of epoch %d goes back to the queue: %s held it, %s",
                            self.name, lease.index, self.epoch, lease.task, why)

    def _start_next_epoch_if_done(self) -> None:
        if self._unfinished:
            return
        if self.spec.num_epochs and self.epoch >= self.spec.num_epochs:
            return
        failed = self.failed_shards
        log.info("dynamic shards %r: epoch %d done (%d shards%s)", self.name, self.epoch, len(self._status),
                 f", failed: {failed}" if failed else "")
        self.epoch += 1
        self.version += 1
        if self.spec.num_epochs and self.epoch >= self.spec.num_epochs:
            return
        self._status = [0] * len(self._status)
        self._unfinished = len(self._status)
        self._todo = collections.deque(self.spec.order(self.epoch))

    def _describe(self, index: int) -> str:
        file, start, end = self.spec.shard(index)
        return file or f"records {start}..{end - 1}"

    def _publish(self) -> None:
        monitoring.DATA_SHARDS_EPOCH.labels(self.name).set(self.epoch)
        monitoring.DATA_SHARDS_DONE_FRACTION.labels(self.name).set(self.fraction_done)
        monitoring.DATA_SHARDS_PER_EPOCH.labels(self.name).set(len(self._status))


class ShardService:
    """The data sets a task hands out, by name; thread-safe. A data set answers WAIT until the
    chief opens it (with its saved state, or fresh), so no shard is handed out before a restore."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._queues: dict[str, ShardQueue] = {}
        self._lock = threading.Lock()

    def open(self, name: str, spec: ShardsSpec, state: Optional[Sequence[int]]) -> None:
        """(Re)starts data set ``name`` from ``state`` (None or zeros: from the start); leases in flight are dropped."""
        queue = ShardQueue(name, spec, state, self._clock)
        with self._lock:
            self._queues[name] = queue
        log.info("dynamic shards %r: opened at epoch %d, %.0f%% of its shards done", name, queue.epoch,
                 100 * queue.fraction_done)

    def next_shard(self, name: str, spec: ShardsSpec, task: str, client: str, finished_lease: int) -> Assignment:
        with self._lock:
            queue = self._queues.get(name)
            if queue is None:
                return Assignment("wait", retry_after_seconds=0.5,
                                  reason=f"the chief has not opened dynamic shards {name!r} yet (it does in its "
                                         f"DynamicShardsHook, when its session is created)")
            _check_same_spec(queue, spec)
            return queue.next_shard(task, client, finished_lease)

    def renew(self, name: str, client: str, leases: Sequence[int], release: bool = False) -> list[int]:
        """Renews (or, with ``release``, gives back) ``client``'s ``leases``; returns those it no longer holds."""
        with self._lock:
            queue = self._queues.get(name)
            if queue is None:
                return list(leases)
            if release:
                queue.release(client, leases)
                return []
            return queue.renew(client, leases)

    def queue(self, name: str) -> ShardQueue:
        """The queue of ``name``; KeyError naming the open ones when it is not open."""
        with self._lock:
            if name not in self._queues:
                raise KeyError(f"dynamic shards {name!r} are not open on this task; open: {sorted(self._queues)}")
            return self._queues[name]

    def snapshot(self, name: str, known_version: int = 0) -> ShardsSnapshot:
        """The state of ``name``, or only its version and progress when it is ``known_version``;
        KeyError naming the open ones when it is not open."""
        with self._lock:
            if name not in self._queues:
                raise KeyError(f"dynamic shards {name!r} are not open on this task; open: {sorted(self._queues)}")
            queue = self._queues[name]
            unchanged = queue.version == known_version
            return ShardsSnapshot(state=[] if unchanged else queue.state(), epoch=queue.epoch,
                                  fraction_done=queue.fraction_done,
                                  failed_shards=[] if unchanged else queue.failed_shards,
                                  waiting_clients=queue.waiting_clients(), version=queue.version, unchanged=unchanged)


class ShardsEndpoint(Protocol):
    """Task 0's shard service as its callers hold it: in this process (``LocalShards``) or over gRPC
    (``rpc/shard_calls.ShardsClient``). A bad request is an ``InvalidArgumentError`` naming the method;
    a service that cannot be reached, an ``UnavailableError`` (retry)."""

    def next_shard(self, dataset: str, spec: ShardsSpec, task: str, client: str,
                   finished_lease: int) -> Assignment: ...

    def renew(self, dataset: str, client: str, leases: Sequence[int], release: bool = False) -> list[int]: ...

    def open(self, dataset: str, spec: ShardsSpec, state: Optional[Sequence[int]]) -> None: ...

    def state(self, dataset: str, known_version: int = 0) -> ShardsSnapshot: ...

    def close(self) -> None: ...


class LocalShards:
    """A ``ShardService`` of this process, called directly: what the chief uses when it hosts the
    service itself, so its hook's per-step look at the state is a version compared under a lock."""

    def __init__(self, service: ShardService) -> None:
        self._service = service

    def next_shard(self, dataset: str, spec: ShardsSpec, task: str, client: str, finished_lease: int) -> Assignment:
        return _answered("NextShard", lambda: self._service.next_shard(dataset, spec, task, client, finished_lease))

    def renew(self, dataset: str, client: str, leases: Sequence[int], release: bool = False) -> list[int]:
        return _answered("RenewLeases", lambda: self._service.renew(dataset, client, leases, release))

    def open(self, dataset: str, spec: ShardsSpec, state: Optional[Sequence[int]]) -> None:
        _answered("OpenShards", lambda: self._service.open(dataset, spec, state))

    def state(self, dataset: str, known_version: int = 0) -> ShardsSnapshot:
        return _answered("GetShardsState", lambda: self._service.snapshot(dataset, known_version))

    def close(self) -> None:
        """Nothing to release: the service belongs to this process's server."""


T = TypeVar("T")


def _answered(method: str, call: Callable[[], T]) -> T:
    """``call``'s result; a bad request (ValueError, KeyError) becomes the ``InvalidArgumentError``
    that the gRPC service answers it with (``services.answer``), so callers cannot tell the two apart."""
    try:
        return call()
    except (ValueError, TypeError, KeyError) as e:
        raise errors.InvalidArgumentError(None, None, f"{method}: {e}") from None


def _check_same_spec(queue: ShardQueue, spec: ShardsSpec) -> None:
    if spec != queue.spec:
        differ = [f"{f.name}={getattr(spec, f.name)!r} (the chief opened it with {getattr(queue.spec, f.name)!r})"
                  for f in dataclasses.fields(spec) if getattr(spec, f.name) != getattr(queue.spec, f.name)]
        raise ValueError(f"dynamic shards {queue.name!r} were asked for with another definition: {', '.join(differ)}; "
                         f"every worker must call dynamic_shards with the same arguments")
