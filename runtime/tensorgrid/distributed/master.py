"""The Master service's logic: sessions, step planning, and running partitions.

A master session holds the client's graph. For each new step signature (feeds,
fetches, targets, graph version) it places and partitions the graph by task and
registers one partition per task; each step then runs every partition at once
under one step id. Only the tasks a step needs are contacted, so a session never
waits for unrelated peers. If a task restarted (its incarnation changed or its
graphs are gone), the step fails with AbortedError, the plans using it are dropped,
and the next step re-registers: MonitoredTrainingSession recovers from that.

Sessions are bounded (``ServerLimits``): one with no call for
``session_idle_timeout_s`` and no step running is closed (when it is next used, or
when a new session is created), and at most ``max_sessions`` are open. Fed values
are checked against the fed tensor's dtype and shape before a step runs.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import itertools
import logging
import random
import threading
import time
from typing import Any, Callable, Optional, Sequence, TypeVar

import numpy as np

from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.distributed import graph_codec
from tensorgrid.distributed import limits as limits_lib
from tensorgrid.distributed import partition as partition_lib
from tensorgrid.distributed import worker_interface
from tensorgrid.framework import device as device_lib
from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import graph_def as graph_def_lib
from tensorgrid.framework import graph_rebuild

log = logging.getLogger("tensorgrid.master")

T = TypeVar("T")


@dataclasses.dataclass
class _PartitionRun:
    task: str
    handle: str
    feed_names: list[str]
    """Client tensor names, in the order RunGraph takes their values."""
    fetch_names: list[str]
    incarnation: int


@dataclasses.dataclass
class _StepPlan:
    runs: list[_PartitionRun]
    fed_fetches: list[str]
    feeds: dict[str, graph_lib.Tensor] = dataclasses.field(default_factory=dict)
    """The fed tensors by name, whose dtype and shape each fed value must match."""


class _StepFailure:
    """The first failure of a step's partitions (later ones are its consequences)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.failure: Optional[BaseException] = None
        self.run: Optional[_PartitionRun] = None
        self.aborted = False

    def record(self, failure: BaseException, run: Optional[_PartitionRun]) -> bool:
        """Keeps ``failure`` if it is the first; returns whether it was."""
        with self._lock:
            if self.failure is not None:
                return False
            self.failure, self.run = failure, run
            return True


@dataclasses.dataclass
class SessionOptions:
    device_filters: list[str] = dataclasses.field(default_factory=list)
    """Tasks the session may use; ops placed elsewhere are an error."""
    operation_timeout_in_ms: int = 0
    """Deadline of one step (0: none)."""
    isolate_session_state: bool = False
    """The session's resources are its own on every task (``ConfigProto.isolate_session_state``)."""


class _MasterSession:
    def __init__(self, handle: str, graph: graph_lib.Graph, options: SessionOptions, graph_nodes: int,
                 graph_bytes: int) -> None:
        self.handle = handle
        self.graph = graph
        self.options = options
        self.graph_nodes = graph_nodes
        self.graph_bytes = graph_bytes
        """The size of the GraphDefs received so far, as ``ServerLimits.max_graph_nodes``
        and ``max_graph_bytes`` count it."""
        self.plans: dict[Any, _StepPlan] = {}
        self.lock = threading.Lock()
        self.registered: list[tuple[str, str]] = []
        self.running: dict[int, _StepPlan] = {}
        self.last_used = time.monotonic()
        self.closed = False
        """Set by CloseSession: a step it interrupts fails with CancelledError, as in TensorFlow."""


class Master:
    """Sessions of the clients that target this task."""

    def __init__(self, task: device_lib.DeviceSpec, cluster: cluster_lib.ClusterSpec,
                 worker_for: Callable[[str], worker_interface.WorkerInterface], connect_timeout: float = 600.0,
                 limits: Optional[limits_lib.ServerLimits] = None) -> None:
        self.task = task
        self.limits = limits or limits_lib.ServerLimits()
        self.cluster = cluster
        self._worker_for = worker_for
        self._sessions: dict[str, _MasterSession] = {}
        self._lock = threading.Lock()
        self._handles = itertools.count(1)
        self._incarnations: dict[str, int] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="master")
        self._connect_timeout = connect_timeout
        self._own_task = cluster_lib.task_name(task.job or "", task.task or 0)
        self._prefix = f"{random.SystemRandom().getrandbits(32):08x}"

    # ------------------------------------------------------------------ sessions
    def create_session(self, graph_def: graph_def_lib.GraphDef, options: Optional[SessionOptions] = None,
                       graph_bytes: Optional[int] = None) -> str:
        """A new session of ``graph_def``; returns its handle. ``graph_bytes`` is its size
        as serialized (a CreateSession request's; for a client in this process, measured
        here by ``graph_codec.serialized_size``, so both count alike), counted against
        ``ServerLimits.max_graph_bytes``."""
        if graph_bytes is None:
            graph_bytes = graph_codec.serialized_size(graph_def)
        self.limits.check_graph_size("CreateSession", len(graph_def.nodes), graph_bytes)
        self._close_idle_sessions()
        with self._lock:
            if len(self._sessions) >= self.limits.max_sessions:
                raise errors.ResourceExhaustedError(
                    None, None, f"This master has {len(self._sessions)} open sessions, its limit "
                    f"(TENSORGRID_MAX_SESSIONS={self.limits.max_sessions}); close sessions or raise the limit")
        graph = _import(graph_def, graph_lib.Graph())
        handle = f"{self._prefix}-s{next(self._handles)}"
        with self._lock:
            self._sessions[handle] = _MasterSession(handle, graph, options or SessionOptions(), len(graph_def.nodes),
                                                    graph_bytes)
        return handle

    def _close_idle_sessions(self) -> None:
        """Closes the sessions unused for ``session_idle_timeout_s`` with no step running."""
        horizon = time.monotonic() - self.limits.session_idle_timeout_s
        with self._lock:
            idle = [h for h, s in self._sessions.items() if s.last_used < horizon and not s.running]
        for handle in idle:
            log.info("closing session %s: unused for %g s (TENSORGRID_SESSION_IDLE_TIMEOUT_S)", handle,
                     self.limits.session_idle_timeout_s)
            self.close_session(handle)

    def extend_session(self, handle: str, graph_def: graph_def_lib.GraphDef, graph_bytes: Optional[int] = None) -> int:
        """Adds the client's new nodes to the session graph; returns the new version.
        The session's graph, extensions included, is bounded (``check_graph_size``;
        ``graph_bytes`` as for ``create_session``)."""
        if graph_bytes is None:
            graph_bytes = graph_codec.serialized_size(graph_def)
        session = self._session(handle)
        with session.lock:
            nodes, total_bytes = session.graph_nodes + len(graph_def.nodes), session.graph_bytes + graph_bytes
            self.limits.check_graph_size(f"ExtendSession of session {handle}", nodes, total_bytes)
            _import(graph_def, session.graph)
            session.graph_nodes, session.graph_bytes = nodes, total_bytes
            return session.graph.version

    def close_session(self, handle: str) -> None:
        with self._lock:
            session = self._sessions.pop(handle, None)
        if session is None:
            return
        with session.lock:
            session.closed = True
            running = list(session.running.items())
        for step_id, plan in running:
            self._abort(plan, step_id, errors.CancelledError(None, None, f"session {handle} was closed"))
        for task, graph_handle in session.registered:
            self._deregister(task, graph_handle)

    def _session(self, handle: str) -> _MasterSession:
        with self._lock:
            session = self._sessions.get(handle)
        now = time.monotonic()
        if session is not None and now - session.last_used > self.limits.session_idle_timeout_s and not session.running:
            self.close_session(handle)
            session = None
        if session is None:
            raise errors.NotFoundError(
                None, None, f"Session handle {handle!r} is not known to this master (it was closed, idle for "
                f"{self.limits.session_idle_timeout_s:g} s (TENSORGRID_SESSION_IDLE_TIMEOUT_S), or the task restarted)"
            )
        session.last_used = now
        return session

    # ------------------------------------------------------------------ steps
    def run_step(self, handle: str, feeds: dict[str, Any], fetches: Sequence[str], targets: Sequence[str],
                 timeout: Optional[float] = None) -> list[Any]:
        """Runs one step: feed values by tensor name, fetch values in ``fetches`` order."""
        session = self._session(handle)
        feed_names = sorted(feeds)
        key = (tuple(feed_names), tuple(fetches), tuple(targets), session.graph.version)
        plan = session.plans.get(key)
        if plan is None:
            with session.lock:
                plan = session.plans.get(key) or self._plan(session, feed_names, list(fetches), list(targets))
                session.plans[key] = plan
        for name, tensor in plan.feeds.items():
            _check_feed(tensor, feeds[name])
        step_id = random.getrandbits(62) | 1
        with session.lock:
            session.running[step_id] = plan
        try:
            return self._run_planned(session, plan, step_id, feeds, fetches, timeout)
        finally:
            with session.lock:
                session.running.pop(step_id, None)

    def _run_planned(self, session: _MasterSession, plan: _StepPlan, step_id: int, feeds: dict[str, Any],
                     fetches: Sequence[str], timeout: Optional[float]) -> list[Any]:
        deadline = timeout or (session.options.operation_timeout_in_ms / 1000.0) or None
        # One partition runs in the calling thread (one thread hand-off less per step):
        # this task's own if it has one, else the first; unless a deadline must bound the
        # step, then every partition runs in the pool.
        inline = None
        if not deadline and plan.runs:
            inline = next((run for run in plan.runs if run.task == self._own_task), plan.runs[0])
        step = _StepFailure()
        values: dict[str, Any] = {name: feeds[name] for name in plan.fed_fetches}
        futures = {}
        for run in plan.runs:
            if run is inline:
                continue
            future = self._pool.submit(self._run_partition, run, step_id, [feeds[n] for n in run.feed_names])
            futures[future] = run
            if inline is not None:
                # Nobody waits on the pool while the inline partition runs: the first
                # failure aborts the step at once, so that partition cannot wait forever.
                future.add_done_callback(functools.partial(self._on_done, run=run, plan=plan, step_id=step_id,
                                                           step=step))
        if inline is not None:
            try:
                for name, value in zip(inline.fetch_names,
                                       self._run_partition(inline, step_id, [feeds[n] for n in inline.feed_names])):
                    values[name] = value
            except BaseException as exc:  # noqa: BLE001 - the first failure aborts the step
                step.record(exc, inline)
        if step.failure is None:
            try:
                for future in concurrent.futures.as_completed(futures, timeout=deadline):
                    run = futures[future]
                    try:
                        for name, value in zip(run.fetch_names, future.result()):
                            values[name] = value
                    except BaseException as exc:  # noqa: BLE001 - the first failure aborts the step
                        step.record(exc, run)
                        break
            except concurrent.futures.TimeoutError:
                step.record(errors.DeadlineExceededError(None, None, f"Step timed out after {deadline} s"), None)
        if step.failure is not None:
            if not step.aborted:
                self._abort(plan, step_id, step.failure)
            if session.closed:
                raise errors.CancelledError(
                    None, None, f"Session {session.handle} was closed while step {step_id} ran: the step was cancelled")
            raise self._classify(session, plan, step_id, step.run, step.failure)
        return [values[name] for name in fetches]

    def _on_done(self, future: "concurrent.futures.Future[list[Any]]", run: _PartitionRun, plan: _StepPlan,
                 step_id: int, step: "_StepFailure") -> None:
        failure = future.exception()
        if failure is not None and step.record(failure, run):
            self._abort(plan, step_id, failure)
            step.aborted = True

    def _run_partition(self, run: _PartitionRun, step_id: int, feed_values: list[Any]) -> list[Any]:
        return list(self._worker_for(run.task).run_graph(run.handle, step_id, feed_values))

    def _abort(self, plan: _StepPlan, step_id: int, failure: BaseException) -> None:
        reason = f"Step {step_id} failed: {getattr(failure, 'message', failure)}"
        for run in plan.runs:
            try:
                self._worker_for(run.task).abort_step(step_id, reason)
            except Exception as e:  # noqa: BLE001 - the task may be the one that died
                log.debug("abort of step %d on %s failed: %s", step_id, run.task, e)

    def _classify(self, session: _MasterSession, plan: _StepPlan, step_id: int, failed: Optional[_PartitionRun],
                  failure: BaseException) -> BaseException:
        """Turns a failure caused by a restarted or unreachable task into AbortedError/UnavailableError;
        after any AbortedError the session's partitions are registered again at the next step."""
        restarted = []
        for run in plan.runs:
            try:
                incarnation = self._worker_for(run.task).incarnation_quick()
            except Exception:  # noqa: BLE001 - unreachable now
                incarnation = None
            if incarnation != run.incarnation:
                restarted.append(run.task)
                with self._lock:
                    self._incarnations.pop(run.task, None)
        if restarted:
            with session.lock:
                self._drop_plans(session, failed_step=step_id)
            down = ", ".join(restarted)
            if isinstance(failure, errors.UnavailableError):
                return errors.UnavailableError(None, None, f"Task(s) {down} are unavailable: {failure}")
            return errors.AbortedError(
                None, None, f"Task(s) {down} restarted or became unreachable during the step: {failure}"
            )
        if isinstance(failure, errors.AbortedError):
            # A task that no longer knows a partition (its graph handle) answers ABORTED:
            # the next step registers the partitions again.
            with session.lock:
                self._drop_plans(session, failed_step=step_id)
        return failure

    def _drop_plans(self, session: _MasterSession, failed_step: Optional[int] = None) -> None:
        """Forgets the session's plans, so its next step registers its partitions again
        (lock held). The partitions of plans no step is running (``failed_step`` ends) are
        deregistered in the background, best effort (a restarted task forgot them
        already), so repeated aborts do not pile up registered graphs on the tasks
        (``max_registered_graph_bytes``); the others are deregistered when the session
        closes."""
        running = {id(plan) for step_id, plan in session.running.items() if step_id != failed_step}
        stale = {(run.task, run.handle) for plan in session.plans.values() if id(plan) not in running
                 for run in plan.runs}
        session.plans.clear()
        session.registered = [entry for entry in session.registered if entry not in stale]
        for task, handle in stale:
            try:
                self._pool.submit(self._deregister, task, handle)
            except RuntimeError:  # the master is closing: its tasks forget them when idle
                log.debug("master closed: %s stays registered on %s", handle, task)

    def _deregister(self, task: str, handle: str) -> None:
        try:
            self._worker_for(task).deregister_graph(handle)
        except Exception as e:  # noqa: BLE001 - best effort: the task may be gone
            log.debug("could not deregister %s on %s: %s", handle, task, e)

    def _plan(self, session: _MasterSession, feed_names: list[str], fetches: list[str],
              targets: list[str]) -> _StepPlan:
        graph = session.graph
        feed_tensors = [_tensor(graph, n, "feed") for n in feed_names]
        fetch_tensors = [_tensor(graph, n, "fetch") for n in fetches]
        target_ops = [_operation(graph, n) for n in targets]
        timeout_s = session.options.operation_timeout_in_ms / 1000.0 or None

        def incarnation_of(task: str) -> int:
            return self.incarnation(task, timeout_s)

        parts = partition_lib.partition(graph, feed_tensors, fetch_tensors, target_ops, self.task,
                                        self.cluster, incarnation_of)
        _check_device_filters(parts, session.options.device_filters)
        for task in parts:
            incarnation_of(task)  # a task not up yet (started late) is waited for, not failed at once
        runs = []
        # The step's tasks as this master's cluster has them: a task whose cluster spec lacks one
        # (this worker joined a running asynchronous job with a larger spec) learns its address.
        peer_addresses = {task: self.cluster.task_address(spec.job or "", spec.task or 0)
                          for task, spec in ((t, device_lib.DeviceSpec.from_string(t)) for t in parts)}
        # And who registers: a task that dials this one at another address follows it there
        # (this task started again elsewhere, its old address perhaps held by a frozen process).
        registrant = self._own_task if self._own_task in parts else ""
        for task, part in parts.items():
            ordered_feeds = list(part.feeds)
            handle = self._worker_for(task).register_graph(
                session.handle, part.graph_def, [part.feeds[n] for n in ordered_feeds], part.fetches, part.targets,
                isolate_session_state=session.options.isolate_session_state, peer_addresses=peer_addresses,
                registering_task=registrant, registering_incarnation=self.incarnation(registrant) if registrant else 0,
            )
            session.registered.append((task, handle))
            runs.append(_PartitionRun(task, handle, ordered_feeds, part.fetches, self.incarnation(task)))
        fed = set(feed_names)
        return _StepPlan(runs, [n for n in fetches if n in fed], dict(zip(feed_names, feed_tensors)))

    # ------------------------------------------------------------------ tasks
    def incarnation(self, task: str, timeout_s: Optional[float] = None) -> int:
        """The incarnation of ``task``, waiting (with backoff and a log line) until it answers:
        UnavailableError after the master's connect timeout, or DeadlineExceededError after
        ``timeout_s`` (a session's ``operation_timeout_in_ms``) when that is sooner."""
        with self._lock:
            known = self._incarnations.get(task)
        if known is not None:
            return known
        probe = self._worker_for(task).incarnation_quick
        if timeout_s is not None and timeout_s < self._connect_timeout:
            value = int(wait_for_task(task, probe, timeout_s, give_up=errors.DeadlineExceededError))
        else:
            value = int(wait_for_task(task, probe, self._connect_timeout))
        with self._lock:
            self._incarnations[task] = value
        return value

    def list_devices(self) -> list[tuple[str, str, int]]:
        devices = []
        for job, index, _ in self.cluster.all_tasks():
            task = cluster_lib.task_name(job, index)
            worker = self._worker_for(task)
            incarnation = self.incarnation(task)
            devices += [(name, kind, incarnation) for name, kind in worker.devices()]
        return devices

    def reset(self, containers: Optional[list[str]]) -> None:
        """Clears containers on every task of the cluster and forgets every session."""
        for job, index, _ in self.cluster.all_tasks():
            self._worker_for(cluster_lib.task_name(job, index)).cleanup_all(containers)
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            with session.lock:
                self._drop_plans(session)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


# Waits between probes of a task that does not answer: doubling from the first, capped. A
# probe is one GetStatus, which fails at once while the task is down (and gRPC's own
# reconnect backoff, capped at 2 s by ``liveness``, bounds the connection attempts), so
# the cap is not there to spare the task: it is how late a waiter may learn that the task
# is back. A worker whose step failed while a PS restarted waits here; one whose step was
# in flight learns of the restart from that step at once. At 5 s the first kind came
# back seconds after the second, which could end the training meanwhile.
WAIT_FOR_TASK_FIRST_S = 0.1
WAIT_FOR_TASK_MAX_S = 1.0


def wait_for_task(task: str, probe: Callable[[], T], timeout: float,
                  give_up: type[errors.OpError] = errors.UnavailableError) -> T:
    """Calls ``probe`` until it answers, backing off from ``WAIT_FOR_TASK_FIRST_S`` to
    ``WAIT_FOR_TASK_MAX_S``; logs while waiting. After ``timeout`` seconds, raises ``give_up``
    (UnavailableError, or DeadlineExceededError when the bound is a session's operation timeout)."""
    start = time.monotonic()
    delay = WAIT_FOR_TASK_FIRST_S
    attempts = 0
    while True:
        try:
            return probe()
        except errors.UnavailableError as e:
            attempts += 1
            waited = time.monotonic() - start
            if waited >= timeout:
                raise give_up(None, None, f"Gave up waiting for {task} after {waited:.1f} s: {e}") from None
            if attempts == 1 or attempts % 10 == 0:
                log.warning("waiting for %s (not reachable yet, retrying with backoff): %s", task, e)
            time.sleep(min(delay, timeout - waited))
            delay = min(delay * 2, WAIT_FOR_TASK_MAX_S)


def _check_device_filters(parts: dict[str, partition_lib.Partition], filters: list[str]) -> None:
    if not filters:
        return
    specs = [device_lib.DeviceSpec.from_string(f) for f in filters]
    for task in parts:
        spec = device_lib.DeviceSpec.from_string(task)
        if not any(f.is_compatible_with(spec) for f in specs):
            raise errors.InvalidArgumentError(
                None, None, f"The step needs {task}, which the session's device_filters {filters} exclude"
            )


def _import(graph_def: graph_def_lib.GraphDef, graph: graph_lib.Graph) -> graph_lib.Graph:
    try:
        return graph_rebuild.rebuild_graph(graph_def, graph)
    except (KeyError, ValueError, TypeError) as e:
        raise errors.InvalidArgumentError(None, None, f"Invalid graph: {e.args[0] if e.args else e}") from None


def _check_feed(tensor: graph_lib.Tensor, value: Any) -> None:
    """InvalidArgumentError unless a fed array has the fed tensor's dtype and a shape
    compatible with its static shape. Values fed in-process that are not numpy arrays of
    a tensorgrid dtype (Python numbers, device arrays) are left to the kernels, as in a
    local session."""
    if not isinstance(value, np.ndarray):
        return
    wanted = tensor.dtype.base_dtype
    try:
        got = dtypes.as_dtype(value.dtype)
    except TypeError:
        return  # no tensorgrid dtype (numpy text, in-process only: the wire carries none)
    if got != wanted:
        raise errors.InvalidArgumentError(
            None, None, f"Cannot feed value of dtype {got.name} to tensor {tensor.name!r} of dtype {wanted.name}")
    if not tensor.shape.is_compatible_with(value.shape):
        raise errors.InvalidArgumentError(
            None, None, f"Cannot feed value of shape {value.shape} to tensor {tensor.name!r}, which has shape "
            f"{tensor.shape}")


def _tensor(graph: graph_lib.Graph, name: str, what: str) -> graph_lib.Tensor:
    try:
        return graph.get_tensor_by_name(name)
    except (KeyError, ValueError) as e:
        raise errors.NotFoundError(None, None, f"Cannot {what} {name!r}: {e.args[0]}") from None


def _operation(graph: graph_lib.Graph, name: str) -> graph_lib.Operation:
    try:
        return graph.get_operation_by_name(name)
    except KeyError as e:
        raise errors.NotFoundError(None, None, f"Cannot run target {name!r}: {e.args[0]}") from None
