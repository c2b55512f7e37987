"""The Worker service's logic: registered partitions, steps, and tensors for peers.

One Worker per task. It owns the task's resource manager (so every session on the
task shares variables by name), an incarnation id that changes on restart, the
partitions masters registered (each prepared once into an executor Plan), and the
step's rendezvous: a Send for another task is pushed to that task (``PushTensors``,
batched per step and peer, see ``_PeerRendezvous``) and lands in its rendezvous,
where its Recv takes it; ``RecvTensor`` remains for pulls. The services
(``rpc/services.py``, over gRPC and the data channel) and in-process callers both call
these methods; ``Worker`` implements ``worker_interface.WorkerInterface``, as does
the remote ``rpc.clients.WorkerClient``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import logging
import random
import threading
import time
from typing import Any, Callable, Mapping, Optional, Sequence

from tensorgrid import monitoring
from tensorgrid.distributed import graph_codec
from tensorgrid.distributed import limits as limits_lib
from tensorgrid.distributed import worker_interface
from tensorgrid.execution import async_program
from tensorgrid.execution import call_program
from tensorgrid.execution import executor
from tensorgrid.execution import rendezvous as rendezvous_lib
from tensorgrid.execution import resources as resources_lib
from tensorgrid.framework import errors
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import graph_def as graph_def_lib
from tensorgrid.framework import graph_rebuild
from tensorgrid.framework import python_callables

log = logging.getLogger("tensorgrid.worker")


@dataclasses.dataclass
class _RegisteredGraph:
    handle: str
    session_handle: str
    graph: graph_lib.Graph
    program: "call_program.StepProgram | async_program.AsyncStepProgram"
    """The partition's plan, run as generated code once it ran a few steps (with its Recvs:
    ``async_program``)."""
    feed_names: list[str]
    fetch_names: list[str]
    resources: resources_lib.ResourceManager
    """The task's (shared by name), or the session's own when its state is isolated."""
    graph_bytes: int
    """Its GraphDef's size as serialized, counted against ``max_registered_graph_bytes``."""
    last_used: float = dataclasses.field(default_factory=time.monotonic)


class _PeerRendezvous(rendezvous_lib.LocalRendezvous):
    """Tensors are pushed: a Send for another task goes into that task's outbox, and the
    outboxes of a step are flushed (one push per destination, over the peer's data
    channel or as a PushTensors call) whenever the step's executor has nothing ready
    to run, and at its end. A Recv takes from the local table, where peers' pushes
    land. Nothing is batched past a point where the step waits, so batching cannot
    deadlock two tasks waiting on each other.
    """

    def __init__(self, worker: "Worker", limits: limits_lib.ServerLimits) -> None:
        super().__init__(ttl_s=limits.rendezvous_ttl_s, max_bytes=limits.rendezvous_max_bytes,
                         max_entries=limits.rendezvous_max_entries)
        self._worker = worker
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="push")
        self._outbox: dict[int, dict[str, list[tuple[str, Any]]]] = {}
        self._in_flight: dict[int, list[tuple[str, concurrent.futures.Future[None]]]] = {}
        self._outbox_lock = threading.Lock()

    def send(self, step_id: int, key: str, value: Any, recv_task: Optional[str] = None) -> None:
        if recv_task is None or recv_task == self._worker.task:
            super().send(step_id, key, value)
            return
        with self._outbox_lock:
            self._outbox.setdefault(step_id, {}).setdefault(recv_task, []).append((key, value))

    def recv_async(self, step_id: int, key: str, send_task: str, done: Callable[..., None]) -> None:
        self.take_async(step_id, key, done)

    def flush(self, step_id: int) -> None:
        """Pushes the step's outboxes from this thread (the step has nothing else to do
        until a tensor arrives): every push on a data channel is sent before any answer
        is awaited, so pushes to several tasks are in flight together without a hand-off
        to another thread; pushes that cannot go that way (gRPC, a peer in this process)
        as before: the first from this thread, the others in parallel on the pool."""
        with self._outbox_lock:
            batches = list(self._outbox.pop(step_id, {}).items())
        if not batches:
            return
        answers: list[Callable[[], None]] = []
        blocking: list[tuple[str, list[tuple[str, Any]]]] = []
        for task, items in batches:
            start = getattr(self._worker.peer(task), "start_push", None)
            answer = start(step_id, self._worker.task, items) if start is not None else None
            if answer is None:
                blocking.append((task, items))
            else:
                answers.append(answer)
        failure: Optional[BaseException] = None
        if blocking:
            with self._outbox_lock:
                in_flight = self._in_flight.setdefault(step_id, [])
                for task, items in blocking[1:]:
                    client = self._worker.peer(task)
                    in_flight.append((task, self._pool.submit(client.push_tensors, step_id, self._worker.task,
                                                              items)))
            task, items = blocking[0]
            try:
                self._worker.peer(task).push_tensors(step_id, self._worker.task, items)
            except BaseException as e:  # noqa: BLE001 - raised once every answer was read
                failure = e
        for answer in answers:  # every one read, so that no connection is left mid-call
            try:
                answer()
            except BaseException as e:  # noqa: BLE001 - the first failure is raised
                failure = failure or e
        if failure is not None:
            raise failure

    def wait_pushed(self, step_id: int) -> None:
        """Flushes the step's outboxes and waits until every push was delivered (or raises)."""
        self.flush(step_id)
        with self._outbox_lock:
            in_flight = self._in_flight.pop(step_id, [])
        for _, future in in_flight:
            future.result()

    def forget(self, step_id: int) -> None:
        with self._outbox_lock:
            self._outbox.pop(step_id, None)
            self._in_flight.pop(step_id, None)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class Worker:
    """Runs graph partitions on this task's devices."""

    def __init__(self, task: str, peer: Callable[[str], worker_interface.WorkerInterface], placement: Any = None,
                 limits: Optional[limits_lib.ServerLimits] = None,
                 learn_peers: Optional[Callable[[Mapping[str, str], str, int], None]] = None) -> None:
        self.task = task
        self._learn_peers = learn_peers
        """Given a registration's ``peer_addresses``, registering task and its incarnation: the
        server adds the tasks its cluster spec lacks, and follows a registering task that moved."""
        self.incarnation = random.SystemRandom().getrandbits(63) | 1
        self.resources = resources_lib.ResourceManager()
        self._session_resources: dict[str, resources_lib.ResourceManager] = {}
        """Resources of sessions created with ``isolate_session_state``, by session handle."""
        self.limits = limits or limits_lib.ServerLimits()
        self.rendezvous = _PeerRendezvous(self, self.limits)
        self._peer = peer
        self._placement = placement or executor.default_placement(allow_soft_placement=True)
        self._graphs: dict[str, _RegisteredGraph] = {}
        self.registered_graph_bytes = 0
        """The bytes of GraphDef of the partitions in ``_graphs`` (``max_registered_graph_bytes``)."""
        self._lock = threading.Lock()
        self._handles = itertools.count(1)
        self._recv_timeout = self.limits.recv_tensor_timeout_s
        self._running: dict[int, list[executor.StepContext]] = {}
        self.steps_run = 0
        self.before_step: Optional[Callable[[], None]] = None
        """Called before each partition runs: a PS waits there for its replica (rpc/replication_service.py)."""
        self._steps_metric = monitoring.STEPS.labels(task)
        self._step_duration_metric = monitoring.STEP_DURATION.labels(task)
        self._closed = threading.Event()
        threading.Thread(target=self._sweep_rendezvous, daemon=True, name="rendezvous-sweep").start()

    def _sweep_rendezvous(self) -> None:
        """Expires the rendezvous entries of steps that are gone, every quarter of the TTL
        (at most every 10 s), whether or not anything is sent (``LocalRendezvous.sweep``)."""
        interval = min(max(self.limits.rendezvous_ttl_s / 4, 0.05), 10.0)
        while not self._closed.wait(interval):
            with self._lock:
                running = set(self._running)
            expired = self.rendezvous.sweep(running)
            if expired:
                log.info("%s: expired %d rendezvous entries of steps that are gone (TENSORGRID_RENDEZVOUS_TTL_S=%g)",
                         self.task, expired, self.limits.rendezvous_ttl_s)

    def peer(self, task: str) -> worker_interface.WorkerInterface:
        return self._peer(task)

    def incarnation_quick(self) -> int:
        """The incarnation, as a peer client answers it (the master calls both alike)."""
        return self.incarnation

    # ------------------------------------------------------------------ status
    def devices(self) -> list[tuple[str, str]]:
        from tensorgrid.kernels import backend

        result = [(f"{self.task}/device:CPU:0", "CPU")]
        if backend.gpu_available():
            from tensorgrid.kernels import cupy_backend

            result += [(f"{self.task}/device:GPU:{i}", "GPU") for i in range(cupy_backend.device_count())]
        return result

    # ------------------------------------------------------------------ graphs
    def register_graph(self, session_handle: str, graph_def: graph_def_lib.GraphDef,
                       feeds: Sequence[str], fetches: Sequence[str], targets: Sequence[str],
                       isolate_session_state: bool = False, graph_bytes: Optional[int] = None,
                       *, peer_addresses: Optional[Mapping[str, str]] = None, registering_task: str = "",
                       registering_incarnation: int = 0) -> str:
        """Prepares a partition once; returns the handle RunGraph uses. With
        ``isolate_session_state`` its resources are the session's own on this task (as
        TensorFlow's per-session resource manager): no other session sees them, and they go
        when the session's last partition is deregistered. ``graph_bytes`` is the size of
        the partition's GraphDef as serialized (a RegisterGraph request's; for a caller in
        this process, ``graph_codec.serialized_size``), counted against
        ``max_registered_graph_bytes`` until the partition is forgotten. ``peer_addresses``
        (the registering master's addresses of the step's tasks) go to ``learn_peers``, with the
        registering master's task and the incarnation of its worker."""
        if registering_task and registering_incarnation and registering_task != self.task:
            self.abort_steps_of_replaced(registering_task, registering_incarnation)
        if peer_addresses and self._learn_peers is not None:
            self._learn_peers(peer_addresses, registering_task, registering_incarnation)
        if graph_bytes is None:
            graph_bytes = graph_codec.serialized_size(graph_def)
        for node in graph_def.nodes:
            reason = python_callables.not_runnable_here(node.op, node.name, node.attrs, self.task)
            if reason is not None:
                raise errors.InvalidArgumentError(None, None, f"RegisterGraph: {reason}")
        with self._lock:
            self._make_room_for_a_graph(graph_bytes)  # before the graph is imported, which takes memory
        try:
            graph = graph_rebuild.rebuild_graph(graph_def)
            feed_tensors = [graph.get_tensor_by_name(n) for n in feeds]
            fetch_tensors = [graph.get_tensor_by_name(n) for n in fetches]
            target_ops = [graph.get_operation_by_name(n) for n in targets]
            plan = executor.Plan(graph, feed_tensors, fetch_tensors, target_ops, {}, self._placement)
        except errors.OpError:
            raise
        except (KeyError, ValueError, TypeError) as e:
            raise errors.InvalidArgumentError(None, None, f"Invalid graph partition: {e}") from None
        handle = f"{session_handle}/g{next(self._handles)}"
        with self._lock:
            self._make_room_for_a_graph(graph_bytes)
            resources = self.resources
            if isolate_session_state:
                resources = self._session_resources.setdefault(session_handle, resources_lib.ResourceManager())
            self._graphs[handle] = _RegisteredGraph(handle, session_handle, graph, async_program.step_runner(plan),
                                                    list(feeds), list(fetches),
                                                    resources, graph_bytes)
            self.registered_graph_bytes += graph_bytes
        return handle

    def _make_room_for_a_graph(self, graph_bytes: int) -> None:
        """Bounds the registered partitions (lock held): forgets those unused for
        ``session_idle_timeout_s`` (a master re-registers one it still needs, after an
        AbortedError), then refuses a new one of ``graph_bytes`` beyond
        ``max_registered_graphs`` or ``max_registered_graph_bytes``."""
        horizon = time.monotonic() - self.limits.session_idle_timeout_s
        for handle in [h for h, g in self._graphs.items() if g.last_used < horizon]:
            self._forget_graph(handle)
        if len(self._graphs) >= self.limits.max_registered_graphs:
            raise errors.ResourceExhaustedError(
                None, None, f"{self.task} has {len(self._graphs)} registered graph partitions, its limit "
                f"(TENSORGRID_MAX_REGISTERED_GRAPHS={self.limits.max_registered_graphs}); close sessions or raise it")
        limit = self.limits.max_registered_graph_bytes
        if self.registered_graph_bytes + graph_bytes > limit:
            raise errors.ResourceExhaustedError(
                None, None, f"RegisterGraph: {self.task} holds {self.registered_graph_bytes} bytes of GraphDef in "
                f"{len(self._graphs)} registered graph partitions; this one's {graph_bytes} bytes would pass its "
                f"limit of {limit} bytes ({limits_lib.env_var('max_registered_graph_bytes')}={limit}); deregister "
                f"graphs or close sessions (unused partitions are forgotten after "
                f"{self.limits.session_idle_timeout_s:g} s), or raise the limit")

    def abort_steps_of_replaced(self, task: str, incarnation: int) -> int:
        """Aborts the steps waiting here for a tensor from another incarnation of ``task``
        than ``incarnation``, which registers now: the process they wait on was replaced
        (restarted, or started again elsewhere while it is frozen, a lost node's pod), so
        its tensors never come; each such step would hold its thread and its tensors for
        good. Returns how many steps it aborted."""
        current = f"{incarnation:016x}"

        def sent_by_a_replaced_process(key: str) -> bool:
            fields = key.split(";")  # partition.rendezvous_key: src device;src incarnation;dst;name;frame
            return len(fields) == 5 and fields[0].startswith(task + "/") and fields[1] != current

        def failure_of(key: str) -> BaseException:
            return errors.AbortedError(None, None, f"Step aborted on {self.task}: {task} now runs incarnation "
                                       f"{current}, so tensor {key.split(';')[3]} from the process it replaced "
                                       f"(incarnation {key.split(';')[1]}) will never come")

        aborted = self.rendezvous.abort_steps_waiting_for(sent_by_a_replaced_process, failure_of)
        if aborted:
            log.info("%s: aborted %d step(s) waiting for tensors from a replaced process of %s (now incarnation %s)",
                     self.task, aborted, task, current)
        return aborted

    def signature(self, handle: str) -> tuple[list[str], list[str]]:
        """The feed and fetch names a registered partition takes and returns, in order."""
        registered = self._registered(handle)
        return registered.feed_names, registered.fetch_names

    def _registered(self, handle: str) -> _RegisteredGraph:
        with self._lock:
            registered = self._graphs.get(handle)
            if registered is not None:
                registered.last_used = time.monotonic()
        if registered is None:
            # ABORTED, as TensorFlow's GraphMgr answers: the master re-registers on this code.
            raise errors.AbortedError(
                None, None,
                f"Graph handle {handle!r} is not registered on {self.task} (incarnation "
                f"{self.incarnation:016x}): the task may have restarted",
            )
        return registered

    def deregister_graph(self, handle: str) -> None:
        with self._lock:
            self._forget_graph(handle)

    def deregister_session(self, session_handle: str) -> None:
        with self._lock:
            for handle in [h for h, g in self._graphs.items() if g.session_handle == session_handle]:
                self._forget_graph(handle)

    def _forget_graph(self, handle: str) -> None:
        """Drops a partition (lock held); an isolated session's resources go with its last one."""
        registered = self._graphs.pop(handle, None)
        if registered is None:
            return
        self.registered_graph_bytes -= registered.graph_bytes
        if registered.resources is self.resources:
            return
        session = registered.session_handle
        if not any(g.session_handle == session for g in self._graphs.values()):
            resources = self._session_resources.pop(session, None)
            if resources is not None:
                resources.cleanup()

    def run_graph(self, handle: str, step_id: int, feed_values: Sequence[Any]) -> list[Any]:
        """Runs a registered partition for one step; returns its fetches in registration order."""
        registered = self._registered(handle)
        if len(feed_values) != len(registered.feed_names):
            raise errors.InvalidArgumentError(
                None, None, f"RunGraph for {handle} expects {len(registered.feed_names)} feeds, got {len(feed_values)}"
            )
        if self.before_step is not None:
            self.before_step()
        step = executor.StepContext(step_id=step_id, resources=registered.resources, rendezvous=self.rendezvous)
        started = time.perf_counter()
        with self._lock:
            self._running.setdefault(step_id, []).append(step)
        try:
            result = registered.program.run(step, feed_values)
            self.rendezvous.wait_pushed(step_id)
        except BaseException as exc:
            self.rendezvous.forget(step_id)
            self.rendezvous.abort(step_id, _as_abort(exc, self.task))
            raise
        finally:
            with self._lock:
                steps = self._running.get(step_id, [])
                if step in steps:
                    steps.remove(step)
                if not steps:
                    self._running.pop(step_id, None)
        self.steps_run += 1
        self._steps_metric.inc()
        self._step_duration_metric.observe(time.perf_counter() - started)
        return result

    # ------------------------------------------------------------------ tensors for peers
    def recv_tensor(self, step_id: int, key: str, timeout: Optional[float] = None,
                    wake: Optional[threading.Event] = None) -> Any:
        """The value a Send of this task produced for ``key`` in ``step_id``: waits for it
        up to ``timeout``, at most ``ServerLimits.recv_tensor_timeout_s``, or until
        ``wake`` is set (CancelledError: the caller's call ended)."""
        fields = key.split(";")
        if len(fields) != 5:
            raise errors.InvalidArgumentError(None, None, f"Malformed rendezvous key {key!r}: expected 5 ';'-separated fields")
        try:
            incarnation = int(fields[1], 16)
        except ValueError:
            raise errors.InvalidArgumentError(None, None, f"Malformed incarnation {fields[1]!r} in rendezvous key {key!r}") from None
        if incarnation != self.incarnation:
            raise errors.AbortedError(
                None, None,
                f"{self.task} restarted: tensor {fields[3]} was requested from incarnation {incarnation:016x}, "
                f"the task now runs incarnation {self.incarnation:016x}",
            )
        return self.rendezvous.take(step_id, key, min(timeout or self._recv_timeout, self._recv_timeout), wake)

    def push_tensors(self, step_id: int, from_task: str, items: Sequence[tuple[str, Any]],
                     origin: Optional[str] = None) -> None:
        """Tensors a peer's Sends produced for this task (the receiving end of PushTensors).
        They count against ``origin``, who the server saw send them
        (``LocalRendezvous.deliver``); without one, the caller is a task in this process."""
        origin = origin or f"{from_task} in this process"
        for key, value in items:
            self.rendezvous.deliver(step_id, key, value, origin)

    def abort_step(self, step_id: int, reason: str) -> None:
        """Fails the step here: its waiters, and its partitions still running (e.g. in a queue)."""
        failure = errors.AbortedError(None, None, reason)
        self.rendezvous.abort(step_id, failure)
        with self._lock:
            running = list(self._running.get(step_id, []))
        for step in running:
            step.cancel(failure)

    def cleanup_step(self, step_id: int) -> None:
        self.rendezvous.cleanup_step(step_id)

    def cleanup_all(self, containers: Optional[list[str]] = None) -> None:
        """Clears resource containers (all when None or empty), as ``Session.reset`` asks,
        in the shared resources and in every isolated session's. Clearing all of them also
        forgets every registered partition (as TensorFlow's Reset closes every session): a
        master that still runs one gets ABORTED and registers it again."""
        with self._lock:
            if not containers:
                for handle in list(self._graphs):
                    self._forget_graph(handle)
            isolated = list(self._session_resources.values())
        for resources in [self.resources, *isolated]:
            resources.cleanup(containers)

    def close(self) -> None:
        """Fails every running step and closes queues and accumulators, so no thread stays blocked."""
        failure = errors.CancelledError(None, None, f"{self.task} is shutting down")
        self._closed.set()
        with self._lock:
            running = [step for steps in self._running.values() for step in steps]
        for step in running:
            step.cancel(failure)
        self.rendezvous.abort_all(failure)
        with self._lock:
            isolated = list(self._session_resources.values())
            self._session_resources.clear()
        for resources in [self.resources, *isolated]:
            resources.cleanup()
        self.rendezvous.close()


def _as_abort(exc: BaseException, task: str) -> BaseException:
    if isinstance(exc, errors.OpError):
        return type(exc)(None, None, f"Step aborted on {task}: {exc.message}")
    return errors.AbortedError(None, None, f"Step aborted on {task}: {exc}")
