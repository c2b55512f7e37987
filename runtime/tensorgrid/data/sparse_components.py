"""SparseTensors inside ``tf.data`` elements: a VarLenFeature parsed in ``Dataset.map``.

A pipeline moves flat lists of arrays, so a SparseTensor in an element travels as three
components (indices, values, dense_shape), marked in the dataset's structure by a
``SparseComponents`` node. Functions (``map``, ``filter``) receive and return real
SparseTensors; ``get_next`` gives them back; ``batch`` stacks them as TensorFlow does
(a leading batch dimension on the indices, the dense shape the batch's largest), which
the iterator's kernel does for the component positions ``sparse_starts`` names.
"""

from __future__ import annotations

import collections
from typing import Any, Callable

from tensorgrid.framework import sparse_tensor
from tensorgrid.framework import tensor_shape


class SparseComponents(collections.namedtuple("SparseComponents", ["indices", "values", "dense_shape"])):
    """One SparseTensor of an element, as its three components (or their types, shapes or structure)."""


def encode(value: Any) -> Any:
    """``value`` with each SparseTensor replaced by its SparseComponents (what a function returns)."""
    if isinstance(value, sparse_tensor.SparseTensor):
        return SparseComponents(value.indices, value.values, value.dense_shape)
    if isinstance(value, dict):
        return type(value)((key, encode(item)) for key, item in value.items())
    if isinstance(value, tuple) and not isinstance(value, SparseComponents):
        items = [encode(item) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


def decode(value: Any) -> Any:
    """``value`` with each SparseComponents of tensors made a SparseTensor again (what a function receives)."""
    if isinstance(value, SparseComponents):
        return sparse_tensor.SparseTensor(*value)
    if isinstance(value, dict):
        return type(value)((key, decode(item)) for key, item in value.items())
    if isinstance(value, tuple):
        items = [decode(item) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


def with_sparse_tensors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` called with SparseTensors for the SparseComponents of its arguments, its result encoded."""
    return lambda *args: encode(fn(*[decode(a) for a in args]))


def argument_structure(structure: Any) -> Any:
    """How a function's arguments are packed: a tuple element as positional arguments, a dict or a
    single SparseTensor as one argument, any other single component as one argument (None)."""
    if isinstance(structure, SparseComponents):
        return (structure,)
    return structure if isinstance(structure, (tuple, dict)) else None


def starts(structure: Any) -> list[int]:
    """The flat positions at which each SparseComponents of ``structure`` begins."""
    found: list[int] = []

    def walk(node: Any, position: int) -> int:
        if isinstance(node, SparseComponents):
            found.append(position)
            return position + 3
        if isinstance(node, dict):
            for key in sorted(node):
                position = walk(node[key], position)
            return position
        if isinstance(node, tuple):
            for item in node:
                position = walk(item, position)
            return position
        return position + 1

    walk(structure, 0)
    return found


def batched_shapes(shapes: list[tensor_shape.TensorShape], sparse_starts: list[int],
                   first: Any) -> list[tensor_shape.TensorShape]:
    """The static shapes after ``batch``: ``[first, ...]`` for a dense component; a sparse one's
    indices gain a column and its dense shape an entry."""
    out = [tensor_shape.TensorShape([first]).concatenate(s) for s in shapes]
    for start in sparse_starts:
        rank = shapes[start + 2][0].value if shapes[start + 2].ndims == 1 else None
        grown = None if rank is None else rank + 1
        out[start:start + 3] = [tensor_shape.TensorShape([None, grown]), tensor_shape.TensorShape([None]),
                                tensor_shape.TensorShape([grown])]
    return out
