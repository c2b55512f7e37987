"""``tf.train.Coordinator``: stop a set of threads together and surface their errors."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from typing import Any, Iterator, Optional, Sequence

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
