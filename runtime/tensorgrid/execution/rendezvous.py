"""The rendezvous: where a Send leaves a tensor until its Recv takes it.

Entries are keyed by (step id, rendezvous key). A value is taken exactly once; a
waiter that arrives first is called back when the value is sent. Aborting a step
fails its waiters and drops its values, so a failed step leaves nothing behind.

Entries of steps that are gone are bounded (a peer, or anyone who can reach the
task's ports, may push tensors for steps that never run; a receiver may wait for a
tensor nobody sends): a value waiting longer than ``ttl_s``, or the oldest values
while those waiting are more than ``max_entries`` or hold more than ``max_bytes``, are
dropped, and their step is aborted with an error saying why, so a step that does come
for one fails instead of waiting forever. Over the bounds, the values of the origin
holding the most bytes go first: the origin is who delivered a value as the server saw
it (``deliver``: a process, a host or a connection), never the sending task a key names,
which whoever pushes it chooses, so one origin's flood cannot push out another's values. ``sweep`` (the worker calls it on a timer)
does the same without waiting for the next send, and fails the receivers with no
deadline of their own that waited longer than ``ttl_s`` for a step no longer running.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Container, Optional

from tensorgrid.framework import errors

Callback = Callable[..., None]

ENTRY_OVERHEAD_BYTES = 256
"""What a waiting value costs besides its array's bytes and its key (the entry, its
tuple and the array object), counted against ``max_bytes`` so tiny values are bounded too."""
LOCAL_ORIGIN = "this task"
"""The origin of values sent by this task's own Sends (``send``)."""
MAX_ABORTED_STEPS = 65536
"""Aborted step ids remembered (so late sends fail) beyond which the oldest are forgotten."""


class LocalRendezvous:
    """Thread-safe table of sent values and waiting receivers for one task."""

    def __init__(self, ttl_s: float = 300.0, max_bytes: int = 1 << 30, max_entries: int = 1 << 18,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[int, str], tuple[Any, float, int, str]] = {}
        """(value, time sent, bytes counted, origin), oldest first (dicts keep insertion order)."""
        self._waiters: dict[tuple[int, str], tuple[Callback, Optional[float]]] = {}
        """(callback, time it began waiting; None for a receiver with a deadline of its own)."""
        self._aborted: dict[int, tuple[BaseException, float]] = {}
        self._ttl_s = ttl_s
        self._max_bytes = max_bytes
        self._max_entries = max_entries
        self._clock = clock
        self._value_bytes = 0
        self._origin_bytes: dict[str, int] = {}
        """Bytes counted for the waiting values of each origin (``deliver``)."""
        self.dropped = 0
        """Entries dropped: values untaken (expired or over the bounds) and receivers
        expired by ``sweep``, for metrics and tests."""

    def send(self, step_id: int, key: str, value: Any) -> None:
        """A value of this task's own Send for ``key`` in ``step_id``."""
        self.deliver(step_id, key, value, LOCAL_ORIGIN)

    def deliver(self, step_id: int, key: str, value: Any, origin: str) -> None:
        """A value for ``key`` in ``step_id`` that ``origin`` delivered: who the server
        knows sent it (a peer process, host or connection), whatever task the key names.
        Its bytes count against ``origin`` when values must be dropped."""
        entry = (step_id, key)
        with self._lock:
            failure = self._aborted.get(step_id)
            if failure is not None:
                raise failure[0]
            waiting = self._waiters.pop(entry, None)
            if waiting is None:
                if entry in self._values:
                    raise errors.InternalError(None, None, f"Duplicate send of {key} in step {step_id}")
                size = int(getattr(value, "nbytes", 0)) + len(key) + ENTRY_OVERHEAD_BYTES
                now = self._clock()
                self._values[entry] = (value, now, size, origin)
                self._value_bytes += size
                self._origin_bytes[origin] = self._origin_bytes.get(origin, 0) + size
                self._drop_untaken(now)
                return
        waiting[0](value)

    def _drop_untaken(self, now: float) -> None:
        """Drops values while the oldest is older than ``ttl_s`` (that one), or the values are
        more than ``max_entries`` or hold more than ``max_bytes``: then the oldest of the
        origin holding the most bytes, so one origin's flood drops its own values first
        (never the newest value), aborting their steps (lock held)."""
        dropped = False
        while self._values:
            (step_id, key), (_, sent, _, _) = next(iter(self._values.items()))
            if now - sent > self._ttl_s:
                why = f"nobody took it within {self._ttl_s:g} s (TENSORGRID_RENDEZVOUS_TTL_S)"
            elif self._value_bytes > self._max_bytes and len(self._values) > 1:
                step_id, key = self._oldest_of_heaviest_origin()
                why = (f"the tensors waiting to be taken on this task held more than {self._max_bytes} bytes "
                       f"(TENSORGRID_RENDEZVOUS_MAX_BYTES), and it was the oldest of the origin sending the most")
            elif len(self._values) > self._max_entries:
                step_id, key = self._oldest_of_heaviest_origin()
                why = (f"more than {self._max_entries} tensors were waiting to be taken on this task "
                       f"(TENSORGRID_RENDEZVOUS_MAX_ENTRIES), and it was the oldest of the origin sending the most")
            else:
                break
            self._forget_value((step_id, key))
            self.dropped += 1
            dropped = True
            if step_id not in self._aborted:
                self._aborted[step_id] = (errors.AbortedError(
                    None, None, f"Tensor {key} sent in step {step_id} was dropped: {why}"), now)
        if dropped:
            self._forget_old_aborts()

    def _oldest_of_heaviest_origin(self) -> tuple[int, str]:
        """The oldest waiting value of the origin holding the most bytes, unless that is the
        newest value: then the oldest of all (lock held, at least two values)."""
        heaviest = max(self._origin_bytes, key=self._origin_bytes.__getitem__)
        newest = next(reversed(self._values))
        entry = next(e for e, (_, _, _, origin) in self._values.items() if origin == heaviest)
        return next(iter(self._values)) if entry == newest else entry

    def _forget_value(self, entry: tuple[int, str]) -> Any:
        """Removes a waiting value and its bytes from the counts; returns it (lock held)."""
        value, _, size, origin = self._values.pop(entry)
        self._value_bytes -= size
        left = self._origin_bytes[origin] - size
        if left:
            self._origin_bytes[origin] = left
        else:
            del self._origin_bytes[origin]
        return value

    def flush(self, step_id: int) -> None:
        """Delivers what was sent so far in ``step_id`` (nothing to do for a local table)."""

    def take_async(self, step_id: int, key: str, done: Callback) -> None:
        """Calls ``done(value)`` now if it was sent, else when it is (or ``done(failure=...)``,
        also when it waited longer than ``ttl_s`` and ``sweep`` finds its step gone)."""
        self._take(step_id, key, done, self._clock())

    def _take(self, step_id: int, key: str, done: Callback, since: Optional[float]) -> None:
        entry = (step_id, key)
        with self._lock:
            failure = self._aborted.get(step_id)
            if failure is None:
                found = (self._forget_value(entry),) if entry in self._values else None
                if found is None:
                    if entry in self._waiters:
                        raise errors.InternalError(None, None, f"Two receivers for {key} in step {step_id}")
                    self._waiters[entry] = (done, since)
                    return
        if failure is not None:
            done(failure=failure[0])
        elif found is not None:
            done(found[0])

    def take(self, step_id: int, key: str, timeout: Optional[float] = None,
             wake: Optional[threading.Event] = None) -> Any:
        """Blocks until the value of ``key`` in ``step_id`` is sent; raises if the step
        aborts, DeadlineExceededError after ``timeout``, CancelledError when ``wake`` is
        set first (the caller's call ended: its waiter is removed at once)."""
        arrived = threading.Event()
        box: dict[str, Any] = {}

        def done(value: Any = None, failure: Optional[BaseException] = None) -> None:
            box["value"], box["failure"] = value, failure
            arrived.set()
            if wake is not None:
                wake.set()

        self._take(step_id, key, done, None if timeout is not None else self._clock())
        (wake or arrived).wait(timeout)
        if not arrived.is_set():
            with self._lock:
                mine = self._waiters.get((step_id, key), (None, None))[0] is done
                if mine:
                    del self._waiters[(step_id, key)]
            if mine and wake is not None and wake.is_set():
                raise errors.CancelledError(
                    None, None, f"The call waiting for tensor {key} of step {step_id} ended before it was sent")
            if mine:
                raise errors.DeadlineExceededError(
                    None, None, f"Timed out after {timeout} s waiting for tensor {key} of step {step_id}")
            arrived.wait()  # a send or an abort took the waiter and is calling it
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
            self._drop_step_values(step_id)
            self._forget_old_aborts()
        for _, (waiter, _) in waiters:
            waiter(failure=failure)

    def abort_steps_waiting_for(self, never_sent: Callable[[str], bool],
                                failure_of: Callable[[str], BaseException]) -> int:
        """Aborts (as ``abort``) every step with a receiver waiting for a key that
        ``never_sent`` says will not come (its sender is gone), with ``failure_of(key)``;
        returns how many steps it aborted."""
        with self._lock:
            doomed = {step_id: key for step_id, key in self._waiters if never_sent(key)}
        for step_id, key in doomed.items():
            self.abort(step_id, failure_of(key))
        return len(doomed)

    def cleanup_step(self, step_id: int) -> None:
        """Drops leftovers of a finished step: values nobody took, and receivers still
        waiting (they fail with AbortedError: nothing will be sent in a finished step)."""
        with self._lock:
            self._drop_step_values(step_id)
            waiters = [(k, self._waiters.pop(k)[0]) for k in [k for k in self._waiters if k[0] == step_id]]
        for (_, key), waiter in waiters:
            waiter(failure=errors.AbortedError(
                None, None, f"Step {step_id} was cleaned up while a receiver waited for tensor {key}"))

    def sweep(self, running_steps: Container[int]) -> int:
        """Expires what no send or step end would: values older than ``ttl_s`` (and the
        oldest beyond the bounds), and receivers without a deadline of their own that
        waited longer than ``ttl_s`` for a step not in ``running_steps`` (they fail with
        AbortedError). Returns how many entries it expired."""
        with self._lock:
            now = self._clock()
            dropped_before = self.dropped
            self._drop_untaken(now)
            expired = [(k, waiter) for k, (waiter, since) in self._waiters.items()
                       if since is not None and now - since > self._ttl_s and k[0] not in running_steps]
            for k, _ in expired:
                del self._waiters[k]
            self.dropped += len(expired)
            count = self.dropped - dropped_before
        for (step_id, key), waiter in expired:
            waiter(failure=errors.AbortedError(
                None, None, f"Nobody sent tensor {key} of step {step_id} within {self._ttl_s:g} s "
                f"(TENSORGRID_RENDEZVOUS_TTL_S), and the step no longer runs on this task"))
        return count

    def _drop_step_values(self, step_id: int) -> None:
        for k in [k for k in self._values if k[0] == step_id]:
            self._forget_value(k)

    def abort_all(self, failure: BaseException) -> None:
        with self._lock:
            steps = {k[0] for k in self._waiters} | {k[0] for k in self._values}
        for step_id in steps:
            self.abort(step_id, failure)

    def pending_count(self) -> int:
        """Values waiting to be taken plus receivers waiting for a value."""
        with self._lock:
            return len(self._values) + len(self._waiters)

    def pending_bytes(self) -> int:
        """Bytes counted for the values waiting to be taken (see ``max_bytes``)."""
        with self._lock:
            return self._value_bytes

    def _forget_old_aborts(self, horizon: float = 600.0) -> None:
        now = self._clock()
        for step_id in [s for s, (_, t) in self._aborted.items() if now - t > horizon]:
            del self._aborted[step_id]
        while len(self._aborted) > MAX_ABORTED_STEPS:
            del self._aborted[next(iter(self._aborted))]
