"""Reports a synchronous step that does not finish, and which replicas it waits for.

Why it exists: ``SyncReplicasOptimizer``'s chief applies a step once
``replicas_to_aggregate`` gradients are in; with a dead or stuck worker it waits for
ever, and so does every other worker, waiting for its next token: silently, in
TensorFlow too. On the chief, ``SyncReplicasWatch`` looks at the global step every
``report_s``; when it stood still that long it logs how many gradients the step has,
and which training tasks do not answer (through this process's server), and again
each ``report_s`` after. What then is ``TENSORGRID_SYNC_MISSING_REPLICAS``:

- ``wait`` (the default): keep waiting and reporting; a replacement worker that comes
  back contributes and training goes on (``total_num_replicas`` above
  ``replicas_to_aggregate`` keeps it going without one);
- ``fail``: once ``fail_after_s`` passed, stop training with DeadlineExceededError naming
  the missing tasks, so the chief exits non-zero and the job's restart policy applies.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from typing import Any, Mapping, Optional

from tensorgrid.distributed.rpc import session_targets
from tensorgrid.distributed.rpc.transport import liveness
from tensorgrid.framework import errors

log = logging.getLogger("tensorgrid.train")

REPORT_ENV = "TENSORGRID_SYNC_REPORT_SECONDS"
MISSING_ENV = "TENSORGRID_SYNC_MISSING_REPLICAS"
FAIL_AFTER_ENV = "TENSORGRID_SYNC_FAIL_AFTER_SECONDS"
MISSING_CHOICES = ("wait", "fail")


@dataclasses.dataclass(frozen=True)
class WatchSettings:
    """What the chief does about a synchronous step that does not finish."""

    report_s: float = 30.0
    """Seconds the global step may stand still before the chief reports the missing
    replicas (and then every this many seconds); ``TENSORGRID_SYNC_REPORT_SECONDS``."""
    on_missing: str = "wait"
    """``wait`` or ``fail``; ``TENSORGRID_SYNC_MISSING_REPLICAS``."""
    fail_after_s: float = 600.0
    """With ``fail``: seconds the global step may stand still before training stops
    with DeadlineExceededError; ``TENSORGRID_SYNC_FAIL_AFTER_SECONDS``."""

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "WatchSettings":
        """The defaults, overridden by the environment; ValueError naming a bad value."""
        env = os.environ if environ is None else environ
        defaults = cls()
        on_missing = env.get(MISSING_ENV, "").strip() or defaults.on_missing
        if on_missing not in MISSING_CHOICES:
            raise ValueError(f"{MISSING_ENV}={on_missing!r}; valid values are {', '.join(MISSING_CHOICES)}")
        return cls(report_s=liveness.seconds_from_env(env, REPORT_ENV, defaults.report_s), on_missing=on_missing,
                   fail_after_s=liveness.seconds_from_env(env, FAIL_AFTER_ENV, defaults.fail_after_s))


class SyncReplicasWatch:
    """The chief's watcher thread of one session (module docstring). ``global_step`` and
    ``gradients_in`` (the number of gradients a step's accumulator holds) are tensors."""

    def __init__(self, global_step: Any, gradients_in: Any, replicas_to_aggregate: int,
                 settings: Optional[WatchSettings] = None) -> None:
        self._global_step = global_step
        self._gradients_in = gradients_in
        self._replicas_to_aggregate = replicas_to_aggregate
        self._settings = settings or WatchSettings.from_env()

    def start(self, session: Any, coord: Any) -> threading.Thread:
        thread = threading.Thread(target=self._watch, args=(session, coord), name="sync-replicas-watch", daemon=True)
        coord.register_thread(thread)
        thread.start()
        return thread

    def _watch(self, session: Any, coord: Any) -> None:
        settings = self._settings
        last_step, since = None, time.monotonic()
        while not coord.wait_for_stop(settings.report_s):
            try:
                step, gradients = session.run([self._global_step, self._gradients_in])
            except errors.OpError as e:
                log.info("sync training: cannot read the global step (%s); the session's recovery takes over", e)
                return
            now = time.monotonic()
            if step != last_step:
                last_step, since = step, now
                continue
            missing = _unanswering_tasks(session)
            who = ("training tasks not answering: " + "; ".join(f"{t} ({why})" for t, why in missing.items())
                   if missing else "every training task answers, so a replica is slow or stuck before its step")
            stalled = now - since
            log.warning("sync training: global step %d has waited %.0f s for gradients: %d of %d in; %s",
                        step, stalled, gradients, self._replicas_to_aggregate, who)
            if settings.on_missing == "fail" and stalled >= settings.fail_after_s:
                coord.request_stop(errors.DeadlineExceededError(
                    None, None, f"synchronous training stopped: global step {step} got {gradients} of "
                                f"{self._replicas_to_aggregate} gradients in {stalled:.0f} s; {who} "
                                f"({MISSING_ENV}=fail)"))
                session.close()  # fails the steps blocked on the missing replicas
                return


def _unanswering_tasks(session: Any) -> dict[str, str]:
    """Training tasks that do not answer this process's server now, with why; empty when
    the session's target is not a server of this process."""
    target = getattr(session, "sess_str", "")
    server = session_targets.local_server_for_target(target) if target else None
    return server.unanswering_training_tasks() if server is not None else {}
