"""``tf.data.Dataset`` (TF1's API): input pipelines as iterator ops of the graph.

A Dataset is a description: a source stage, then transformations, each a list of
plain values (a ``map`` function as a function attribute), plus the tensors the
stages read. Making an iterator puts that description on an op of the graph; the
iterator's kernels (``kernels/dataset_kernels.py``) run the pipeline on the task
where the iterator is placed. The end of the data is OutOfRangeError, which ends a
``MonitoredTrainingSession`` loop cleanly.
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Callable, Iterable, Optional

import numpy as np

from tensorgrid.data import sparse_components
from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import python_callables
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import functional_ops
from tensorgrid.ops import op_util

for _op_type in ("Iterator", "OneShotIterator", "MakeIterator", "IteratorGetNext"):
    op_registry.register_op(_op_type, stateful=True)
    op_registry.NotDifferentiable(_op_type)

AUTOTUNE = -1
"""``tf.data.experimental.AUTOTUNE``: accepted wherever a buffer size or parallelism is."""


def _structure_of(value: Any) -> Any:
    """Tuples and dicts are structure; anything else (lists included, as in TF) is one component,
    shown as None."""
    if isinstance(value, dict):
        return {key: _structure_of(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return type(value)(*[_structure_of(v) for v in value]) if hasattr(value, "_fields") else \
            tuple(_structure_of(v) for v in value)
    return None


def _components(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in _components(value[key])]
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in _components(item)]
    return [value]


def _pack(structure: Any, leaves: list[Any]) -> Any:
    remaining = list(leaves)

    def build(node: Any) -> Any:
        if isinstance(node, dict):
            built = {key: build(node[key]) for key in sorted(node)}
            return type(node)((key, built[key]) for key in node)
        if isinstance(node, tuple):
            items = [build(item) for item in node]
            return type(node)(*items) if hasattr(node, "_fields") else tuple(items)
        return remaining.pop(0)

    return build(structure)


def positive(value: Any, what: str, allow_autotune: bool = False) -> int:
    number = op_util.static_int(value, "Dataset", what)
    if number < 1 and not (allow_autotune and number == AUTOTUNE):
        raise ValueError(f"{what} must be a positive integer, got {number}")
    return number


class Dataset:
    """A pipeline of elements (each a tuple, dict or single tensor of components)."""

    def __init__(self, stages: list[list[Any]], inputs: list[graph_lib.Tensor], structure: Any,
                 types: list[dtypes.DType], shapes: list[tensor_shape.TensorShape]) -> None:
        self._stages, self._inputs, self._structure = stages, inputs, structure
        self._types, self._shapes = types, shapes

    # ------------------------------------------------------------ sources
    @staticmethod
    def from_tensor_slices(tensors: Any) -> "Dataset":
        """One element per row of ``tensors`` (all components must have the same first dimension)."""
        structure = _structure_of(tensors)
        parts = [op_util.to_tensor(c) for c in _components(tensors)]
        for t in parts:
            if t.shape.ndims == 0:
                raise ValueError(f"from_tensor_slices needs tensors of rank >= 1, got {t.name} of shape {t.shape}")
        return Dataset([["tensor_slices", len(parts)]], parts, structure, [t.dtype.base_dtype for t in parts],
                       [tensor_shape.TensorShape(t.shape.dims[1:]) if t.shape.dims is not None else t.shape
                        for t in parts])

    @staticmethod
    def from_tensors(tensors: Any) -> "Dataset":
        """A single element: ``tensors``."""
        parts = [op_util.to_tensor(c) for c in _components(tensors)]
        return Dataset([["tensors", len(parts)]], parts, _structure_of(tensors),
                       [t.dtype.base_dtype for t in parts], [t.shape for t in parts])

    @staticmethod
    def range(*args: int) -> "Dataset":  # TF's name
        """int64 scalars as Python's ``range(*args)`` gives them."""
        if not 1 <= len(args) <= 3 or not all(isinstance(a, (int, np.integer)) for a in args):
            raise TypeError(f"Dataset.range takes 1 to 3 integers (stop, or start, stop[, step]), got {args!r}")
        bounds = range(*[int(a) for a in args])
        return Dataset([["range", bounds.start, bounds.stop, bounds.step]], [], None, [dtypes.int64],
                       [tensor_shape.TensorShape([])])

    @staticmethod
    def from_generator(generator: Callable[..., Iterable[Any]], output_types: Any, output_shapes: Any = None,
                       args: Any = None) -> "Dataset":
        """Elements a Python generator yields, converted to ``output_types`` and checked against
        ``output_shapes``; runs in the process that built the graph (as in TensorFlow)."""
        if not callable(generator):
            raise TypeError(f"generator must be callable, got {generator!r}")
        structure = _structure_of(output_types)
        types = [dtypes.as_dtype(t).base_dtype for t in _components(output_types)]
        if output_shapes is None:
            shapes = [tensor_shape.unknown_shape() for _ in types]
        else:
            shapes = [tensor_shape.as_shape(s) for s in _shape_components(output_shapes, structure)]
        if len(shapes) != len(types):
            raise ValueError(f"output_shapes has {len(shapes)} components for {len(types)} output_types")
        arg_tensors = [op_util.to_tensor(a) for a in (args or [])]

        def flat_elements(*arg_values: Any) -> Iterable[list[np.ndarray]]:
            for value in generator(*arg_values):
                parts = _components(value) if isinstance(structure, (tuple, dict)) else [value]
                if len(parts) != len(types):
                    raise ValueError(f"the generator yielded {value!r}; expected {len(types)} components "
                                     f"of types {[t.name for t in types]}")
                arrays = []
                for part, dtype, shape in zip(parts, types, shapes):
                    array = np.asarray(part, dtype=dtype.as_numpy_dtype)
                    if not shape.is_compatible_with(tensor_shape.TensorShape(list(array.shape))):
                        raise ValueError(f"the generator yielded an element of shape {list(array.shape)} where "
                                         f"output_shapes says {shape}")
                    arrays.append(array)
                yield arrays

        token = python_callables.register(flat_elements)
        return Dataset([["generator", token, len(arg_tensors)]], arg_tensors, structure, types, shapes)

    @staticmethod
    def zip(datasets: Any) -> "Dataset":  # TF's name
        """Elements of ``datasets`` (a tuple or dict of datasets) side by side; ends with the shortest."""
        members = [datasets[key] for key in sorted(datasets)] if isinstance(datasets, dict) else datasets
        if not isinstance(datasets, (tuple, dict)) or not members or \
                not all(isinstance(d, Dataset) for d in members):
            raise TypeError(f"Dataset.zip takes a tuple or dict of datasets, got {datasets!r}")
        structure = ({key: datasets[key]._structure for key in datasets} if isinstance(datasets, dict)
                     else tuple(d._structure for d in members))
        return Dataset([["zip", [[d._stages, len(d._inputs)] for d in members]]],
                       [t for d in members for t in d._inputs], structure,
                       [t for d in members for t in d._types], [s for d in members for s in d._shapes])

    # ------------------------------------------------------------ transformations
    def _then(self, stage: list[Any], inputs: Optional[list[graph_lib.Tensor]] = None, structure: Any = None,
              types: Optional[list[dtypes.DType]] = None,
              shapes: Optional[list[tensor_shape.TensorShape]] = None) -> "Dataset":
        return Dataset(self._stages + [stage], self._inputs + (inputs or []),
                       self._structure if types is None else structure,
                       self._types if types is None else types, self._shapes if shapes is None else shapes)

    def map(self, map_func: Callable[..., Any], num_parallel_calls: Any = None) -> "Dataset":
        """Each element through ``map_func`` (a tuple element is passed as positional arguments)."""
        if not callable(map_func):
            raise TypeError(f"map_func must be callable, got {map_func!r}")
        if num_parallel_calls is not None:
            positive(num_parallel_calls, "num_parallel_calls", allow_autotune=True)
        outer = self._graph()
        specs = list(zip(self._types, self._shapes))
        function = functional_ops.build(outer, "map_func", sparse_components.with_sparse_tensors(map_func), specs,
                                        arg_structure=sparse_components.argument_structure(self._structure))
        captured = functional_ops.unify_captures([function.graph], first_arg=len(specs))
        structure = _structure_of(function.structure)
        return self._then(["map", function.as_attr(), len(captured)], captured, structure,
                          [t.dtype.base_dtype for t in function.outputs], [t.shape for t in function.outputs])

    def filter(self, predicate: Callable[..., Any]) -> "Dataset":  # TF's name
        """The elements for which ``predicate`` (returning a boolean scalar) holds."""
        if not callable(predicate):
            raise TypeError(f"predicate must be callable, got {predicate!r}")
        specs = list(zip(self._types, self._shapes))
        function = functional_ops.build(self._graph(), "predicate", sparse_components.with_sparse_tensors(predicate),
                                        specs, arg_structure=sparse_components.argument_structure(self._structure))
        if len(function.outputs) != 1 or function.outputs[0].dtype.base_dtype != dtypes.bool_ or \
                function.outputs[0].shape.ndims not in (None, 0):
            raise ValueError(f"A filter predicate must return a boolean scalar tensor, got {function.outputs}")
        captured = functional_ops.unify_captures([function.graph], first_arg=len(specs))
        return self._then(["filter", function.as_attr(), len(captured)], captured)

    def batch(self, batch_size: Any, drop_remainder: bool = False) -> "Dataset":
        """Elements stacked ``batch_size`` at a time; a SparseTensor component gains a leading batch
        dimension, its dense shape the batch's largest (as in TF)."""
        size = positive(batch_size, "batch_size")
        first = size if drop_remainder else None
        sparse_starts = sparse_components.starts(self._structure)
        return self._then(["batch", size, bool(drop_remainder), sparse_starts], structure=self._structure,
                          types=self._types,
                          shapes=sparse_components.batched_shapes(self._shapes, sparse_starts, first))

    def padded_batch(self, batch_size: Any, padded_shapes: Any = None, padding_values: Any = None,
                     drop_remainder: bool = False) -> "Dataset":
        """Batches of elements padded to ``padded_shapes`` (a None or -1 dimension: the batch's largest)."""
        size = positive(batch_size, "batch_size")
        if sparse_components.starts(self._structure):
            raise TypeError("padded_batch does not batch SparseTensor components; use batch, which stacks them "
                            "into a SparseTensor with the batch's largest dense shape")
        if padded_shapes is None:
            shapes = list(self._shapes)
        else:
            shapes = [tensor_shape.as_shape(s) for s in _shape_components(padded_shapes, self._structure)]
        if len(shapes) != len(self._types):
            raise ValueError(f"padded_shapes has {len(shapes)} shapes for {len(self._types)} components")
        for i, (shape, element) in enumerate(zip(shapes, self._shapes)):
            if shape.ndims is None:
                raise ValueError(f"padded_shapes[{i}] must have a known rank, got {shape}")
            if not shape.is_compatible_with(element) and not (
                    element.ndims in (None, shape.ndims) and all(
                        p is None or e is None or e <= p for p, e in zip(shape.as_list(), element.as_list()
                                                                       if element.ndims else [None] * shape.ndims))):
                raise ValueError(f"The padded shape {shape} is not compatible with the shape {element} of "
                                 f"component {i}")
        if padding_values is None:
            pads = [array_ops.zeros([], dtype=t) if t != dtypes.string else op_util.to_tensor(b"") for t in self._types]
        else:
            pads = [op_util.to_tensor(v, dtype=t) for v, t in zip(_components(padding_values), self._types)]
            if len(pads) != len(self._types) or any(p.shape.ndims not in (None, 0) for p in pads):
                raise ValueError(f"padding_values must hold one scalar per component ({len(self._types)}), "
                                 f"got {padding_values!r}")
        first = size if drop_remainder else None
        stage = ["padded_batch", size, bool(drop_remainder), [[-1 if d is None else d for d in s.as_list()] for s in shapes]]
        return self._then(stage, pads, self._structure, self._types,
                          [tensor_shape.TensorShape([first]).concatenate(s) for s in shapes])

    def concatenate(self, dataset: "Dataset") -> "Dataset":
        """This dataset's elements, then ``dataset``'s (same structure and types)."""
        if not isinstance(dataset, Dataset):
            raise TypeError(f"concatenate takes a Dataset, got {dataset!r}")
        if self._types != dataset._types or _structure_of(self._structure) != _structure_of(dataset._structure):
            raise TypeError(f"Types of the datasets to concatenate differ: {self.output_types} and "
                            f"{dataset.output_types}")
        shapes = [tensor_shape.TensorShape(None if a.ndims is None or a.ndims != b.ndims else
                                           [x if x == y else None for x, y in zip(a.as_list(), b.as_list())])
                  for a, b in zip(self._shapes, dataset._shapes)]
        return self._then(["concatenate", dataset._stages, len(dataset._inputs)], list(dataset._inputs),
                          self._structure, self._types, shapes)

    def flat_map(self, map_func: Callable[..., Any]) -> "Dataset":
        """The elements of the dataset ``map_func`` makes of each element, one dataset after another."""
        return self._nested("flat_map", map_func, 1, 1)

    def interleave(self, map_func: Callable[..., Any], cycle_length: Any = AUTOTUNE, block_length: Any = 1,
                   num_parallel_calls: Any = None) -> "Dataset":
        """The datasets ``map_func`` makes, ``cycle_length`` at a time, ``block_length`` elements from each in
        turn (TF's order; ``cycle_length=AUTOTUNE`` is this machine's CPU count, as TensorFlow's)."""
        cycle = positive(cycle_length, "cycle_length", allow_autotune=True)
        if cycle == AUTOTUNE:
            cycle = os.cpu_count() or 1
        if num_parallel_calls is not None:
            positive(num_parallel_calls, "num_parallel_calls", allow_autotune=True)
        return self._nested("interleave", map_func, cycle, positive(block_length, "block_length"))

    def _nested(self, what: str, map_func: Callable[..., Any], cycle: int, block: int) -> "Dataset":
        if not callable(map_func):
            raise TypeError(f"map_func must be callable, got {map_func!r}")
        made: list[Dataset] = []

        def nested_inputs(*args: Any) -> Any:
            nested = map_func(*args)
            if not isinstance(nested, Dataset):
                raise TypeError(f"`map_func` of {what} must return a Dataset, got {type(nested).__name__}")
            made.append(nested)
            return list(nested._inputs) or [array_ops.zeros([], dtype=dtypes.int32)]

        specs = list(zip(self._types, self._shapes))
        function = functional_ops.build(self._graph(), "map_func", sparse_components.with_sparse_tensors(nested_inputs),
                                        specs, arg_structure=sparse_components.argument_structure(self._structure))
        captured = functional_ops.unify_captures([function.graph], first_arg=len(specs))
        nested = made[0]
        stage = ["interleave", function.as_attr(), len(captured), nested._stages, len(nested._inputs), cycle, block]
        return self._then(stage, captured, nested._structure, nested._types, nested._shapes)

    def shuffle(self, buffer_size: Any, seed: Optional[int] = None,
                reshuffle_each_iteration: Optional[bool] = None) -> "Dataset":
        size = positive(buffer_size, "buffer_size")
        graph_seed = self._graph().seed
        if seed is None and graph_seed is not None:
            seed = int(graph_seed) + len(self._stages)
        reshuffle = True if reshuffle_each_iteration is None else bool(reshuffle_each_iteration)
        return self._then(["shuffle", size, None if seed is None else int(seed), reshuffle])

    def repeat(self, count: Any = None) -> "Dataset":
        """The elements ``count`` times (None or -1: forever); ``count`` may be a tensor (a placeholder
        fed when the iterator is initialized)."""
        return self._counted("repeat", -1 if count is None else count)

    def take(self, count: Any) -> "Dataset":
        """The first ``count`` elements (-1: all); ``count`` may be a tensor."""
        return self._counted("take", count)

    def skip(self, count: Any) -> "Dataset":
        """All but the first ``count`` elements (-1: none); ``count`` may be a tensor."""
        return self._counted("skip", count)

    def _counted(self, kind: str, count: Any) -> "Dataset":
        """A stage with an int64 scalar count: a number known now, else (None) the stage's input,
        read when the iterator is initialized."""
        if isinstance(count, graph_lib.Tensor) or hasattr(count, "_as_graph_element"):
            tensor = op_util.to_tensor(count)
            if tensor.dtype.base_dtype not in op_util.INDICES or tensor.shape.ndims not in (None, 0):
                raise TypeError(f"Dataset.{kind}: count must be an int64 scalar, got {tensor.name} of dtype "
                                f"{tensor.dtype.base_dtype.name} and shape {tensor.shape}")
            if op_util.static_value(tensor) is None:
                return self._then([kind, None], [tensor])
        return self._then([kind, op_util.static_int(count, f"Dataset.{kind}", "count")])

    def prefetch(self, buffer_size: Any) -> "Dataset":
        """A thread runs this dataset ahead of the iterator, keeping up to ``buffer_size`` elements
        ready (``tf.data.experimental.AUTOTUNE``: a few)."""
        return self._then(["prefetch", positive(buffer_size, "buffer_size", allow_autotune=True)])

    # ------------------------------------------------------------ iterators and structure
    def make_one_shot_iterator(self) -> "Iterator":
        op = op_util.make_op("OneShotIterator", self._inputs, [(dtypes.resource, [])], "OneShotIterator",
                             {"dataset": self._stages, "container": "", "shared_name": _iterator_name()},
                             graph=self._graph())
        return Iterator(op.outputs[0], None, self._structure, self._types, self._shapes)

    def make_initializable_iterator(self, shared_name: Optional[str] = None) -> "Iterator":
        iterator = Iterator.from_structure(self.output_types, self.output_shapes, shared_name)
        iterator._initializer = iterator.make_initializer(self)
        return iterator

    def _graph(self) -> graph_lib.Graph:
        return op_util.graph_of(*self._inputs)

    @property
    def output_types(self) -> Any:
        return _pack(self._structure, list(self._types))

    @property
    def output_shapes(self) -> Any:
        return _pack(self._structure, list(self._shapes))

    @property
    def output_classes(self) -> Any:
        return _pack(self._structure, [graph_lib.Tensor] * len(self._types))


def _iterator_name() -> str:
    """A name no other graph's iterator has: an iterator is a resource of its task, and the
    sessions of other programs on that task must not share it."""
    return f"iterator_{uuid.uuid4().hex}"


def _shape_components(shapes: Any, structure: Any) -> list[Any]:
    """Shapes (each a TensorShape or list of sizes) arranged as ``structure``, flattened."""
    if isinstance(structure, dict):
        return [s for key in sorted(structure) for s in _shape_components(shapes[key], structure[key])]
    if isinstance(structure, tuple):
        return [s for sub, st in zip(shapes, structure) for s in _shape_components(sub, st)]
    return [shapes]


class Iterator:
    """TF1's ``tf.data.Iterator``: ``get_next()`` gives the next element's tensors."""

    def __init__(self, handle: graph_lib.Tensor, initializer: Optional[graph_lib.Operation], structure: Any,
                 types: list[dtypes.DType], shapes: list[tensor_shape.TensorShape]) -> None:
        self._handle, self._initializer = handle, initializer
        self._structure, self._types, self._shapes = structure, types, shapes

    @staticmethod
    def from_structure(output_types: Any, output_shapes: Any = None, shared_name: Optional[str] = None) -> "Iterator":
        """An iterator that any dataset of this structure can (re)initialize (``make_initializer``)."""
        structure = _structure_of(output_types)
        types = [dtypes.as_dtype(t).base_dtype for t in _components(output_types)]
        shapes = ([tensor_shape.unknown_shape() for _ in types] if output_shapes is None else
                  [tensor_shape.as_shape(s) for s in _shape_components(output_shapes, structure)])
        graph = graph_lib.get_default_graph()
        handle = op_util.make_tensor("Iterator", [], dtypes.resource, [], "Iterator",
                                     {"container": graph.current_container, "shared_name": shared_name or _iterator_name()})
        return Iterator(handle, None, structure, types, shapes)

    @property
    def initializer(self) -> graph_lib.Operation:
        if self._initializer is None:
            raise ValueError("This iterator has no initializer: a one-shot iterator initializes itself; an iterator "
                             "from from_structure is initialized by iterator.make_initializer(dataset)")
        return self._initializer

    def make_initializer(self, dataset: Dataset, name: Optional[str] = None) -> graph_lib.Operation:
        if dataset._types != self._types:
            raise TypeError(f"Expected output types {[t.name for t in self._types]} but got dataset with output "
                            f"types {[t.name for t in dataset._types]}")
        for mine, theirs in zip(self._shapes, dataset._shapes):
            if not mine.is_compatible_with(theirs):
                raise TypeError(f"Expected output shapes compatible with {self._shapes} but got dataset with "
                                f"output shapes {dataset._shapes}")
        graph = self._handle.graph
        with graph.colocate_with(self._handle.op):
            return op_util.make_op("MakeIterator", [self._handle, *dataset._inputs], [], name or "MakeIterator",
                                   {"dataset": dataset._stages}, graph=graph)

    def get_next(self, name: Optional[str] = None) -> Any:
        graph = self._handle.graph
        with graph.colocate_with(self._handle.op):
            op = op_util.make_op("IteratorGetNext", [self._handle], list(zip(self._types, self._shapes)),
                                 name or "IteratorGetNext", graph=graph)
        return sparse_components.decode(_pack(self._structure, op.outputs))

    @property
    def output_types(self) -> Any:
        return _pack(self._structure, list(self._types))

    @property
    def output_shapes(self) -> Any:
        return _pack(self._structure, list(self._shapes))


def make_one_shot_iterator(dataset: Dataset) -> Iterator:
    """``tf.data.make_one_shot_iterator(dataset)`` (tf.compat.v1)."""
    return dataset.make_one_shot_iterator()


def make_initializable_iterator(dataset: Dataset, shared_name: Optional[str] = None) -> Iterator:
    """``tf.data.make_initializable_iterator(dataset)`` (tf.compat.v1)."""
    return dataset.make_initializable_iterator(shared_name)
