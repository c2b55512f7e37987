"""TF1's dense columns: numbers as they are, bucketized, one-hot (indicator) or embedded.

``numeric_column`` and ``bucketized_column`` read numeric features; ``indicator_column`` and
``embedding_column`` make a categorical column dense. An embedding column's table is created by
``tf.get_variable`` in the caller's variable scope, so a scope's partitioner shards it and
``replica_device_setter`` places the shards on the parameter servers; its gradient is sparse.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tensorgrid.feature_column import column_base
from tensorgrid.feature_column import sparse_inputs
from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import sparse_tensor
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import init_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import parsing_ops


def _as_shape_tuple(key: str, shape: Any) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"shape dimensions must be greater than 0. shape: {shape}, key: {key}")
    return dims


def _default_value_tuple(key: str, default_value: Any, shape: tuple[int, ...], dtype: dtypes.DType) -> Any:
    """``default_value`` as TF1 keeps it: None, or nested tuples of ``shape``."""
    if default_value is None:
        return None
    array = np.asarray(default_value)
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise TypeError(f"default_value must be compatible with dtype. default_value: {default_value}, "
                        f"dtype: {dtype.name}, key: {key}")
    if array.ndim == 0:
        array = np.full(shape, array.item())
    elif array.shape != shape:
        raise ValueError(f"The shape of default_value must be equal to given shape. default_value: {default_value}, "
                         f"shape: {shape}, key: {key}")
    typed = array.astype(dtype.as_numpy_dtype)
    converted: Any = typed.tolist()

    def as_tuples(value: Any) -> Any:
        return tuple(as_tuples(item) for item in value) if isinstance(value, list) else value

    return as_tuples(converted)


@dataclasses.dataclass(frozen=True)
class NumericColumn(column_base.DenseColumn):
    """A numeric feature of ``shape`` per example, read as float32."""

    key: str
    shape: tuple[int, ...] = (1,)
    default_value: Any = None
    dtype: dtypes.DType = dtypes.float32
    normalizer_fn: Optional[Callable[[Any], Any]] = None

    @property
    def name(self) -> str:
        return self.key

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return {self.key: parsing_ops.FixedLenFeature(self.shape, self.dtype, self.default_value)}

    @property
    def variable_shape(self) -> tensor_shape.TensorShape:
        return tensor_shape.TensorShape(list(self.shape))

    def transform(self, builder: column_base.FeatureBuilder) -> graph_lib.Tensor:
        feature = builder.get(self.key)
        if isinstance(feature, sparse_tensor.SparseTensor):
            raise ValueError(f"The corresponding Tensor of numerical column must be a Tensor. SparseTensor is not "
                             f"supported. key: {self.key}")
        if self.normalizer_fn is not None:
            feature = self.normalizer_fn(feature)
        return math_ops.cast(feature, dtypes.float32)

    def dense_tensor(self, builder: column_base.FeatureBuilder, weight_collections: Optional[list[str]],
                     trainable: bool) -> graph_lib.Tensor:
        tensor: graph_lib.Tensor = builder.get(self)
        return tensor


def numeric_column(key: str, shape: Any = (1,), default_value: Any = None, dtype: Any = dtypes.float32,
                   normalizer_fn: Optional[Callable[[Any], Any]] = None) -> NumericColumn:
    """A numeric feature; ``normalizer_fn`` is applied to it before it is read as float32."""
    if not isinstance(key, str):
        raise ValueError(f"key must be a string. Given: {key!r}")
    dims = _as_shape_tuple(key, shape)
    chosen = dtypes.as_dtype(dtype)
    if not (chosen.is_integer or chosen.is_floating):
        raise ValueError(f"dtype must be convertible to float. dtype: {chosen.name}, key: {key}")
    default = _default_value_tuple(key, default_value, dims, chosen)
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError(f"normalizer_fn must be a callable. Given: {normalizer_fn}")
    return NumericColumn(key, dims, default, chosen, normalizer_fn)


@dataclasses.dataclass(frozen=True)
class BucketizedColumn(column_base.DenseColumn, column_base.CategoricalColumn):
    """A numeric column cut at ``boundaries``: dense, a one-hot per value; categorical, its bucket ids."""

    source_column: NumericColumn
    boundaries: tuple[float, ...]

    @property
    def name(self) -> str:
        return f"{self.source_column.name}_bucketized"

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return self.source_column.parse_example_spec

    @property
    def variable_shape(self) -> tensor_shape.TensorShape:
        return tensor_shape.TensorShape(list(self.source_column.shape) + [len(self.boundaries) + 1])

    @property
    def num_buckets(self) -> int:
        return (len(self.boundaries) + 1) * int(np.prod(self.source_column.shape))

    def transform(self, builder: column_base.FeatureBuilder) -> graph_lib.Tensor:
        """Each value's bucket: how many boundaries are at or below it (TF's ``Bucketize``), int32."""
        values = builder.get(self.source_column)
        graph = values.graph
        with graph.name_scope(self.name):
            boundaries = array_ops.constant(np.asarray(self.boundaries, np.float32))
            at_or_below = math_ops.greater_equal(array_ops.expand_dims(values, -1), boundaries)
            return math_ops.reduce_sum(math_ops.cast(at_or_below, dtypes.int32), axis=-1)

    def dense_tensor(self, builder: column_base.FeatureBuilder, weight_collections: Optional[list[str]],
                     trainable: bool) -> graph_lib.Tensor:
        return indexing_ops.one_hot(builder.get(self), len(self.boundaries) + 1, on_value=1.0, off_value=0.0,
                                    dtype=dtypes.float32)

    def sparse_tensors(self, builder: column_base.FeatureBuilder, weight_collections: Optional[list[str]],
                       trainable: bool) -> column_base.IdsAndWeights:
        """Example ``b``'s ``i``-th value in bucket ``k`` is id ``k + i * (len(boundaries) + 1)`` at ``[b, i]``."""
        buckets = builder.get(self)
        source_dimension = int(np.prod(self.source_column.shape))
        bucket_count = len(self.boundaries) + 1
        graph = buckets.graph
        with graph.name_scope(self.name):
            batch_size = indexing_ops.strided_slice_from_key(array_ops.shape(buckets), 0)
            flat = math_ops.cast(array_ops.reshape(buckets, [-1]), dtypes.int64)
            rows = array_ops.reshape(array_ops.tile(array_ops.expand_dims(math_ops.range(batch_size), 1),
                                                    array_ops.stack([1, source_dimension])), [-1])
            positions = array_ops.tile(math_ops.range(source_dimension), array_ops.expand_dims(batch_size, 0))
            ids = math_ops.add(flat, math_ops.cast(math_ops.multiply(positions, bucket_count), dtypes.int64))
            indices = math_ops.cast(array_ops.transpose(array_ops.stack([rows, positions])), dtypes.int64)
            dense_shape = math_ops.cast(array_ops.stack([batch_size, source_dimension]), dtypes.int64)
        return column_base.IdsAndWeights(sparse_tensor.SparseTensor(indices, ids, dense_shape), None)


def bucketized_column(source_column: Any, boundaries: Sequence[float]) -> BucketizedColumn:
    """``source_column``'s values by bucket: ``(-inf, b0), [b0, b1), ..., [bn, +inf)``."""
    if not isinstance(source_column, NumericColumn):
        raise ValueError(f"source_column must be a column generated with numeric_column(). Given: {source_column}")
    if len(source_column.shape) > 1:
        raise ValueError(f"source_column must be one-dimensional column. Given: {source_column}")
    if not boundaries or not isinstance(boundaries, (list, tuple)):
        raise ValueError("boundaries must be a sorted list.")
    for earlier, later in zip(boundaries, boundaries[1:]):
        if not earlier < later:
            raise ValueError("boundaries must be a sorted list.")
    return BucketizedColumn(source_column, tuple(float(boundary) for boundary in boundaries))


@dataclasses.dataclass(frozen=True)
class IndicatorColumn(column_base.DenseColumn):
    """A categorical column as a multi-hot vector: per example, how often each id occurs."""

    categorical_column: column_base.CategoricalColumn

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_indicator"

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return self.categorical_column.parse_example_spec

    @property
    def variable_shape(self) -> tensor_shape.TensorShape:
        return tensor_shape.TensorShape([self.categorical_column.num_buckets])

    def transform(self, builder: column_base.FeatureBuilder) -> graph_lib.Tensor:
        ids, weights = self.categorical_column.sparse_tensors(builder, None, True)
        graph = ids.values.graph
        with graph.name_scope(self.name):
            return sparse_inputs.indicator_counts(ids, weights, self.categorical_column.num_buckets, self.name)

    def dense_tensor(self, builder: column_base.FeatureBuilder, weight_collections: Optional[list[str]],
                     trainable: bool) -> graph_lib.Tensor:
        tensor: graph_lib.Tensor = builder.get(self)
        return tensor


def indicator_column(categorical_column: Any) -> IndicatorColumn:
    """``categorical_column`` as counts per id (a one-hot when each example has one id)."""
    if not isinstance(categorical_column, column_base.CategoricalColumn):
        raise ValueError(f"Unsupported input type. Input must be a CategoricalColumn. Given: {categorical_column}")
    return IndicatorColumn(categorical_column)


def _check_embedding_options(dimension: Any, combiner: str, initializer: Any, ckpt_to_load_from: Any,
                             tensor_name_in_ckpt: Any) -> None:
    if dimension is None or isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
        raise ValueError(f"Invalid dimension {dimension}.")
    if combiner not in sparse_inputs.COMBINERS:
        raise ValueError(f"combiner must be one of {list(sparse_inputs.COMBINERS)}, got {combiner!r}")
    if initializer is not None and not callable(initializer):
        raise ValueError(f"initializer must be callable if specified. Given: {initializer}")
    if ckpt_to_load_from is not None or tensor_name_in_ckpt is not None:
        raise ValueError("ckpt_to_load_from and tensor_name_in_ckpt are not supported by tensorgrid's embedding "
                         "columns (docs/differences.md): restore the table with a tf.train.Saver instead")


def _default_initializer(dimension: int) -> Any:
    return init_ops.truncated_normal_initializer(mean=0.0, stddev=1 / math.sqrt(dimension))


@dataclasses.dataclass(frozen=True)
class EmbeddingColumn(column_base.DenseColumn):
    """A categorical column's ids, each a learned row of ``dimension`` floats, combined per example."""

    categorical_column: column_base.CategoricalColumn
    dimension: int
    combiner: str
    initializer: Any
    max_norm: Optional[float]
    trainable: bool

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_embedding"

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return self.categorical_column.parse_example_spec

    @property
    def variable_shape(self) -> tensor_shape.TensorShape:
        return tensor_shape.TensorShape([self.dimension])

    def transform(self, builder: column_base.FeatureBuilder) -> column_base.IdsAndWeights:
        return self.categorical_column.sparse_tensors(builder, None, True)

    def embedding_weights(self, weight_collections: Optional[list[str]], trainable: bool) -> Any:
        """The table the categorical column keeps its rows in (``[num_buckets, dimension]`` by ``tf.get_variable``
        in the current scope; an embedding variable for ``categorical_column_with_embedding``)."""
        return self.categorical_column.make_weights("embedding_weights", self.dimension, self.initializer,
                                                    self.trainable and trainable, weight_collections)

    def dense_tensor(self, builder: column_base.FeatureBuilder, weight_collections: Optional[list[str]],
                     trainable: bool) -> graph_lib.Tensor:
        ids, weights = builder.get(self)
        table = self.embedding_weights(weight_collections, trainable)
        graph = ids.values.graph
        with graph.name_scope(f"{self.name}_weights"):
            return sparse_inputs.safe_embedding_lookup_sparse(table, ids, weights, self.combiner, self.name,
                                                              self.max_norm)


def embedding_column(categorical_column: Any, dimension: int, combiner: str = "mean", initializer: Any = None,
                     ckpt_to_load_from: Any = None, tensor_name_in_ckpt: Any = None, max_norm: Optional[float] = None,
                     trainable: bool = True) -> EmbeddingColumn:
    """``categorical_column`` embedded in ``dimension`` floats; the rows of an example's ids are
    combined by ``combiner`` ('mean', 'sqrtn' or 'sum'). The table starts from ``initializer``
    (TF's default: a truncated normal of stddev ``1/sqrt(dimension)``)."""
    if not isinstance(categorical_column, column_base.CategoricalColumn):
        raise ValueError(f"categorical_column must be a categorical column, got {categorical_column!r}")
    _check_embedding_options(dimension, combiner, initializer, ckpt_to_load_from, tensor_name_in_ckpt)
    return EmbeddingColumn(categorical_column, dimension, combiner,
                           initializer if initializer is not None else _default_initializer(dimension),
                           max_norm, trainable)


@dataclasses.dataclass(frozen=True)
class SharedEmbeddingColumn(EmbeddingColumn):
    """An embedding column whose table is shared with the other columns of one ``shared_embedding_columns`` call:
    the first to be read creates it, under the name of their collection."""

    shared_embedding_collection_name: str = ""

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_shared_embedding"

    @property
    def var_scope_name(self) -> str:
        return self.shared_embedding_collection_name

    def embedding_weights(self, weight_collections: Optional[list[str]], trainable: bool) -> Any:
        graph = graph_lib.get_default_graph()
        shared = graph.get_collection(self.shared_embedding_collection_name)
        expected = [self.categorical_column.num_buckets, self.dimension]
        if shared:
            if len(shared) > 1:
                raise ValueError(f"Collection {self.shared_embedding_collection_name} can only contain one variable. "
                                 f"Suggested fix A: Choose a unique name for this collection. Suggested fix B: "
                                 f"remove all other variables from this collection. Given: {shared}")
            table = shared[0]
            if list(table.shape.as_list()) != expected:
                raise ValueError(f"Shared embedding collection {self.shared_embedding_collection_name} holds a "
                                 f"variable of shape {table.shape}, expected {expected}")
            return table
        table = super().embedding_weights(weight_collections, trainable)
        graph.add_to_collection(self.shared_embedding_collection_name, table)
        return table


def shared_embedding_columns(categorical_columns: Sequence[Any], dimension: int, combiner: str = "mean",
                             initializer: Any = None, shared_embedding_collection_name: Optional[str] = None,
                             ckpt_to_load_from: Any = None, tensor_name_in_ckpt: Any = None,
                             max_norm: Optional[float] = None, trainable: bool = True) -> list[SharedEmbeddingColumn]:
    """One embedding column per categorical column, all reading one table (their columns must have
    the same number of buckets); the table is ``<collection name>/embedding_weights``."""
    _check_embedding_options(dimension, combiner, initializer, ckpt_to_load_from, tensor_name_in_ckpt)
    columns = list(categorical_columns)
    if not columns:
        raise ValueError("categorical_columns must not be empty")
    for column in columns:
        if not isinstance(column, column_base.CategoricalColumn) or isinstance(column, BucketizedColumn):
            raise ValueError(f"All categorical_columns must be subclasses of _CategoricalColumn. Given: {column}")
    def base_type(column: column_base.CategoricalColumn) -> type:
        return type(getattr(column, "categorical_column", column))

    for column in columns[1:]:
        if base_type(column) is not base_type(columns[0]):
            raise ValueError(f"To use shared_embedding_column, all categorical_columns must have the same type, or "
                             f"be weighted_categorical_column of the same type. Given column: {column} of type: "
                             f"{type(column).__name__} does not match given column: {columns[0]} of type: "
                             f"{type(columns[0]).__name__}")
    buckets = columns[0].num_buckets
    for column in columns[1:]:
        if column.num_buckets != buckets:
            raise ValueError(f"To use shared_embedding_column, all categorical_columns must have the same number of "
                             f"buckets. Given column: {columns[0]} with buckets: {buckets}, and column: {column} "
                             f"with buckets: {column.num_buckets}")
    collection = shared_embedding_collection_name or "_".join(sorted(c.name for c in columns)) + "_shared_embedding"
    chosen_initializer = initializer if initializer is not None else _default_initializer(dimension)
    return [SharedEmbeddingColumn(column, dimension, combiner, chosen_initializer, max_norm, trainable, collection)
            for column in columns]
