"""Python callables that a graph refers to by token (``Dataset.from_generator``, ``tf.py_func``).

A graph can only name a Python function, not carry it; the function stays in this
process's registry and the op holds its token. So, as in TensorFlow, such an op runs
only in the process that built the graph; elsewhere the lookup fails with an error
that says so. A ``tf.py_func`` op also records which process that is (``PROCESS``), so
a task that is handed one to run in another process refuses it when the partition is
registered, naming the op and the task, instead of finding an unrelated function under
the same token.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from typing import Any, Callable, Mapping, Optional

_lock = threading.Lock()
_callables: dict[int, Callable[..., Any]] = {}
_tokens = itertools.count(1)

PROCESS = uuid.uuid4().hex
"""This process, as the ops that name its callables record it (attribute ``PROCESS_ATTR``)."""
PROCESS_ATTR = "process"


def register(fn: Callable[..., Any]) -> int:
    """Keeps ``fn`` for the life of the process; returns its token."""
    with _lock:
        token = next(_tokens)
        _callables[token] = fn
        return token


def lookup(token: int) -> Callable[..., Any]:
    """The callable of ``token``; LookupError when this process did not register it."""
    with _lock:
        fn = _callables.get(token)
    if fn is None:
        raise LookupError(
            f"Python function {token} is not registered in this process: a Dataset.from_generator pipeline "
            "runs only in the process that built its graph (place its iterator on that process's task)")
    return fn


def not_runnable_here(op_type: str, op_name: str, attrs: Mapping[str, Any], task: str) -> Optional[str]:
    """Why the op ``op_name`` cannot run on ``task`` in this process (its Python function lives in
    another one), or None when it can (it names no process, or this one)."""
    owner = attrs.get(PROCESS_ATTR)
    if owner is None or owner == PROCESS:
        return None
    return (f"{op_type} op {op_name!r} is placed on {task}, but the Python function it calls lives only in the "
            "process that built the graph; as in TensorFlow, place a tf.py_func/tf.numpy_function on a task "
            "served by that process (the client's own in-process server), or replace it with graph ops")
