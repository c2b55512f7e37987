"""The standard hooks: stop at a step, fail on NaN, save checkpoints and summaries, log tensors and speed."""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tensorgrid import monitoring
from tensorgrid.framework import graph as graph_lib
from tensorgrid.summary import event_file
from tensorgrid.train import checkpoint_management
from tensorgrid.train import session_run_hook
from tensorgrid.train import training_util

log = logging.getLogger("tensorgrid.train")


class SecondOrStepTimer:
    """Triggers every ``every_secs`` seconds or every ``every_steps`` steps (exactly one is set)."""

    def __init__(self, every_secs: Optional[float] = None, every_steps: Optional[int] = None) -> None:
        if (every_secs is None) == (every_steps is None):
            raise ValueError(
                f"Exactly one of every_secs and every_steps must be set, got every_secs={every_secs}, "
                f"every_steps={every_steps}"
            )
        if every_secs is not None and every_secs <= 0 or every_steps is not None and every_steps <= 0:
            raise ValueError(f"The interval must be positive, got every_secs={every_secs}, every_steps={every_steps}")
        self._every_secs = every_secs
        self._every_steps = every_steps
        self._last_time: Optional[float] = None
        self._last_step: Optional[int] = None

    def reset(self) -> None:
        self._last_time = None
        self._last_step = None

    def should_trigger_for_step(self, step: int) -> bool:
        if self._last_step is None:
            return True
        if self._last_step == step:
            return False
        if self._every_secs is not None:
            return time.monotonic() >= (self._last_time or 0) + self._every_secs
        return step >= self._last_step + (self._every_steps or 0)

    def update_last_triggered_step(self, step: int) -> tuple[Optional[float], Optional[int]]:
        now = time.monotonic()
        elapsed = None if self._last_time is None else now - self._last_time
        steps = None if self._last_step is None else step - self._last_step
        self._last_time = now
        self._last_step = step
        return elapsed, steps

    def last_triggered_step(self) -> Optional[int]:
        return self._last_step


def _global_step_or_fail(hook: str) -> graph_lib.Tensor:
    step = training_util.get_global_step()
    if step is None:
        raise RuntimeError(f"Global step should be created to use {hook} (tf.train.get_or_create_global_step()).")
    tensor: graph_lib.Tensor = step
    return tensor


class StopAtStepHook(session_run_hook.SessionRunHook):
    """Requests a stop when the global step reaches ``last_step`` (or ``num_steps`` more)."""

    def __init__(self, num_steps: Optional[int] = None, last_step: Optional[int] = None) -> None:
        if (num_steps is None) == (last_step is None):
            raise ValueError("Exactly one of num_steps and last_step must be provided.")
        if num_steps is not None and num_steps < 0:
            raise ValueError(f"num_steps must be non-negative, got {num_steps}")
        self._num_steps = num_steps
        self._last_step = last_step

    def begin(self) -> None:
        self._global_step_tensor = _global_step_or_fail("StopAtStepHook")

    def after_create_session(self, session: Any, coord: Any) -> None:
        if self._num_steps is not None and self._last_step is None:
            self._last_step = int(session.run(self._global_step_tensor)) + self._num_steps
        if self._last_step is not None:
            monitoring.TARGET_STEP.set(self._last_step)  # progress for the operator's status and dashboards

    def before_run(self, run_context: session_run_hook.SessionRunContext) -> session_run_hook.SessionRunArgs:
        return session_run_hook.SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context: session_run_hook.SessionRunContext,
                  run_values: session_run_hook.SessionRunValues) -> None:
        assert self._last_step is not None
        step = int(run_values.results)
        monitoring.record_global_step(step)  # the chief's final figures (monitoring.write_final_figures)
        if step + 1 >= self._last_step:
            # The value read may predate this step's increment: read it again to be sure.
            step = int(run_context.session.run(self._global_step_tensor))
            monitoring.record_global_step(step)
            if step >= self._last_step:
                run_context.request_stop()


class NanLossDuringTrainingError(RuntimeError):
    def __str__(self) -> str:
        return "NaN loss during training."


class NanTensorHook(session_run_hook.SessionRunHook):
    """Fails (or stops) the training when the loss becomes NaN."""

    def __init__(self, loss_tensor: Any, fail_on_nan_loss: bool = True) -> None:
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss

    def before_run(self, run_context: session_run_hook.SessionRunContext) -> session_run_hook.SessionRunArgs:
        return session_run_hook.SessionRunArgs(self._loss_tensor)

    def after_run(self, run_context: session_run_hook.SessionRunContext,
                  run_values: session_run_hook.SessionRunValues) -> None:
        if np.isnan(run_values.results):
            if self._fail_on_nan_loss:
                log.error("Model diverged with loss = NaN.")
                raise NanLossDuringTrainingError
            log.warning("Model diverged with loss = NaN; stopping training.")
            run_context.request_stop()


class CheckpointSaverListener:
    """Called around each checkpoint save."""

    def begin(self) -> None:
        pass

    def before_save(self, session: Any, global_step_value: int) -> None:
        pass

    def after_save(self, session: Any, global_step_value: int) -> Optional[bool]:
        return None

    def end(self, session: Any, global_step_value: int) -> None:
        pass


class CheckpointSaverHook(session_run_hook.SessionRunHook):
    """Saves a checkpoint when the session starts, every N seconds or steps, and at the end."""

    def __init__(self, checkpoint_dir: str, save_secs: Optional[float] = None, save_steps: Optional[int] = None,
                 saver: Any = None, checkpoint_basename: str = "model.ckpt", scaffold: Any = None,
                 listeners: Optional[Sequence[CheckpointSaverListener]] = None) -> None:
        if saver is not None and scaffold is not None:
            raise ValueError("You cannot provide both saver and scaffold.")
        self._checkpoint_dir = checkpoint_dir
        self._save_path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._saver = saver
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._listeners = list(listeners or [])
        self._recovered = False

    def begin(self) -> None:
        self._global_step_tensor = _global_step_or_fail("CheckpointSaverHook")
        os.makedirs(self._checkpoint_dir, exist_ok=True)  # as TF's summary writer does for it
        for listener in self._listeners:
            listener.begin()

    def after_create_session(self, session: Any, coord: Any) -> None:
        global_step = int(session.run(self._global_step_tensor))
        # The graph for TensorBoard, written here (not in begin) because other hooks may add
        # ops in their begin; into the directory's shared writer, as TensorFlow does.
        event_file.FileWriterCache.get(self._checkpoint_dir).add_graph(graph_lib.get_default_graph())
        if not self._recovered:
            self._recover_history()
            self._recovered = True
        self._save(session, global_step)
        self._timer.update_last_triggered_step(global_step)

    def before_run(self, run_context: session_run_hook.SessionRunContext) -> session_run_hook.SessionRunArgs:
        return session_run_hook.SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context: session_run_hook.SessionRunContext,
                  run_values: session_run_hook.SessionRunValues) -> None:
        stale_global_step = int(run_values.results)
        if self._timer.should_trigger_for_step(stale_global_step + 1):
            global_step = int(run_context.session.run(self._global_step_tensor))
            if self._timer.should_trigger_for_step(global_step):
                self._timer.update_last_triggered_step(global_step)
                if self._save(run_context.session, global_step):
                    run_context.request_stop()

    def end(self, session: Any) -> None:
        last_step = int(session.run(self._global_step_tensor))
        if last_step != self._timer.last_triggered_step():
            self._save(session, last_step)
        for listener in self._listeners:
            listener.end(session, last_step)

    def _get_saver(self) -> Any:
        if self._saver is not None:
            return self._saver
        if self._scaffold is not None:
            return self._scaffold.saver
        savers = graph_lib.get_default_graph().get_collection(graph_lib.GraphKeys.SAVERS)
        if len(savers) != 1:
            raise RuntimeError(
                f"CheckpointSaverHook needs exactly one Saver in the SAVERS collection, found {len(savers)}; "
                "pass saver= or scaffold="
            )
        self._saver = savers[0]
        return self._saver

    def _recover_history(self) -> None:
        """Before this process's first save: the saver adopts the checkpoints the state
        file lists (``recover_last_checkpoints``), so ``max_to_keep`` counts them after a
        restart too, and what a process killed while saving left behind is deleted."""
        saver = self._get_saver()
        state = checkpoint_management.get_checkpoint_state(self._checkpoint_dir)
        if state is not None and not saver.last_checkpoints:
            saver.recover_last_checkpoints(list(state.all_model_checkpoint_paths))
        leftovers = checkpoint_management.leftovers_of_interrupted_saves(self._save_path, state)
        for path in leftovers:
            try:
                os.unlink(path)
            except OSError as e:
                log.warning("could not delete %s, left by an interrupted checkpoint save: %s", path, e)
        if leftovers:
            log.info("Deleted %d files left in %s by interrupted checkpoint saves", len(leftovers),
                     self._checkpoint_dir)

    def _save(self, session: Any, step: int) -> bool:
        for listener in self._listeners:
            listener.before_save(session, step)
        started = time.monotonic()
        path = self._get_saver().save(session, self._save_path, global_step=step)
        log.info("Saved checkpoint for step %d to %s in %.2f s", step, path, time.monotonic() - started)
        should_stop = False
        for listener in self._listeners:
            if listener.after_save(session, step):
                should_stop = True
        return should_stop


class StepCounterHook(session_run_hook.SessionRunHook):
    """Logs the global step rate (steps/sec) every N steps or seconds: progress for people."""

    def __init__(self, every_n_steps: Optional[int] = 100, every_n_secs: Optional[float] = None,
                 output_dir: Optional[str] = None, summary_writer: Any = None) -> None:
        if every_n_secs is not None:
            every_n_steps = None
        self._timer = SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_steps)
        self.last_rate: Optional[float] = None

    def begin(self) -> None:
        self._global_step_tensor = _global_step_or_fail("StepCounterHook")

    def before_run(self, run_context: session_run_hook.SessionRunContext) -> session_run_hook.SessionRunArgs:
        return session_run_hook.SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context: session_run_hook.SessionRunContext,
                  run_values: session_run_hook.SessionRunValues) -> None:
        step = int(run_values.results)
        monitoring.record_global_step(step)
        if self._timer.should_trigger_for_step(step):
            elapsed, steps = self._timer.update_last_triggered_step(step)
            if elapsed and steps:
                self.last_rate = steps / elapsed
                log.info("global_step/sec: %.4g (global step %d)", self.last_rate, step)


class LoggingTensorHook(session_run_hook.SessionRunHook):
    """Logs the values of tensors every N iterations or seconds (and optionally at the end)."""

    def __init__(self, tensors: Any, every_n_iter: Optional[int] = None, every_n_secs: Optional[float] = None,
                 at_end: bool = False, formatter: Optional[Callable[[dict[str, Any]], str]] = None) -> None:
        only_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError("Exactly one of every_n_iter and every_n_secs must be provided (or only at_end=True).")
        if isinstance(tensors, dict):
            self._tag_order = list(tensors)
            self._tensors = dict(tensors)
        else:
            items = tensors if isinstance(tensors, (list, tuple)) else [tensors]
            self._tag_order = [getattr(t, "name", t) for t in items]
            self._tensors = {getattr(t, "name", t): t for t in items}
        self._timer = None if only_at_end else SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter)
        self._log_at_end = at_end
        self._formatter = formatter
        self._iter = 0
        self._should_trigger = False

    def begin(self) -> None:
        graph = graph_lib.get_default_graph()
        self._current = {tag: _as_tensor(graph, t) for tag, t in self._tensors.items()}
        self._iter = 0

    def before_run(self, run_context: session_run_hook.SessionRunContext) -> Optional[session_run_hook.SessionRunArgs]:
        self._should_trigger = self._timer is not None and self._timer.should_trigger_for_step(self._iter)
        return session_run_hook.SessionRunArgs(self._current) if self._should_trigger else None

    def _log(self, values: dict[str, Any]) -> None:
        if self._formatter is not None:
            log.info(self._formatter(values))
        else:
            log.info(", ".join(f"{tag} = {values[tag]}" for tag in self._tag_order))

    def after_run(self, run_context: session_run_hook.SessionRunContext,
                  run_values: session_run_hook.SessionRunValues) -> None:
        if self._should_trigger and self._timer is not None:
            self._timer.update_last_triggered_step(self._iter)
            self._log(run_values.results)
        self._iter += 1

    def end(self, session: Any) -> None:
        if self._log_at_end:
            self._log(session.run(self._current))


def _as_tensor(graph: graph_lib.Graph, value: Any) -> Any:
    """A tensor, or a tensor's or an op's name (as TF, ``"loss"`` means ``"loss:0"``)."""
    if isinstance(value, str) and ":" not in value:
        value += ":0"
    return graph.as_graph_element(value)


class GlobalStepWaiterHook(session_run_hook.SessionRunHook):
    """Delays a worker until the global step reaches ``wait_until_step``."""

    def __init__(self, wait_until_step: int) -> None:
        self._wait_until_step = wait_until_step

    def begin(self) -> None:
        self._global_step_tensor = _global_step_or_fail("GlobalStepWaiterHook")
        self._done = self._wait_until_step <= 0

    def before_run(self, run_context: session_run_hook.SessionRunContext) -> None:
        delay = 0.01
        while not self._done:
            if int(run_context.session.run(self._global_step_tensor)) >= self._wait_until_step:
                self._done = True
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        return None


class FinalOpsHook(session_run_hook.SessionRunHook):
    """Runs ops when the session ends and keeps their values."""

    def __init__(self, final_ops: Any, final_ops_feed_dict: Any = None) -> None:
        self._final_ops = final_ops
        self._feed_dict = final_ops_feed_dict
        self.final_ops_values: Any = None

    def end(self, session: Any) -> None:
        if self._final_ops is not None:
            self.final_ops_values = session.run(self._final_ops, feed_dict=self._feed_dict)


class FeedFnHook(session_run_hook.SessionRunHook):
    """Adds ``feed_fn()``'s feeds to every run."""

    def __init__(self, feed_fn: Callable[[], dict[Any, Any]]) -> None:
        self.feed_fn = feed_fn

    def before_run(self, run_context: session_run_hook.SessionRunContext) -> session_run_hook.SessionRunArgs:
        return session_run_hook.SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


class SummarySaverHook(session_run_hook.SessionRunHook):
    """Writes the summary op's value every ``save_steps`` steps or ``save_secs`` seconds
    (``tf.train.SummarySaverHook``), tagged with the global step."""

    def __init__(self, save_steps: Optional[int] = None, save_secs: Optional[float] = None,
                 output_dir: Optional[str] = None, summary_writer: Any = None, scaffold: Any = None,
                 summary_op: Any = None) -> None:
        if (scaffold is None) == (summary_op is None):
            raise ValueError("Exactly one of scaffold or summary_op must be provided.")
        if output_dir is None and summary_writer is None:
            raise ValueError("SummarySaverHook needs an output_dir or a summary_writer")
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._output_dir, self._writer = output_dir, summary_writer
        self._scaffold, self._summary_op = scaffold, summary_op
        self._global_step: Any = None
        self._next_step: Optional[int] = None
        self._requested = False

    def begin(self) -> None:
        if self._writer is None:
            assert self._output_dir is not None
            self._writer = event_file.FileWriterCache.get(self._output_dir)
        global_step = training_util.get_global_step()
        if global_step is None:
            raise RuntimeError("Global step should be created to use SummarySaverHook.")
        self._global_step = global_step  # read after the step: its increment included, as in TensorFlow
        self._next_step = None

    def _op(self) -> Any:
        op = self._summary_op if self._summary_op is not None else self._scaffold.summary_op
        return list(op) if isinstance(op, (list, tuple)) else op

    def before_run(self, run_context: Any) -> Any:
        op = self._op()
        if op is None:  # no summaries in the graph: nothing to fetch, nothing to write
            self._requested = False
            return None
        self._requested = self._next_step is None or self._timer.should_trigger_for_step(self._next_step)
        fetches: dict[str, Any] = {"global_step": self._global_step}
        if self._requested:
            fetches["summary"] = op
        return session_run_hook.SessionRunArgs(fetches)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if not run_values.results:
            return
        global_step = int(run_values.results["global_step"])
        if self._requested:
            self._timer.update_last_triggered_step(global_step)
            summaries = run_values.results["summary"]
            for summary in summaries if isinstance(summaries, list) else [summaries]:
                self._writer.add_summary(summary, global_step)
        self._next_step = global_step + 1

    def end(self, session: Any) -> None:
        if self._writer is not None:  # flushed, not closed: the directory's writer is shared (FileWriterCache)
            self._writer.flush()
