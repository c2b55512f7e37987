"""Queues and gradient accumulators: shared, blocking state for synchronous training.

A FIFO queue and a conditional accumulator live in a task's resource manager like
variables do, so every worker's session reaches the same one by name. Their
blocking operations (dequeue, take_grad) are asynchronous kernels: the waiting step
is called back when the data arrives, and closing the resource (Session.reset,
shutdown) fails the waiters instead of leaving them hanging.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Optional

from tensorgrid.framework import errors
from tensorgrid.kernels.registry import register_kernel

Done = Callable[..., None]


class FIFOQueue:
    """Tuples of arrays in arrival order; ``capacity < 0`` means unbounded."""

    def __init__(self, name: str, capacity: int, num_components: int) -> None:
        self.name = name
        self.capacity = capacity
        self.num_components = num_components
        self._items: collections.deque[tuple[Any, ...]] = collections.deque()
        self._takers: collections.deque[tuple[Optional[int], Done]] = collections.deque()
        self._putters: collections.deque[tuple[list[tuple[Any, ...]], Done]] = collections.deque()
        self._lock = threading.Lock()
        self._closed = False
        self._cancelled = False

    def size(self) -> int:
        with self._lock:
            return len(self._items)

    def enqueue_async(self, items: list[tuple[Any, ...]], done: Done) -> None:
        with self._lock:
            if self._closed:
                failure = errors.CancelledError(None, None, f"Queue '{self.name}' is closed.")
            else:
                failure = None
                self._putters.append((items, done))
            ready = self._settle()
        if failure is not None:
            done(failure=failure)
        for callback, value in ready:
            callback(value)

    def dequeue_async(self, count: Optional[int], done: Done) -> None:
        """``count=None`` takes one element; an int takes that many, stacked."""
        with self._lock:
            self._takers.append((count, done))
            ready = self._settle()
        for callback, value in ready:
            callback(value)

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        with self._lock:
            self._closed = True
            failed_putters = list(self._putters) if cancel_pending_enqueues else []
            if cancel_pending_enqueues:
                self._putters.clear()
            ready = self._settle()
            failed_takers = []
            if not self._putters:
                failed_takers = list(self._takers)
                self._takers.clear()
            size = len(self._items)
        for callback, value in ready:
            callback(value)
        for _, done in failed_putters:
            done(failure=errors.CancelledError(None, None, f"Enqueue to queue '{self.name}' was cancelled."))
        for count, done in failed_takers:
            done(failure=errors.OutOfRangeError(
                None, None,
                f"FIFOQueue '{self.name}' is closed and has insufficient elements "
                f"(requested {count or 1}, current size {size})",
            ))

    def _settle(self) -> list[tuple[Done, Any]]:
        """Moves pending puts into the queue and serves waiting takers (lock held)."""
        ready: list[tuple[Done, Any]] = []
        while self._putters:
            items, done = self._putters[0]
            if self.capacity >= 0 and len(self._items) + len(items) > self.capacity and self._items:
                break
            self._putters.popleft()
            self._items.extend(items)
            ready.append((done, None))
        while self._takers:
            count, done = self._takers[0]
            needed = count or 1
            if len(self._items) < needed:
                break
            self._takers.popleft()
            taken = [self._items.popleft() for _ in range(needed)]
            if count is None:
                ready.append((done, taken[0] if self.num_components > 1 else taken[0][0]))
            else:
                columns = tuple(_stack([item[i] for item in taken]) for i in range(self.num_components))
                ready.append((done, columns if self.num_components > 1 else columns[0]))
        return ready


def _stack(values: list[Any]) -> Any:
    first = values[0]
    xp = _array_module(first)
    return xp.stack([xp.asarray(v) for v in values])


def _array_module(value: Any) -> Any:
    module = type(value).__module__.split(".")[0]
    if module == "cupy":
        import importlib

        return importlib.import_module("cupy")
    import numpy

    return numpy


class ConditionalAccumulator:
    """Averages gradients applied for the current global step; stale ones are dropped."""

    def __init__(self, name: str, shape: Optional[tuple[Optional[int], ...]], reduction: str) -> None:
        self.name = name
        self.shape = shape
        self.reduction = reduction
        self.global_step = 0
        self.count = 0
        self.dropped = 0
        self._sum: Any = None
        self._takers: collections.deque[tuple[int, Done]] = collections.deque()
        self._lock = threading.Lock()
        self._closed = False

    def apply_grad(self, local_step: int, grad: Any, xp: Any) -> None:
        if self.shape is not None and (
            len(self.shape) != grad.ndim or any(d is not None and d != g for d, g in zip(self.shape, grad.shape))
        ):
            raise errors.InvalidArgumentError(
                None, None,
                f"Shape mismatch in accumulator {self.name}: expected {list(self.shape)}, got {list(grad.shape)}",
            )
        with self._lock:
            if local_step < self.global_step:
                self.dropped += 1
                return
            if self._sum is None:
                self._sum = grad.copy()
            else:
                xp.add(self._sum, grad, out=self._sum)
            self.count += 1
            ready = self._serve()
        for done, value in ready:
            done(value)

    def take_grad_async(self, num_required: int, done: Done) -> None:
        if num_required < 1:
            done(failure=errors.InvalidArgumentError(
                None, None, f"Argument num_required must be positive, but was {num_required}"))
            return
        with self._lock:
            if self._closed:
                failure: Optional[BaseException] = errors.CancelledError(None, None, f"Accumulator {self.name} is closed")
            else:
                failure = None
                self._takers.append((num_required, done))
            ready = self._serve()
        if failure is not None:
            done(failure=failure)
        for callback, value in ready:
            callback(value)

    def set_global_step(self, step: int) -> None:
        with self._lock:
            self.global_step = step

    def _serve(self) -> list[tuple[Done, Any]]:
        ready = []
        while self._takers and self.count >= self._takers[0][0]:
            _, done = self._takers.popleft()
            value = self._sum / self.count if self.reduction == "MEAN" else self._sum
            ready.append((done, value.astype(self._sum.dtype, copy=False)))
            self._sum = None
            self.count = 0
            self.global_step += 1
        return ready

    def close(self) -> None:
        with self._lock:
            self._closed = True
            takers = list(self._takers)
            self._takers.clear()
        for _, done in takers:
            done(failure=errors.CancelledError(None, None, f"Accumulator {self.name} was closed"))


# ---------------------------------------------------------------------- queue kernels

def _resource(k: Any, step: Any, kind: type, create: Callable[[], Any]) -> Any:
    name = k.attrs["shared_name"] or k.name
    return step.resources.lookup_or_create(k.attrs["container"], name, kind, create)


@register_kernel("FIFOQueueV2", host_only=True)
def _fifo_queue(k: Any, step: Any) -> Any:
    name = k.attrs["shared_name"] or k.name
    return _resource(k, step, FIFOQueue, lambda: FIFOQueue(name, k.attrs["capacity"], len(k.attrs["component_types"])))


def _check_components(queue: FIFOQueue, components: tuple[Any, ...]) -> None:
    if len(components) != queue.num_components:
        raise errors.InvalidArgumentError(
            None, None, f"Queue '{queue.name}' has {queue.num_components} components, got {len(components)}"
        )


@register_kernel("QueueEnqueueV2", is_async=True, host_only=True)
def _enqueue(k: Any, step: Any, done: Done, queue: FIFOQueue, *components: Any) -> None:
    _check_components(queue, components)
    queue.enqueue_async([tuple(c.copy() for c in components)], lambda value=None, failure=None: done(None, failure))


@register_kernel("QueueEnqueueManyV2", is_async=True, host_only=True)
def _enqueue_many(k: Any, step: Any, done: Done, queue: FIFOQueue, *components: Any) -> None:
    _check_components(queue, components)
    sizes = {c.shape[0] if c.ndim else None for c in components}
    if len(sizes) != 1 or None in sizes:
        raise errors.InvalidArgumentError(
            None, None, f"enqueue_many needs components with the same first dimension, got shapes {[c.shape for c in components]}"
        )
    count = sizes.pop()
    items = [tuple(c[i].copy() for c in components) for i in range(count)]
    queue.enqueue_async(items, lambda value=None, failure=None: done(None, failure))


@register_kernel("QueueDequeueV2", is_async=True, host_only=True)
def _dequeue(k: Any, step: Any, done: Done, queue: FIFOQueue) -> None:
    queue.dequeue_async(None, done)


@register_kernel("QueueDequeueManyV2", is_async=True, host_only=True)
def _dequeue_many(k: Any, step: Any, done: Done, queue: FIFOQueue, n: Any) -> None:
    count = int(n)
    if count < 0:
        raise errors.InvalidArgumentError(None, None, f"dequeue_many: n must be >= 0, got {count}")
    queue.dequeue_async(count, done)


@register_kernel("QueueSizeV2", host_only=True)
def _queue_size(k: Any, step: Any, queue: FIFOQueue) -> Any:
    return k.xp.asarray(queue.size(), dtype=k.output_dtypes[0])


@register_kernel("QueueCloseV2", host_only=True)
def _queue_close(k: Any, step: Any, queue: FIFOQueue) -> None:
    queue.close(k.attrs["cancel_pending_enqueues"])


# ---------------------------------------------------------------------- accumulator kernels

@register_kernel("ConditionalAccumulator")
def _accumulator(k: Any, step: Any) -> Any:
    name = k.attrs["shared_name"] or k.name
    return _resource(k, step, ConditionalAccumulator,
                     lambda: ConditionalAccumulator(name, k.attrs["shape"], k.attrs["reduction_type"]))


@register_kernel("AccumulatorApplyGradient")
def _apply_grad(k: Any, step: Any, accumulator: ConditionalAccumulator, local_step: Any, grad: Any) -> None:
    accumulator.apply_grad(int(local_step), grad, k.xp)


@register_kernel("AccumulatorTakeGradient", is_async=True)
def _take_grad(k: Any, step: Any, done: Done, accumulator: ConditionalAccumulator, num_required: Any) -> None:
    accumulator.take_grad_async(int(num_required), done)


@register_kernel("AccumulatorSetGlobalStep")
def _set_global_step(k: Any, step: Any, accumulator: ConditionalAccumulator, new_step: Any) -> None:
    accumulator.set_global_step(int(new_step))


@register_kernel("AccumulatorNumAccumulated")
def _num_accumulated(k: Any, step: Any, accumulator: ConditionalAccumulator) -> Any:
    return k.xp.asarray(accumulator.count, dtype=k.output_dtypes[0])
