"""``MonitoredTrainingSession``: a session that initializes, checkpoints, runs hooks and recovers.

The chief creates the session with ``SessionManager.prepare_session`` (restore or
init), everyone else waits for readiness. Every ``run`` goes through the hooks.
When a step fails because a parameter server restarted or became unreachable
(AbortedError, UnavailableError) the session is closed and created again: the
chief then finds the lost variables uninitialized and restores the latest
checkpoint, while a model that survived is used as it is.
"""

from __future__ import annotations

import inspect
import logging
import time
from typing import Any, Optional, Sequence

from tensorgrid.framework import errors
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import lookup_ops
from tensorgrid.ops import summary_ops
from tensorgrid.ops import variables
from tensorgrid.train import basic_session_run_hooks as hooks_lib
from tensorgrid.train import coordinator as coordinator_lib
from tensorgrid.train import queue_runner as queue_runner_lib
from tensorgrid.train import session_manager as session_manager_lib
from tensorgrid.train import session_run_hook
from tensorgrid.train import training_util

log = logging.getLogger("tensorgrid.train")

_PREEMPTION_ERRORS = (errors.AbortedError, errors.UnavailableError)
# Waits between attempts to create a session while a peer is unavailable: doubling, capped at 1 s as
# the master's wait for a task (``distributed/master.py``, ``WAIT_FOR_TASK_MAX_S``): at 5 s a session
# whose PS came back (restarted, loaded from its live replica) could idle seconds after the others trained on.
CREATE_RETRY_FIRST_SECONDS = 0.1
CREATE_RETRY_MAX_SECONDS = 1.0
_USE_DEFAULT = object()


class Scaffold:
    """The ops that prepare a model (init, readiness checks, local init) and its Saver."""

    def __init__(self, init_op: Any = None, init_feed_dict: Any = None, init_fn: Any = None, ready_op: Any = None,
                 ready_for_local_init_op: Any = None, local_init_op: Any = None, summary_op: Any = None,
                 saver: Any = None, copy_from_scaffold: Optional["Scaffold"] = None) -> None:
        if copy_from_scaffold is not None:
            # Ops and tensors have no truth value: test for None, never with ``or``.
            init_op = _first_given(init_op, copy_from_scaffold.init_op)
            init_feed_dict = _first_given(init_feed_dict, copy_from_scaffold.init_feed_dict)
            init_fn = _first_given(init_fn, copy_from_scaffold._user_init_fn)
            ready_op = _first_given(ready_op, copy_from_scaffold.ready_op)
            ready_for_local_init_op = _first_given(ready_for_local_init_op,
                                                   copy_from_scaffold.ready_for_local_init_op)
            local_init_op = _first_given(local_init_op, copy_from_scaffold.local_init_op)
            saver = _first_given(saver, copy_from_scaffold.saver)
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict
        self._user_init_fn: Any = init_fn
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._local_init_op = local_init_op
        self._summary_op = summary_op
        self._saver = saver

    def finalize(self) -> "Scaffold":
        """Fills in the missing ops, each from its graph collection or else made and added to it
        (so a second MonitoredSession on the same, now finalized, graph finds them), then
        finalizes the graph. RuntimeError when a collection holds more than one candidate."""
        graph = graph_lib.get_default_graph()
        keys = graph_lib.GraphKeys
        if self._init_op is None:
            self._init_op = _get_or_default("init_op", keys.INIT_OP, variables.global_variables_initializer)
        if self._ready_op is None:
            self._ready_op = _get_or_default("ready_op", keys.READY_OP, variables.report_uninitialized_variables)
        if self._ready_for_local_init_op is None:
            self._ready_for_local_init_op = _get_or_default(
                "ready_for_local_init_op", keys.READY_FOR_LOCAL_INIT_OP,
                lambda: variables.report_uninitialized_variables(variables.global_variables()))
        if self._local_init_op is None:
            self._local_init_op = _get_or_default(
                "local_init_op", keys.LOCAL_INIT_OP,
                lambda: control_flow_ops.group(variables.local_variables_initializer(),
                                              lookup_ops.tables_initializer(), name="local_init"))
        if self._summary_op is None:
            self._summary_op = _get_or_default("summary_op", keys.SUMMARY_OP, summary_ops.merge_all)
        if self._saver is None:
            self._saver = _saver_or_default()
        if self._saver is not None:
            # A Saver made with defer_build=True (the Estimator's) gets its ops now, before the
            # graph is finalized, as TensorFlow's Scaffold builds it; a built one is left as it is.
            self._saver.build()
        if not graph.finalized:
            graph.finalize()
        return self

    @property
    def init_op(self) -> Any:
        return self._init_op

    @property
    def init_feed_dict(self) -> Any:
        return self._init_feed_dict

    @property
    def init_fn(self) -> Any:
        if self._user_init_fn is None:
            return None
        return lambda sess: self._user_init_fn(self, sess)

    @property
    def ready_op(self) -> Any:
        return self._ready_op

    @property
    def ready_for_local_init_op(self) -> Any:
        return self._ready_for_local_init_op

    @property
    def local_init_op(self) -> Any:
        return self._local_init_op

    @property
    def summary_op(self) -> Any:
        return self._summary_op

    @property
    def saver(self) -> Any:
        return self._saver


def _first_given(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


def _get_or_default(what: str, key: str, make: Any) -> Any:
    """The one item of collection ``key``, or else ``make()``, added to the collection (TF's
    ``Scaffold.get_or_default``)."""
    graph = graph_lib.get_default_graph()
    items = graph.get_collection(key)
    if len(items) > 1:
        raise RuntimeError(f"More than one item in the collection {key!r} ({len(items)}). Please indicate which "
                           f"one to use by passing it to the Scaffold as {what}=...")
    if items:
        return items[0]
    made = make()
    if made is not None:
        graph.add_to_collection(key, made)
    return made


def _saver_or_default() -> Any:
    """The Saver of the SAVERS collection, or a new one (added to it) when the graph has variables."""
    graph = graph_lib.get_default_graph()
    savers = graph.get_collection(graph_lib.GraphKeys.SAVERS)
    if len(savers) > 1:
        raise RuntimeError(f"More than one item in the collection {graph_lib.GraphKeys.SAVERS!r} ({len(savers)}). "
                           "Please indicate which one to use by passing it to the Scaffold as saver=...")
    if savers:
        return savers[0]
    if not variables.global_variables():
        return None
    from tensorgrid.train import saver as saver_lib

    made = saver_lib.Saver()
    graph.add_to_collection(graph_lib.GraphKeys.SAVERS, made)
    return made


class SessionCreator:
    def create_session(self) -> Any:
        raise NotImplementedError


class ChiefSessionCreator(SessionCreator):
    """Initializes or restores the model (see session_manager for when it restores)."""

    def __init__(self, scaffold: Optional[Scaffold] = None, master: str = "", config: Any = None,
                 checkpoint_dir: Optional[str] = None, checkpoint_filename_with_path: Optional[str] = None) -> None:
        self._scaffold = scaffold or Scaffold()
        self._master = master
        self._config = config
        self._checkpoint_dir = checkpoint_dir
        self._checkpoint_filename_with_path = checkpoint_filename_with_path
        self.session_manager: Optional[session_manager_lib.SessionManager] = None

    def create_session(self) -> Any:
        self._scaffold.finalize()
        self.session_manager = session_manager_lib.SessionManager(
            local_init_op=self._scaffold.local_init_op, ready_op=self._scaffold.ready_op,
            ready_for_local_init_op=self._scaffold.ready_for_local_init_op, graph=graph_lib.get_default_graph())
        return self.session_manager.prepare_session(
            self._master, saver=self._scaffold.saver, checkpoint_dir=self._checkpoint_dir,
            checkpoint_filename_with_path=self._checkpoint_filename_with_path, config=self._config,
            init_op=self._scaffold.init_op, init_feed_dict=self._scaffold.init_feed_dict,
            init_fn=self._scaffold.init_fn)


class WorkerSessionCreator(SessionCreator):
    """Waits until the chief has made the model ready."""

    def __init__(self, scaffold: Optional[Scaffold] = None, master: str = "", config: Any = None,
                 max_wait_secs: float = 30 * 60) -> None:
        self._scaffold = scaffold or Scaffold()
        self._master = master
        self._config = config
        self._max_wait_secs = max_wait_secs

    def create_session(self) -> Any:
        self._scaffold.finalize()
        manager = session_manager_lib.SessionManager(
            local_init_op=self._scaffold.local_init_op, ready_op=self._scaffold.ready_op,
            ready_for_local_init_op=self._scaffold.ready_for_local_init_op, graph=graph_lib.get_default_graph())
        return manager.wait_for_session(self._master, config=self._config, max_wait_secs=self._max_wait_secs)


class StepContext:
    """What the function given to ``MonitoredSession.run_step_fn`` receives."""

    def __init__(self, session: Any, run_with_hooks: Any) -> None:
        self._session = session
        self._run_with_hooks = run_with_hooks

    @property
    def session(self) -> Any:
        """The raw session: runs here bypass the hooks."""
        return self._session

    def run_with_hooks(self, *args: Any, **kwargs: Any) -> Any:
        """``MonitoredSession.run``: the hooks see this run."""
        return self._run_with_hooks(*args, **kwargs)

    def request_stop(self) -> None:
        """Ends the step function and the session's ``with`` block at once (StopIteration, which
        the block swallows, as in TensorFlow)."""
        raise StopIteration("step_fn has requested the iterations to stop.")


class MonitoredSession:
    """Runs steps through hooks, with queue runners, and recovery from preemption."""

    StepContext = StepContext

    def __init__(self, session_creator: Optional[SessionCreator] = None,
                 hooks: Optional[Sequence[session_run_hook.SessionRunHook]] = None,
                 stop_grace_period_secs: float = 120, should_recover: bool = True) -> None:
        self._creator = session_creator or ChiefSessionCreator()
        self._hooks = list(hooks or [])
        self._stop_grace_period_secs = stop_grace_period_secs
        self._should_recover = should_recover
        self._graph = graph_lib.get_default_graph()
        for hook in self._hooks:
            hook.begin()
        self._sess: Any = None
        self._coord: Optional[coordinator_lib.Coordinator] = None
        self._stop_requested = False
        self._closed = False
        self.recoveries = 0
        self._create()

    @property
    def graph(self) -> graph_lib.Graph:
        return self._graph

    def _create(self) -> None:
        delay = 0.0
        while True:
            try:
                self._sess = self._creator.create_session()
                self._coord = coordinator_lib.Coordinator()
                queue_runner_lib.start_queue_runners(self._sess, coord=self._coord)
                for hook in self._hooks:
                    hook.after_create_session(self._sess, self._coord)
                return
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                # Backoff: a peer whose DNS name or pod is not there yet takes seconds to appear.
                delay = min(max(2 * delay, CREATE_RETRY_FIRST_SECONDS), CREATE_RETRY_MAX_SECONDS)
                log.info("Creating the session failed (%s: %s); retrying in %.1f s", type(e).__name__, e, delay)
                self._close_session_only()
                time.sleep(delay)

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata: Any = None) -> Any:
        while True:
            try:
                return self._hooked_run(fetches, feed_dict, options, run_metadata)
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                self._raise_stop_reason()
                log.warning(
                    "A step failed with %s: %s. This may be due to a preemption in a connected worker or "
                    "parameter server. The current session will be closed and a new one created.",
                    type(e).__name__, e,
                )
                self.recoveries += 1
                self._close_session_only()
                self._create()

    def run_step_fn(self, step_fn: Any) -> Any:
        """Calls ``step_fn(step_context)`` (TF1's ``run_step_fn``): it runs what it likes through
        ``step_context.session`` or ``step_context.run_with_hooks``; a preempted session is
        recreated and ``step_fn`` called again; ``request_stop()`` ends the session's ``with`` block."""
        names = [p.name for p in inspect.signature(step_fn).parameters.values()]
        if names not in (["step_context"], ["self", "step_context"]):
            raise ValueError("`step_fn` may either have one `step_context` argument, or `self` and `step_context` "
                             f"arguments if it's an instance method. Got {tuple(names)} instead.")
        while True:
            try:
                return step_fn(StepContext(self._sess, self._hooked_run))
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                log.warning("A step function failed with %s: %s. The session will be recreated and the step "
                            "function called again.", type(e).__name__, e)
                self.recoveries += 1
                self._close_session_only()
                self._create()

    def _raise_stop_reason(self) -> None:
        """Raises the error a hook's thread stopped training with (e.g. missing sync
        replicas), unless it is one more preemption, which recovery handles."""
        if self._coord is not None:
            try:
                self._coord.raise_requested_exception()
            except _PREEMPTION_ERRORS:
                pass

    def _hooked_run(self, fetches: Any, feed_dict: Any = None, options: Any = None,
                    run_metadata: Any = None) -> Any:
        if self._closed:
            raise RuntimeError("Session is already closed.")
        if self.should_stop():
            raise RuntimeError("Run called even after should_stop requested.")
        context = session_run_hook.SessionRunContext(session_run_hook.SessionRunArgs(fetches, feed_dict, options),
                                                     self._sess)
        hook_fetches: dict[int, Any] = {}
        feeds = dict(feed_dict or {})
        for i, hook in enumerate(self._hooks):
            request = hook.before_run(context)
            if request is None:
                continue
            if request.fetches is not None:
                hook_fetches[i] = request.fetches
            for key, value in (request.feed_dict or {}).items():
                if key in feeds:
                    raise RuntimeError(f"Same tensor is fed by a SessionRunHook and user: {key}")
                feeds[key] = value
        outputs = self._sess.run({"caller": fetches, "hooks": hook_fetches} if fetches is not None
                                 else {"hooks": hook_fetches}, feed_dict=feeds or None, options=options,
                                 run_metadata=run_metadata)
        for i, hook in enumerate(self._hooks):
            hook.after_run(context, session_run_hook.SessionRunValues(outputs["hooks"].get(i), options, run_metadata))
        self._stop_requested = self._stop_requested or context.stop_requested
        return outputs.get("caller")

    def should_stop(self) -> bool:
        return self._closed or self._stop_requested or (self._coord is not None and self._coord.should_stop())

    def close(self) -> None:
        self._close_internal(None)

    def _close_session_only(self, raise_thread_errors: bool = False) -> None:
        """Stops the queue runners and closes the session.

        The session is closed before the threads are joined: closing fails the steps
        they are blocked in (a chief's SyncReplicas thread waits in take_grad for
        gradients that will never come), so they end at once instead of holding the
        close for ``stop_grace_period_secs`` as in TensorFlow (its issue #13779).
        With ``raise_thread_errors`` the exception that stopped a thread is raised.
        """
        coord, sess = self._coord, self._sess
        self._sess = None
        self._coord = None
        if coord is not None:
            coord.request_stop()
        if sess is not None:
            try:
                sess.close()
            except Exception as e:  # noqa: BLE001 - the cluster may be gone
                log.debug("closing the session failed: %s", e)
        if coord is not None:
            try:
                coord.join(stop_grace_period_secs=self._stop_grace_period_secs, ignore_live_threads=True)
            except Exception as e:  # a failed thread of a dead session
                if raise_thread_errors:
                    raise
                log.debug("queue runner stopped with %s", e)

    def _close_internal(self, exception_type: Any) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if exception_type is None and self._sess is not None:
                for hook in self._hooks:
                    hook.end(self._sess)
        finally:
            self._close_session_only(raise_thread_errors=exception_type is None)
            if exception_type is None:
                _report_training_finished(self)

    def __enter__(self) -> "MonitoredSession":
        return self

    def __exit__(self, exception_type: Any, exception_value: Any, traceback: Any) -> bool:
        if exception_type in (errors.OutOfRangeError, StopIteration):
            exception_type = None
        self._close_internal(exception_type)
        return exception_type is None


class SingularMonitoredSession(MonitoredSession):
    """A MonitoredSession for a single process, with direct access to the raw session."""

    def __init__(self, hooks: Optional[Sequence[session_run_hook.SessionRunHook]] = None,
                 scaffold: Optional[Scaffold] = None, master: str = "", config: Any = None,
                 checkpoint_dir: Optional[str] = None, stop_grace_period_secs: float = 120) -> None:
        creator = ChiefSessionCreator(scaffold=scaffold, master=master, config=config, checkpoint_dir=checkpoint_dir)
        super().__init__(creator, hooks, stop_grace_period_secs, should_recover=False)

    def raw_session(self) -> Any:
        return self._sess


def _report_training_finished(session: MonitoredSession) -> None:
    """Tells an in-process server that this task's training loop ended (so PS tasks can exit)."""
    master = getattr(session._creator, "_master", "")
    if not master:
        return
    from tensorgrid.distributed.rpc import session_targets

    server = session_targets.local_server_for_target(master)
    if server is not None:
        server.report_training_finished()


def MonitoredTrainingSession(  # noqa: N802 - TensorFlow's public name
    master: str = "",
    is_chief: bool = True,
    checkpoint_dir: Optional[str] = None,
    scaffold: Optional[Scaffold] = None,
    hooks: Optional[Sequence[session_run_hook.SessionRunHook]] = None,
    chief_only_hooks: Optional[Sequence[session_run_hook.SessionRunHook]] = None,
    save_checkpoint_secs: Any = _USE_DEFAULT,
    save_summaries_steps: Any = _USE_DEFAULT,
    save_summaries_secs: Any = _USE_DEFAULT,
    config: Any = None,
    stop_grace_period_secs: float = 120,
    log_step_count_steps: int = 100,
    max_wait_secs: float = 7200,
    save_checkpoint_steps: Any = _USE_DEFAULT,
    summary_dir: Optional[str] = None,
) -> MonitoredSession:
    """A MonitoredSession set up for distributed training (``tf.train.MonitoredTrainingSession``).

    The chief writes the summaries (``tf.summary.merge_all()`` unless the scaffold names a
    summary op) to ``summary_dir`` or else ``checkpoint_dir`` every ``save_summaries_steps``
    (default 100) steps or ``save_summaries_secs`` seconds.
    """
    if save_checkpoint_steps is _USE_DEFAULT and save_checkpoint_secs is _USE_DEFAULT:
        save_checkpoint_steps, save_checkpoint_secs = None, 600
    elif save_checkpoint_secs is _USE_DEFAULT:
        save_checkpoint_secs = None
    elif save_checkpoint_steps is _USE_DEFAULT:
        save_checkpoint_steps = None
    if save_summaries_steps is _USE_DEFAULT and save_summaries_secs is _USE_DEFAULT:
        save_summaries_steps, save_summaries_secs = 100, None
    elif save_summaries_secs is _USE_DEFAULT:
        save_summaries_secs = None
    elif save_summaries_steps is _USE_DEFAULT:
        save_summaries_steps = None
    scaffold = scaffold or Scaffold()
    all_hooks: list[session_run_hook.SessionRunHook] = []
    if is_chief:
        creator: SessionCreator = ChiefSessionCreator(scaffold=scaffold, master=master, config=config,
                                                      checkpoint_dir=checkpoint_dir)
        all_hooks.extend(chief_only_hooks or [])
        if log_step_count_steps and log_step_count_steps > 0 and training_util.get_global_step() is not None:
            all_hooks.append(hooks_lib.StepCounterHook(every_n_steps=log_step_count_steps))
        summary_output = summary_dir or checkpoint_dir
        if summary_output and (save_summaries_secs or save_summaries_steps) and \
                training_util.get_global_step() is not None:
            all_hooks.append(hooks_lib.SummarySaverHook(save_steps=save_summaries_steps or None,
                                                        save_secs=None if save_summaries_steps else save_summaries_secs,
                                                        output_dir=summary_output, scaffold=scaffold))
        if checkpoint_dir and (save_checkpoint_secs or save_checkpoint_steps):
            all_hooks.append(hooks_lib.CheckpointSaverHook(checkpoint_dir, save_secs=save_checkpoint_secs,
                                                           save_steps=save_checkpoint_steps, scaffold=scaffold))
    else:
        creator = WorkerSessionCreator(scaffold=scaffold, master=master, config=config, max_wait_secs=max_wait_secs)
    all_hooks.extend(hooks or [])
    return MonitoredSession(session_creator=creator, hooks=all_hooks, stop_grace_period_secs=stop_grace_period_secs)
