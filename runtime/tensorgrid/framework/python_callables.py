"""Python callables that a graph refers to by token (``Dataset.from_generator``).

A graph can only name a Python function, not carry it; the function stays in this
process's registry and the op holds its token. So, as in TensorFlow, such an op runs
only in the process that built the graph; elsewhere the lookup fails with an error
that says so.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable

_lock = threading.Lock()
_callables: dict[int, Callable[..., Any]] = {}
_tokens = itertools.count(1)


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
