"""The Replication service on gRPC, and the wiring of a PS task's replica into its server.

``distributed/replication.py`` decides what a push carries and when a step waits; this
module carries pushes and snapshots as ``protos/tensorgrid/v1/replication.proto`` messages
(its own service, registered on every task's gRPC server beside Master and Worker, so any
task can hold a replica), gives a PS task its ``Replicator`` and the load of its replica
at start (``PrimaryReplication``), runs a standby task that only holds a replica
(``serve_standby``, ``tensorgrid ps-standby``), makes a standby the PS itself, with the
replica it holds loaded (``take_over``), when its PS is lost, and starts a promoted process that
restarted as that PS again (``come_back_as_promoted``).
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import re
import threading
from typing import TYPE_CHECKING, Any, Iterator, Optional

import grpc
import numpy as np

from tensorgrid import monitoring
from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.distributed import replica_tables
from tensorgrid.distributed import replication
from tensorgrid.distributed.rpc import ports
from tensorgrid.distributed.rpc import user_authority
from tensorgrid.distributed.rpc.transport import grpc_frames
from tensorgrid.distributed.rpc.transport import peer_channel
from tensorgrid.distributed.rpc.transport import tls
from tensorgrid.framework import errors
from tensorgrid.kernels import backend as backend_lib
from tensorgrid.v1 import replication_pb2

if TYPE_CHECKING:
    from tensorgrid.distributed.rpc import server as server_lib

log = logging.getLogger("tensorgrid.replication")

REPLICATION_SERVICE = replication_pb2.DESCRIPTOR.services_by_name["Replication"]
PUSH_TIMEOUT_S = 60.0
FETCH_TIMEOUT_S = 60.0


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(field_number: int, length: int) -> bytes:
    """The tag and length of a length-delimited protobuf field (a message or ``bytes``) of ``length`` bytes."""
    return _varint(field_number << 3 | 2) + _varint(length)


_ROWS_VALUES_FIELD = replication_pb2.ReplicaRows.DESCRIPTOR.fields_by_name["values"].number


def _rows_field(field_number: int, piece: replication.Rows) -> list[Any]:
    """The ``ReplicaRows`` of ``piece`` encoded as field ``field_number`` of the message around it, in parts
    to join: its ``values`` are the array's own buffer, not a ``bytes`` copy of it that protobuf would copy
    again to serialize (a push of a large state is mostly these bytes; protobuf parses fields in any order)."""
    values = np.ascontiguousarray(piece.values).reshape(-1).view(np.uint8)
    head = replication_pb2.ReplicaRows(
        container=piece.key[0], name=piece.key[1], dtype=piece.values.dtype.name, shape=list(piece.shape),
        rows=[] if piece.rows is None else piece.rows.tolist(), row_start=piece.row_start,
        row_count=piece.row_count, updates=piece.updates).SerializeToString()
    values_tag = _length_delimited(_ROWS_VALUES_FIELD, values.nbytes)
    return [_length_delimited(field_number, len(head) + len(values_tag) + values.nbytes), head, values_tag,
            values.data]


def _from_proto(message: replication_pb2.ReplicaRows) -> replication.Rows:
    """The rows of ``message``; InvalidArgumentError naming the variable when its parts disagree."""
    shape = tuple(int(d) for d in message.shape)
    where = f"replica rows of {message.container}/{message.name}"
    try:
        dtype = np.dtype(message.dtype)
    except TypeError:
        raise errors.InvalidArgumentError(None, None, f"{where}: unknown dtype {message.dtype!r}") from None
    rows = np.asarray(message.rows, np.int64) if message.rows else None
    count = rows.size if rows is not None else int(message.row_count)
    row_shape = shape[1:] if shape else ()
    expected = (count,) + row_shape if shape else ()
    data = message.values  # each read of the field makes a new bytes copy of it: one
    if any(d < 0 for d in shape) or len(data) != int(np.prod(expected, dtype=np.int64)) * dtype.itemsize:
        raise errors.InvalidArgumentError(
            None, None, f"{where}: {len(data)} value bytes do not hold {count} rows of shape "
                        f"{list(row_shape)} and dtype {dtype.name} (variable shape {list(shape)})")
    bound = shape[0] if shape else 1
    first, last = ((int(rows.min()), int(rows.max())) if rows is not None and rows.size
                   else (int(message.row_start), int(message.row_start) + count - 1))
    if count and (first < 0 or last >= bound):
        raise errors.InvalidArgumentError(None, None, f"{where}: rows {first}..{last} are not in [0, {bound})")
    values = np.frombuffer(data, dtype).reshape(expected)  # read-only: applying copies it
    return replication.Rows((message.container, message.name), shape, values, int(message.updates), rows,
                            int(message.row_start), count)


def _array_from_proto(message: replication_pb2.ReplicaArray, where: str) -> np.ndarray:
    try:
        dtype = np.dtype(message.dtype)
    except TypeError:
        raise errors.InvalidArgumentError(None, None, f"{where}: unknown dtype {message.dtype!r}") from None
    shape = tuple(int(d) for d in message.shape)
    data = message.data  # each read of the field makes a new bytes copy of it: one
    if any(d < 0 for d in shape) or len(data) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
        raise errors.InvalidArgumentError(
            None, None, f"{where}: {len(data)} bytes do not hold an array of shape {list(shape)} and dtype "
                        f"{dtype.name}")
    return np.frombuffer(data, dtype).reshape(shape).copy()


_TABLE_KEYED = ("keys", "values", "freqs", "versions")
_DEFINITION_FIELDS = ("name", "dim", "value_dtype", "filter_freq", "steps_to_live", "l2_weight_threshold",
                      "default_value_no_permission", "max_entries", "evict_every_n_steps", "bloom_filter_shape",
                      "slot_initial")


def _table_to_proto(piece: replica_tables.TableRows) -> replication_pb2.ReplicaTableRows:
    arrays = {name: replication_pb2.ReplicaArray(dtype=array.dtype.name, shape=list(array.shape),
                                                 data=np.ascontiguousarray(array).tobytes())
              for name, array in piece.arrays.items()}
    return replication_pb2.ReplicaTableRows(
        container=piece.key[0], name=piece.key[1], whole=piece.whole,
        definition="" if piece.definition is None else json.dumps(piece.definition, sort_keys=True),
        pending_included=piece.pending_included, arrays=arrays)


def _table_from_proto(message: replication_pb2.ReplicaTableRows) -> replica_tables.TableRows:
    """The table piece of ``message``; InvalidArgumentError naming the table when its parts disagree."""
    where = f"replica keys of embedding variable table {message.container}/{message.name}"
    arrays = {name: _array_from_proto(array, f"{where}, array {name!r}") for name, array in message.arrays.items()}
    keys = arrays.get("keys")
    columns = [n for n in arrays if n in _TABLE_KEYED[1:] or n.startswith("slot:")]
    if (keys is None and columns) or (keys is not None and keys.ndim != 1) or any(
            len(arrays[n]) != len(keys) for n in columns if keys is not None):
        raise errors.InvalidArgumentError(
            None, None, f"{where}: the columns {sorted(columns)} do not have one entry per key of 'keys' "
                        f"({'absent' if keys is None else list(keys.shape)})")
    definition = None
    if message.whole:
        try:
            definition = json.loads(message.definition)
        except json.JSONDecodeError as e:
            raise errors.InvalidArgumentError(None, None, f"{where}: its definition is not JSON ({e})") from None
        missing = [f for f in _DEFINITION_FIELDS if not isinstance(definition, dict) or f not in definition]
        needed = [n for n in ("keys", "defaults", "pending_keys", "pending_counts") if n not in arrays]
        if missing or needed:
            raise errors.InvalidArgumentError(
                None, None, f"{where}: a whole table needs the definition fields {missing} and arrays {needed}")
    return replica_tables.TableRows((message.container, message.name), arrays, message.whole, definition,
                                 message.pending_included)


_BATCH_FIELDS = replication_pb2.ReplicaBatch.DESCRIPTOR.fields_by_name
_SNAPSHOT_FIELDS = replication_pb2.ReplicaSnapshot.DESCRIPTOR.fields_by_name


def _with_piece(header: bytes, piece: replication.Piece, rows_field: int, table_field: int) -> bytes:
    """The message ``header`` (a serialized ``ReplicaBatch`` or ``ReplicaSnapshot`` without its piece) with
    ``piece`` as its field ``rows_field`` (rows of a variable) or ``table_field`` (keys of a table)."""
    if isinstance(piece, replica_tables.TableRows):
        table: bytes = _table_to_proto(piece).SerializeToString()
        return header + _length_delimited(table_field, len(table)) + table
    joined: bytes = b"".join([header, *_rows_field(rows_field, piece)])
    return joined


class ReplicationServicer:
    """Serves the replicas of a task's ``ReplicaStore``."""

    def __init__(self, store: replication.ReplicaStore) -> None:
        self._store = store

    def PushReplica(self, frames: Iterator[bytes], context: grpc.ServicerContext) -> replication_pb2.ReplicaAck:  # noqa: N802
        push: Optional[replication.Push] = None
        pieces: list[replication.Piece] = []
        try:
            for raw in frames:
                batch = replication_pb2.ReplicaBatch.FromString(raw)
                if push is None:
                    push = replication.Push(batch.primary_task, int(batch.primary_incarnation), int(batch.sequence),
                                            batch.full)
                pieces += [_from_proto(rows) for rows in batch.rows]
                pieces += [_table_from_proto(table) for table in batch.tables]
        except errors.OpError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, e.message)
        except Exception as e:  # noqa: BLE001 - a malformed message: answered, the server goes on
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed ReplicaBatch: {e}")
        if push is None or not push.primary_task:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a push must name its primary_task in its first message")
        assert push is not None
        try:
            ack = self._store.apply(push, pieces)
        except errors.FailedPreconditionError as e:  # the primary itself: its holder's address reached it
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, e.message)
        return replication_pb2.ReplicaAck(sequence=ack.sequence, needs_full=ack.needs_full)

    def FetchReplica(self, request: replication_pb2.FetchReplicaRequest,  # noqa: N802
                     context: grpc.ServicerContext) -> Iterator[bytes]:
        try:
            snapshot = self._store.snapshot(request.primary_task, int(request.requester_incarnation))
        except errors.FailedPreconditionError as e:  # the asker itself: its holder's address reached it
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, e.message)
        if snapshot is None:
            return
        header = replication_pb2.ReplicaSnapshot(
            primary_incarnation=snapshot.primary_incarnation, sequence=snapshot.sequence,
            age_seconds=snapshot.age_seconds).SerializeToString()
        for piece in snapshot.rows:
            yield _with_piece(header, piece, _SNAPSHOT_FIELDS["rows"].number, _SNAPSHOT_FIELDS["table"].number)


def handler(store: replication.ReplicaStore) -> grpc.GenericRpcHandler:
    """The Replication service of a task's gRPC server."""
    return grpc_frames.generic_handler(REPLICATION_SERVICE, ReplicationServicer(store))


def _op_error(e: grpc.RpcError, what: str) -> errors.OpError:
    code = e.code() if hasattr(e, "code") else None
    details = e.details() if hasattr(e, "details") else str(e)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return errors.InvalidArgumentError(None, None, f"{what}: {details}")
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return errors.FailedPreconditionError(None, None, f"{what}: {details}")
    return errors.UnavailableError(None, None, f"{what}: {code.name if code else 'error'}: {details}")


class ReplicationClient:
    """``replication.ReplicaPeer`` on gRPC: the calls of a primary to its replica holder.
    ``incarnation``: the primary's, sent with its fetches (its pushes carry it anyway), so a holder
    address that reaches the primary itself is refused by incarnation, not guessed from addresses."""

    def __init__(self, address: str, incarnation: int = 0) -> None:
        self.address = address
        self._incarnation = incarnation
        user_authority.ensure_for([address])
        self._channel = peer_channel.PeerChannel(address, tls.from_env(), grpc_frames.grpc_options(
            grpc_frames.channel_options()), REPLICATION_SERVICE)

    def push(self, push: replication.Push, pieces: list[replication.Piece]) -> replication.Ack:
        header: bytes = replication_pb2.ReplicaBatch(
            primary_task=push.primary_task, primary_incarnation=push.primary_incarnation, sequence=push.sequence,
            full=push.full).SerializeToString()

        def messages() -> Iterator[bytes]:
            yield header
            for piece in pieces:
                yield _with_piece(header, piece, _BATCH_FIELDS["rows"].number, _BATCH_FIELDS["tables"].number)
        try:
            with self._channel.stub() as stub:
                ack = stub.PushReplica(messages(), timeout=PUSH_TIMEOUT_S)
        except grpc.RpcError as e:
            raise self._failed(e, "PushReplica to") from None
        return replication.Ack(int(ack.sequence), bool(ack.needs_full))

    def fetch(self, primary_task: str) -> Optional[replication.Snapshot]:
        snapshot: Optional[replication.Snapshot] = None
        try:
            with self._channel.stub() as stub:
                request = replication_pb2.FetchReplicaRequest(primary_task=primary_task,
                                                              requester_incarnation=self._incarnation)
                for raw in stub.FetchReplica(request, timeout=FETCH_TIMEOUT_S):
                    message = replication_pb2.ReplicaSnapshot.FromString(raw)
                    if snapshot is None:
                        snapshot = replication.Snapshot(int(message.primary_incarnation), int(message.sequence),
                                                        float(message.age_seconds), [])
                    snapshot.rows.append(_table_from_proto(message.table) if message.HasField("table")
                                         else _from_proto(message.rows))
        except grpc.RpcError as e:
            raise self._failed(e, "FetchReplica from") from None
        return snapshot

    def _failed(self, e: grpc.RpcError, what: str) -> errors.OpError:
        """The call's error; where the address reached this very task (a refusal by incarnation), the
        next call opens a new connection, so a name that now leads to another task (a standby's
        Service once its DNS no longer names this pod) is looked up again: gRPC keeps a connection
        that works, and would keep calling itself."""
        error = _op_error(e, f"{what} {self.address}")
        if isinstance(error, errors.FailedPreconditionError):
            self._channel.reconnect()
        return error

    def close(self) -> None:
        self._channel.close()


class PrimaryReplication:
    """A PS task's replica: loaded from its holder before the task's first step, then kept live.

    Until the load ends, the task's steps wait (``Worker.before_step``): the chief must not
    find the variables uninitialized and initialize or restore them meanwhile. ``taken_over``: a
    standby that became this PS loaded the replica it held already; only the pushes start.
    """

    def __init__(self, server: server_lib.Server, holder: str, address: str,
                 settings: replication.ReplicationSettings,
                 taken_over: Optional[replication.Promotion] = None) -> None:
        self._server = server
        self._settings = settings
        self._holder = holder
        self._client = ReplicationClient(address, server.worker.incarnation)
        self._loaded = threading.Event()
        self.restored: Optional[replication.Restored] = None
        self.replicator = replication.Replicator(server.task, server.worker.incarnation, server.worker.resources,
                                                 self._client, holder, settings)
        server.worker.before_step = self._before_step
        if taken_over is not None:
            self.restored = taken_over.restored
            monitoring.PS_STARTED_FROM_REPLICA.labels(server.task).set(0 if self.restored is None else 1)
            self._loaded.set()
            self.replicator.start()
            return
        threading.Thread(target=self._load_then_replicate, daemon=True, name="ps-replica-load").start()

    def _before_step(self) -> None:
        self._loaded.wait()
        self.replicator.wait_within_lag()

    def _load_then_replicate(self) -> None:
        try:
            self.restored = replication.restore_from_replica(
                self._server.worker.resources, backend_lib.for_device("CPU"), self._client, self._server.task,
                self._holder, self._settings.fetch_wait_s)
        finally:
            monitoring.PS_STARTED_FROM_REPLICA.labels(self._server.task).set(0 if self.restored is None else 1)
            self._loaded.set()
        self.replicator.start()

    def close(self) -> None:
        self.replicator.close()
        self._loaded.set()
        self._client.close()


def start_for(server: server_lib.Server) -> Optional[PrimaryReplication]:
    """The replica of ``server``'s state when it is a PS with a holder (the ring,
    ``TENSORGRID_PS_REPLICA_ADDRESS``, or for a standby that became this PS the next standby at
    its address), else None."""
    promotion = server.promotion
    settings = replication.ReplicationSettings.from_env(
        standby_address=None if promotion is None else promotion.standby_address)
    taken_over = promotion if promotion is not None and not promotion.restarted else None
    if taken_over is not None:
        restored = taken_over.restored
        log.warning("%s: %s %s (%s)", server.task, replication.TOOK_OVER, server.address,
                    "it held no replica: started empty" if restored is None else
                    f"loaded {restored.variables} variables from the replica it held, {restored.age_seconds:.2f} s old")
    elif promotion is not None:
        log.warning("%s: this process took over as %s before it restarted (its take-over file still names it): it "
                    "comes back as %s, not as a standby, loading its state from the live replica on the next standby "
                    "(%s), else the chief restores the checkpoint", server.task, server.task, server.task,
                    settings.replica_address)
    holder = replication.replica_holder(server.cluster, server.job_name, server.task_index, settings)
    if holder is None:
        if server.job_name == "ps":
            if taken_over is None:
                monitoring.PS_STARTED_FROM_REPLICA.labels(server.task).set(0)
            else:
                monitoring.PS_STARTED_FROM_REPLICA.labels(server.task).set(0 if taken_over.restored is None else 1)
            log.info("%s: no live replica of its state (%s): a restart restores the checkpoint", server.task,
                     "a single PS and no " + replication.REPLICA_ADDRESS_ENV if settings.enabled
                     else replication.REPLICATION_ENV + " is not 1")
        return None
    log.info("%s: keeping a live replica of its state on %s at %s (max lag %g s)", server.task, holder[0],
             holder[1], settings.max_lag_s)
    return PrimaryReplication(server, holder[0], holder[1], settings, taken_over)


def serve_standby(address: str, standby_for: str,
                  store: Optional[replication.ReplicaStore] = None) -> tuple[grpc.Server, replication.ReplicaStore]:
    """A standby task at ``address``: a gRPC server with only the Replication service,
    holding the replica of ``standby_for`` (e.g. ``/job:ps/replica:0/task:0``) in ``store``
    (a new one by default; the one held still, after a failed take over)."""
    problem = cluster_lib.address_problem(address)
    if problem is not None:
        raise ValueError(f"the standby's address {address!r} {problem}")
    user_authority.ensure_for([address])
    store = store if store is not None else replication.ReplicaStore()
    rpc_server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="standby"),
                             options=grpc_frames.grpc_options(grpc_frames.server_options()))
    rpc_server.add_generic_rpc_handlers((handler(store),))
    port = address.rsplit(":", 1)[1]
    listen = ports.listen_host(address)
    bound = tls.add_port(rpc_server, f"{listen or '[::]'}:{port}", tls.from_env())
    if not bound:
        raise RuntimeError(f"the standby of {standby_for} cannot listen on {address}: is another process using it?")
    rpc_server.start()
    log.info("Standby for %s: holding its replica at %s", standby_for, address)
    return rpc_server, store


def standby_task(env: Any) -> str:
    """The PS task a standby holds the replica of, from ``TENSORGRID_PS_STANDBY_FOR``."""
    task = str(env.get(replication.STANDBY_FOR_ENV, ""))
    if not task.startswith("/job:ps/"):
        raise ValueError(f"{replication.STANDBY_FOR_ENV}={task!r}: name the PS task this standby holds the replica "
                         f"of, e.g. /job:ps/replica:0/task:0")
    return task


def take_over_request(path: str) -> str:
    """The PS task the file at ``path`` (``tensorgrid ps-standby --take-over-file``) tells the standby to
    become: the operator's annotation ``tensorgrid.io/take-over``, written there by the kubelet (a
    downward API volume: empty while the annotation is absent); ``""`` while it says nothing or is
    not there yet."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


class HeldReplica:
    """``replication.ReplicaPeer`` over this process's own ``ReplicaStore``: what a standby
    taking over loads (fetches only: a standby never pushes)."""

    def __init__(self, store: replication.ReplicaStore) -> None:
        self._store = store

    def fetch(self, primary_task: str) -> Optional[replication.Snapshot]:
        return self._store.snapshot(primary_task)

    def push(self, push: replication.Push, pieces: list[replication.Piece]) -> replication.Ack:
        raise errors.FailedPreconditionError(None, None, f"{push.primary_task}: a standby's own replica takes no push")


def promotion_cluster(env: Any) -> cluster_lib.ClusterSpec:
    """The cluster a standby taking over joins: ``TF_CONFIG``'s ``cluster`` (its ``task`` is not read:
    the standby is not a task of it until it takes over)."""
    text = str(env.get("TF_CONFIG", ""))
    try:
        cluster = json.loads(text).get("cluster") if text.strip() else None
    except (json.JSONDecodeError, AttributeError):
        cluster = None
    if not cluster:
        raise ValueError(f"TF_CONFIG={text[:200]!r}: a standby takes over its PS's address only with the job's "
                         "cluster in TF_CONFIG, e.g. {\"cluster\": {\"ps\": [\"h0:2222\"], \"worker\": [\"h1:2222\"]}}")
    spec = cluster_lib.ClusterSpec(cluster)
    cluster_lib.check_addresses(spec)
    return spec


def _ps_index(standby_for: str, cluster: cluster_lib.ClusterSpec) -> int:
    """The index of the PS ``standby_for`` names; ValueError when ``cluster`` has no such PS."""
    found = re.fullmatch(r"/job:ps/replica:0/task:(\d+)", standby_for)
    if found is None or int(found.group(1)) not in cluster.task_indices("ps"):
        raise ValueError(f"the standby of {standby_for!r} cannot take over: the PS tasks of the cluster are "
                         f"{[cluster_lib.task_name('ps', i) for i in cluster.task_indices('ps')]}")
    return int(found.group(1))


def take_over(rpc_server: grpc.Server, store: replication.ReplicaStore, standby_for: str,
              cluster: cluster_lib.ClusterSpec, standby_address: str) -> server_lib.Server:
    """The standby at ``standby_address`` becomes ``standby_for`` (``/job:ps/replica:0/task:<i>``): its
    Replication server stops (freeing the port, which may be the PS's own once a Service points here), a
    full server of that task starts at the PS's address in ``cluster`` with the replica held loaded
    before it serves (empty when it held none: then the chief restores the checkpoint, as for a new PS),
    and pushes its replica to the next standby that comes up at ``standby_address``
    (``replication.Promotion``). ValueError (still serving as a standby) when ``cluster`` has no such
    PS; ``TakeOverError`` when the PS could not start (its Replication server stopped, the replica
    still in ``store``)."""
    from tensorgrid.distributed.rpc import server as server_lib

    server = server_lib.Server(cluster, "ps", _ps_index(standby_for, cluster), start=False)  # binds nothing yet
    rpc_server.stop(grace=None).wait()
    try:
        server.promotion = replication.Promotion(standby_address, replication.restore_from_replica(
            server.worker.resources, backend_lib.for_device("CPU"), HeldReplica(store), server.task, "this standby",
            0.0))
        server.start()
    except Exception as e:  # the address taken (the old PS still there), ...: said, the replica kept
        raise TakeOverError(f"{server.task} could not start at {server.address}: {e}") from e
    return server


class TakeOverError(RuntimeError):
    """A standby stopped serving its replica to take over, and could not start as its PS: it
    still holds the replica (``serve_standby`` with that store serves it again)."""


def come_back_as_promoted(standby_for: str, cluster: cluster_lib.ClusterSpec, standby_address: str) -> server_lib.Server:
    """A standby process that had taken over ``standby_for`` and restarted (a container restart: its
    take-over file still names the PS) starts as that PS again, not as a standby that would take over
    empty: its state comes from the live replica it pushed to the next standby (at ``standby_address``,
    or ``TENSORGRID_PS_REPLICA_ADDRESS``), as a restarted PS loads its own, else the chief restores the
    checkpoint. ValueError when ``cluster`` has no such PS; the server's own errors (its address taken)
    when it cannot start."""
    from tensorgrid.distributed.rpc import server as server_lib

    server = server_lib.Server(cluster, "ps", _ps_index(standby_for, cluster), start=False)
    server.promotion = replication.Promotion(standby_address, None, restarted=True)
    server.start()
    return server
