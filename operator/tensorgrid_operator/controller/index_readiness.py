"""Keeps kopf's index readiness from waiting forever on watchers kopf itself stopped.

Why it exists: an operator with indexes (``registrations``: pods, Services, NetworkPolicies and
PodDisruptionBudgets by job) makes kopf hold every handler and daemon until each watcher of an
indexed resource has listed its objects once, and each object so listed has been indexed: a
"toggle" per watcher and per object, dropped when that is done. kopf 1.45 drops them only then.
A watcher it stops before its first listing is done (its namespace deleted while the operator
starts: kopf watches a namespace marked for deletion until its status says it is going) leaves
its toggle, and a worker cancelled before its first event leaves the object's: the operator then
never acts on any job again, with nothing in its log. The operator's tests met it as a job whose
pods never came (tests/operator/controlplane/test_converted_tfjobs.py, a fresh operator starting
while the previous test's namespace was deleted).

:func:`install` wraps kopf's watcher and worker so that each drops its own toggle when it ends,
however it ends (dropping one twice is harmless). A stopped watcher's namespace has nothing left
to wait for, nor has a worker that will never run. kopf's internals are private: the wrappers are
installed only where they have the parameters this relies on, and a log line says when they do not.
"""

from __future__ import annotations

import functools
import inspect
import logging
from typing import Any, Callable, Coroutine

from kopf._core.reactor import queueing

_WRAPPED = "_tensorgrid_drops_its_readiness_toggle"
_PARAMETERS = ("operator_indexed", "resource_indexed")

Coro = Callable[..., Coroutine[Any, Any, Any]]


def _dropping_its_toggle(fn: Coro) -> Coro:
    """``fn`` (kopf's watcher or worker), then its ``resource_indexed`` toggle dropped from ``operator_indexed``."""

    @functools.wraps(fn)
    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        finally:
            toggles, toggle = kwargs.get("operator_indexed"), kwargs.get("resource_indexed")
            if toggles is not None and toggle is not None:
                await toggles.drop_toggle(toggle)

    setattr(wrapped, _WRAPPED, True)
    return wrapped


def install(logger: "logging.Logger | logging.LoggerAdapter[Any]") -> bool:
    """Wraps kopf's watcher and worker (once per process); ``False``, with a warning, where kopf has changed."""
    for name in ("watcher", "worker"):
        fn = getattr(queueing, name, None)
        if fn is None or not all(p in inspect.signature(fn).parameters for p in _PARAMETERS):
            logger.warning("kopf's queueing.%s is not the one of kopf 1.45 (parameters %s): index readiness is left "
                           "as kopf has it, and a namespace deleted while the operator starts may stop it acting on "
                           "jobs (controller/index_readiness.py)", name, ", ".join(_PARAMETERS))
            return False
    for name in ("watcher", "worker"):
        fn = getattr(queueing, name)
        if not getattr(fn, _WRAPPED, False):
            setattr(queueing, name, _dropping_its_toggle(fn))
    return True
