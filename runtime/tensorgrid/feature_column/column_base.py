"""What every TF1 feature column is, and the per-call cache of transformed features.

A column is a frozen description (hashable, compared by value, as TF's namedtuple columns are);
``input_layer`` and ``linear_model`` ask it for a dense tensor (``DenseColumn``) or for sparse ids
and weights (``CategoricalColumn``). ``FeatureBuilder`` is TF's ``_LazyBuilder``: it reads each raw
feature once (a rank-1 feature becomes ``[batch, 1]``) and transforms each column once per call,
so columns sharing a source (a bucketized column and its crosses) share its ops.
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import sparse_tensor
from tensorgrid.framework import tensor_conversion
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import variable_scope


class IdsAndWeights(NamedTuple):
    """A categorical column's ids ``[batch, ids per row]`` and their weights (None: all 1)."""

    id_tensor: sparse_tensor.SparseTensor
    weight_tensor: Optional[sparse_tensor.SparseTensor]


class FeatureColumn(abc.ABC):
    """A named way of reading features; its name orders the columns and names their variables."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The column's name, unique among the columns of one model."""

    @property
    def var_scope_name(self) -> str:
        """The variable scope its variables are created in (its name, except for shared embeddings)."""
        return self.name

    @property
    @abc.abstractmethod
    def parse_example_spec(self) -> dict[str, Any]:
        """The ``tf.parse_example`` features it reads: key to FixedLenFeature or VarLenFeature."""

    @abc.abstractmethod
    def transform(self, builder: "FeatureBuilder") -> Any:
        """The column's transformed feature, computed once per builder."""


class DenseColumn(FeatureColumn):
    """A column ``input_layer`` can read: a dense float tensor per example."""

    @property
    @abc.abstractmethod
    def variable_shape(self) -> tensor_shape.TensorShape:
        """The shape of one example's dense tensor."""

    @abc.abstractmethod
    def dense_tensor(self, builder: "FeatureBuilder", weight_collections: Optional[list[str]],
                     trainable: bool) -> graph_lib.Tensor:
        """``[batch] + variable_shape``, float32."""


class CategoricalColumn(FeatureColumn):
    """A column of ids in ``[0, num_buckets)``, each example holding any number of them."""

    @property
    @abc.abstractmethod
    def num_buckets(self) -> int:
        """How many distinct ids there are."""

    @abc.abstractmethod
    def sparse_tensors(self, builder: "FeatureBuilder", weight_collections: Optional[list[str]],
                       trainable: bool) -> IdsAndWeights:
        """The ids of each example (and their weights)."""

    def make_weights(self, name: str, dimension: int, initializer: Any, trainable: bool,
                     collections: Optional[list[str]]) -> Any:
        """The table of one ``dimension``-wide row per id that embedding columns and ``linear_model``
        read this column's ids in: ``[num_buckets, dimension]`` by ``tf.get_variable`` in the current scope."""
        return variable_scope.get_variable(name, shape=[self.num_buckets, dimension], dtype=dtypes.float32,
                                           initializer=initializer, trainable=trainable, collections=collections)


def _as_rank_at_least_two(feature: Any, key: str) -> Any:
    """A rank-1 feature ``[batch]`` read as ``[batch, 1]``, as TF's ``_LazyBuilder`` does."""
    if isinstance(feature, sparse_tensor.SparseTensor):
        rank = feature.shape.ndims
        if rank == 1:
            zeros = array_ops.zeros_like(feature.indices)
            indices = array_ops.concat([feature.indices, zeros], 1)
            dense_shape = array_ops.concat([feature.dense_shape, array_ops.constant([1], dtype=dtypes.int64)], 0)
            return sparse_tensor.SparseTensor(indices, feature.values, dense_shape)
        return feature
    rank = feature.shape.ndims
    if rank is None:
        raise ValueError(f"Feature (key: {key}) cannot have rank 0 or unknown rank: give it a static rank")
    if rank == 0:
        raise ValueError(f"Feature (key: {key}) cannot have rank 0. Given: {feature}")
    if rank == 1:
        return array_ops.expand_dims(feature, -1)
    return feature


class FeatureBuilder:
    """The features of one ``input_layer``/``linear_model`` call and the columns transformed so far."""

    def __init__(self, features: Any) -> None:
        if not isinstance(features, dict):
            raise ValueError(f"features should be a dictionary of `Tensor`s. Given type: {type(features)}")
        self._features = dict(features)
        self._cache: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        """The raw feature of a string key, or a column's transformed feature."""
        if key in self._cache:
            return self._cache[key]
        if isinstance(key, str):
            if key not in self._features:
                raise ValueError(f"The following key is not found in features: {key!r}; "
                                 f"features has {sorted(str(k) for k in self._features)}")
            raw = self._features[key]
            if isinstance(raw, sparse_tensor.SparseTensorValue):
                raw = sparse_tensor.SparseTensor.from_value(raw)
            if not isinstance(raw, sparse_tensor.SparseTensor):
                raw = tensor_conversion.convert_to_tensor(raw)
            value = _as_rank_at_least_two(raw, key)
        elif isinstance(key, FeatureColumn):
            value = key.transform(self)
        else:
            raise TypeError(f"Feature keys are strings or feature columns, got {key!r} of type {type(key).__name__}")
        self._cache[key] = value
        return value


def check_dtype_family(column_name: str, column_dtype: dtypes.DType, tensor_dtype: dtypes.DType) -> None:
    """A categorical column of strings reads strings, one of integers reads integers (TF's check)."""
    if column_dtype.is_integer != tensor_dtype.base_dtype.is_integer:
        raise ValueError(f"Column dtype and SparseTensors dtype must be compatible. key: {column_name}, "
                         f"column dtype: {column_dtype.name}, tensor dtype: {tensor_dtype.base_dtype.name}")


def check_string_or_int(dtype: dtypes.DType, what: str) -> None:
    if dtype.base_dtype != dtypes.string and not dtype.base_dtype.is_integer:
        raise ValueError(f"{what} dtype must be string or integer. dtype: {dtype.base_dtype.name}.")


def as_int64_ids(ids: sparse_tensor.SparseTensor) -> sparse_tensor.SparseTensor:
    if ids.values.dtype.base_dtype == dtypes.int64:
        return ids
    return sparse_tensor.SparseTensor(ids.indices, math_ops.cast(ids.values, dtypes.int64), ids.dense_shape)


def with_default_collections(weight_collections: Optional[list[str]]) -> list[str]:
    """The collections of a model's variables: the caller's, plus global and model variables."""
    collections = list(weight_collections or [])
    for key in (graph_lib.GraphKeys.GLOBAL_VARIABLES, graph_lib.GraphKeys.MODEL_VARIABLES):
        if key not in collections:
            collections.append(key)
    return collections
