"""``tf.SparseTensor``: a tensor given by its non-zero entries, the input of sparse embedding lookups.

Three tensors, as in TF: ``indices`` (int64, ``[N, rank]``, one row of coordinates
per entry, in row-major order), ``values`` (``[N]``) and ``dense_shape`` (int64,
``[rank]``). A batch of variable-length id lists (the features of a click model)
is a ``[batch, max_ids]`` SparseTensor whose row ``b`` holds example ``b``'s ids.
"""

from __future__ import annotations

import collections
from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import indexed_slices
from tensorgrid.framework import tensor_conversion
from tensorgrid.framework import tensor_shape

SparseTensorValue = collections.namedtuple("SparseTensorValue", ["indices", "values", "dense_shape"])
"""What ``Session.run`` returns for a SparseTensor, and what may be fed to one."""


class SparseTensor:
    """Entries ``values[i]`` at coordinates ``indices[i]`` of a tensor of shape ``dense_shape``."""

    _value_type = SparseTensorValue

    def __init__(self, indices: Any, values: Any, dense_shape: Any) -> None:
        self._indices = tensor_conversion.convert_to_tensor(indices, dtype=dtypes.int64, name="indices")
        self._values = tensor_conversion.convert_to_tensor(values, name="values")
        self._dense_shape = tensor_conversion.convert_to_tensor(dense_shape, dtype=dtypes.int64, name="dense_shape")
        if self._indices.shape.ndims not in (None, 2):
            raise ValueError(f"SparseTensor indices must be a matrix [N, rank], got shape {self._indices.shape}")
        if self._values.shape.ndims not in (None, 1):
            raise ValueError(f"SparseTensor values must be a vector [N], got shape {self._values.shape}")
        if self._dense_shape.shape.ndims not in (None, 1):
            raise ValueError(f"SparseTensor dense_shape must be a vector [rank], got shape {self._dense_shape.shape}")
        if not self._indices.shape.with_rank(2)[:1].is_compatible_with(self._values.shape.with_rank(1)):
            raise ValueError(
                f"SparseTensor has {self._indices.shape[0]} index rows but {self._values.shape[0]} values"
            )

    @classmethod
    def from_value(cls, value: Any) -> "SparseTensor":
        """A SparseTensor of constants from a ``SparseTensorValue`` (or a SparseTensor as it is)."""
        if isinstance(value, SparseTensor):
            return value
        return cls(value.indices, value.values, value.dense_shape)

    @property
    def indices(self) -> graph_lib.Tensor:
        return self._indices

    @property
    def values(self) -> graph_lib.Tensor:
        return self._values

    @property
    def dense_shape(self) -> graph_lib.Tensor:
        return self._dense_shape

    @property
    def dtype(self) -> dtypes.DType:
        return self._values.dtype

    @property
    def name(self) -> str:
        return self._values.name

    @property
    def op(self) -> graph_lib.Operation:
        return self._values.op

    @property
    def graph(self) -> graph_lib.Graph:
        return self._values.graph

    @property
    def shape(self) -> tensor_shape.TensorShape:
        return indexed_slices.constant_value_as_shape(self._dense_shape)

    def get_shape(self) -> tensor_shape.TensorShape:
        return self.shape

    def _fetch_components(self) -> list[Optional[graph_lib.Tensor]]:
        """The tensors that ``Session.run`` fetches (or feeds) for this value, in ``SparseTensorValue`` order."""
        return [self._indices, self._values, self._dense_shape]

    def __repr__(self) -> str:
        return f"SparseTensor(indices={self._indices}, values={self._values}, dense_shape={self._dense_shape})"
