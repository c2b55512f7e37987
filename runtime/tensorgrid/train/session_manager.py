"""``tf.train.SessionManager``: get a session whose model is initialized, one way or another.

The chief initializes the model, or restores it from the latest checkpoint. Other
workers wait until the chief has done so. Two differences from TensorFlow, both
deliberate:

- A chief that finds the model already initialized (the parameter servers kept
  running while the chief restarted) uses it as it is: it does not roll a live
  model back to its last checkpoint. A checkpoint is restored only when variables
  are missing, e.g. after a parameter server restarted, or when its global step is
  past the live one (a restarted parameter server loaded a live replica older than
  the checkpoint: the newest state wins, and the log says which). A peer that cannot be
  reached while the chief checks (UnavailableError, AbortedError: a restarted
  task) says nothing about the model, so the error is raised, not read as "not
  initialized"; ``MonitoredSession`` retries the session's creation with backoff.
- Waiting workers poll readiness with a short backoff (50 ms growing to 1 s) on one
  session, instead of closing it and sleeping 30 seconds between checks.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Optional

from tensorgrid.client import session as session_lib
from tensorgrid.framework import errors
from tensorgrid.framework import graph as graph_lib

log = logging.getLogger("tensorgrid.train")

_NOT_INITIALIZED = (errors.FailedPreconditionError, errors.NotFoundError)
"""Errors of a readiness check that mean the model is not initialized (a variable
read before its initializer ran, a resource not created yet)."""
_NOT_REACHABLE = (errors.UnavailableError, errors.AbortedError)
"""Errors of a readiness check that mean a task could not be asked (down, restarting);
a waiting worker polls on, a chief raises them instead of restoring."""


class SessionManager:
    def __init__(self, local_init_op: Any = None, ready_op: Any = None, ready_for_local_init_op: Any = None,
                 graph: Optional[graph_lib.Graph] = None, recovery_wait_secs: float = 30,
                 local_init_run_options: Any = None, local_init_feed_dict: Any = None) -> None:
        self._local_init_op = local_init_op
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._graph = graph if graph is not None else graph_lib.get_default_graph()
        self._recovery_wait_secs = recovery_wait_secs
        self._local_init_feed_dict = local_init_feed_dict
        self.last_preparation = ""
        """How the last ``prepare_session`` got a ready model: 'live', 'restored' or 'initialized'."""

    def _new_session(self, master: str, config: Any) -> session_lib.Session:
        return session_lib.Session(master, graph=self._graph, config=config)

    def prepare_session(self, master: str, init_op: Any = None, saver: Any = None, checkpoint_dir: Optional[str] = None,
                        checkpoint_filename_with_path: Optional[str] = None, wait_for_checkpoint: bool = False,
                        max_wait_secs: float = 7200, config: Any = None, init_feed_dict: Any = None,
                        init_fn: Optional[Callable[[Any], None]] = None) -> session_lib.Session:
        """A session for the chief, with the model live, restored, or freshly initialized."""
        sess = self._new_session(master, config)
        global_ready_op = self._ready_for_local_init_op if self._ready_for_local_init_op is not None else self._ready_op
        ready, _ = self._model_ready(sess, global_ready_op, peers_must_answer=True)
        newer = self._newer_checkpoint(sess, saver, checkpoint_dir, checkpoint_filename_with_path) \
            if ready and self._ready_op is not None else None
        if newer is not None:
            path, live_step, saved_step = newer
            log.warning("The model on the parameter servers is at global step %d, the checkpoint %s at %d (a "
                        "restarted parameter server loaded an older live replica): restoring the checkpoint, the "
                        "newest", live_step, path, saved_step)
            saver.restore(sess, path)
            self.last_preparation = "restored"
        elif ready and self._ready_op is not None:
            self.last_preparation = "live"
            log.info("Model is already initialized on the parameter servers (none restarted, or a restarted one "
                     "loaded its live replica): using it without restoring")
        elif self._restore(sess, saver, checkpoint_dir, checkpoint_filename_with_path, wait_for_checkpoint, max_wait_secs):
            self.last_preparation = "restored"
        else:
            if init_op is None and init_fn is None and self._local_init_op is None:
                raise RuntimeError(
                    "Model is not initialized and no init_op, init_fn or local_init_op was given"
                )
            if master:  # a cluster's chief says why it initializes (a restarted PS had no live replica)
                log.info("Initializing the model: the parameter servers do not hold it and there is no checkpoint")
            if init_op is not None:
                sess.run(init_op, feed_dict=init_feed_dict)
            if init_fn is not None:
                init_fn(sess)
            self.last_preparation = "initialized"
        ok, message = self._try_run_local_init_op(sess, peers_must_answer=True)
        if not ok:
            raise RuntimeError(f"Init operations did not make model ready for local_init: {message}")
        ok, message = self._model_ready(sess, self._ready_op, peers_must_answer=True)
        if not ok:
            raise RuntimeError(
                f"Init operations did not make model ready. Init op: {getattr(init_op, 'name', None)}, "
                f"init fn: {init_fn}, error: {message}"
            )
        return sess

    def recover_session(self, master: str, saver: Any = None, checkpoint_dir: Optional[str] = None,
                        checkpoint_filename_with_path: Optional[str] = None, wait_for_checkpoint: bool = False,
                        max_wait_secs: float = 7200, config: Any = None) -> tuple[session_lib.Session, bool]:
        sess = self._new_session(master, config)
        if not self._restore(sess, saver, checkpoint_dir, checkpoint_filename_with_path, wait_for_checkpoint, max_wait_secs):
            return sess, False
        ok, _ = self._try_run_local_init_op(sess)
        if not ok:
            return sess, False
        ready, _ = self._model_ready(sess, self._ready_op)
        return sess, ready

    def wait_for_session(self, master: str, config: Any = None, max_wait_secs: float = float("inf")) -> session_lib.Session:
        """A session for a non-chief worker, once the chief has made the model ready."""
        start = time.monotonic()
        sess = self._new_session(master, config)
        delay = 0.05
        last_log = 0.0
        while True:
            ok, message = self._try_run_local_init_op(sess)
            if ok:
                ok, message = self._model_ready(sess, self._ready_op)
                if ok:
                    return sess
            waited = time.monotonic() - start
            if waited > max_wait_secs:
                sess.close()
                raise errors.DeadlineExceededError(
                    None, None, f"Session was not ready after waiting {waited:.0f} secs: {message}"
                )
            if waited - last_log >= 10 or last_log == 0.0:
                log.info("Waiting for the chief to initialize the model: %s", message)
                last_log = max(waited, 1e-9)
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def _restore(self, sess: Any, saver: Any, checkpoint_dir: Optional[str], path: Optional[str],
                 wait_for_checkpoint: bool, max_wait_secs: float) -> bool:
        if path:
            if saver is None:
                raise ValueError("A checkpoint path was given but no saver to restore it with")
            saver.restore(sess, path)
            return True
        if not checkpoint_dir or saver is None:
            return False
        from tensorgrid.train import checkpoint_management

        latest = checkpoint_management.latest_checkpoint(checkpoint_dir)
        waited = 0.0
        while latest is None and wait_for_checkpoint and waited < max_wait_secs:
            time.sleep(self._recovery_wait_secs)
            waited += self._recovery_wait_secs
            latest = checkpoint_management.latest_checkpoint(checkpoint_dir)
        if latest is None:
            return False
        log.info("Restoring the model from checkpoint %s", latest)
        saver.restore(sess, latest)
        return True

    def _newer_checkpoint(self, sess: Any, saver: Any, checkpoint_dir: Optional[str],
                          path: Optional[str]) -> Optional[tuple[str, int, int]]:
        """(the checkpoint, the live global step, the checkpoint's) when the latest checkpoint's
        global step is past the live model's; None otherwise, or with no saver, checkpoint or
        global step to compare."""
        from tensorgrid.train import checkpoint_management
        from tensorgrid.train import training_util

        step = training_util.get_global_step(self._graph)
        if saver is None or step is None:
            return None
        path = path or (checkpoint_management.latest_checkpoint(checkpoint_dir) if checkpoint_dir else None)
        if path is None:
            return None
        try:
            saved = int(checkpoint_management.load_variable(path, step.op.name))
        except (errors.OpError, KeyError, ValueError, OSError):  # no global step saved there: nothing to compare
            return None
        live = int(sess.run(step))
        return (path, live, saved) if saved > live else None

    def _try_run_local_init_op(self, sess: Any, peers_must_answer: bool = False) -> tuple[bool, str]:
        if self._local_init_op is None:
            return True, ""
        ready, message = self._model_ready(sess, self._ready_for_local_init_op, peers_must_answer)
        if not ready:
            return False, message
        sess.run(self._local_init_op, feed_dict=self._local_init_feed_dict)
        return True, ""

    @staticmethod
    def _model_ready(sess: Any, ready_op: Any, peers_must_answer: bool = False) -> tuple[bool, str]:
        """Whether ``ready_op`` reports every variable initialized, and if not, why. With
        ``peers_must_answer`` an unreachable task raises its error (the chief must not
        read it as "not initialized"); without, it is one more reason to wait."""
        if ready_op is None:
            return True, ""
        not_ready = _NOT_INITIALIZED if peers_must_answer else (*_NOT_INITIALIZED, *_NOT_REACHABLE)
        try:
            names = sess.run(ready_op)
        except not_ready as e:
            return False, f"{type(e).__name__}: {e}"
        if names is None or len(names) == 0:
            return True, ""
        shown = ", ".join(str(n) for n in list(names)[:10])
        more = f" and {len(names) - 10} more" if len(names) > 10 else ""
        return False, f"Variables not initialized: {shown}{more}"
