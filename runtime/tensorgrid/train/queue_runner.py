"""``tf.train.QueueRunner``: threads that keep running an enqueue op until told to stop.

SyncReplicasOptimizer's chief uses one to apply aggregated gradients and hand out
tokens for the next step.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any, Optional, Sequence

from tensorgrid.framework import errors
from tensorgrid.framework import graph as graph_lib

log = logging.getLogger("tensorgrid.train")


class QueueRunner:
    """Runs each of ``enqueue_ops`` in its own thread, in a loop."""

    def __init__(self, queue: Any = None, enqueue_ops: Optional[Sequence[Any]] = None, close_op: Any = None,
                 cancel_op: Any = None, queue_closed_exception_types: Optional[Sequence[type]] = None) -> None:
        if not enqueue_ops:
            raise ValueError("QueueRunner needs at least one enqueue op")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None or queue is None else queue.close()
        self._cancel_op = cancel_op if cancel_op is not None or queue is None else queue.close(cancel_pending_enqueues=True)
        self._closed_types: tuple[type[BaseException], ...] = tuple(
            queue_closed_exception_types or (errors.OutOfRangeError,))
        self._exceptions: list[BaseException] = []
        self._lock = threading.Lock()
        self._runs_per_session: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    @property
    def queue(self) -> Any:
        return self._queue

    @property
    def enqueue_ops(self) -> list[Any]:
        return list(self._enqueue_ops)

    @property
    def exceptions_raised(self) -> list[BaseException]:
        return list(self._exceptions)

    def _run(self, sess: Any, enqueue_op: Any, coord: Any) -> None:
        try:
            while coord is None or not coord.should_stop():
                try:
                    sess.run(enqueue_op)
                except self._closed_types:
                    # The input ran out: close the queue once the last enqueue thread of
                    # this session is done, so its consumers see the end.
                    if self._finish_run(sess) and self._close_op is not None:
                        try:
                            sess.run(self._close_op)
                        except Exception as e:  # noqa: BLE001 - best effort
                            log.debug("closing queue failed: %s", e)
                    return
        except (errors.CancelledError, RuntimeError) as e:
            if coord is None or not coord.should_stop():
                self._record(e, coord)
        except BaseException as e:  # noqa: BLE001 - reported to the coordinator
            self._record(e, coord)
        self._finish_run(sess)

    def _finish_run(self, sess: Any) -> bool:
        """Counts one enqueue thread of ``sess`` as finished; True for the last one."""
        with self._lock:
            self._runs_per_session[sess] -= 1
            return self._runs_per_session[sess] == 0

    def _record(self, e: BaseException, coord: Any) -> None:
        if coord is not None:
            coord.request_stop(e)
            return
        log.error("QueueRunner thread failed: %s", e)
        with self._lock:
            self._exceptions.append(e)

    def _cancel_on_stop(self, sess: Any, coord: Any) -> None:
        coord.wait_for_stop()
        if self._cancel_op is not None:
            try:
                sess.run(self._cancel_op)
            except Exception as e:  # noqa: BLE001 - the session may be closing
                log.debug("cancelling queue failed: %s", e)

    def create_threads(self, sess: Any, coord: Any = None, daemon: bool = False, start: bool = False) -> list[threading.Thread]:
        """One thread per enqueue op (plus one that cancels the queue on a stop request).

        Returns no threads if this runner's threads for ``sess`` are still running.
        """
        with self._lock:
            if self._runs_per_session.get(sess, 0) > 0:
                return []
            self._runs_per_session[sess] = len(self._enqueue_ops)
        threads = [threading.Thread(target=self._run, args=(sess, op, coord), daemon=daemon,
                                    name=f"QueueRunner-{getattr(op, 'name', i)}")
                   for i, op in enumerate(self._enqueue_ops)]
        if coord is not None:
            threads.append(threading.Thread(target=self._cancel_on_stop, args=(sess, coord), daemon=daemon,
                                            name="QueueRunner-cancel"))
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if start:
                t.start()
        return threads


def add_queue_runner(qr: QueueRunner, collection: str = graph_lib.GraphKeys.QUEUE_RUNNERS) -> None:
    graph_lib.get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(sess: Any = None, coord: Any = None, daemon: bool = True, start: bool = True,
                        collection: str = graph_lib.GraphKeys.QUEUE_RUNNERS) -> list[threading.Thread]:
    sess = sess or graph_lib.get_default_session()
    if sess is None:
        raise ValueError("Cannot start queue runners: no default session is registered")
    threads: list[threading.Thread] = []
    for qr in sess.graph.get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads
