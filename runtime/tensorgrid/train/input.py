"""TF1's queue input pipelines (TensorFlow's ``training/input.py``): producers and batchers.

``string_input_producer`` fills a queue of file names that a reader (``tf.TFRecordReader``)
drains; ``batch`` and ``shuffle_batch`` enqueue single examples from queue-runner threads
and dequeue them in batches. Each function adds a ``QueueRunner`` to
``GraphKeys.QUEUE_RUNNERS`` (``tf.train.start_queue_runners`` or a MonitoredTrainingSession
starts them) and a ``fraction_..._full`` scalar summary of its queue, named as TensorFlow
names them. ``num_epochs`` counts epochs in a local variable (``tf.local_variables_initializer``);
when it is spent the producer's queue is closed, the readers and batchers downstream drain
what is left and then fail with OutOfRangeError, which ends a ``Coordinator``'s loop cleanly.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import sparse_tensor
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import data_flow_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import random_ops
from tensorgrid.ops import summary_ops
from tensorgrid.ops import variables
from tensorgrid.train import queue_runner


def limit_epochs(tensor: Any, num_epochs: Optional[int] = None, name: Optional[str] = None) -> graph_lib.Tensor:
    """``tensor``, each run counted: after ``num_epochs`` runs it fails with OutOfRangeError."""
    if num_epochs is None:
        return op_util.to_tensor(tensor)
    if isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs <= 0:
        raise ValueError(f"num_epochs must be > 0 not {num_epochs!r}.")
    t = op_util.to_tensor(tensor)
    graph = t.graph
    with graph.name_scope(name or "limit_epochs") as scope:
        epochs = variables.Variable(array_ops.constant(0, dtype=dtypes.int64), name="epochs", trainable=False,
                                    collections=[graph_lib.GraphKeys.LOCAL_VARIABLES])
        counter = epochs.count_up_to(num_epochs)
        with graph.control_dependencies([counter]):
            return array_ops.identity(t, name=scope)


def input_producer(input_tensor: Any, element_shape: Any = None, num_epochs: Optional[int] = None,
                   shuffle: bool = True, seed: Optional[int] = None, capacity: int = 32,
                   shared_name: Optional[str] = None, summary_name: Optional[str] = None,
                   name: Optional[str] = None, cancel_op: Any = None) -> data_flow_ops.FIFOQueue:
    """A queue that a queue runner fills with the rows of ``input_tensor``, epoch after epoch
    (each epoch shuffled with ``shuffle``), ``num_epochs`` times or forever."""
    graph = graph_lib.get_default_graph()
    with graph.name_scope(name or "input_producer") as scope:
        t = op_util.to_tensor(input_tensor, name="input_tensor")
        if t.shape.ndims == 0:
            raise ValueError(f"input_producer needs a tensor of rank >= 1 (its rows are the elements), got {t.name}")
        rows = t.shape[1:] if t.shape.ndims is not None else tensor_shape.unknown_shape()
        shape = rows.merge_with(tensor_shape.as_shape(element_shape))
        if not shape.is_fully_defined():
            raise ValueError("Either `input_tensor` must have a fully defined shape or `element_shape` must be "
                             "specified")
        if shuffle:
            t = random_ops.random_shuffle(t, seed=seed)
        t = limit_epochs(t, num_epochs)
        queue = data_flow_ops.FIFOQueue(capacity=capacity, dtypes=[t.dtype.base_dtype], shapes=[shape],
                                        shared_name=shared_name, name=scope)
        enqueue = queue.enqueue_many([t])
        queue_runner.add_queue_runner(queue_runner.QueueRunner(queue, [enqueue], cancel_op=cancel_op))
        if summary_name is not None:
            summary_ops.scalar(summary_name, math_ops.multiply(math_ops.cast(queue.size(), dtypes.float32),
                                                               1.0 / capacity))
        return queue


def string_input_producer(string_tensor: Any, num_epochs: Optional[int] = None, shuffle: bool = True,
                          seed: Optional[int] = None, capacity: int = 32, shared_name: Optional[str] = None,
                          name: Optional[str] = None, cancel_op: Any = None) -> data_flow_ops.FIFOQueue:
    """A queue of the strings (file names) of ``string_tensor`` for a reader to read."""
    if not isinstance(string_tensor, graph_lib.Tensor) and not _non_empty(string_tensor):
        raise ValueError("string_input_producer requires a non-null input tensor")
    graph = graph_lib.get_default_graph()
    with graph.name_scope(name or "input_producer") as scope:
        t = op_util.to_tensor(string_tensor, dtype=dtypes.string)
        if t.shape.ndims is not None and t.shape.ndims >= 1 and t.shape[0] == 0:
            raise ValueError("string_input_producer requires a non-null input tensor")
        return input_producer(t, element_shape=[], num_epochs=num_epochs, shuffle=shuffle, seed=seed,
                              capacity=capacity, shared_name=shared_name, name=scope,
                              summary_name=f"fraction_of_{capacity}_full", cancel_op=cancel_op)


def _non_empty(value: Any) -> bool:
    try:
        return len(value) > 0
    except TypeError:
        return value is not None


def range_input_producer(limit: Any, num_epochs: Optional[int] = None, shuffle: bool = True,
                         seed: Optional[int] = None, capacity: int = 32, shared_name: Optional[str] = None,
                         name: Optional[str] = None) -> data_flow_ops.FIFOQueue:
    """A queue of the integers 0 .. ``limit``-1 (int32), per epoch."""
    graph = graph_lib.get_default_graph()
    with graph.name_scope(name or "input_producer") as scope:
        return input_producer(math_ops.range(limit), [], num_epochs, shuffle, seed, capacity, shared_name,
                              f"fraction_of_{capacity}_full", scope)


def slice_input_producer(tensor_list: Sequence[Any], num_epochs: Optional[int] = None, shuffle: bool = True,
                         seed: Optional[int] = None, capacity: int = 32, shared_name: Optional[str] = None,
                         name: Optional[str] = None) -> list[graph_lib.Tensor]:
    """One row of each tensor of ``tensor_list`` (the same row of each) per run."""
    graph = graph_lib.get_default_graph()
    with graph.name_scope(name or "input_producer"):
        tensors = [op_util.to_tensor(t) for t in tensor_list]
        if not tensors:
            raise ValueError("Expected at least one tensor in slice_input_producer().")
        range_size = array_ops.shape(tensors[0])[0]  # type: ignore[index]  # Tensor.__getitem__ is added by math_ops
        queue = range_input_producer(range_size, num_epochs=num_epochs, shuffle=shuffle, seed=seed,
                                     capacity=capacity, shared_name=shared_name)
        index = queue.dequeue()
        return [indexing_ops.gather(t, index) for t in tensors]


# ---------------------------------------------------------------------- batching

def _as_tensor_list(tensors: Any) -> list[Any]:
    if isinstance(tensors, dict):
        return [tensors[k] for k in sorted(tensors, key=str)]
    if isinstance(tensors, (list, tuple)):
        return list(tensors)
    raise TypeError(f"Batching takes a list, tuple or dict of tensors, got {type(tensors).__name__}")


def _validate(tensor_list: list[Any], what: str) -> list[graph_lib.Tensor]:
    if not tensor_list:
        raise ValueError(f"Expected at least one tensor in {what}().")
    for t in tensor_list:
        if isinstance(t, sparse_tensor.SparseTensor):
            raise TypeError(f"{what}: SparseTensor inputs are not supported, got {t!r} (docs/differences.md)")
    return [op_util.to_tensor(t) for t in tensor_list]


def _shapes(tensor_lists: list[list[graph_lib.Tensor]], shapes: Any, enqueue_many: bool,
            dynamic_pad: bool) -> list[tensor_shape.TensorShape]:
    """The queue's component shapes: given, or merged from the tensors (without the batch dimension)."""
    if shapes is None:
        merged = []
        for i in range(len(tensor_lists[0])):
            shape = tensor_shape.unknown_shape()
            for tl in tensor_lists:
                if tl[i].shape.ndims is None:
                    raise ValueError(f"Cannot infer Tensor's rank: {tl[i]}")
                component = tl[i].shape
                if enqueue_many:
                    if component.ndims == 0:
                        raise ValueError(f"Shape {component} must have rank at least 1 with enqueue_many=True")
                    component = component[1:]
                shape = shape.merge_with(component)
            merged.append(shape)
        result = merged
    else:
        result = [tensor_shape.as_shape(s) for s in shapes]
    if dynamic_pad:
        raise ValueError("dynamic_pad=True (a PaddingFIFOQueue) is not supported: pad the examples to one shape "
                         "first (docs/differences.md)")
    if any(not s.is_fully_defined() for s in result):
        raise ValueError(f"All shapes must be fully defined: {result}")
    return result


def _as_original_type(original: Any, dequeued: Any) -> Any:
    if isinstance(original, dict):
        listed = [dequeued] if len(original) == 1 else dequeued
        return {k: listed[i] for i, k in enumerate(sorted(original, key=str))}
    return dequeued


def _fraction_full(queue: data_flow_ops.FIFOQueue, capacity: int, min_after_dequeue: Optional[int]) -> None:
    """TensorFlow's summary of how full a batching queue is."""
    if min_after_dequeue is None:
        summary_ops.scalar(f"fraction_of_{capacity}_full",
                           math_ops.multiply(math_ops.cast(queue.size(), dtypes.float32), 1.0 / capacity))
        return
    over = math_ops.maximum(0, math_ops.subtract(queue.size(), min_after_dequeue))
    summary_ops.scalar(f"fraction_over_{min_after_dequeue}_of_{capacity - min_after_dequeue}_full",
                       math_ops.multiply(math_ops.cast(over, dtypes.float32), 1.0 / (capacity - min_after_dequeue)))


def _batching(tensor_lists_given: list[Any], original: Any, batch_size: Any, capacity: int, threads_per_list: int,
              enqueue_many: bool, shapes: Any, dynamic_pad: bool, allow_smaller_final_batch: bool,
              shared_name: Optional[str], name: str, what: str,
              shuffle: Optional[tuple[int, Optional[int]]]) -> Any:
    """What batch, shuffle_batch and their _join forms share: a queue of examples that queue
    runners fill (``threads_per_list`` threads per tensor list) and a batched dequeue."""
    graph = graph_lib.get_default_graph()
    with graph.name_scope(name) as scope:
        if shuffle is not None and capacity <= shuffle[0]:
            raise ValueError(f"capacity {capacity} must be bigger than min_after_dequeue {shuffle[0]}.")
        tensor_lists = [_validate(tl, what) for tl in tensor_lists_given]
        if any(len(tl) != len(tensor_lists[0]) for tl in tensor_lists):
            raise ValueError(f"{what}: every tensor list must have the same number of tensors, got "
                             f"{[len(tl) for tl in tensor_lists]}")
        types = [t.dtype.base_dtype for t in tensor_lists[0]]
        for tl in tensor_lists[1:]:
            if [t.dtype.base_dtype for t in tl] != types:
                raise TypeError(f"{what}: the tensor lists must have the same dtypes, got "
                                f"{[t.dtype.base_dtype.name for t in tl]} and {[d.name for d in types]}")
        queue_shapes = _shapes(tensor_lists, shapes, enqueue_many, dynamic_pad)
        queue: data_flow_ops.FIFOQueue
        if shuffle is None:
            queue = data_flow_ops.FIFOQueue(capacity=capacity, dtypes=types, shapes=queue_shapes,
                                            shared_name=shared_name)
        else:
            queue = data_flow_ops.RandomShuffleQueue(capacity=capacity, min_after_dequeue=shuffle[0], seed=shuffle[1],
                                                     dtypes=types, shapes=queue_shapes, shared_name=shared_name)
        enqueue = queue.enqueue_many if enqueue_many else queue.enqueue
        enqueue_ops = [op for tl in tensor_lists for op in [enqueue(tl)] * threads_per_list]
        queue_runner.add_queue_runner(queue_runner.QueueRunner(queue, enqueue_ops))
        _fraction_full(queue, capacity, None if shuffle is None else shuffle[0])
        if allow_smaller_final_batch:
            dequeued = queue.dequeue_up_to(batch_size, name=scope)
        else:
            dequeued = queue.dequeue_many(batch_size, name=scope)
        return _as_original_type(original, dequeued)


def batch(tensors: Any, batch_size: Any, num_threads: int = 1, capacity: int = 32, enqueue_many: bool = False,
          shapes: Any = None, dynamic_pad: bool = False, allow_smaller_final_batch: bool = False,
          shared_name: Optional[str] = None, name: Optional[str] = None) -> Any:
    """Batches of ``tensors`` in the order ``num_threads`` queue-runner threads enqueue them
    (one thread: the order they are produced). A single tensor in ``tensors`` comes back as
    one tensor, as in TensorFlow."""
    return _batching([_as_tensor_list(tensors)], tensors, batch_size, capacity, num_threads, enqueue_many, shapes,
                     dynamic_pad, allow_smaller_final_batch, shared_name, name or "batch", "batch", None)


def batch_join(tensors_list: Sequence[Any], batch_size: Any, capacity: int = 32, enqueue_many: bool = False,
               shapes: Any = None, dynamic_pad: bool = False, allow_smaller_final_batch: bool = False,
               shared_name: Optional[str] = None, name: Optional[str] = None) -> Any:
    """Like ``batch``, from several lists of tensors, one enqueue thread each (e.g. one reader each)."""
    if not tensors_list:
        raise ValueError("Expected at least one set of tensors")
    return _batching([_as_tensor_list(t) for t in tensors_list], tensors_list[0], batch_size, capacity, 1,
                     enqueue_many, shapes, dynamic_pad, allow_smaller_final_batch, shared_name, name or "batch_join",
                     "batch_join", None)


def shuffle_batch(tensors: Any, batch_size: Any, capacity: int, min_after_dequeue: int, num_threads: int = 1,
                  seed: Optional[int] = None, enqueue_many: bool = False, shapes: Any = None,
                  allow_smaller_final_batch: bool = False, shared_name: Optional[str] = None,
                  name: Optional[str] = None) -> Any:
    """Batches of examples drawn at random from a RandomShuffleQueue that keeps at least
    ``min_after_dequeue`` of them (until its input ends)."""
    return _batching([_as_tensor_list(tensors)], tensors, batch_size, capacity, num_threads, enqueue_many, shapes,
                     False, allow_smaller_final_batch, shared_name, name or "shuffle_batch", "shuffle_batch",
                     (min_after_dequeue, seed))


def shuffle_batch_join(tensors_list: Sequence[Any], batch_size: Any, capacity: int, min_after_dequeue: int,
                       seed: Optional[int] = None, enqueue_many: bool = False, shapes: Any = None,
                       allow_smaller_final_batch: bool = False, shared_name: Optional[str] = None,
                       name: Optional[str] = None) -> Any:
    """Like ``shuffle_batch``, from several lists of tensors, one enqueue thread each."""
    if not tensors_list:
        raise ValueError("Expected at least one set of tensors")
    return _batching([_as_tensor_list(t) for t in tensors_list], tensors_list[0], batch_size, capacity, 1,
                     enqueue_many, shapes, False, allow_smaller_final_batch, shared_name,
                     name or "shuffle_batch_join", "shuffle_batch_join", (min_after_dequeue, seed))
