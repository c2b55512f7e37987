"""``tf.data.experimental.dynamic_shards``: data handed out in shards at run time, each once per epoch.

``Dataset.shard`` splits the data among a fixed set of workers: a worker that dies takes its part
with it, one that joins trains some data twice. Here every worker's input pipeline asks task 0's
shard service (``distributed/shard_queue.py``, served by ``rpc/shard_calls.py``) for its next
shard as it goes, so fast workers take more, and a shard of a worker that dies or leaves goes back
to the queue. A shard is reported done when the pipeline asks for the element after its last one:
with ``batch(b)`` and a ``shard_size`` that ``b`` divides, that is the step after the one that
trained the shard's last batch (docs/data.md says what else keeps that true).

The state of the data set (epoch, the shards done) lives in the service while training runs; the
chief's ``DynamicShardsHook`` opens the service with the state kept in a variable (placed as the
model's variables are: on a parameter server under ``replica_device_setter``) and writes the
service's state back into it in the steps that begin after it changed, so a checkpoint holds it and
a restarted chief goes on where the live model is. Task 0 is the chief: where its server runs in
this process (the usual case), the hook and the pipelines call the service directly
(``shard_queue.LocalShards``), so a step in which nothing changed costs a version compared under a
lock; elsewhere they call it over gRPC, and the hook asks at most every
``REMOTE_STATE_INTERVAL_SECONDS``.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import threading
import time
import uuid
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from tensorgrid.data import dataset_ops
from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.distributed import shard_queue
from tensorgrid.distributed.rpc import session_targets
from tensorgrid.distributed.rpc import shard_calls
from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import array_ops
from tensorgrid.ops import state_ops
from tensorgrid.ops import variables
from tensorgrid.train import session_run_hook

log = logging.getLogger("tensorgrid.shards")

COLLECTION = "dynamic_shards"
"""The graph collection of the ``DynamicShards`` a graph reads (``DynamicShardsHook`` opens them)."""
UNAVAILABLE_TIMEOUT_SECONDS = 600.0
"""How long a worker waits for task 0's shard service while it cannot be reached (a chief restarting)."""
REMOTE_STATE_INTERVAL_SECONDS = 1.0
"""How often the chief's hook asks for the state when task 0's service is in another process (a call
per step would cost a round trip each); an older state in the variable is never ahead of the model,
so it only widens what a restart trains again."""
_PROCESS_ID = uuid.uuid4().hex[:12]


@dataclasses.dataclass
class DynamicShards:
    """One data set of ``dynamic_shards`` in a graph: its name, definition and state variable."""

    name: str
    spec: shard_queue.ShardsSpec
    state: variables.Variable
    """int64 ``[3 + number of shards]``: zeros until the chief first writes the service's state."""
    state_feed: graph_lib.Tensor
    save_state: graph_lib.Operation


def dynamic_shards(files: Optional[Sequence[str]] = None, num_records: Optional[int] = None,
                   shard_size: Optional[int] = None, num_epochs: Optional[int] = 1, shuffle: bool = False,
                   seed: int = 0, name: str = "dynamic_shards", lease_seconds: float = 30.0,
                   max_attempts: int = 3) -> dataset_ops.Dataset:
    """A Dataset of shard descriptions handed out by task 0 (the chief, else worker 0) as workers ask.

    Either ``files`` (each file is one shard) or ``num_records`` (records ``0 .. num_records-1`` in
    shards of ``shard_size``). Elements are dicts: ``file`` (string, empty for a record count),
    ``start`` and ``end`` (int64, records ``[start, end)``; ``0`` and ``-1`` for a whole file),
    ``epoch`` and ``index`` (int64). ``num_epochs=None`` repeats for ever; ``shuffle`` reorders the
    shards each epoch (``seed + epoch``). A worker that does not renew its lease for
    ``lease_seconds`` loses its shard to the queue; a shard lost ``max_attempts`` times is reported
    failed and skipped. Every worker must call it with the same arguments, and the chief must run
    ``DynamicShardsHook``; the state variable it makes is placed by the current device scope.
    """
    spec = _defined(name, files, num_records, shard_size, num_epochs, shuffle, seed, lease_seconds, max_attempts)

    def shard_descriptions() -> Iterator[dict[str, Any]]:
        for shard, (file, start, end) in _ShardSource(name, spec).shards():
            yield {"file": file, "start": start, "end": end, "epoch": shard.epoch, "index": shard.index}

    types = {"file": dtypes.string, "start": dtypes.int64, "end": dtypes.int64, "epoch": dtypes.int64,
             "index": dtypes.int64}
    return dataset_ops.Dataset.from_generator(shard_descriptions, types, {key: [] for key in types})


def dynamic_shard_records(num_records: int, shard_size: int, num_epochs: Optional[int] = 1, shuffle: bool = False,
                          seed: int = 0, name: str = "dynamic_shards", lease_seconds: float = 30.0,
                          max_attempts: int = 3) -> dataset_ops.Dataset:
    """The record numbers (int64 scalars) of ``dynamic_shards(num_records=..., shard_size=...)``, shard by
    shard, for indexing your data (``tf.gather``). A shard is reported done when the record after
    its last one is asked for (with ``batch(b)``, ``b`` dividing ``shard_size``: the next step)."""
    spec = _defined(name, None, num_records, shard_size, num_epochs, shuffle, seed, lease_seconds, max_attempts)

    def records() -> Iterator[int]:
        for _, (_, start, end) in _ShardSource(name, spec).shards():
            yield from range(start, end)

    return dataset_ops.Dataset.from_generator(records, dtypes.int64, [])


def _defined(name: str, files: Optional[Sequence[str]], num_records: Optional[int], shard_size: Optional[int],
             num_epochs: Optional[int], shuffle: bool, seed: int, lease_seconds: float,
             max_attempts: int) -> shard_queue.ShardsSpec:
    """The checked definition of data set ``name``, with its state variable added to the graph."""
    if not isinstance(name, str) or not name or "/" in name or " " in name:
        raise ValueError(f"name must be a non-empty name without '/' or spaces, got {name!r}")
    if isinstance(files, (str, bytes)):
        raise TypeError(f"files must be a list of file names, got the string {files!r}")
    if num_epochs is not None and int(num_epochs) < 1:
        raise ValueError(f"num_epochs must be at least 1 (or None: for ever), got {num_epochs}")
    spec = shard_queue.ShardsSpec(
        files=tuple(str(f) for f in (files or ())), num_records=int(num_records or 0), shard_size=int(shard_size or 0),
        num_epochs=0 if num_epochs is None else int(num_epochs), shuffle=bool(shuffle), seed=int(seed),
        max_attempts=int(max_attempts), lease_seconds=float(lease_seconds))
    graph = graph_lib.get_default_graph()
    if any(shards.name == name for shards in graph.get_collection(COLLECTION)):
        raise ValueError(f"this graph already reads dynamic shards named {name!r}; give each data set its own name")
    size = shard_queue.STATE_HEADER + spec.num_shards
    state = variables.Variable(np.zeros([size], np.int64), trainable=False, name=f"{name}/state")
    with graph.colocate_with(state.op):
        feed = array_ops.placeholder(dtypes.int64, [size], name=f"{name}/state_value")
        save = state_ops.assign(state, feed).op
    graph.add_to_collection(COLLECTION, DynamicShards(name, spec, state, feed, save))
    return spec


class DynamicShardsHook(session_run_hook.SessionRunHook):
    """The chief's side of ``dynamic_shards``: opens task 0's shard service with the state saved in
    each data set's variable (or from the start), saves the service's state into it before each
    step when it changed (so checkpoints hold it), and at the end, when every epoch is done, waits within a lease
    for the workers still asking to be told so. On other tasks it does nothing."""

    def __init__(self, is_chief: bool = True) -> None:
        self._is_chief = is_chief
        self._shards: list[DynamicShards] = []
        self._service: Optional[shard_queue.ShardsEndpoint] = None
        self._remote = False
        self._next_remote_look = 0.0
        self._epochs: dict[str, int] = {}
        self._versions: dict[str, int] = {}
        """The state version each data set's variable holds (0: unknown, so the next step writes it)."""

    def begin(self) -> None:
        self._shards = list(graph_lib.get_default_graph().get_collection(COLLECTION))

    def after_create_session(self, session: Any, coord: Any) -> None:
        if not self._is_chief or not self._shards:
            return
        self._service, self._remote = _shards_endpoint()
        self._next_remote_look = 0.0
        self._versions = {}
        for shards, state in zip(self._shards, session.run([s.state for s in self._shards])):
            self._service.open(shards.name, shards.spec, [int(v) for v in state])

    def before_run(self, run_context: Any) -> Optional[session_run_hook.SessionRunArgs]:
        # The state read here has only shards whose last records a step that ended trained: written
        # in this step, it is never ahead of the model a checkpoint after this step holds.
        if self._service is None:
            return None
        if self._remote:
            if time.monotonic() < self._next_remote_look:
                return None
            self._next_remote_look = time.monotonic() + REMOTE_STATE_INTERVAL_SECONDS
        saves, feeds = [], {}
        for shards in self._shards:
            answer = self._service.state(shards.name, self._versions.get(shards.name, 0))
            if answer.unchanged:
                continue
            self._versions[shards.name] = answer.version
            saves.append(shards.save_state)
            feeds[shards.state_feed] = np.asarray(answer.state, np.int64)
            if self._epochs.get(shards.name) != answer.epoch:
                self._epochs[shards.name] = answer.epoch
                log.info("dynamic shards %r: epoch %d, %.0f%% of its shards done%s", shards.name, answer.epoch,
                         100 * answer.fraction_done,
                         f"; failed shards: {answer.failed_shards}" if answer.failed_shards else "")
        return session_run_hook.SessionRunArgs(saves, feed_dict=feeds) if saves else None

    def end(self, session: Any) -> None:
        if self._service is None:
            return
        for shards in self._shards:
            answer = self._service.state(shards.name)
            session.run(shards.save_state, {shards.state_feed: np.asarray(answer.state, np.int64)})
            if not shards.spec.num_epochs or answer.epoch < shards.spec.num_epochs:
                continue  # stopped before the data's end: the workers go on asking, nothing to tell them
            deadline = time.monotonic() + shards.spec.lease_seconds
            while self._service.state(shards.name).waiting_clients and time.monotonic() < deadline:
                time.sleep(0.1)
        self._service.close()
        self._service = None


# ---------------------------------------------------------------------- a worker's side

def _this_task() -> tuple[cluster_lib.ClusterSpec, str]:
    """The cluster and the task of this process: its server's, else TF_CONFIG's."""
    servers = session_targets.servers_in_process()
    if len(servers) == 1:
        return servers[0].cluster, servers[0].task
    tf_config = cluster_lib.TFConfig.from_env()
    if tf_config.cluster and tf_config.task_type is not None and tf_config.task_index is not None:
        return tf_config.cluster, cluster_lib.task_name(tf_config.task_type, tf_config.task_index)
    raise errors.FailedPreconditionError(
        None, None, f"dynamic shards are served by task 0 of a cluster; this process runs {len(servers)} servers and "
                    f"TF_CONFIG names no task: start this task's tf.train.Server (or set TF_CONFIG) before reading them")


def _shards_endpoint() -> tuple[shard_queue.ShardsEndpoint, bool]:
    """Task 0's shard service and whether it is in another process: its server's own service when
    that server runs in this process (called directly), else a gRPC client of it."""
    cluster, _ = _this_task()
    job, index = shard_calls.host_task(cluster)
    address = cluster.task_address(job, index)
    server = session_targets.local_server_for_target(address)
    if server is not None and server.task == cluster_lib.task_name(job, index):
        return shard_queue.LocalShards(server.shards), False
    return shard_calls.ShardsClient(address), True


class _ShardSource:
    """One pass of a worker's pipeline over a data set: asks for shards, keeps their leases alive."""

    def __init__(self, name: str, spec: shard_queue.ShardsSpec) -> None:
        self.name, self.spec = name, spec
        cluster, self.task = _this_task()
        self.host = cluster_lib.task_name(*shard_calls.host_task(cluster))
        self.client_id = f"{self.task}#{os.getpid()}-{_PROCESS_ID}-{uuid.uuid4().hex[:8]}"
        self._service, _ = _shards_endpoint()
        self._leases: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def shards(self) -> Iterator[tuple[shard_queue.Assignment, tuple[str, int, int]]]:
        """Each shard this pass trains: its assignment and ``(file, start, end)``."""
        keeper = threading.Thread(target=self._renew_leases, name=f"shard-leases-{self.name}", daemon=True)
        keeper.start()
        atexit.register(self._give_back)
        finished = 0
        try:
            while True:
                answer = self._ask(finished)
                with self._lock:
                    self._leases.discard(finished)
                    if answer.outcome == "shard":
                        self._leases.add(answer.lease)
                if answer.outcome == "end":
                    return
                finished = answer.lease
                yield answer, self.spec.shard(answer.index)
        finally:
            atexit.unregister(self._give_back)
            self._stop.set()
            keeper.join(timeout=shard_calls.CALL_TIMEOUT_SECONDS)
            self._give_back()
            self._service.close()

    def _give_back(self) -> None:
        """Returns the shard this pass holds to the queue at once (the process is leaving, or the pass
        was abandoned), instead of letting its lease run out."""
        with self._lock:
            leases, self._leases = sorted(self._leases), set()
        if leases:
            try:
                self._service.renew(self.name, self.client_id, leases, release=True)
            except errors.OpError as e:
                log.info("dynamic shards %r: could not give leases %s back to %s (they run out instead): %s",
                         self.name, leases, self.host, e.message)

    def _ask(self, finished: int) -> shard_queue.Assignment:
        """The next shard, reporting ``finished``; waits while none is free or task 0 cannot be reached."""
        unreachable_since: Optional[float] = None
        waited_since = time.monotonic()
        while True:
            try:
                answer = self._service.next_shard(self.name, self.spec, self.task, self.client_id, finished)
            except errors.UnavailableError as e:
                unreachable_since = unreachable_since or time.monotonic()
                if time.monotonic() - unreachable_since > UNAVAILABLE_TIMEOUT_SECONDS:
                    raise errors.UnavailableError(
                        None, None, f"the shard service of dynamic shards {self.name!r} on {self.host} could not be "
                                    f"reached for {UNAVAILABLE_TIMEOUT_SECONDS:g} s: {e.message}") from None
                time.sleep(0.5)
                continue
            if answer.outcome != "wait":
                return answer
            finished = 0  # reported: the service took it (or refused it) at the first answer
            if time.monotonic() - waited_since > 30.0:
                log.info("dynamic shards %r: %s waits: %s", self.name, self.task, answer.reason)
                waited_since = time.monotonic()
            time.sleep(answer.retry_after_seconds)

    def _renew_leases(self) -> None:
        while not self._stop.wait(self.spec.lease_seconds / 3):
            with self._lock:
                leases = sorted(self._leases)
            if not leases:
                continue
            try:
                lost = self._service.renew(self.name, self.client_id, leases)
            except errors.OpError as e:
                log.debug("dynamic shards %r: renewing leases on %s failed: %s", self.name, self.host, e.message)
                continue
            if lost:
                log.warning("dynamic shards %r: %s lost its lease of shards %s (held too long, or task 0 restarted): "
                            "they are trained again elsewhere", self.name, self.task, lost)
                with self._lock:
                    self._leases.difference_update(lost)
