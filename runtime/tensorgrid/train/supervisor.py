"""``tf.train.Supervisor``: TF1's training helper from before ``MonitoredTrainingSession``.

Many published TF1 trainers (TensorFlow's distributed how-to, Kubeflow's ``dist_mnist.py``,
sync-SGD tutorials) are written around it, so it is here as TensorFlow has it: a
``SessionManager`` (the chief initializes the model or restores it from the latest checkpoint
in ``logdir``; other workers wait until the model is ready), a ``Coordinator`` that its
threads and the training loop share, a ``Saver`` and a summary ``FileWriter``. The chief's
standard services are ``LooperThread``s: one saves a checkpoint every ``save_model_secs``, one
writes the summary op's value every ``save_summaries_secs``, one writes the global step rate;
each runs once at start, then on its timer.

Differences from TensorFlow (docs/differences.md): no ``graph.pbtxt``, meta graph or
``SessionLog`` events are written to ``logdir`` (the graph is, through the summary writer);
``managed_session`` closes its session before joining the threads, as ``MonitoredSession``
does here, so a thread blocked in a step (a SyncReplicas chief's queue runner) ends at once
instead of holding the exit for ``stop_grace_secs``; waiting workers poll readiness with a
short backoff instead of every ``recovery_wait_secs`` (session_manager.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import Any, Callable, Iterator, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.kernels import summary_kernels
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import lookup_ops
from tensorgrid.ops import summary_ops
from tensorgrid.ops import variables
from tensorgrid.summary import event_file
from tensorgrid.train import coordinator as coordinator_lib
from tensorgrid.train import session_manager as session_manager_lib
from tensorgrid.train import training_util

log = logging.getLogger("tensorgrid.train")

_VARIABLE_OP_TYPES = ("Variable", "VariableV2")


class Supervisor:
    """Initializes or restores the model, checkpoints it and writes its summaries (``tf.train.Supervisor``).

    ``USE_DEFAULT`` for an op, the saver, the global step or the summary writer means: the first
    of its graph collection, else one made here (and added to the collection); ``None`` means none.
    The graph is finalized by the constructor.
    """

    USE_DEFAULT = 0

    def __init__(self, graph: Optional[graph_lib.Graph] = None, ready_op: Any = USE_DEFAULT,
                 ready_for_local_init_op: Any = USE_DEFAULT, is_chief: bool = True, init_op: Any = USE_DEFAULT,
                 init_feed_dict: Any = None, local_init_op: Any = USE_DEFAULT, logdir: Optional[str] = None,
                 summary_op: Any = USE_DEFAULT, saver: Any = USE_DEFAULT, global_step: Any = USE_DEFAULT,
                 save_summaries_secs: float = 120, save_model_secs: float = 600, recovery_wait_secs: float = 30,
                 stop_grace_secs: float = 120, checkpoint_basename: str = "model.ckpt",
                 session_manager: Optional[session_manager_lib.SessionManager] = None,
                 summary_writer: Any = USE_DEFAULT, init_fn: Optional[Callable[[Any], None]] = None,
                 local_init_run_options: Any = None) -> None:
        graph = graph if graph is not None else graph_lib.get_default_graph()
        with graph.as_default():
            self._ready_op = _first_or_made(ready_op, graph, graph_lib.GraphKeys.READY_OP,
                                            variables.report_uninitialized_variables)
            # None by default, as in TensorFlow: local_init_op runs without a readiness check.
            self._ready_for_local_init_op = _first_or_made(ready_for_local_init_op, graph,
                                                           graph_lib.GraphKeys.READY_FOR_LOCAL_INIT_OP, None)
            self._init_op = _first_or_made(init_op, graph, graph_lib.GraphKeys.INIT_OP,
                                           variables.global_variables_initializer)
            self._init_feed_dict = init_feed_dict
            self._local_init_op = _first_or_made(
                local_init_op, graph, graph_lib.GraphKeys.LOCAL_INIT_OP,
                lambda: control_flow_ops.group(variables.local_variables_initializer(),
                                               lookup_ops.tables_initializer()))
            self._saver = _first_or_made(saver, graph, graph_lib.GraphKeys.SAVERS, _default_saver)
            self._summary_op = _first_or_made(summary_op, graph, graph_lib.GraphKeys.SUMMARY_OP,
                                              summary_ops.merge_all)
            self._global_step = _first_or_made(global_step, graph, graph_lib.GraphKeys.GLOBAL_STEP,
                                               lambda: _global_step_tensor(graph))
        self._graph = graph
        self._is_chief = is_chief
        self._coord = coordinator_lib.Coordinator()
        self._recovery_wait_secs = recovery_wait_secs
        self._stop_grace_secs = stop_grace_secs
        self._init_fn = init_fn
        # Checkpoints and events are the chief's: a non-chief keeps none of these.
        self._logdir: Optional[str] = None
        self._save_summaries_secs: Optional[float] = None
        self._save_model_secs: Optional[float] = None
        self._save_path: Optional[str] = None
        self._summary_writer: Any = None
        self._graph_added_to_summary = False
        if is_chief:
            self._logdir = os.fspath(logdir) if logdir is not None else None
            self._save_summaries_secs = save_summaries_secs
            self._save_model_secs = save_model_secs
            if self._logdir:
                self._save_path = os.path.join(self._logdir, checkpoint_basename)
            if summary_writer is Supervisor.USE_DEFAULT:
                if self._logdir:
                    self._summary_writer = event_file.FileWriter(self._logdir)
            else:
                self._summary_writer = summary_writer
        self._session_manager = session_manager if session_manager is not None else \
            session_manager_lib.SessionManager(
                local_init_op=self._local_init_op, ready_op=self._ready_op,
                ready_for_local_init_op=self._ready_for_local_init_op, graph=graph,
                recovery_wait_secs=recovery_wait_secs, local_init_run_options=local_init_run_options)
        self._verify_setup()
        graph.finalize()

    def _verify_setup(self) -> None:
        """A non-chief's variables must be placed (on the parameter servers): its own would never be
        initialized by the chief."""
        if self._is_chief:
            return
        for op in self._graph.get_operations():
            if op.type in _VARIABLE_OP_TYPES and not op.device:
                raise ValueError(f"When using replicas, all Variables must have their device set: {op.name!r} "
                                 "has none (build the model under tf.device(tf.train.replica_device_setter(...)))")

    # ------------------------------------------------------------------ what it holds
    @property
    def is_chief(self) -> bool:
        return self._is_chief

    @property
    def session_manager(self) -> session_manager_lib.SessionManager:
        return self._session_manager

    @property
    def coord(self) -> coordinator_lib.Coordinator:
        """The Coordinator of the service threads; the training loop may use it for its own threads."""
        return self._coord

    @property
    def init_op(self) -> Any:
        return self._init_op

    @property
    def init_feed_dict(self) -> Any:
        return self._init_feed_dict

    @property
    def ready_op(self) -> Any:
        return self._ready_op

    @property
    def ready_for_local_init_op(self) -> Any:
        return self._ready_for_local_init_op

    @property
    def summary_writer(self) -> Any:
        return self._summary_writer

    @property
    def summary_op(self) -> Any:
        return self._summary_op

    @property
    def save_summaries_secs(self) -> Optional[float]:
        return self._save_summaries_secs

    @property
    def global_step(self) -> Any:
        return self._global_step

    @property
    def saver(self) -> Any:
        return self._saver

    @property
    def save_model_secs(self) -> Optional[float]:
        return self._save_model_secs

    @property
    def save_path(self) -> Optional[str]:
        return self._save_path

    # ------------------------------------------------------------------ sessions
    def prepare_or_wait_for_session(self, master: str = "", config: Any = None, wait_for_checkpoint: bool = False,
                                    max_wait_secs: float = 7200, start_standard_services: bool = True) -> Any:
        """A session whose model is ready: the chief's initialized or restored from ``logdir`` (then its
        services started), a non-chief's once the chief has made it ready; then the queue runners."""
        self._coord.clear_stop()
        if self._summary_writer is not None:
            self._summary_writer.reopen()
        if self._is_chief:
            sess = self._session_manager.prepare_session(
                master, init_op=self._init_op, saver=self._saver, checkpoint_dir=self._logdir,
                wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs, config=config,
                init_feed_dict=self._init_feed_dict, init_fn=self._init_fn)
            self._write_graph()
            if start_standard_services:
                log.info("Starting standard services.")
                self.start_standard_services(sess)
        else:
            sess = self._session_manager.wait_for_session(master, config=config, max_wait_secs=max_wait_secs)
        if start_standard_services:
            log.info("Starting queue runners.")
            self.start_queue_runners(sess)
        return sess

    @contextlib.contextmanager
    def managed_session(self, master: str = "", config: Any = None, start_standard_services: bool = True,
                        close_summary_writer: bool = True) -> Iterator[Any]:
        """``prepare_or_wait_for_session`` as a ``with`` block. An exception of the block or of a
        service thread stops the supervisor and is raised again when the block exits, after the
        threads stopped and the session closed; ``OutOfRangeError`` (the input ran out) is a
        clean end and is not raised."""
        sess = None
        try:
            sess = self.prepare_or_wait_for_session(master=master, config=config,
                                                    start_standard_services=start_standard_services)
            yield sess
        except Exception as e:  # noqa: BLE001 - kept by the coordinator, raised by stop() unless a clean end
            self.request_stop(e)
        finally:
            self._coord.request_stop()
            # Closed before the threads are joined: the steps they are blocked in fail at once.
            if sess is not None:
                try:
                    sess.close()
                except Exception as e:  # noqa: BLE001 - the cluster may be gone
                    log.debug("closing the session failed: %s", e)
            self.stop(close_summary_writer=close_summary_writer)

    def _write_graph(self) -> None:
        if self._summary_writer is not None and not self._graph_added_to_summary:
            self._summary_writer.add_graph(self._graph)
            self._graph_added_to_summary = True

    # ------------------------------------------------------------------ services
    def start_standard_services(self, sess: Any) -> Optional[list[coordinator_lib.LooperThread]]:
        """Starts the chief's checkpoint, summary and step-rate threads (those its settings ask for);
        returns them, or None without a ``logdir``."""
        if not self._is_chief:
            raise RuntimeError("Only chief supervisor can start standard services. "
                               "Because only chief supervisors can write events.")
        if not self._logdir:
            log.warning("Standard services need a 'logdir' passed to the SessionManager")
            return None
        threads: list[coordinator_lib.LooperThread] = []
        if self._save_summaries_secs and self._summary_writer is not None:
            if self._summary_op is not None:
                threads.append(_SummaryThread(self, sess))
            if self._global_step is not None:
                threads.append(_StepCounterThread(self, sess))
        if self._saver is not None and self._save_model_secs:
            threads.append(_CheckpointThread(self, sess))
        for thread in threads:
            thread.start()
        return threads

    def start_queue_runners(self, sess: Any, queue_runners: Optional[Sequence[Any]] = None) -> list[Any]:
        """Starts the threads of ``queue_runners`` (default: the graph's QUEUE_RUNNERS collection)
        under this supervisor's coordinator."""
        if queue_runners is None:
            queue_runners = self._graph.get_collection(graph_lib.GraphKeys.QUEUE_RUNNERS)
        threads: list[Any] = []
        for runner in queue_runners:
            threads.extend(runner.create_threads(sess, coord=self._coord, daemon=True, start=True))
        return threads

    def loop(self, timer_interval_secs: Optional[float], target: Callable[..., Any],
             args: Optional[Sequence[Any]] = None, kwargs: Optional[dict[str, Any]] = None) -> coordinator_lib.LooperThread:
        """Starts a thread calling ``target`` every ``timer_interval_secs`` (back to back when None)
        until a stop is requested; ``stop()`` joins it."""
        return coordinator_lib.LooperThread.loop(self._coord, timer_interval_secs, target, args=args, kwargs=kwargs)

    def stop(self, threads: Optional[Sequence[Any]] = None, close_summary_writer: bool = True,
             ignore_live_threads: bool = False) -> None:
        """Stops and joins the service, queue-runner and ``loop`` threads (and ``threads``), raising the
        error that stopped one; closes the summary writer. The session stays open."""
        self._coord.request_stop()
        try:
            self._coord.join(threads, stop_grace_period_secs=self._stop_grace_secs,
                             ignore_live_threads=ignore_live_threads)
        finally:
            if close_summary_writer and self._summary_writer is not None:
                self._summary_writer.close()
                self._graph_added_to_summary = False

    def request_stop(self, ex: Any = None) -> None:
        """Asks every thread to stop; ``ex`` (an exception or ``sys.exc_info()``) is raised by ``stop``."""
        self._coord.request_stop(ex=ex)

    def should_stop(self) -> bool:
        return self._coord.should_stop()

    def stop_on_exception(self) -> Any:
        """A context manager that stops the supervisor when its block raises."""
        return self._coord.stop_on_exception()

    def wait_for_stop(self) -> None:
        self._coord.wait_for_stop()

    def summary_computed(self, sess: Any, summary: Any, global_step: Optional[int] = None) -> None:
        """Writes ``summary`` (a summary op's value) with ``global_step``, default the current one."""
        if self._summary_writer is None:
            raise RuntimeError("Writing a summary requires a summary writer.")
        if global_step is None and self._global_step is not None:
            global_step = training_util.global_step(sess, self._global_step)
        self._summary_writer.add_summary(summary, global_step)

    # TensorFlow's CamelCase aliases.
    PrepareSession = prepare_or_wait_for_session
    StartQueueRunners = start_queue_runners
    StartStandardServices = start_standard_services
    Stop = stop
    RequestStop = request_stop
    Loop = loop
    ShouldStop = should_stop
    StopOnException = stop_on_exception
    WaitForStop = wait_for_stop
    SummaryComputed = summary_computed


def _first_or_made(given: Any, graph: graph_lib.Graph, key: str, make: Optional[Callable[[], Any]]) -> Any:
    """``given``, unless it is ``USE_DEFAULT``: then the first item of collection ``key``, else
    ``make()`` added to the collection (None when there is nothing to make)."""
    if given is not Supervisor.USE_DEFAULT:
        return given
    items = graph.get_collection(key)
    if len(items) > 1:
        log.info("Found %d %s operations. Returning the first one.", len(items), key)
    if items:
        return items[0]
    made = make() if make is not None else None
    if made is not None:
        graph.add_to_collection(key, made)
    return made


def _default_saver() -> Any:
    """A Saver of every global variable, when there are any."""
    if not variables.global_variables():
        return None
    from tensorgrid.train import saver as saver_lib

    return saver_lib.Saver()


def _global_step_tensor(graph: graph_lib.Graph) -> Any:
    """The tensor named ``global_step:0`` when it is an integer, else None."""
    try:
        tensor = graph.get_tensor_by_name("global_step:0")
    except KeyError:
        return None
    if tensor.dtype.base_dtype in (dtypes.int32, dtypes.int64):
        return tensor
    log.warning("Found 'global_step' is not an int type: %s", tensor.dtype)
    return None


class _SummaryThread(coordinator_lib.LooperThread):
    """Writes the summary op's value, with the global step, every ``save_summaries_secs``."""

    def __init__(self, supervisor: Supervisor, sess: Any) -> None:
        super().__init__(supervisor.coord, supervisor.save_summaries_secs)
        self._supervisor = supervisor
        self._sess = sess

    def run_loop(self) -> None:
        supervisor = self._supervisor
        if supervisor.global_step is not None:
            summaries, step = self._sess.run([supervisor.summary_op, supervisor.global_step])
            step = int(step)
        else:
            summaries, step = self._sess.run(supervisor.summary_op), None
        if supervisor.summary_writer is not None:
            log.info("Recording summary at step %s.", step)
            supervisor.summary_writer.add_summary(summaries, step)


class _StepCounterThread(coordinator_lib.LooperThread):
    """Writes the global step rate (``global_step/sec``) every ``save_summaries_secs``."""

    def __init__(self, supervisor: Supervisor, sess: Any) -> None:
        super().__init__(supervisor.coord, supervisor.save_summaries_secs)
        self._supervisor = supervisor
        self._sess = sess
        self._tag = f"{supervisor.global_step.op.name}/sec"
        self._last_time = 0.0
        self._last_step = 0
        self._logged = 0

    def start_loop(self) -> None:
        self._last_time = time.time()
        self._last_step = training_util.global_step(self._sess, self._supervisor.global_step)

    def run_loop(self) -> None:
        step = training_util.global_step(self._sess, self._supervisor.global_step)
        now = time.time()
        elapsed = now - self._last_time
        rate = (step - self._last_step) / elapsed if elapsed > 0 else float("inf")
        self._last_step, self._last_time = step, now
        if self._supervisor.summary_writer is not None:
            self._supervisor.summary_writer.add_summary(summary_kernels.scalar_summary(self._tag, rate), step)
        if self._logged < 10:
            self._logged += 1
            log.info("%s: %g", self._tag, rate)


class _CheckpointThread(coordinator_lib.LooperThread):
    """Saves a checkpoint to ``logdir`` every ``save_model_secs``."""

    def __init__(self, supervisor: Supervisor, sess: Any) -> None:
        super().__init__(supervisor.coord, supervisor.save_model_secs)
        self._supervisor = supervisor
        self._sess = sess

    def run_loop(self) -> None:
        log.info("Saving checkpoint to path %s", self._supervisor.save_path)
        self._supervisor.saver.save(self._sess, self._supervisor.save_path, global_step=self._supervisor.global_step)
