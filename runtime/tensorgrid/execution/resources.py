"""Named containers of resources (variables, queues, accumulators) on one task.

State outlives steps and sessions: every session that runs a graph naming variable
``w`` in container ``c`` on this task gets the same buffer, which is how workers
share parameters on a PS. ``Session.reset`` clears containers.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, TypeVar

from tensorgrid.execution import written_rows
from tensorgrid.framework import errors

DEFAULT_CONTAINER = "localhost"

R = TypeVar("R")


class Variable:
    """A mutable buffer with a declared dtype and shape; uninitialized until assigned."""

    def __init__(self, name: str, dtype: Any, shape: Optional[tuple[Optional[int], ...]], backend: Any) -> None:
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.backend = backend
        self.value: Any = None
        self.lock = threading.Lock()
        self.updates = 0
        self.written = written_rows.WrittenRows()
        """Which rows were written when: what an incremental checkpoint reads."""
        self.awaits_its_op = False
        """Made before the graph's variable op ran (loaded from a replica on the host): that op
        moves it to its own device when it first finds it (``state_kernels._variable``)."""

    @property
    def initialized(self) -> bool:
        return self.value is not None

    def read(self) -> Any:
        value = self.value
        if value is None:
            raise errors.FailedPreconditionError(
                None, None,
                f"Attempting to use uninitialized value {self.name}: run its initializer "
                "(tf.global_variables_initializer()) or restore it from a checkpoint first",
            )
        return value

    def assign(self, new_value: Any, validate_shape: bool) -> None:
        if validate_shape and self.shape is not None:
            declared = self.shape
            actual = tuple(new_value.shape)
            if len(declared) != len(actual) or any(d is not None and d != a for d, a in zip(declared, actual)):
                raise errors.InvalidArgumentError(
                    None, None,
                    f"Assign requires shapes of both tensors to match. lhs shape= {list(declared)} "
                    f"rhs shape= {list(actual)} (variable {self.name})",
                )
        if new_value.dtype != self.dtype:
            new_value = new_value.astype(self.dtype)
        if self.value is not None and self.value.shape == new_value.shape and self.backend.is_native(new_value):
            # Copy in place: readers holding the buffer (and fused updates) keep one buffer.
            self.value[...] = new_value
        else:
            self.value = new_value.copy() if self.backend.is_native(new_value) else self.backend.asarray(new_value)
        self.updates += 1
        self.written.wrote_whole()


class ResourceManager:
    """Containers of named resources; thread-safe lookup-or-create."""

    variable_type = Variable
    """Kernels create variables through this, so the kernel layer needs no import of this one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._containers: dict[str, dict[str, Any]] = {}
        self.generation = 0
        """Bumped by ``cleanup`` so kernels drop resources they cached."""

    def lookup_or_create(self, container: str, name: str, kind: type, create: Callable[[], R]) -> R:
        container = container or DEFAULT_CONTAINER
        with self._lock:
            resources = self._containers.setdefault(container, {})
            existing = resources.get(name)
            if existing is None:
                existing = create()
                resources[name] = existing
            elif not isinstance(existing, kind):
                raise errors.InvalidArgumentError(
                    None, None,
                    f"Resource {container}/{name} is a {type(existing).__name__}, not a {kind.__name__}",
                )
            return existing  # type: ignore[return-value]

    def lookup(self, container: str, name: str) -> Any:
        container = container or DEFAULT_CONTAINER
        with self._lock:
            try:
                return self._containers[container][name]
            except KeyError:
                raise errors.NotFoundError(None, None, f"Resource {container}/{name} does not exist") from None

    def containers(self) -> list[str]:
        with self._lock:
            return sorted(self._containers)

    def items(self) -> list[tuple[str, str, Any]]:
        with self._lock:
            return [(c, n, r) for c, rs in self._containers.items() for n, r in rs.items()]

    def cleanup(self, containers: Optional[list[str]] = None) -> None:
        """Drops the named containers (all of them when ``containers`` is empty)."""
        with self._lock:
            self.generation += 1
            doomed = list(self._containers) if not containers else [c or DEFAULT_CONTAINER for c in containers]
            for name in doomed:
                resources = self._containers.pop(name, {})
                for resource in resources.values():
                    close = getattr(resource, "close", None)
                    if close is not None:
                        close()
