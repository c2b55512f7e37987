"""The rendezvous: where a Send leaves a tensor until its Recv takes it.

Entries are keyed by (step id, rendezvous key). A value is taken exactly once; a
waiter that arrives first is called back when the value is sent. Aborting a step
fails its waiters and drops its values, so a failed step leaves nothing behind.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

from tensorgrid.framework import errors

Callback = Callable[..., None]


class LocalRendezvous:
    """Thread-safe table of sent values and waiting receivers for one task."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[int, str], tuple[Any, float]] = {}
        self._waiters: dict[tuple[int, str], Callback] = {}
        self._aborted: dict[int, tuple[BaseException, float]] = {}

    def send(self, step_id: int, key: str, value: Any) -> None:
        entry = (step_id, key)
        with self._lock:
            failure = self._aborted.get(step_id)
            if failure is not None:
                raise failure[0]
            waiter = self._waiters.pop(entry, None)
            if waiter is None:
                if entry in self._values:
                    raise errors.InternalError(None, None, f"Duplicate send of {key} in step {step_id}")
                self._values[entry] = (value, time.monotonic())
                return
        waiter(value)

    def flush(self, step_id: int) -> None:
        """Delivers what was sent so far in ``step_id`` (nothing to do for a local table)."""

    def take_async(self, step_id: int, key: str, done: Callback) -> None:
        """Calls ``done(value)`` now if it was sent, else when it is (or ``done(failure=...)``)."""
        entry = (step_id, key)
        with self._lock:
            failure = self._aborted.get(step_id)
            if failure is None:
                found = self._values.pop(entry, None)
                if found is None:
                    if entry in self._waiters:
                        raise errors.InternalError(None, None, f"Two receivers for {key} in step {step_id}")
                    self._waiters[entry] = done
                    return
        if failure is not None:
            done(failure=failure[0])
        elif found is not None:
            done(found[0])

    def take(self, step_id: int, key: str, timeout: Optional[float] = None) -> Any:
        """Blocks until the value of ``key`` in ``step_id`` is sent; raises if the step aborts."""
        event = threading.Event()
        box: dict[str, Any] = {}

        def done(value: Any = None, failure: Optional[BaseException] = None) -> None:
            box["value"], box["failure"] = value, failure
            event.set()

        self.take_async(step_id, key, done)
        if not event.wait(timeout):
            with self._lock:
                self._waiters.pop((step_id, key), None)
            raise errors.DeadlineExceededError(
                None, None, f"Timed out after {timeout} s waiting for tensor {key} of step {step_id}"
            )
        if box["failure"] is not None:
            raise box["failure"]
        return box["value"]

    def abort(self, step_id: int, failure: BaseException) -> None:
        """Fails every waiter of ``step_id`` and drops its values; later sends fail too."""
        with self._lock:
            self._aborted[step_id] = (failure, time.monotonic())
            waiters = [(k, w) for k, w in self._waiters.items() if k[0] == step_id]
            for k, _ in waiters:
                del self._waiters[k]
            for k in [k for k in self._values if k[0] == step_id]:
                del self._values[k]
            self._forget_old_aborts()
        for _, waiter in waiters:
            waiter(failure=failure)

    def cleanup_step(self, step_id: int) -> None:
        """Drops leftovers of a finished step (values nobody took)."""
        with self._lock:
            for k in [k for k in self._values if k[0] == step_id]:
                del self._values[k]

    def abort_all(self, failure: BaseException) -> None:
        with self._lock:
            steps = {k[0] for k in self._waiters} | {k[0] for k in self._values}
        for step_id in steps:
            self.abort(step_id, failure)

    def pending_count(self) -> int:
        with self._lock:
            return len(self._values) + len(self._waiters)

    def _forget_old_aborts(self, horizon: float = 600.0) -> None:
        now = time.monotonic()
        for step_id in [s for s, (_, t) in self._aborted.items() if now - t > horizon]:
            del self._aborted[step_id]
