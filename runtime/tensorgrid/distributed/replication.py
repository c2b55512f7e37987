"""Live replicas of a parameter server's state, and the failover that loads them back.

A PS that died used to come back empty, and the chief rolled the whole model back to the
last checkpoint. With replication on (``ReplicationSettings``) every PS task (the *primary*)
keeps a live copy of its state (every variable of its resource manager: model variables,
optimizer slots, the global step) on another task, its *replica holder*: the next PS of the ring when the job has two or more,
or a standby PS task (``TENSORGRID_PS_REPLICA_ADDRESS``). A ``Replicator`` thread of the
primary pushes, every ``interval_s``, the rows written since its last acknowledged push, as
the variables' write tracking reports them (``execution/written_rows.py``; absolute values, so
a push repeated after a failure is harmless); a step of the
primary waits while the replica lags more than ``max_lag_s``. A primary restarted at the
same address fetches its state from the holder's ``ReplicaStore`` before it runs a step
(``restore_from_replica``); where no holder answers, it starts empty and the chief's
checkpoint path takes over, as before.

An embedding variable's table (``tf.get_embedding_variable``, a resource of its own type) is
replicated by its keys (``replica_tables.py``).

Protocol-free: the calls to the holder go through ``ReplicaPeer``;
``rpc/replication_service.py`` binds them to gRPC and wires this into a task's server.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol, Union

import numpy as np

from tensorgrid import monitoring
from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.distributed import replica_tables
from tensorgrid.execution import resources as resources_lib
from tensorgrid.framework import errors
from tensorgrid.kernels import embedding_variable_writes

log = logging.getLogger("tensorgrid.replication")

REPLICATION_ENV = "TENSORGRID_PS_REPLICATION"
MAX_LAG_ENV = "TENSORGRID_PS_REPLICA_MAX_LAG_S"
INTERVAL_ENV = "TENSORGRID_PS_REPLICA_INTERVAL_S"
FETCH_WAIT_ENV = "TENSORGRID_PS_REPLICA_FETCH_WAIT_S"
REPLICA_ADDRESS_ENV = "TENSORGRID_PS_REPLICA_ADDRESS"
STANDBY_FOR_ENV = "TENSORGRID_PS_STANDBY_FOR"
TOOK_OVER = "a standby took over at"
"""What a standby that became its PS logs (``<task>: a standby took over at <address> (...)``):
``tensorgrid local`` reads it to start the next standby."""

PIECE_BYTES = replica_tables.PIECE_BYTES
"""The most value bytes one message of a push or a snapshot carries."""

VariableKey = replica_tables.VariableKey
"""(container, name) of a variable in a resource manager."""


def _positive_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{name}={raw!r}: must be a number of seconds greater than 0")
    return value


@dataclasses.dataclass(frozen=True)
class ReplicationSettings:
    """How a PS task replicates its state (docs/fault-tolerance.md)."""

    enabled: bool = True
    """``TENSORGRID_PS_REPLICATION``: ``1`` or ``0`` (the checkpoint is the only copy). Unset: on
    when a standby is named (``replica_address``), else off: pushing the rows written still costs
    a PS training a large table too much of its steps/s (docs/fault-tolerance.md)."""
    max_lag_s: float = 1.0
    """``TENSORGRID_PS_REPLICA_MAX_LAG_S``: how far the replica may lag before the primary's steps wait."""
    interval_s: float = 0.1
    """``TENSORGRID_PS_REPLICA_INTERVAL_S``: how often the primary pushes what changed."""
    fetch_wait_s: float = 10.0
    """``TENSORGRID_PS_REPLICA_FETCH_WAIT_S``: how long a starting PS waits for its holder to answer."""
    replica_address: Optional[str] = None
    """``TENSORGRID_PS_REPLICA_ADDRESS``: the standby task holding this PS's replica (default: the ring)."""

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None,
                 standby_address: Optional[str] = None) -> "ReplicationSettings":
        """The settings ``env`` (default: this process's) gives; ``standby_address``, for a PS that a
        standby became (``Promotion``): its holder where ``TENSORGRID_PS_REPLICA_ADDRESS`` names none."""
        env = os.environ if env is None else env
        address = env.get(REPLICA_ADDRESS_ENV, "") or standby_address
        switch = env.get(REPLICATION_ENV, "") or ("1" if address else "0")
        if switch not in ("0", "1"):
            raise ValueError(f"{REPLICATION_ENV}={switch!r}: valid values are '1' (replicate) and '0' (do not)")
        if address is not None:
            problem = cluster_lib.address_problem(address)
            if problem is not None:
                raise ValueError(f"{REPLICA_ADDRESS_ENV}={address!r}: the address {problem}")
        return cls(enabled=switch == "1", max_lag_s=_positive_float(env, MAX_LAG_ENV, 1.0),
                   interval_s=_positive_float(env, INTERVAL_ENV, 0.1),
                   fetch_wait_s=_positive_float(env, FETCH_WAIT_ENV, 10.0), replica_address=address)


def replica_holder(cluster: cluster_lib.ClusterSpec, job: str, index: int,
                   settings: ReplicationSettings) -> Optional[tuple[str, str]]:
    """(name, address) of the task holding the replica of ``job:index``, or None when it has
    none: not a PS, replication off, or a single PS without a standby."""
    if job != "ps" or not settings.enabled:
        return None
    if settings.replica_address is not None:
        return f"the standby of {cluster_lib.task_name(job, index)}", settings.replica_address
    indices = cluster.task_indices("ps")
    if len(indices) < 2:
        return None
    following = indices[(indices.index(index) + 1) % len(indices)]
    return cluster_lib.task_name("ps", following), cluster.task_address("ps", following)


# ---------------------------------------------------------------------- what travels

@dataclasses.dataclass
class Rows:
    """Some rows of one variable, with their values: listed ``rows``, else the
    ``row_count`` rows from ``row_start`` (a 0-d variable: 0 and 1, ``values`` 0-d)."""

    key: VariableKey
    shape: tuple[int, ...]
    values: np.ndarray
    updates: int
    rows: Optional[np.ndarray] = None
    row_start: int = 0
    row_count: int = 0

    def write_into(self, target: np.ndarray) -> None:
        if target.ndim == 0:
            target[...] = self.values
        elif self.rows is not None:
            target[self.rows] = self.values
        else:
            target[self.row_start:self.row_start + self.row_count] = self.values


def _whole(key: VariableKey, value: np.ndarray, updates: int) -> list[Rows]:
    """Every row of ``value``, in pieces of at most ``PIECE_BYTES``."""
    if value.ndim == 0:
        return [Rows(key, (), value, updates, row_start=0, row_count=1)]
    count = value.shape[0]
    row_bytes = max(value.nbytes // max(count, 1), 1)
    step = max(PIECE_BYTES // row_bytes, 1)
    return [Rows(key, tuple(value.shape), value[start:start + step], updates, row_start=start,
                 row_count=min(step, count - start)) for start in range(0, max(count, 1), step)]


def _listed(key: VariableKey, values: np.ndarray, shape: tuple[int, ...], rows: np.ndarray,
            updates: int) -> list[Rows]:
    """The listed ``rows`` of a variable of ``shape`` (``values`` holds them, in order), in pieces
    of at most ``PIECE_BYTES``."""
    row_bytes = max(values.nbytes // max(values.shape[0], 1), 1)
    step = max(PIECE_BYTES // row_bytes, 1)
    return [Rows(key, shape, values[start:start + step], updates, rows=rows[start:start + step])
            for start in range(0, rows.size, step)]


Piece = Union[Rows, replica_tables.TableRows]
"""What a push or a snapshot carries: rows of a variable, or keys of a table."""

def piece_bytes(piece: Piece) -> int:
    if isinstance(piece, replica_tables.TableRows):
        return sum(array.nbytes for array in piece.arrays.values())
    return int(piece.values.nbytes)


def _variables(resources: resources_lib.ResourceManager) -> list[tuple[VariableKey, resources_lib.Variable]]:
    return [((container, name), resource) for container, name, resource in resources.items()
            if isinstance(resource, resources_lib.Variable) and resource.initialized]


Baseline = replica_tables.Baseline


class DeltaTracker:
    """What changed since the last acknowledged push, from the variables' own write tracking
    (``Variable.written``): each variable reports the rows written after this tracker's
    baseline, or that it must be taken whole (written whole, first asked, or another object).
    No copy of the state is kept: a push reads only the rows written (the executor records a
    whole write for any kernel that does not report its rows, so no write is missed)."""

    def __init__(self) -> None:
        self._baselines: dict[VariableKey, Baseline] = {}
        self._full_needed = True

    def require_full(self) -> None:
        self._full_needed = True

    def changes(self, resources: resources_lib.ResourceManager
                ) -> tuple[bool, list[Piece], dict[VariableKey, tuple[Baseline, int]]]:
        """(whether this is a full push, the rows and keys to push, what to ``commit`` once
        acknowledged: each variable's and table's new baseline and update count)."""
        current = _variables(resources)
        tables = replica_tables.tables_of(resources)
        full = self._full_needed or bool(set(self._baselines) - {key for key, _ in current}
                                         - {key for key, _ in tables})
        pieces: list[Piece] = []
        pushed: dict[VariableKey, tuple[Baseline, int]] = {}
        for key, variable in current:
            updates = variable.updates
            shape = tuple(variable.read().shape)
            num_rows = shape[0] if shape else 1
            before = (0, 0) if full else self._baselines.get(key, (0, 0))
            baseline, rows = variable.written.changed_since(before[0], before[1], num_rows)
            pushed[key] = (baseline, updates)
            if rows is not None and rows.size == 0:
                continue
            # The values are read after the baseline is taken: a write ending later (an assign
            # replacing the buffer included) is in the next push.
            buffer = variable.read()
            if rows is None or buffer.ndim == 0 or tuple(buffer.shape) != shape or rows.size * 2 >= num_rows:
                pieces += _whole(key, np.asarray(variable.backend.to_numpy(buffer)), updates)
            else:
                values = np.asarray(variable.backend.to_numpy(buffer[variable.backend.asarray(rows)]))
                pieces += _listed(key, values, tuple(buffer.shape), rows, updates)
        for key, table in tables:
            before = embedding_variable_writes.EVERYTHING if full else self._baselines.get(
                key, embedding_variable_writes.EVERYTHING)
            baseline, table_pieces = replica_tables.table_changes(key, table, before)
            pushed[key] = (baseline, 0)
            pieces += table_pieces
        return full, pieces, pushed

    def holder_lacks(self, key: VariableKey) -> bool:
        """Whether the holder holds nothing of ``key`` yet: no push of it was acknowledged (a full push is
        owed, or the variable or table was made, or first initialized, after the last one)."""
        return self._full_needed or key not in self._baselines

    def commit(self, pushed: dict[VariableKey, tuple[Baseline, int]]) -> None:
        self._baselines = {key: baseline for key, (baseline, _) in pushed.items()}
        self._full_needed = False


# ---------------------------------------------------------------------- the holder's side

@dataclasses.dataclass
class Push:
    """The first message's fields of a push."""

    primary_task: str
    primary_incarnation: int
    sequence: int
    full: bool


@dataclasses.dataclass
class Ack:
    sequence: int
    needs_full: bool = False


@dataclasses.dataclass
class _HeldReplica:
    incarnation: int
    sequence: int
    applied_at: float
    variables: dict[VariableKey, tuple[np.ndarray, int]]
    tables: dict[VariableKey, replica_tables.HeldTable] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Snapshot:
    """A replica as fetched: who pushed it, how old it is, and its variables' rows and tables' keys."""

    primary_incarnation: int
    sequence: int
    age_seconds: float
    rows: list[Piece]


def _apply_piece(variables: dict[VariableKey, tuple[np.ndarray, int]], tables: dict[VariableKey, replica_tables.HeldTable],
                 piece: Piece) -> bool:
    """Applies a piece to a replica's variables or tables; False when it cannot apply (a table's keys
    for a table not held whole, or of other columns): the replica must be sent whole."""
    if isinstance(piece, Rows):
        _apply(variables, piece)
        return True
    if piece.whole:
        tables[piece.key] = replica_tables.HeldTable(piece.definition or {})
    held = tables.get(piece.key)
    return held is not None and held.apply(piece)


def _apply(variables: dict[VariableKey, tuple[np.ndarray, int]], piece: Rows) -> None:
    held = variables.get(piece.key)
    if held is None or held[0].shape != piece.shape or held[0].dtype != piece.values.dtype:
        held = (np.zeros(piece.shape, piece.values.dtype), 0)
    piece.write_into(held[0])
    variables[piece.key] = (held[0], max(held[1], piece.updates))


class ReplicaStore:
    """The replicas this task holds, by primary task; every task has one (any may be a holder).

    ``owner_incarnation``: the incarnation of the task whose store this is (0: a standby, which is
    no primary). A push or a fetch from that incarnation is refused: the holder's address reached
    the primary itself (a standby's Service whose DNS still names the pod that took over), and a
    task holding its own replica would lose it with itself."""

    def __init__(self, owner_incarnation: int = 0) -> None:
        self._lock = threading.Lock()
        self._replicas: dict[str, _HeldReplica] = {}
        self.owner_incarnation = owner_incarnation

    def _refuse_own(self, incarnation: int, what: str, task: str) -> None:
        if self.owner_incarnation and incarnation == self.owner_incarnation:
            raise errors.FailedPreconditionError(
                None, None, f"{what} of {task} reached {task} itself (incarnation {incarnation:016x}): a task never "
                            f"holds its own replica; its holder's address must name another task (a standby)")

    def apply(self, push: Push, pieces: Iterable[Piece]) -> Ack:
        """Applies one push: a full one replaces the replica of its primary; a delta is
        refused (``needs_full``) unless the replica held is of the same primary incarnation
        (and holds the tables it changes: else that replica is dropped, and asked for whole).
        ``errors.FailedPreconditionError`` for a push of this store's own task."""
        self._refuse_own(push.primary_incarnation, "a push of the replica", push.primary_task)
        if push.full:
            replica = _HeldReplica(push.primary_incarnation, push.sequence, time.monotonic(), {})
            if not all([_apply_piece(replica.variables, replica.tables, piece) for piece in pieces]):
                return Ack(push.sequence, needs_full=True)
            with self._lock:
                self._replicas[push.primary_task] = replica
            return Ack(push.sequence)
        with self._lock:
            held = self._replicas.get(push.primary_task)
            if held is None or held.incarnation != push.primary_incarnation:
                return Ack(push.sequence, needs_full=True)
            if not all([_apply_piece(held.variables, held.tables, piece) for piece in pieces]):
                del self._replicas[push.primary_task]
                return Ack(push.sequence, needs_full=True)
            held.sequence, held.applied_at = push.sequence, time.monotonic()
        return Ack(push.sequence)

    def snapshot(self, primary_task: str, requester_incarnation: int = 0) -> Optional[Snapshot]:
        """A copy of the replica of ``primary_task``, or None when this task holds none;
        ``errors.FailedPreconditionError`` when the requester (0: not said) is this store's own task."""
        self._refuse_own(requester_incarnation, "a fetch of the replica", primary_task)
        with self._lock:
            held = self._replicas.get(primary_task)
            if held is None:
                return None
            copies = {key: (value.copy(), updates) for key, (value, updates) in held.variables.items()}
            tables = [piece for key, table in sorted(held.tables.items()) for piece in table.pieces(key)]
            tables = [replica_tables.TableRows(p.key, {n: a.copy() for n, a in p.arrays.items()}, p.whole, p.definition,
                                p.pending_included) for p in tables]
            age = time.monotonic() - held.applied_at
            incarnation, sequence = held.incarnation, held.sequence
        rows: list[Piece] = [piece for key, (value, updates) in sorted(copies.items())
                             for piece in _whole(key, value, updates)]
        return Snapshot(incarnation, sequence, age, rows + list(tables))

    def primaries(self) -> list[str]:
        with self._lock:
            return sorted(self._replicas)


# ---------------------------------------------------------------------- the primary's side

class ReplicaPeer(Protocol):
    """The calls a primary makes to its replica holder (gRPC in ``rpc/replication_service.py``)."""

    def push(self, push: Push, pieces: list[Piece]) -> Ack:
        """Sends one push; an ``errors.OpError`` when the holder cannot be reached."""

    def fetch(self, primary_task: str) -> Optional[Snapshot]:
        """The holder's replica of ``primary_task``; None when it holds none; an
        ``errors.OpError`` when it cannot be reached."""


@dataclasses.dataclass
class Restored:
    """What a restarted primary loaded from its replica."""

    variables: int
    nbytes: int
    age_seconds: float
    global_step: Optional[int]
    tables: int = 0
    """Embedding variable tables loaded."""


@dataclasses.dataclass(frozen=True)
class Promotion:
    """A standby that became its PS (``tensorgrid ps-standby``: SIGUSR1, or its take-over file).

    The PS it became keeps a live replica again, on the next standby of that PS: the one that comes
    up at ``standby_address`` (on Kubernetes the operator starts it behind the same Service), unless
    ``TENSORGRID_PS_REPLICA_ADDRESS`` names another. Until one answers there, the PS's pushes fail
    (or are refused, where the address still reaches the PS itself) and are retried; its steps do
    not wait meanwhile."""

    standby_address: str
    """Where the standby served its replica: where the next standby of this PS comes up."""
    restored: Optional[Restored]
    """What it loaded from the replica it held (None: it held none, so it started empty)."""
    restarted: bool = False
    """The promoted process restarted (its take-over file still names its PS): it held no replica,
    and loads its state from the next standby's replica, as any restarted PS loads its own."""


def _variable_maker(name: str, value: np.ndarray, backend: Any) -> Callable[[], resources_lib.Variable]:
    def make() -> resources_lib.Variable:
        variable = resources_lib.Variable(name, value.dtype, tuple(value.shape), backend)
        variable.awaits_its_op = True  # its op, on a GPU or not, takes it to its device
        return variable

    return make


def restore_from_replica(resources: resources_lib.ResourceManager, backend: Any, peer: ReplicaPeer,
                         primary_task: str, holder: str, wait_s: float) -> Optional[Restored]:
    """Loads the replica of ``primary_task`` from ``peer`` into ``resources`` (variables of
    ``backend``); None when the holder holds none, or did not answer within ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            snapshot = peer.fetch(primary_task)
            break
        except errors.OpError as e:
            if time.monotonic() >= deadline:
                log.warning("%s: the holder of its replica (%s) did not answer within %g s (%s): starting empty",
                            primary_task, holder, wait_s, e.message)
                return None
            time.sleep(0.2)
    if snapshot is None:
        log.info("%s: %s holds no replica of it: starting empty", primary_task, holder)
        return None
    values: dict[VariableKey, tuple[np.ndarray, int]] = {}
    tables: dict[VariableKey, replica_tables.HeldTable] = {}
    for piece in snapshot.rows:
        if not _apply_piece(values, tables, piece):
            log.warning("%s: the replica on %s is not whole (keys of table %s/%s without the table): starting empty",
                        primary_task, holder, *piece.key)
            return None
    step = None
    for (container, name), (value, updates) in values.items():
        variable: resources_lib.Variable = resources.lookup_or_create(
            container, name, resources_lib.Variable, _variable_maker(name, value, backend))
        variable.value = variable.backend.asarray(value)  # a variable the graph made: on its device
        variable.updates = updates
        variable.written.wrote_whole()  # readers that kept a baseline (a saver) take it whole
        if name == "global_step":
            step = int(value)
    for key, table in tables.items():
        replica_tables.load_table(resources, key, table)
    restored = Restored(len(values), sum(v.nbytes for v, _ in values.values())
                        + sum(a.nbytes for t in tables.values() for a in t.arrays.values()), snapshot.age_seconds,
                        step, len(tables))
    log.info("%s: restored %d variables%s (%d bytes%s) from its live replica on %s, %.2f s old",
             primary_task, restored.variables, f" and {len(tables)} embedding variable tables" if tables else "",
             restored.nbytes, "" if step is None else f", global step {step}", holder, restored.age_seconds)
    return restored


class Replicator:
    """The primary's thread that pushes what changed, and the lag bound its steps wait on."""

    def __init__(self, task: str, incarnation: int, resources: resources_lib.ResourceManager, peer: ReplicaPeer,
                 holder: str, settings: ReplicationSettings) -> None:
        self.task, self.holder, self.settings = task, holder, settings
        self._incarnation = incarnation
        self._resources = resources
        self._peer = peer
        self._tracker = DeltaTracker()
        self._sequence = 0
        self._changed = threading.Condition()
        self._replicated_as_of = time.monotonic()
        self._establishing = False  # the push in flight carries state its holder holds none of
        self._updates_pushed = 0
        self._reachable = True
        self._failing_with: Optional[type] = None  # the error class of the pushes failing now (said once each)
        self._closed = threading.Event()
        self.pushed_bytes = 0
        self._lag_seconds = monitoring.PS_REPLICA_LAG_SECONDS.labels(task)
        self._lag_updates = monitoring.PS_REPLICA_LAG_UPDATES.labels(task)
        self._bytes = monitoring.PS_REPLICA_BYTES.labels(task)
        self._thread = threading.Thread(target=self._loop, daemon=True, name="ps-replicator")

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        with self._changed:
            self._changed.notify_all()

    @property
    def lag_seconds(self) -> float:
        return time.monotonic() - self._replicated_as_of

    def wait_within_lag(self) -> None:
        """Blocks a step while the replica lags more than ``max_lag_s`` and its holder answers
        (an unreachable holder does not stop training: the lag then grows, and is exported), unless
        the push in flight establishes the replica: it carries variables or tables the holder holds
        none of (the first push of this incarnation's state, a holder that restarted, the tables the
        chief just initialized). Until that push lands a loss of this PS loses what it carries
        whatever the steps do, and a step waiting for it would only stretch a push of a whole large
        state (seconds) into the steps' time; the pushes after it are bound again."""
        with self._changed:
            while (self._reachable and not self._closed.is_set() and not self._establishing
                   and self.lag_seconds > self.settings.max_lag_s):
                self._changed.wait(self.settings.interval_s)

    def _loop(self) -> None:
        backoff = self.settings.interval_s
        while not self._closed.wait(backoff):
            ok = self.push_once()
            backoff = self.settings.interval_s if ok else min(backoff * 2, 1.0)

    def push_once(self) -> bool:
        """One push of what changed; whether the holder took it."""
        started = time.monotonic()
        full, pieces, pushed = self._tracker.changes(self._resources)
        updates_now = sum(updates for _, updates in pushed.values())
        self._lag_updates.set(max(updates_now - self._updates_pushed, 0))
        if pieces:
            self._sequence += 1
            new = sorted({piece.key for piece in pieces if self._tracker.holder_lacks(piece.key)})
            self._set_establishing(full or bool(new))
            try:
                ack = self._peer.push(Push(self.task, self._incarnation, self._sequence, full), pieces)
            except errors.OpError as e:
                if type(e) is not self._failing_with:
                    log.warning("%s: cannot push its replica to %s (%s); retrying, steps do not wait meanwhile",
                                self.task, self.holder, e.message)
                    self._failing_with = type(e)
                self._set_reachable(False)
                self._set_establishing(False)
                self._lag_seconds.set(self.lag_seconds)
                return False
            self._failing_with = None
            if ack.needs_full:
                log.info("%s: %s holds no replica of this incarnation: pushing the whole state", self.task, self.holder)
                self._tracker.require_full()
                self._set_reachable(True)
                self._set_establishing(False)
                return False
            sent = sum(piece_bytes(piece) for piece in pieces)
            self.pushed_bytes += sent
            self._bytes.inc(sent)
            if full:
                log.info("%s: pushed its whole state to %s (%d bytes, %.1f s)", self.task, self.holder, sent,
                         time.monotonic() - started)
            elif new:
                log.info("%s: pushed %d variables or tables its replica lacked to %s (%d bytes in all, %.1f s; steps "
                         "did not wait for it)", self.task, len(new), self.holder, sent, time.monotonic() - started)
        if pieces or not full:  # a full push with nothing in it yet (no variables) stays owed
            self._tracker.commit(pushed)
        self._updates_pushed = updates_now
        with self._changed:
            self._replicated_as_of = started
            self._reachable = True
            self._establishing = False
            self._changed.notify_all()
        self._lag_seconds.set(self.lag_seconds)
        self._lag_updates.set(0)
        return True

    def _set_reachable(self, reachable: bool) -> None:
        with self._changed:
            self._reachable = reachable
            self._changed.notify_all()

    def _set_establishing(self, establishing: bool) -> None:
        with self._changed:
            self._establishing = establishing
            self._changed.notify_all()
