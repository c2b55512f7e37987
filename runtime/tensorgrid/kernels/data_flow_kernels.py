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
from tensorgrid.kernels import context
from tensorgrid.kernels.registry import register_kernel

Done = Callable[..., None]
Cancelled = Callable[[], bool]
"""Tells whether the step that is waiting has failed: its place in line is then given up."""


def _never() -> bool:
    return False


_Taker = tuple[Optional[int], Done, list[tuple[Any, ...]], Cancelled, bool]
"""A waiting dequeue: how many elements (None: one, unstacked), its callback, what it took so
far, whether its step failed, and whether fewer will do once the queue is closed (up_to)."""


class FIFOQueue:
    """Tuples of arrays in arrival order; ``capacity < 0`` means unbounded.

    As in TensorFlow, ``enqueue_many`` and ``dequeue_many`` move one element at a time
    as room or data appears, so a batch larger than the capacity still goes through.
    Each component has a dtype name and a shape (None: any) that enqueued elements
    must match.
    """

    def __init__(self, name: str, capacity: int, component_types: list[str],
                 shapes: Optional[list[Optional[tuple[Optional[int], ...]]]] = None) -> None:
        self.name = name
        self.capacity = capacity
        self.component_types = list(component_types)
        self.num_components = len(component_types)
        self.shapes = list(shapes) if shapes else [None] * self.num_components
        self._items: collections.deque[tuple[Any, ...]] = collections.deque()
        self._takers: collections.deque[_Taker] = collections.deque()
        self._putters: collections.deque[tuple[collections.deque[tuple[Any, ...]], Done, Cancelled]] = \
            collections.deque()
        self._lock = threading.Lock()
        self._closed = False

    kind = "FIFOQueue"
    """The queue's kind, as TensorFlow's errors name it."""

    def size(self) -> int:
        with self._lock:
            return len(self._items)

    def _can_take(self) -> bool:
        """Whether a waiting dequeue may take an element now (lock held)."""
        return bool(self._items)

    def _take_one(self) -> tuple[Any, ...]:
        """The element a dequeue takes next (lock held, ``_can_take()`` true)."""
        return self._items.popleft()

    @property
    def closed(self) -> bool:
        return self._closed

    def check_same_definition(self, capacity: int, component_types: list[str],
                              shapes: list[Optional[tuple[Optional[int], ...]]]) -> None:
        """InvalidArgumentError unless a queue op asking for this shared queue defines it as it is."""
        for what, have, asked in (("capacity", self.capacity, capacity),
                                  ("component types", self.component_types, list(component_types)),
                                  ("component shapes", self.shapes, list(shapes) or [None] * len(component_types))):
            if have != asked:
                raise errors.InvalidArgumentError(
                    None, None, f"Shared queue '{self.name}' has {what} {have} but requested {what} was {asked}")

    def check_element(self, components: tuple[Any, ...]) -> None:
        """InvalidArgumentError unless one element's components have the queue's shapes."""
        for index, (component, shape) in enumerate(zip(components, self.shapes)):
            actual = tuple(component.shape)
            if shape is None or actual == shape:  # the common case, one comparison
                continue
            if len(shape) != len(actual) or any(d is not None and d != a for d, a in zip(shape, actual)):
                raise errors.InvalidArgumentError(
                    None, None, f"Shape mismatch in tuple component {index} of queue '{self.name}'. "
                    f"Expected {list(shape)}, got {list(actual)}")

    def enqueue_async(self, items: list[tuple[Any, ...]], done: Done, cancelled: Cancelled = _never) -> None:
        with self._lock:
            if self._closed:
                failure = errors.CancelledError(None, None, f"Queue '{self.name}' is closed.")
            else:
                failure = None
                self._putters.append((collections.deque(items), done, cancelled))
            ready = self._settle()
        if failure is not None:
            done(failure=failure)
        _notify(ready)

    def dequeue_async(self, count: Optional[int], done: Done, cancelled: Cancelled = _never,
                      up_to: bool = False) -> None:
        """``count=None`` takes one element; an int takes that many, stacked; with ``up_to``,
        fewer (at least one) once the queue is closed."""
        with self._lock:
            self._takers.append((count, done, [], cancelled, up_to))
            ready = self._settle()
        _notify(ready)

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        with self._lock:
            self._closed = True
            failed_putters = list(self._putters) if cancel_pending_enqueues else []
            if cancel_pending_enqueues:
                self._putters.clear()
            ready = self._settle()
        _notify(ready)
        for _, done, _ in failed_putters:
            done(failure=errors.CancelledError(None, None, f"Enqueue to queue '{self.name}' was cancelled."))

    def _settle(self) -> list[tuple[Done, Any, Optional[BaseException]]]:
        """Moves elements from pending puts to waiting takers, one at a time (lock held)."""
        ready: list[tuple[Done, Any, Optional[BaseException]]] = []
        while True:
            moved = False
            # A waiter whose step failed gives up its place (and a partial batch it holds),
            # so that no element is handed to a step that no longer listens.
            while self._putters and self._putters[0][2]():
                self._putters.popleft()
            while self._takers and self._takers[0][3]():
                self._items.extendleft(reversed(self._takers.popleft()[2]))
            if self._putters and (self.capacity < 0 or len(self._items) < self.capacity):
                items, done, _ = self._putters[0]
                if items:
                    self._items.append(items.popleft())
                    moved = True
                if not items:
                    self._putters.popleft()
                    ready.append((done, None, None))
                    moved = True
            if self._takers:
                count, done, taken, _, _ = self._takers[0]
                needed = 1 if count is None else count
                if len(taken) < needed and self._can_take():
                    taken.append(self._take_one())
                    moved = True
                if len(taken) == needed:
                    self._takers.popleft()
                    ready.append((done, self._value(count, taken), None))
                    moved = True
            if not moved:
                break
        if self._closed and not self._putters:
            # Nothing more can arrive: a dequeue_up_to that took some gets them; any
            # other taker still waiting never gets enough, and its partial batch goes
            # back to the front, as TensorFlow does.
            if self._takers and self._takers[0][4] and self._takers[0][2]:
                _, done, taken, _, _ = self._takers.popleft()
                ready.append((done, self._value(len(taken), taken), None))
            for _, _, taken, _, _ in reversed(self._takers):
                self._items.extendleft(reversed(taken))
            size = len(self._items)
            while self._takers:
                count, done, _, _, _ = self._takers.popleft()
                ready.append((done, None, errors.OutOfRangeError(
                    None, None,
                    f"{self.kind} '{self.name}' is closed and has insufficient elements "
                    f"(requested {1 if count is None else count}, current size {size})",
                )))
        return ready

    def _value(self, count: Optional[int], taken: list[tuple[Any, ...]]) -> Any:
        if count is None:
            return taken[0] if self.num_components > 1 else taken[0][0]
        columns = tuple(_stack([item[i] for item in taken]) for i in range(self.num_components))
        return columns if self.num_components > 1 else columns[0]


class RandomShuffleQueue(FIFOQueue):
    """A queue whose dequeues take elements at random (``tf.RandomShuffleQueue``).

    While the queue is open a dequeue waits until more than ``min_after_dequeue`` elements
    are in it, so that what is left stays mixed; once it is closed the rest is handed out.
    """

    kind = "RandomShuffleQueue"

    def __init__(self, name: str, capacity: int, min_after_dequeue: int, seeds: Optional[list[int]],
                 component_types: list[str], shapes: Optional[list[Optional[tuple[Optional[int], ...]]]] = None) -> None:
        import numpy

        super().__init__(name, capacity, component_types, shapes)
        self.min_after_dequeue = min_after_dequeue
        self._rng = numpy.random.default_rng(seeds)

    def _can_take(self) -> bool:
        return len(self._items) > (0 if self._closed else self.min_after_dequeue)

    def _take_one(self) -> tuple[Any, ...]:
        # The last element moves into the taken one's place, as TensorFlow's queue does: O(1),
        # where deleting from the middle of the deque moved half of it on every take.
        items = self._items
        index = int(self._rng.integers(len(items)))
        item = items[index]
        last = items.pop()
        if index < len(items):
            items[index] = last
        return item


def _notify(ready: list[tuple[Done, Any, Optional[BaseException]]]) -> None:
    """Calls the waiters back, outside the queue's lock."""
    for done, value, failure in ready:
        if failure is not None:
            done(failure=failure)
        else:
            done(value)


def _stack(values: list[Any]) -> Any:
    """Elements of a queue stacked: host arrays, since queue kernels run on the CPU
    (``host_only``: the executor copies a device tensor to the host before an enqueue)."""
    import numpy

    if not values:
        return numpy.zeros((0,))
    return numpy.stack(values)


class GradientAccumulator:
    """What the dense and the sparse accumulators share: gradients of the current global
    step are counted (stale ones dropped), takers wait until enough arrived, and each
    take starts the next step. A subclass adds a gradient (``_add``) and hands out what it
    gathered, forgetting it (``_take``)."""

    def __init__(self, name: str, shape: Optional[tuple[Optional[int], ...]], reduction: str) -> None:
        self.name = name
        self.shape = shape
        self.reduction = reduction
        self.global_step = 0
        self.count = 0
        self.dropped = 0
        self._takers: collections.deque[tuple[int, Done, Cancelled]] = collections.deque()
        self._lock = threading.Lock()
        self._closed = False

    def _add(self, gradient: Any) -> None:
        raise NotImplementedError

    def _take(self) -> Any:
        raise NotImplementedError

    def _apply(self, local_step: int, gradient: Any) -> None:
        """Adds ``gradient`` unless it is stale; serves the takers it completes."""
        with self._lock:
            if local_step < self.global_step:
                self.dropped += 1
                return
            self._add(gradient)
            self.count += 1
            ready = self._serve()
        for done, value in ready:
            done(value)

    def take_grad_async(self, num_required: int, done: Done, cancelled: Cancelled = _never) -> None:
        if num_required < 1:
            done(failure=errors.InvalidArgumentError(
                None, None, f"Argument num_required must be positive, but was {num_required}"))
            return
        with self._lock:
            if self._closed:
                failure: Optional[BaseException] = errors.CancelledError(None, None, f"Accumulator {self.name} is closed")
            else:
                failure = None
                self._takers.append((num_required, done, cancelled))
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
        while self._takers and self._takers[0][2]():
            self._takers.popleft()  # its step failed: the gradients wait for the next taker
        while self._takers and self.count >= self._takers[0][0]:
            _, done, _ = self._takers.popleft()
            ready.append((done, self._take()))
            self.count = 0
            self.global_step += 1
        return ready

    def close(self) -> None:
        with self._lock:
            self._closed = True
            takers = list(self._takers)
            self._takers.clear()
        for _, done, _ in takers:
            done(failure=errors.CancelledError(None, None, f"Accumulator {self.name} was closed"))


class ConditionalAccumulator(GradientAccumulator):
    """Averages gradients applied for the current global step; stale ones are dropped."""

    def __init__(self, name: str, shape: Optional[tuple[Optional[int], ...]], reduction: str) -> None:
        super().__init__(name, shape, reduction)
        self._sum: Any = None

    def apply_grad(self, local_step: int, grad: Any, xp: Any) -> None:
        if self.shape is not None and (
            len(self.shape) != grad.ndim or any(d is not None and d != g for d, g in zip(self.shape, grad.shape))
        ):
            raise errors.InvalidArgumentError(
                None, None,
                f"Shape mismatch in accumulator {self.name}: expected {list(self.shape)}, got {list(grad.shape)}",
            )
        self._apply(local_step, (grad, xp))

    def _add(self, gradient: Any) -> None:
        grad, xp = gradient
        if self._sum is None:
            self._sum = grad.copy()
        else:
            xp.add(self._sum, grad, out=self._sum)

    def _take(self) -> Any:
        value = self._sum / self.count if self.reduction == "MEAN" else self._sum
        value = value.astype(self._sum.dtype, copy=False)
        self._sum = None
        return value


# ---------------------------------------------------------------------- queue kernels

def _resource(k: context.KernelContext, step: context.StepContext, kind: type, create: Callable[[], Any]) -> Any:
    name = k.attrs["shared_name"] or k.name
    return step.resources.lookup_or_create(k.attrs["container"], name, kind, create)


def _cached_queue(k: context.KernelContext, step: context.StepContext) -> Optional[FIFOQueue]:
    """The queue this node found last time, while its resource manager has not been cleared: a
    queue-fed pipeline runs its queue op on every enqueue, and the lookup (a lock) and the check
    of the definition need doing once."""
    cached = k.state.get("queue")
    if cached is not None and cached[0] is step.resources and cached[1] == step.resources.generation:
        queue: FIFOQueue = cached[2]
        return queue
    return None


def _remember_queue(k: context.KernelContext, step: context.StepContext, queue: FIFOQueue) -> FIFOQueue:
    k.state["queue"] = (step.resources, step.resources.generation, queue)
    return queue


@register_kernel("FIFOQueueV2", host_only=True)
def _fifo_queue(k: context.KernelContext, step: context.StepContext) -> Any:
    cached = _cached_queue(k, step)
    if cached is not None:
        return cached
    name = k.attrs["shared_name"] or k.name
    types = list(k.attrs["component_types"])
    shapes = [None if s is None else tuple(s) for s in k.attrs.get("shapes") or []]
    queue = _resource(k, step, FIFOQueue, lambda: FIFOQueue(name, k.attrs["capacity"], types, shapes))
    queue.check_same_definition(k.attrs["capacity"], types, shapes)
    return _remember_queue(k, step, queue)


@register_kernel("RandomShuffleQueueV2", host_only=True)
def _random_shuffle_queue(k: context.KernelContext, step: context.StepContext) -> Any:
    cached = _cached_queue(k, step)
    if cached is not None:
        return cached
    name = k.attrs["shared_name"] or k.name
    types = list(k.attrs["component_types"])
    shapes = [None if s is None else tuple(s) for s in k.attrs.get("shapes") or []]
    seed, seed2 = k.attrs["seed"], k.attrs["seed2"]
    queue = _resource(k, step, RandomShuffleQueue, lambda: RandomShuffleQueue(
        name, k.attrs["capacity"], k.attrs["min_after_dequeue"], [seed, seed2] if (seed or seed2) else None,
        types, shapes))
    queue.check_same_definition(k.attrs["capacity"], types, shapes)
    return _remember_queue(k, step, queue)


def _check_components(queue: FIFOQueue, components: tuple[Any, ...]) -> None:
    if len(components) != queue.num_components:
        raise errors.InvalidArgumentError(
            None, None, f"Queue '{queue.name}' has {queue.num_components} components, got {len(components)}"
        )


@register_kernel("QueueEnqueueV2", is_async=True, host_only=True)
def _enqueue(k: context.KernelContext, step: context.StepContext, done: Done, queue: FIFOQueue,
             *components: Any) -> None:
    _check_components(queue, components)
    queue.check_element(components)
    queue.enqueue_async([tuple(c.copy() for c in components)], lambda value=None, failure=None: done(None, failure),
                        step.cancelled.is_set)


@register_kernel("QueueEnqueueManyV2", is_async=True, host_only=True)
def _enqueue_many(k: context.KernelContext, step: context.StepContext, done: Done, queue: FIFOQueue,
                  *components: Any) -> None:
    _check_components(queue, components)
    sizes = {c.shape[0] if c.ndim else None for c in components}
    if len(sizes) != 1 or None in sizes:
        raise errors.InvalidArgumentError(
            None, None, f"enqueue_many needs components with the same first dimension, got shapes {[c.shape for c in components]}"
        )
    count = int(components[0].shape[0])
    # c[i, ...] is an array even where c[i] is a Python object (a row of a string vector).
    items = [tuple(c[i, ...].copy() for c in components) for i in range(count)]
    for item in items[:1]:
        queue.check_element(item)  # every element of a batch has the same shapes
    queue.enqueue_async(items, lambda value=None, failure=None: done(None, failure), step.cancelled.is_set)


@register_kernel("QueueDequeueV2", is_async=True, host_only=True)
def _dequeue(k: context.KernelContext, step: context.StepContext, done: Done, queue: FIFOQueue) -> None:
    queue.dequeue_async(None, done, step.cancelled.is_set)


@register_kernel("QueueDequeueManyV2", is_async=True, host_only=True)
def _dequeue_many(k: context.KernelContext, step: context.StepContext, done: Done, queue: FIFOQueue, n: Any) -> None:
    count = int(n)
    if count < 0:
        raise errors.InvalidArgumentError(None, None, f"dequeue_many: n must be >= 0, got {count}")
    queue.dequeue_async(count, done, step.cancelled.is_set)


@register_kernel("QueueDequeueUpToV2", is_async=True, host_only=True)
def _dequeue_up_to(k: context.KernelContext, step: context.StepContext, done: Done, queue: FIFOQueue, n: Any) -> None:
    count = int(n)
    if count < 1:
        raise errors.InvalidArgumentError(None, None, f"dequeue_up_to: n must be >= 1, got {count}")
    queue.dequeue_async(count, done, step.cancelled.is_set, up_to=True)


@register_kernel("QueueIsClosedV2", host_only=True)
def _queue_is_closed(k: context.KernelContext, step: context.StepContext, queue: FIFOQueue) -> Any:
    return k.xp.asarray(queue.closed, dtype=k.output_dtypes[0])


@register_kernel("QueueSizeV2", host_only=True)
def _queue_size(k: context.KernelContext, step: context.StepContext, queue: FIFOQueue) -> Any:
    return k.xp.asarray(queue.size(), dtype=k.output_dtypes[0])


@register_kernel("QueueCloseV2", host_only=True)
def _queue_close(k: context.KernelContext, step: context.StepContext, queue: FIFOQueue) -> None:
    queue.close(k.attrs["cancel_pending_enqueues"])


# ---------------------------------------------------------------------- accumulator kernels

@register_kernel("ConditionalAccumulator")
def _accumulator(k: context.KernelContext, step: context.StepContext) -> Any:
    name = k.attrs["shared_name"] or k.name
    return _resource(k, step, ConditionalAccumulator,
                     lambda: ConditionalAccumulator(name, k.attrs["shape"], k.attrs["reduction_type"]))


@register_kernel("AccumulatorApplyGradient")
def _apply_grad(k: context.KernelContext, step: context.StepContext, accumulator: ConditionalAccumulator,
                local_step: Any, grad: Any) -> None:
    accumulator.apply_grad(int(local_step), grad, k.xp)


@register_kernel("AccumulatorTakeGradient", is_async=True)
def _take_grad(k: context.KernelContext, step: context.StepContext, done: Done, accumulator: ConditionalAccumulator,
               num_required: Any) -> None:
    accumulator.take_grad_async(int(num_required), done, step.cancelled.is_set)


# Both serve dense accumulators (on a GPU or not) and sparse ones (on the host): they run on
# the host and take the handle, and the step, from wherever they were made.
@register_kernel("AccumulatorSetGlobalStep", host_only=True, any_input_device=True)
def _set_global_step(k: context.KernelContext, step: context.StepContext, accumulator: ConditionalAccumulator,
                     new_step: Any) -> None:
    accumulator.set_global_step(int(new_step))


@register_kernel("AccumulatorNumAccumulated", host_only=True, any_input_device=True)
def _num_accumulated(k: context.KernelContext, step: context.StepContext, accumulator: ConditionalAccumulator) -> Any:
    return k.xp.asarray(accumulator.count, dtype=k.output_dtypes[0])
