"""``tf.train.Coordinator``: stop a set of threads together and surface their errors; ``tf.train.LooperThread``:
a thread of a coordinator that calls a function in a loop or on a timer (the Supervisor's services)."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from typing import Any, Callable, Iterator, Optional, Sequence

from tensorgrid.framework import errors

log = logging.getLogger("tensorgrid.train")


class Coordinator:
    """Threads check ``should_stop``; any of them (or the owner) can ``request_stop``."""

    def __init__(self, clean_stop_exception_types: Optional[Sequence[type]] = None) -> None:
        # None means the default; an empty list means no exception stops cleanly (as in TF).
        self._clean_stop: tuple[type, ...] = (
            (errors.OutOfRangeError,) if clean_stop_exception_types is None else tuple(clean_stop_exception_types))
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info: Any = None
        self._registered: set[threading.Thread] = set()
        self._joined = False

    def request_stop(self, ex: Any = None) -> None:
        """Asks every thread to stop; an exception (not a clean-stop one) is re-raised by ``join``.

        ``ex`` is an exception or a ``sys.exc_info()`` tuple. As in TensorFlow, only the
        exception that caused the stop is kept: errors raised by threads while they shut
        down after a stop request are not.
        """
        exc_info = ex if isinstance(ex, tuple) else None if ex is None else (type(ex), ex, ex.__traceback__)
        with self._lock:
            if self._stop_event.is_set():
                return
            if exc_info is not None and not isinstance(exc_info[1], self._clean_stop):
                self._exc_info = exc_info
                log.info("Coordinator stopping because of %s: %s", exc_info[0].__name__, exc_info[1])
            self._stop_event.set()

    def clear_stop(self) -> None:
        with self._lock:
            self._joined = False
            self._exc_info = None
            self._stop_event.clear()

    def should_stop(self) -> bool:
        return self._stop_event.is_set()

    def wait_for_stop(self, timeout: Optional[float] = None) -> bool:
        return self._stop_event.wait(timeout)

    @contextlib.contextmanager
    def stop_on_exception(self) -> Iterator[None]:
        try:
            yield
        except BaseException:  # noqa: BLE001 - reported through request_stop
            self.request_stop(sys.exc_info())

    def register_thread(self, thread: threading.Thread) -> None:
        with self._lock:
            self._registered.add(thread)

    def join(self, threads: Optional[Sequence[threading.Thread]] = None, stop_grace_period_secs: float = 120,
             ignore_live_threads: bool = False) -> None:
        """Waits for the threads after a stop request; re-raises the first reported exception."""
        with self._lock:
            all_threads = set(self._registered) | set(threads or [])
        while any(t.is_alive() for t in all_threads) and not self.wait_for_stop(0.1):
            pass
        deadline = time.monotonic() + stop_grace_period_secs
        for t in all_threads:
            t.join(max(0.0, deadline - time.monotonic()))
        stragglers = [t.name for t in all_threads if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered = set()
            exc_info = self._exc_info
        if exc_info is not None:
            raise exc_info[1].with_traceback(exc_info[2])
        if stragglers and not ignore_live_threads:
            raise RuntimeError(f"Coordinator stopped with threads still running: {' '.join(stragglers)}")

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self) -> None:
        with self._lock:
            if self._exc_info is not None:
                raise self._exc_info[1].with_traceback(self._exc_info[2])


class LooperThread(threading.Thread):
    """Calls ``target(*args, **kwargs)`` (or ``run_loop``) every ``timer_interval_secs`` seconds, the first
    time at once, or back to back when it is None, until ``coord`` is asked to stop
    (``tf.train.LooperThread``). A daemon, registered with ``coord``; an exception it raises stops
    ``coord`` and is re-raised by ``coord.join``. Subclasses override ``start_loop``, ``run_loop`` and
    ``stop_loop``."""

    def __init__(self, coord: Coordinator, timer_interval_secs: Optional[float], target: Optional[Callable[..., Any]] = None,
                 args: Optional[Sequence[Any]] = None, kwargs: Optional[dict[str, Any]] = None) -> None:
        if not isinstance(coord, Coordinator):
            raise ValueError(f"'coord' argument must be a Coordinator: {coord!r}")
        if target is None and (args or kwargs):
            raise ValueError("'args' and 'kwargs' argument require that you also pass 'target'")
        super().__init__(daemon=True)
        self._coord = coord
        self._timer_interval_secs = timer_interval_secs
        self._loop_target = target
        self._loop_args = tuple(args or ())
        self._loop_kwargs = dict(kwargs or {})
        coord.register_thread(self)

    @staticmethod
    def loop(coord: Coordinator, timer_interval_secs: Optional[float], target: Callable[..., Any],
             args: Optional[Sequence[Any]] = None, kwargs: Optional[dict[str, Any]] = None) -> "LooperThread":
        """Starts a LooperThread calling ``target`` and returns it."""
        looper = LooperThread(coord, timer_interval_secs, target=target, args=args, kwargs=kwargs)
        looper.start()
        return looper

    def run(self) -> None:
        with self._coord.stop_on_exception():
            self.start_loop()
            if self._timer_interval_secs is None:
                while not self._coord.should_stop():
                    self.run_loop()
            else:
                next_time = time.monotonic()
                while not self._coord.wait_for_stop(max(0.0, next_time - time.monotonic())):
                    next_time += self._timer_interval_secs
                    self.run_loop()
            self.stop_loop()

    def start_loop(self) -> None:
        """Called once in the thread before the first ``run_loop``."""

    def stop_loop(self) -> None:
        """Called once in the thread after the last ``run_loop``."""

    def run_loop(self) -> None:
        """One round: calls the target."""
        if self._loop_target is not None:
            self._loop_target(*self._loop_args, **self._loop_kwargs)
