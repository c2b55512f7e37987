"""``Dataset.prefetch(n)``: a background thread that keeps up to ``n`` elements ready.

The thread runs the upstream pipeline (its map functions included) while the training step
works, and puts each element, then the end or the error that stopped the pipeline, into a
bounded buffer; the iterator takes them in order. A prefetcher stops, and its thread ends,
when its pass is abandoned: the iterator is initialized again, its resource is dropped
(Session.close, Session.reset), or the consumer lets go of the pass.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Iterator

AUTOTUNE_ELEMENTS = 4
"""How many elements ``prefetch(tf.data.experimental.AUTOTUNE)`` keeps ready (TensorFlow tunes
the number as it runs; a fixed small buffer overlaps input with the step the same way)."""

_END = object()


class Prefetcher:
    """One pass of an upstream pipeline, run ahead by its own thread into a bounded buffer."""

    def __init__(self, upstream: Iterator[Any], buffer_size: int, name: str,
                 on_thread_start: Callable[[], None]) -> None:
        self._upstream = upstream
        self._capacity = buffer_size
        self._buffer: collections.deque[tuple[Any, Any]] = collections.deque()
        self._changed = threading.Condition()
        self._stopped = False
        self._on_thread_start = on_thread_start
        self.thread = threading.Thread(target=self._fill, name=f"prefetch-{name}", daemon=True)
        self.thread.start()

    def _fill(self) -> None:
        self._on_thread_start()
        while True:
            try:
                item: tuple[Any, Any] = (next(self._upstream), None)
            except StopIteration:
                item = (_END, None)
            except BaseException as exc:  # noqa: BLE001 - the consumer gets it in order (else it would wait forever)
                item = (_END, exc)
            with self._changed:
                while len(self._buffer) >= self._capacity and not self._stopped:
                    self._changed.wait()
                if self._stopped:
                    return
                self._buffer.append(item)
                self._changed.notify_all()
            if item[0] is _END:
                return

    def elements(self) -> Iterator[Any]:
        """The upstream's elements in order; then its error, if one stopped it."""
        try:
            while True:
                with self._changed:
                    while not self._buffer and not self._stopped:
                        self._changed.wait()
                    if self._stopped:
                        return
                    element, failure = self._buffer.popleft()
                    self._changed.notify_all()
                if element is _END:
                    if failure is not None:
                        raise failure
                    return
                yield element
        finally:
            self.stop()

    def stop(self) -> None:
        """Ends the thread (at once when it waits for room; after its current element otherwise)."""
        with self._changed:
            self._stopped = True
            self._buffer.clear()
            self._changed.notify_all()
