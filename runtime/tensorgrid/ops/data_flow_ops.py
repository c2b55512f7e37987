"""``tf.FIFOQueue`` and ``tf.ConditionalAccumulator``: shared state that steps can wait on.

``tf.SparseConditionalAccumulator`` does for IndexedSlices what the dense
accumulator does for tensors. All are resources named by ``shared_name`` in their device's container, so the
sessions of all workers reach the same queue. Every op on a queue or accumulator is
colocated with it. SyncReplicasOptimizer is built from these.
"""

from __future__ import annotations

import collections
from typing import Any, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import op_registry
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import op_util

for _op_type in ("FIFOQueueV2", "RandomShuffleQueueV2", "QueueEnqueueV2", "QueueEnqueueManyV2", "QueueDequeueV2", "QueueDequeueManyV2",
                 "QueueDequeueUpToV2", "QueueIsClosedV2", "QueueSizeV2", "QueueCloseV2", "ConditionalAccumulator", "AccumulatorApplyGradient",
                 "AccumulatorTakeGradient", "AccumulatorSetGlobalStep", "AccumulatorNumAccumulated",
                 "SparseConditionalAccumulator", "SparseAccumulatorApplyGradient", "SparseAccumulatorTakeGradient"):
    op_registry.register_op(_op_type, stateful=True)
    op_registry.NotDifferentiable(_op_type)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


class FIFOQueue:
    """A first-in first-out queue of tuples of tensors (``tf.FIFOQueue``).

    With ``names``, elements are dicts: enqueue takes a dict with exactly those keys and the
    dequeues return one. Elements are checked against ``shapes`` when the graph is built and,
    for tensors of unknown shape, when they are enqueued.
    """

    _RESOURCE_OP = "FIFOQueueV2"
    """The op that creates this kind of queue on its device."""

    def __init__(self, capacity: int, dtypes: Any, shapes: Optional[Sequence[Any]] = None,
                 names: Any = None, shared_name: Optional[str] = None, name: str = "fifo_queue") -> None:
        self._build(capacity, dtypes, shapes, names, shared_name, name, {})

    def _build(self, capacity: int, dtypes: Any, shapes: Optional[Sequence[Any]], names: Any,
               shared_name: Optional[str], name: str, extra_attrs: dict[str, Any]) -> None:
        from tensorgrid.framework import dtypes as dtypes_lib

        self._dtypes = [dtypes_lib.as_dtype(d).base_dtype for d in _as_list(dtypes)]
        if not self._dtypes:
            raise ValueError(f"A {type(self).__name__} needs at least one component dtype")
        if shapes is not None:
            if isinstance(shapes, tensor_shape.TensorShape):
                shapes = [shapes]
            if not isinstance(shapes, (list, tuple)):
                raise TypeError(f"shapes must be a list of shapes or one shape, got {shapes!r}")
            if all(d is None or isinstance(d, int) for d in shapes):
                shapes = [shapes]  # a single shape, as TF reads it (so () is one scalar shape)
            self._shapes = [tensor_shape.as_shape(s) for s in shapes]
            if len(self._shapes) != len(self._dtypes):
                raise ValueError(f"{type(self).__name__} has {len(self._dtypes)} dtypes but {len(self._shapes)} shapes")
        else:
            self._shapes = [tensor_shape.unknown_shape() for _ in self._dtypes]
        self._names = _queue_names(names, len(self._dtypes))
        graph = graph_lib.get_default_graph()
        self._queue_ref = op_util.make_tensor(
            self._RESOURCE_OP, [], dtypes_lib.resource, [], name,
            {"component_types": [d.name for d in self._dtypes],
             "shapes": [s.as_tuple_or_none() for s in self._shapes],
             "capacity": int(capacity), "container": graph.current_container, "shared_name": shared_name or "",
             **extra_attrs},
        )
        self._name = self._queue_ref.op.name

    @property
    def queue_ref(self) -> graph_lib.Tensor:
        return self._queue_ref

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtypes(self) -> list[dtypes.DType]:
        return list(self._dtypes)

    @property
    def shapes(self) -> list[tensor_shape.TensorShape]:
        return list(self._shapes)

    @property
    def names(self) -> Optional[list[str]]:
        return None if self._names is None else list(self._names)

    def _components(self, vals: Any, many: bool) -> list[graph_lib.Tensor]:
        if self._names is not None:
            if not isinstance(vals, dict):
                raise ValueError(f"Queue {self._name} has names {self._names}: enqueue a dictionary with those keys, "
                                 f"got {type(vals).__name__}")
            if sorted(vals) != sorted(self._names):
                raise ValueError(f"Keys in dictionary to enqueue {sorted(vals)} do not match names of queue "
                                 f"{self._name}: {sorted(self._names)}")
            vals = [vals[n] for n in self._names]
        elif isinstance(vals, dict):
            raise ValueError(f"Queue {self._name} has no names: enqueue a list or tuple, not a dictionary")
        values = _as_list(vals)
        if len(values) != len(self._dtypes):
            raise ValueError(f"Queue {self._name} takes {len(self._dtypes)} components, got {len(values)}")
        tensors = []
        for value, dt, shape in zip(values, self._dtypes, self._shapes):
            t = op_util.to_tensor(value, dtype=dt)
            element_shape = t.shape[1:] if many and t.shape.ndims else t.shape
            if not shape.is_compatible_with(element_shape):
                raise ValueError(f"Queue {self._name} expects elements of shape {shape}, got {element_shape}")
            tensors.append(t)
        return tensors

    def enqueue(self, vals: Any, name: Optional[str] = None) -> graph_lib.Operation:
        with self._queue_ref.graph.colocate_with(self._queue_ref.op):
            return op_util.make_op("QueueEnqueueV2", [self._queue_ref, *self._components(vals, False)], [],
                                   name or "enqueue")

    def enqueue_many(self, vals: Any, name: Optional[str] = None) -> graph_lib.Operation:
        with self._queue_ref.graph.colocate_with(self._queue_ref.op):
            return op_util.make_op("QueueEnqueueManyV2", [self._queue_ref, *self._components(vals, True)], [],
                                   name or "enqueue_many")

    def _dequeued(self, outputs: list[graph_lib.Tensor]) -> Any:
        """A dequeue's outputs as the user gets them: a dict with names, else one tensor or a list."""
        if self._names is not None:
            return dict(zip(self._names, outputs))
        return outputs[0] if len(outputs) == 1 else outputs

    def dequeue(self, name: Optional[str] = None) -> Any:
        with self._queue_ref.graph.colocate_with(self._queue_ref.op):
            op = op_util.make_op("QueueDequeueV2", [self._queue_ref], list(zip(self._dtypes, self._shapes)),
                                 name or "dequeue")
        return self._dequeued(op.outputs)

    def dequeue_many(self, n: Any, name: Optional[str] = None) -> Any:
        return self._dequeue_batch("QueueDequeueManyV2", n, name or "dequeue_many", exact=True)

    def dequeue_up_to(self, n: Any, name: Optional[str] = None) -> Any:
        """Like ``dequeue_many``, but once the queue is closed returns what is left (at least one element)."""
        return self._dequeue_batch("QueueDequeueUpToV2", n, name or "dequeue_up_to", exact=False)

    def _dequeue_batch(self, op_type: str, n: Any, name: str, exact: bool) -> Any:
        count = op_util.to_tensor(n, dtype=dtypes.int32)
        static_n = op_util.static_value(count)
        lead = [None if static_n is None or not exact else int(static_n)]
        specs = [(d, tensor_shape.TensorShape(lead).concatenate(s)) for d, s in zip(self._dtypes, self._shapes)]
        with self._queue_ref.graph.colocate_with(self._queue_ref.op):
            op = op_util.make_op(op_type, [self._queue_ref, count], specs, name)
        return self._dequeued(op.outputs)

    def is_closed(self, name: Optional[str] = None) -> graph_lib.Tensor:
        """A boolean scalar: whether the queue was closed."""
        with self._queue_ref.graph.colocate_with(self._queue_ref.op):
            return op_util.make_tensor("QueueIsClosedV2", [self._queue_ref], dtypes.bool_, [], name or "is_closed")

    def size(self, name: Optional[str] = None) -> graph_lib.Tensor:
        with self._queue_ref.graph.colocate_with(self._queue_ref.op):
            return op_util.make_tensor("QueueSizeV2", [self._queue_ref], dtypes.int32, [], name or "size")

    def close(self, cancel_pending_enqueues: bool = False, name: Optional[str] = None) -> graph_lib.Operation:
        with self._queue_ref.graph.colocate_with(self._queue_ref.op):
            return op_util.make_op("QueueCloseV2", [self._queue_ref], [], name or "close",
                                   {"cancel_pending_enqueues": bool(cancel_pending_enqueues)})


class RandomShuffleQueue(FIFOQueue):
    """A queue whose dequeues take elements in random order (``tf.RandomShuffleQueue``).

    While it is open, a dequeue leaves at least ``min_after_dequeue`` elements in it (so
    that what follows stays mixed) and waits for more; once closed it hands out the rest.
    """

    _RESOURCE_OP = "RandomShuffleQueueV2"

    def __init__(self, capacity: int, min_after_dequeue: int, dtypes: Any, shapes: Optional[Sequence[Any]] = None,
                 names: Any = None, seed: Optional[int] = None, shared_name: Optional[str] = None,
                 name: str = "random_shuffle_queue") -> None:
        from tensorgrid.ops import random_ops

        if isinstance(min_after_dequeue, bool) or not isinstance(min_after_dequeue, int) or min_after_dequeue < 0:
            raise ValueError(f"min_after_dequeue must be a non-negative int, got {min_after_dequeue!r}")
        seed1, seed2 = random_ops.get_seed(seed)
        self._build(capacity, dtypes, shapes, names, shared_name, name,
                    {"min_after_dequeue": min_after_dequeue, "seed": seed1 or 0, "seed2": seed2 or 0})


def _queue_names(names: Any, count: int) -> Optional[list[str]]:
    """A queue's component names (one string per dtype), or None."""
    if names is None:
        return None
    listed = [names] if isinstance(names, str) else list(names)
    if len(listed) != count or not all(isinstance(n, str) for n in listed):
        raise ValueError(f"Queue names must be {count} strings, one per dtype, got {names!r}")
    return listed


class ConditionalAccumulator:
    """Averages gradients for the current global step (``tf.ConditionalAccumulator``)."""

    _RESOURCE_OP = "ConditionalAccumulator"
    """The op that creates this kind of accumulator on its device."""

    def __init__(self, dtype: Any, shape: Any = None, shared_name: Optional[str] = None,
                 name: str = "conditional_accumulator", reduction_type: str = "MEAN") -> None:
        if reduction_type not in ("MEAN", "SUM"):
            raise ValueError(f"reduction_type must be 'MEAN' or 'SUM', got {reduction_type!r}")
        self._dtype = dtypes.as_dtype(dtype).base_dtype
        self._shape = tensor_shape.as_shape(shape)
        graph = graph_lib.get_default_graph()
        self._handle = op_util.make_tensor(
            self._RESOURCE_OP, [], dtypes.resource, [], name,
            {"dtype": self._dtype.name, "shape": self._shape.as_tuple_or_none(), "reduction_type": reduction_type,
             "container": graph.current_container, "shared_name": shared_name or "", **self._resource_attrs()},
        )

    def _resource_attrs(self) -> dict[str, Any]:
        """Attributes of the resource op beyond TF's (none here)."""
        return {}

    @property
    def accumulator_ref(self) -> graph_lib.Tensor:
        return self._handle

    @property
    def name(self) -> str:
        return self._handle.op.name

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype

    def _colocated(self) -> Any:
        return self._handle.graph.colocate_with(self._handle.op)

    def apply_grad(self, grad: Any, local_step: Any = 0, name: Optional[str] = None) -> graph_lib.Operation:
        g = op_util.to_tensor(grad, dtype=self._dtype)
        if not self._shape.is_compatible_with(g.shape):
            raise ValueError(f"Accumulator {self.name} has shape {self._shape}, got a gradient of shape {g.shape}")
        step = _int64(local_step)
        with self._colocated():
            return op_util.make_op("AccumulatorApplyGradient", [self._handle, step, g], [], name or "AccumulatorApplyGradient")

    def take_grad(self, num_required: Any, name: Optional[str] = None) -> graph_lib.Tensor:
        n = op_util.to_tensor(num_required, dtype=dtypes.int32)
        with self._colocated():
            return op_util.make_tensor("AccumulatorTakeGradient", [self._handle, n], self._dtype, self._shape,
                                       name or "AccumulatorTakeGradient")

    def set_global_step(self, new_global_step: Any, name: Optional[str] = None) -> graph_lib.Operation:
        step = _int64(new_global_step)
        with self._colocated():
            return op_util.make_op("AccumulatorSetGlobalStep", [self._handle, step], [], name or "AccumulatorSetGlobalStep")

    def num_accumulated(self, name: Optional[str] = None) -> graph_lib.Tensor:
        with self._colocated():
            return op_util.make_tensor("AccumulatorNumAccumulated", [self._handle], dtypes.int32, [],
                                       name or "AccumulatorNumAccumulated")


class SparseConditionalAccumulator(ConditionalAccumulator):
    """Averages IndexedSlices gradients row by row for the current global step (``tf.SparseConditionalAccumulator``).

    A take returns the rows touched since the last take, sorted by index, each the mean
    of the gradients that touched it (or their sum with ``reduction_type="SUM"``);
    repeated indices within one gradient are summed first.
    """

    _RESOURCE_OP = "SparseConditionalAccumulator"

    def __init__(self, dtype: Any, shape: Any = None, shared_name: Optional[str] = None,
                 name: str = "sparse_conditional_accumulator", reduction_type: str = "MEAN", *,
                 indices_are_keys: bool = False) -> None:
        """TF's arguments, and tensorgrid's ``indices_are_keys``: the indices are an embedding variable's
        64-bit ids (any int64, negative ones too), not rows of a table of ``shape[0]`` rows; what
        ``SyncReplicasOptimizer`` uses for a ``tf.get_embedding_variable`` table."""
        if not isinstance(indices_are_keys, bool):
            raise TypeError(f"indices_are_keys must be True or False, got {indices_are_keys!r}")
        self._indices_are_keys = indices_are_keys
        super().__init__(dtype, shape, shared_name, name, reduction_type)

    def _resource_attrs(self) -> dict[str, Any]:
        return {"indices_are_keys": self._indices_are_keys}

    def apply_indexed_slices_grad(self, grad: Any, local_step: Any = 0, name: Optional[str] = None) -> graph_lib.Operation:
        """Applies an IndexedSlices gradient computed at ``local_step``."""
        if not isinstance(grad, indexed_slices.IndexedSlices):
            raise TypeError(f"apply_indexed_slices_grad takes a tf.IndexedSlices, got {type(grad).__name__}")
        return self.apply_grad(grad.indices, grad.values, grad.dense_shape, local_step, name)

    def apply_grad(self, grad_indices: Any, grad_values: Any, grad_shape: Any = None,  # type: ignore[override]
                   local_step: Any = 0, name: Optional[str] = None) -> graph_lib.Operation:
        values = op_util.to_tensor(grad_values, dtype=self._dtype)
        if values.shape.ndims == 0:
            raise ValueError(f"Accumulator {self.name}: grad_values must have rank >= 1, got a scalar")
        if self._shape.ndims and values.shape.ndims is not None and \
                not self._shape[1:].is_compatible_with(values.shape[1:]):
            raise ValueError(f"Accumulator {self.name} has shape {self._shape}, got rows of shape {values.shape[1:]}")
        inputs = [self._handle, _int64(local_step), _int64(grad_indices), values]
        if grad_shape is not None:
            inputs.append(_int64(grad_shape))
        with self._colocated():
            return op_util.make_op("SparseAccumulatorApplyGradient", inputs, [], name or "SparseAccumulatorApplyGradient",
                                   {"has_known_shape": grad_shape is not None})

    def take_grad(self, num_required: Any, name: Optional[str] = None) -> Any:
        """The aggregated gradient as TF's (indices, values, shape) triple."""
        n = op_util.to_tensor(num_required, dtype=dtypes.int32)
        rows = self._shape[1:] if self._shape.ndims else tensor_shape.unknown_shape()
        specs = [(dtypes.int64, [None]), (self._dtype, tensor_shape.TensorShape([None]).concatenate(rows)),
                 (dtypes.int64, [self._shape.ndims] if self._shape.ndims else [None])]
        with self._colocated():
            op = op_util.make_op("SparseAccumulatorTakeGradient", [self._handle, n], specs,
                                 name or "SparseAccumulatorTakeGradient")
        return SparseAccumulatorTakeGradient(op.outputs[0], op.outputs[1], op.outputs[2])

    def take_indexed_slices_grad(self, num_required: Any, name: Optional[str] = None) -> indexed_slices.IndexedSlices:
        """The aggregated gradient as an IndexedSlices, ready for an optimizer's sparse update."""
        taken = self.take_grad(num_required, name)
        return indexed_slices.IndexedSlices(taken.values, taken.indices, taken.shape)


SparseAccumulatorTakeGradient = collections.namedtuple("SparseAccumulatorTakeGradient", ["indices", "values", "shape"])


def _int64(value: Any) -> graph_lib.Tensor:
    from tensorgrid.ops import math_ops

    t = op_util.to_tensor(value)
    return math_ops.cast(t, dtypes.int64) if t.dtype.base_dtype != dtypes.int64 else t
