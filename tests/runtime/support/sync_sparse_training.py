"""How the synchronous sparse tests train: in one session that holds the chief's queue runner, each
global step's replica pushes, a wait until the chief has applied them, then a late push.

Fixed tables and embedding variables (tests/runtime/train/test_sparse_sync_replicas.py,
tests/runtime/dynamic_embedding/test_embedding_variable_sync_*.py) train the same way, on
tensorgrid or on TF1 (the oracle), so the way is written once here.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterator, Mapping

PUSH_TIMEOUT_SECONDS = 20.0


@contextlib.contextmanager
def chief_session(lib: Any, graph: Any, hook: Any, init: Any, target: str = "") -> Iterator[Any]:
    """A session of ``graph`` as SyncReplicasOptimizer's chief holds one: ``init`` run and the chief's
    ``hook`` (its queue runner) started; stopped and closed after the block."""
    sess = lib.Session(target, graph=graph)
    coord = lib.train.Coordinator()
    try:
        sess.run(init)
        hook.after_create_session(sess, coord)
        yield sess
    finally:
        coord.request_stop()
        sess.close()
        coord.join(stop_grace_period_secs=5)


def run_sync_steps(sess: Any, train_op: Any, global_step: Any, feed: Callable[[Any, Any], dict[Any, Any]],
                   feeds_per_step: Any, late_pushes: Mapping[int, Any]) -> None:
    """For each step of ``feeds_per_step`` (one (ids, upstream gradients) pair per replica): every
    replica's push (``feed`` makes its feed dict), a wait until the global step has moved on, then the
    push ``late_pushes`` holds for that step's index, if any (a backup replica's, or a stale one)."""
    for index, feeds in enumerate(feeds_per_step):
        for ids, upstream in feeds:
            sess.run(train_op, feed(ids, upstream))
        target = index + 1
        deadline = time.monotonic() + PUSH_TIMEOUT_SECONDS
        while sess.run(global_step) != target:
            assert time.monotonic() < deadline, f"timed out waiting for global step {target}"
            time.sleep(0.005)
        if index in late_pushes:
            sess.run(train_op, feed(*late_pushes[index]))
