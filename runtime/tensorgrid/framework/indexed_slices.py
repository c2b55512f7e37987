"""``tf.IndexedSlices``: some rows of a large tensor, the gradient of a gather.

An embedding table's gradient touches only the rows a batch looked up, so TF
represents it as ``(values, indices, dense_shape)`` with
``dense[indices[i]] += values[i]`` (repeated indices add up). Gradients stay in
this form from the gather to the optimizer, which then updates only those rows on
the parameter server; only ``values`` and ``indices`` cross the network.

This module owns the class and its fetched value. Turning one into a dense tensor
(``convert_to_tensor``) needs an op and is registered by ``ops/sparse_ops``.
"""

from __future__ import annotations

import collections
from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import tensor_conversion
from tensorgrid.framework import tensor_shape

IndexedSlicesValue = collections.namedtuple("IndexedSlicesValue", ["values", "indices", "dense_shape"])
"""What ``Session.run`` returns for an IndexedSlices: numpy values, indices and dense shape (or None)."""


class IndexedSlices:
    """Slices ``values[i]`` of a tensor of shape ``dense_shape``, at rows ``indices[i]`` of its first dimension."""

    _value_type = IndexedSlicesValue

    def __init__(self, values: graph_lib.Tensor, indices: graph_lib.Tensor,
                 dense_shape: Optional[graph_lib.Tensor] = None) -> None:
        self._values = values
        self._indices = indices
        self._dense_shape = dense_shape

    @property
    def values(self) -> graph_lib.Tensor:
        return self._values

    @property
    def indices(self) -> graph_lib.Tensor:
        return self._indices

    @property
    def dense_shape(self) -> Optional[graph_lib.Tensor]:
        return self._dense_shape

    @property
    def name(self) -> str:
        return self._values.name

    @property
    def device(self) -> str:
        return self._values.device

    @property
    def op(self) -> graph_lib.Operation:
        return self._values.op

    @property
    def dtype(self) -> dtypes.DType:
        return self._values.dtype

    @property
    def graph(self) -> graph_lib.Graph:
        return self._values.graph

    @property
    def shape(self) -> tensor_shape.TensorShape:
        """The static shape of the dense tensor, as far as ``dense_shape`` tells it (TF's rule)."""
        if self._dense_shape is None:
            return tensor_shape.unknown_shape()
        return constant_value_as_shape(self._dense_shape)

    def get_shape(self) -> tensor_shape.TensorShape:
        return self.shape

    def consumers(self) -> list[graph_lib.Operation]:
        components = [self._values, self._indices] + ([self._dense_shape] if self._dense_shape is not None else [])
        found: list[graph_lib.Operation] = []
        for t in components:
            found.extend(op for op in t.consumers() if op not in found)
        return found

    def __neg__(self) -> "IndexedSlices":
        return IndexedSlices(-self._values, self._indices, self._dense_shape)  # type: ignore[operator]

    def _fetch_components(self) -> list[Optional[graph_lib.Tensor]]:
        """The tensors that ``Session.run`` fetches for this value, in ``IndexedSlicesValue`` order."""
        return [self._values, self._indices, self._dense_shape]

    def __str__(self) -> str:
        shape = f", dense_shape={self._dense_shape}" if self._dense_shape is not None else ""
        return f"IndexedSlices(indices={self._indices}, values={self._values}{shape})"

    __repr__ = __str__


def constant_value_as_shape(shape_tensor: graph_lib.Tensor) -> tensor_shape.TensorShape:
    """The static shape a 1-D shape tensor stands for: exact for a constant or a ``Shape`` op."""
    op = shape_tensor.op
    if op.type == "Const":
        return tensor_shape.TensorShape([None if int(d) < 0 else int(d) for d in op.get_attr("value").reshape(-1)])
    if op.type == "Shape":
        return op.inputs[0].shape
    rank = shape_tensor.shape[0].value if shape_tensor.shape.ndims == 1 else None
    return tensor_shape.unknown_shape(rank)


def convert_to_tensor_or_indexed_slices(value: Any, dtype: Any = None, name: Optional[str] = None) -> Any:
    """An IndexedSlices (or SparseTensor) as it is; anything else through ``convert_to_tensor``."""
    if hasattr(value, "_fetch_components"):
        wanted = dtypes.as_dtype(dtype) if dtype is not None else None
        if wanted is not None and value.dtype.base_dtype != wanted.base_dtype:
            raise ValueError(
                f"Tensor conversion requested dtype {wanted.name} for {type(value).__name__} {value.name} "
                f"with dtype {value.dtype.base_dtype.name}"
            )
        return value
    return tensor_conversion.convert_to_tensor(value, dtype=dtype, name=name)
