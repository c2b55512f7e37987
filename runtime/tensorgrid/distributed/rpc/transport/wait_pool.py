"""Threads for gRPC calls that wait, apart from the server's shared pool, and how many.

Why it exists: a ``RecvTensor`` call waits for its tensor (up to
``TENSORGRID_RECV_TENSOR_TIMEOUT_S``), and a synchronous gRPC server holds a thread of its
pool for as long as a method runs. On the shared pool that serves RunGraph, RunStep,
GetStatus and CreateSession, enough waiting calls would leave no thread for them. grpc runs
a method on the pool its handler names (``experimental_thread_pool``, which
``grpc_frames.generic_handler`` sets from its ``thread_pools``); a ``WaitPool`` is such a
pool: at most ``limit`` calls run on it at once, each on a thread of its own. A call
beyond them is not queued behind the waiting ones: it runs on the ``overflow`` executor
(the shared pool) only to be refused, with ``refusing()`` true in its thread, and the
method answers RESOURCE_EXHAUSTED at once.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any, Callable


class WaitPool(concurrent.futures.ThreadPoolExecutor):
    """A gRPC method's own threads: ``limit`` calls at once, the next ones refused."""

    def __init__(self, limit: int, overflow: concurrent.futures.Executor, name: str) -> None:
        if limit < 1:
            raise ValueError(f"a WaitPool needs a limit >= 1 of calls at once, got {limit}")
        super().__init__(max_workers=limit, thread_name_prefix=name)
        self.limit = limit
        self._slots = threading.BoundedSemaphore(limit)
        self._overflow = overflow
        self._refusing = threading.local()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Runs ``fn`` on a thread of this pool when fewer than ``limit`` calls run here,
        else on the overflow executor with ``refusing()`` true (so it answers at once)."""
        if self._slots.acquire(blocking=False):
            try:
                return super().submit(self._admitted, fn, args, kwargs)
            except BaseException:
                self._slots.release()
                raise
        return self._overflow.submit(self._refused, fn, args, kwargs)

    def refusing(self) -> bool:
        """Whether the calling thread runs a call beyond ``limit``, which must be refused."""
        return bool(getattr(self._refusing, "active", False))

    def _admitted(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return fn(*args, **kwargs)
        finally:
            self._slots.release()

    def _refused(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self._refusing.active = True
        try:
            return fn(*args, **kwargs)
        finally:
            self._refusing.active = False
