"""Kernels of ``tf.data`` iterators: the pipeline an iterator op names, run on its task.

A Dataset reaches the graph as a list of stages (an attribute of the iterator op: a
source, then transformations) and the tensors its stages read (the op's inputs). An
iterator is a resource of its task; initializing it builds the pipeline as a chain of
Python iterators over host arrays; ``IteratorGetNext`` takes one element, or raises
OutOfRangeError at the end. ``map`` functions run as graphs (the step's function library);
``prefetch`` runs its upstream in a thread of its own (``dataset_prefetch``).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.framework import python_callables
from tensorgrid.kernels import backend as backend_lib
from tensorgrid.kernels import context
from tensorgrid.kernels import dataset_batching
from tensorgrid.kernels import dataset_prefetch
from tensorgrid.kernels import registry as kernel_registry
from tensorgrid.kernels import tf_record

Element = list[Any]
Source = Callable[[], Iterator[Element]]
"""Makes a fresh pass over a stage's elements (``repeat`` asks again for each epoch)."""


class IteratorState:
    """One iterator resource: its pipeline's current pass and the step its functions run in."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock = threading.Lock()
        self.elements: Optional[Iterator[Element]] = None
        self.step: Optional[context.StepContext] = None
        self._prefetchers: list[dataset_prefetch.Prefetcher] = []
        self._prefetchers_lock = threading.Lock()
        self._thread_step = threading.local()

    def initialize(self, stages: Sequence[Any], inputs: Sequence[Any], step: context.StepContext) -> None:
        self.step = step
        self.close()  # a new pass: the old one's prefetch threads end
        source = _pipeline(self, stages, list(inputs))
        with self.lock:
            self.elements = source()

    def consumer_step(self) -> context.StepContext:
        """The step that initialized this pass, or the last that took an element from it."""
        assert self.step is not None, f"iterator {self.name}: its pipeline runs before initialize gave it a step"
        return self.step

    def function_step(self) -> context.StepContext:
        """The step a dataset function runs in: the consumer's, or a prefetch thread's own."""
        return getattr(self._thread_step, "step", None) or self.consumer_step()

    def _adopt_step(self) -> None:
        """Gives a prefetch thread a step of its own on the consumer's resources, so a failed
        training step does not cancel the functions running ahead of it."""
        self._thread_step.step = self.consumer_step().detached()

    def prefetched(self, upstream: Source, buffer_size: int) -> Iterator[Element]:
        prefetcher = dataset_prefetch.Prefetcher(upstream(), buffer_size, self.name, self._adopt_step)
        with self._prefetchers_lock:
            self._prefetchers = [p for p in self._prefetchers if p.thread.is_alive()] + [prefetcher]
        return prefetcher.elements()

    def prefetch_threads(self) -> list[threading.Thread]:
        """The prefetch threads still running (for tests of their cleanup)."""
        with self._prefetchers_lock:
            return [p.thread for p in self._prefetchers if p.thread.is_alive()]

    def close(self) -> None:
        """Stops every prefetch thread (the resource is dropped, or a new pass begins)."""
        with self._prefetchers_lock:
            doomed, self._prefetchers = self._prefetchers, []
        for prefetcher in doomed:
            prefetcher.stop()

    def get_next(self, step: context.StepContext) -> Element:
        with self.lock:
            if self.elements is None:
                raise errors.FailedPreconditionError(
                    None, None, f"GetNext() failed because the iterator {self.name} has not been initialized. Ensure "
                    "that you have run the initializer operation for this iterator before getting the next element.")
            self.step = step
            try:
                return next(self.elements)
            except StopIteration:
                raise errors.OutOfRangeError(None, None, "End of sequence") from None


def _pipeline(state: IteratorState, stages: Sequence[Any], inputs: list[Any]) -> Source:
    source: Optional[Source] = None
    for stage in stages:
        kind, params = stage[0], list(stage[1:])
        if source is None:
            source = _zip(state, params, inputs) if kind == "zip" else _source(kind, params, inputs)
            continue
        source = _transformation(state, kind, params, inputs, source)
    if source is None:
        raise errors.InvalidArgumentError(None, None, "A dataset needs a source stage; got no stages")
    return source


def _zip(state: IteratorState, params: list[Any], inputs: list[Any]) -> Source:
    """Elements of several pipelines side by side, until the shortest ends."""
    sources = [_pipeline(state, stages, _take(inputs, count)) for stages, count in params[0]]
    return lambda: ([c for element in elements for c in element] for elements in zip(*[s() for s in sources]))


def _take(inputs: list[Any], count: int) -> list[Any]:
    if count > len(inputs):
        raise errors.InvalidArgumentError(None, None, f"A dataset stage reads {count} inputs but only "
                                          f"{len(inputs)} are left")
    taken = inputs[:count]
    del inputs[:count]
    return taken


def _source(kind: str, params: list[Any], inputs: list[Any]) -> Source:
    if kind == "tensor_slices":
        arrays = [np.asarray(a) for a in _take(inputs, params[0])]
        sizes = {a.shape[0] if a.ndim else None for a in arrays}
        if None in sizes or len(sizes) != 1:
            raise errors.InvalidArgumentError(
                None, None, f"from_tensor_slices needs components with the same first dimension, got shapes "
                f"{[list(a.shape) for a in arrays]}")
        return lambda: ([a[i] for a in arrays] for i in range(arrays[0].shape[0]))
    if kind == "tensors":
        values = [np.asarray(a) for a in _take(inputs, params[0])]
        return lambda: iter([list(values)])
    if kind == "range":
        start, stop, step = params
        return lambda: ([np.int64(v)] for v in range(start, stop, step))
    if kind == "generator":
        token, count = params
        args = [np.asarray(a) for a in _take(inputs, count)]
        make = python_callables.lookup(token)
        return lambda: iter(make(*args))
    if kind in ("tfrecord_files", "text_line_files"):
        compression, parallel = params
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in np.asarray(_take(inputs, 1)[0]).reshape(-1)]
        read = tf_record.read_records if kind == "tfrecord_files" else tf_record.read_lines
        files: list[Source] = [_file_source(read, name, compression) for name in names]
        return lambda: interleaved(iter(files), max(parallel, 1), 1)
    if kind == "fixed_length_files":
        compression, parallel, record_bytes, header_bytes, footer_bytes, buffer_size = params
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in np.asarray(_take(inputs, 1)[0]).reshape(-1)]

        def read_fixed(name: str, compression: str) -> Iterator[bytes]:
            return tf_record.read_fixed_length(name, compression, record_bytes, header_bytes, footer_bytes,
                                               buffer_size)

        files = [_file_source(read_fixed, name, compression) for name in names]
        return lambda: interleaved(iter(files), max(parallel, 1), 1)
    raise errors.InvalidArgumentError(None, None, f"Unknown dataset source {kind!r}; valid sources are "
                                      "tensor_slices, tensors, range, generator, zip, tfrecord_files, text_line_files, "
                                      "fixed_length_files")


def _file_source(read: Callable[[str, str], Iterator[bytes]], name: str, compression: str) -> Source:
    return lambda: ([np.array(item, dtype=object)] for item in read(name, compression))


def interleaved(sources: Iterator[Source], cycle_length: int, block_length: int) -> Iterator[Element]:
    """TensorFlow's interleave order (its InterleaveDatasetOp, step for step): up to ``cycle_length``
    sources open at once, ``block_length`` elements from each in turn; a slot that runs out is
    refilled from the next source when the cycle comes back to it."""
    current: list[Optional[Iterator[Element]]] = [None] * cycle_length
    end_of_input, num_open, index, block = False, 0, 0, 0
    while not end_of_input or num_open > 0:
        open_element = current[index]
        if open_element is not None:
            item = next(open_element, None)
            if item is not None:
                yield item
                block += 1
                if block == block_length:
                    block, index = 0, (index + 1) % cycle_length
                continue
            current[index] = None
            num_open -= 1
            block, index = 0, (index + 1) % cycle_length
        elif not end_of_input:
            source = next(sources, None)
            if source is None:
                end_of_input = True
            else:
                current[index] = source()
                num_open += 1
        else:
            block, index = 0, (index + 1) % cycle_length


def _transformation(state: IteratorState, kind: str, params: list[Any], inputs: list[Any],
                    upstream: Source) -> Source:
    if kind == "map":
        attr, count = params
        captured = _take(inputs, count)
        function = state.consumer_step().functions.instantiate(attr, backend_lib.for_device("CPU"))
        return lambda: (list(function(state.function_step(), [*element, *captured])) for element in upstream())
    if kind == "filter":
        attr, count = params
        captured = _take(inputs, count)
        predicate = state.consumer_step().functions.instantiate(attr, backend_lib.for_device("CPU"))
        return lambda: (element for element in upstream()
                        if bool(np.asarray(predicate(state.function_step(), [*element, *captured])[0])))
    if kind == "batch":
        size, drop_remainder, sparse_starts = params
        return lambda: _batches(upstream(), size, drop_remainder, sparse_starts)
    if kind == "shuffle":
        buffer_size, seed, reshuffle = params
        random = np.random.RandomState(seed)
        return lambda: _shuffled(upstream(), buffer_size, random if reshuffle else np.random.RandomState(seed))
    if kind in ("repeat", "take", "skip"):
        count = params[0] if params[0] is not None else _count(kind, _take(inputs, 1)[0])
        if kind == "repeat":
            return lambda: _repeated(upstream, count)
        if kind == "take":
            return lambda: itertools.islice(upstream(), None if count < 0 else count)
        return lambda: _skipped(upstream(), count)
    if kind == "prefetch":
        size = params[0] if params[0] != -1 else dataset_prefetch.AUTOTUNE_ELEMENTS
        return lambda: state.prefetched(upstream, size)
    if kind == "padded_batch":
        size, drop_remainder, shapes = params
        pads = [np.asarray(p) for p in _take(inputs, len(shapes))]
        return lambda: dataset_batching.padded_batches(upstream(), size, drop_remainder, shapes, pads)
    if kind == "concatenate":
        stages, count = params
        following = _pipeline(state, stages, _take(inputs, count))
        return lambda: itertools.chain(upstream(), following())
    if kind == "interleave":
        attr, count, stages, nested_count, cycle, block = params
        captured = _take(inputs, count)
        make_inputs = state.consumer_step().functions.instantiate(attr, backend_lib.for_device("CPU"))

        def sources() -> Iterator[Source]:
            for element in upstream():
                values = make_inputs(state.function_step(), [*element, *captured])
                yield _pipeline(state, stages, list(values[:nested_count]))

        return lambda: interleaved(sources(), cycle, block)
    raise errors.InvalidArgumentError(None, None, f"Unknown dataset transformation {kind!r}; valid are map, filter, "
                                      "batch, padded_batch, shuffle, repeat, take, skip, prefetch, concatenate, "
                                      "interleave")


def _count(kind: str, value: Any) -> int:
    """A stage's count read from its tensor when the iterator is initialized."""
    array = np.asarray(value)
    if array.ndim != 0 or array.dtype.kind not in "iu":
        raise errors.InvalidArgumentError(None, None, f"Dataset.{kind}: count must be an integer scalar, got "
                                          f"{array.tolist()!r}")
    return int(array)


def _batches(elements: Iterator[Element], size: int, drop_remainder: bool,
             sparse_starts: Sequence[int]) -> Iterator[Element]:
    sparse = {start + offset for start in sparse_starts for offset in range(3)}
    while True:
        batch = list(itertools.islice(elements, size))
        if not batch or (drop_remainder and len(batch) < size):
            return
        stacked: list[Any] = []
        for component in range(len(batch[0])):
            if component in sparse:
                if component in sparse_starts:
                    stacked.extend(dataset_batching.sparse_batch([element[component:component + 3]
                                                                  for element in batch]))
                continue
            first = np.shape(batch[0][component])
            for i, element in enumerate(batch):
                if np.shape(element[component]) != first:
                    raise errors.InvalidArgumentError(
                        None, None, f"Cannot batch tensors with different shapes in component {component}. First "
                        f"element had shape {list(first)} and element {i} had shape {list(np.shape(element[component]))}.")
            stacked.append(np.stack([element[component] for element in batch]))
        yield stacked


def _shuffled(elements: Iterator[Element], buffer_size: int, random: np.random.RandomState) -> Iterator[Element]:
    buffer = list(itertools.islice(elements, buffer_size))
    for element in elements:
        index = random.randint(len(buffer))
        yield buffer[index]
        buffer[index] = element
    while buffer:
        yield buffer.pop(random.randint(len(buffer)))


def _repeated(upstream: Source, count: int) -> Iterator[Element]:
    epochs = itertools.count() if count < 0 else range(count)
    for _ in epochs:
        produced = False
        for element in upstream():
            produced = True
            yield element
        if not produced:
            return  # an empty dataset repeated forever is empty, not an endless loop


def _skipped(elements: Iterator[Element], count: int) -> Iterator[Element]:
    if count < 0:
        return iter(())
    return itertools.islice(elements, count, None)


def _iterator_state(k: context.KernelContext, step: context.StepContext) -> IteratorState:
    cached = k.state.get("iterator")
    if cached is not None and cached[0] is step.resources and cached[1] == step.resources.generation:
        return cached[2]  # type: ignore[no-any-return]
    name = k.attrs["shared_name"] or k.name
    state = step.resources.lookup_or_create(k.attrs["container"], name, IteratorState, lambda: IteratorState(name))
    k.state["iterator"] = (step.resources, step.resources.generation, state)
    return state


@kernel_registry.register_kernel("Iterator", host_only=True)
def _iterator(k: context.KernelContext, step: context.StepContext) -> Any:
    return _iterator_state(k, step)


@kernel_registry.register_kernel("OneShotIterator", host_only=True)
def _one_shot_iterator(k: context.KernelContext, step: context.StepContext, *inputs: Any) -> Any:
    state = _iterator_state(k, step)
    with k.state.setdefault("init_lock", threading.Lock()):
        if state.elements is None:
            state.initialize(k.attrs["dataset"], inputs, step)
    return state


@kernel_registry.register_kernel("MakeIterator", host_only=True)
def _make_iterator(k: context.KernelContext, step: context.StepContext, state: IteratorState, *inputs: Any) -> None:
    state.initialize(k.attrs["dataset"], inputs, step)


@kernel_registry.register_kernel("IteratorGetNext", host_only=True)
def _iterator_get_next(k: context.KernelContext, step: context.StepContext, state: IteratorState) -> Any:
    element = state.get_next(step)
    if len(element) != len(k.output_dtypes):
        raise errors.InvalidArgumentError(None, None, f"{k.name}: the dataset gave {len(element)} components, "
                                          f"expected {len(k.output_dtypes)}")
    values = [np.asarray(v, dtype=dtype) for v, dtype in zip(element, k.output_dtypes)]
    return values[0] if len(values) == 1 else tuple(values)
