"""TF1's categorical columns: features read as ids, by identity, hashing, a vocabulary or a cross.

Each turns its raw feature (a SparseTensor, or a dense tensor whose ``''``/``-1`` entries are
"absent") into ids ``[batch, ids per row]`` with TensorFlow's own arithmetic: the same hash
buckets (``string_to_hash_bucket_fast``), the same vocabulary tables (``index_table_from_*``) and
the same cross ids (``sparse_cross_hashed``), so a model trained here reads features as TF's does.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Optional, Sequence

from tensorgrid.feature_column import column_base
from tensorgrid.feature_column import sparse_inputs
from tensorgrid.framework import dtypes
from tensorgrid.framework import sparse_tensor
from tensorgrid.ops import array_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import lookup_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import parsing_ops
from tensorgrid.ops import sparse_cross_ops
from tensorgrid.ops import string_ops


def _check_key(key: Any) -> str:
    if not isinstance(key, str):
        raise ValueError(f"key must be a string. Given: {key!r}")
    return key


class KeyedCategoricalColumn(column_base.CategoricalColumn):
    """A categorical column reading one feature ``key`` of ``dtype``."""

    key: str
    dtype: dtypes.DType

    @property
    def name(self) -> str:
        return self.key

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        return {self.key: parsing_ops.VarLenFeature(self.dtype)}

    def sparse_tensors(self, builder: column_base.FeatureBuilder, weight_collections: Optional[list[str]],
                       trainable: bool) -> column_base.IdsAndWeights:
        return column_base.IdsAndWeights(builder.get(self), None)

    def _sparse_input(self, builder: column_base.FeatureBuilder) -> sparse_tensor.SparseTensor:
        ids = sparse_inputs.to_sparse_input(builder.get(self.key))
        column_base.check_string_or_int(ids.dtype, f"column_name: {self.key} input_tensor")
        column_base.check_dtype_family(self.key, self.dtype, ids.dtype)
        return ids


@dataclasses.dataclass(frozen=True)
class IdentityCategoricalColumn(KeyedCategoricalColumn):
    """The integer feature is the id (``categorical_column_with_identity``)."""

    key: str
    number_buckets: int
    default_value: Optional[int] = None
    dtype: dtypes.DType = dtypes.int64

    @property
    def num_buckets(self) -> int:
        return self.number_buckets

    def transform(self, builder: column_base.FeatureBuilder) -> sparse_tensor.SparseTensor:
        ids = sparse_inputs.to_sparse_input(builder.get(self.key))
        if not ids.dtype.base_dtype.is_integer:
            raise ValueError(f"Invalid input, not integer. key: {self.key} dtype: {ids.dtype.base_dtype.name}")
        graph = ids.values.graph
        with graph.name_scope(f"{self.key}_identity"):
            values = math_ops.cast(ids.values, dtypes.int64)
            if self.default_value is not None:
                low = array_ops.constant(0, dtype=dtypes.int64)
                high = array_ops.constant(self.number_buckets, dtype=dtypes.int64)
                outside = math_ops.logical_or(math_ops.less(values, low), math_ops.greater_equal(values, high))
                values = indexing_ops.where(outside, array_ops.fill(array_ops.shape(values), array_ops.constant(
                    self.default_value, dtype=dtypes.int64)), values)
        return sparse_tensor.SparseTensor(ids.indices, values, ids.dense_shape)


def categorical_column_with_identity(key: str, num_buckets: int,
                                     default_value: Optional[int] = None) -> IdentityCategoricalColumn:
    """Ids that are the feature's own integers, in ``[0, num_buckets)``; others become
    ``default_value``; when it is None they pass unchecked, as in TF 2.21 (an indicator column
    ignores them, an embedding lookup fails the step)."""
    _check_key(key)
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, int) or num_buckets < 1:
        raise ValueError(f"num_buckets {num_buckets} < 1, column_name {key}")
    if default_value is not None and not 0 <= default_value < num_buckets:
        raise ValueError(f"default_value {default_value} not in range [0, {num_buckets}), column_name {key}")
    return IdentityCategoricalColumn(key, num_buckets, default_value)


@dataclasses.dataclass(frozen=True)
class HashedCategoricalColumn(KeyedCategoricalColumn):
    """Ids that are the feature's fingerprint modulo ``hash_bucket_size``."""

    key: str
    hash_bucket_size: int
    dtype: dtypes.DType = dtypes.string

    @property
    def num_buckets(self) -> int:
        return self.hash_bucket_size

    def transform(self, builder: column_base.FeatureBuilder) -> sparse_tensor.SparseTensor:
        ids = self._sparse_input(builder)
        values = ids.values
        graph = values.graph
        with graph.name_scope(self.key):
            if values.dtype.base_dtype != dtypes.string:
                values = string_ops.as_string(values)
            buckets = string_ops.string_to_hash_bucket_fast(values, self.hash_bucket_size, name="lookup")
        return sparse_tensor.SparseTensor(ids.indices, buckets, ids.dense_shape)


def categorical_column_with_hash_bucket(key: str, hash_bucket_size: int,
                                        dtype: Any = dtypes.string) -> HashedCategoricalColumn:
    """Ids of a string or integer feature by TensorFlow's fast fingerprint hash."""
    _check_key(key)
    if hash_bucket_size is None:
        raise ValueError(f"hash_bucket_size must be set. key: {key}")
    if isinstance(hash_bucket_size, bool) or not isinstance(hash_bucket_size, int) or hash_bucket_size < 1:
        raise ValueError(f"hash_bucket_size must be at least 1. hash_bucket_size: {hash_bucket_size}, key: {key}")
    dtype = dtypes.as_dtype(dtype)
    column_base.check_string_or_int(dtype, f"column_name: {key}")
    return HashedCategoricalColumn(key, hash_bucket_size, dtype)


def _check_vocabulary_options(key: str, num_oov_buckets: int, default_value: int) -> None:
    if isinstance(num_oov_buckets, bool) or not isinstance(num_oov_buckets, int) or num_oov_buckets < 0:
        raise ValueError(f"Invalid num_oov_buckets {num_oov_buckets}, column_name: {key}")
    if default_value != -1 and num_oov_buckets != 0:
        raise ValueError(f"Can't specify both default_value {default_value} and num_oov_buckets {num_oov_buckets}, "
                         f"column_name: {key}")


@dataclasses.dataclass(frozen=True)
class VocabularyListCategoricalColumn(KeyedCategoricalColumn):
    """Ids that are positions in an in-memory vocabulary."""

    key: str
    vocabulary_list: tuple[Any, ...]
    dtype: dtypes.DType
    default_value: int = -1
    num_oov_buckets: int = 0

    @property
    def num_buckets(self) -> int:
        return len(self.vocabulary_list) + self.num_oov_buckets

    def transform(self, builder: column_base.FeatureBuilder) -> sparse_tensor.SparseTensor:
        ids = self._sparse_input(builder)
        key_dtype = dtypes.int64 if self.dtype.is_integer else self.dtype
        if ids.dtype.base_dtype != key_dtype:
            ids = column_base.as_int64_ids(ids)
        table = lookup_ops.index_table_from_tensor(
            vocabulary_list=list(self.vocabulary_list), num_oov_buckets=self.num_oov_buckets,
            default_value=self.default_value, dtype=key_dtype, name=f"{self.key}_lookup")
        looked_up: sparse_tensor.SparseTensor = typing.cast(Any, table).lookup(ids)
        return looked_up


def categorical_column_with_vocabulary_list(key: str, vocabulary_list: Sequence[Any], dtype: Any = None,
                                            default_value: int = -1,
                                            num_oov_buckets: int = 0) -> VocabularyListCategoricalColumn:
    """Ids that are positions in ``vocabulary_list``; other values get ``default_value`` (dropped
    when -1) or one of ``num_oov_buckets`` hash buckets after the vocabulary."""
    _check_key(key)
    if vocabulary_list is None or len(vocabulary_list) < 1:
        raise ValueError(f"vocabulary_list {vocabulary_list} must be non-empty, column_name: {key}")
    vocabulary = tuple(vocabulary_list)
    if len(set(vocabulary)) != len(vocabulary):
        raise ValueError(f"Duplicate keys in vocabulary_list {vocabulary_list}, column_name: {key}")
    if all(isinstance(word, (str, bytes)) for word in vocabulary):
        vocabulary_dtype = dtypes.string
    elif all(isinstance(word, int) and not isinstance(word, bool) for word in vocabulary):
        vocabulary_dtype = dtypes.int64
    else:
        raise ValueError(f"vocabulary_list {vocabulary_list} must hold only strings or only integers, column_name: {key}")
    _check_vocabulary_options(key, num_oov_buckets, default_value)
    if dtype is None:
        chosen = vocabulary_dtype
    else:
        chosen = dtypes.as_dtype(dtype)
        if chosen.is_integer != vocabulary_dtype.is_integer:
            raise ValueError(f"dtype {chosen.name} and vocabulary dtype {vocabulary_dtype.name} do not match, "
                             f"column_name: {key}")
    column_base.check_string_or_int(chosen, f"column_name: {key}")
    return VocabularyListCategoricalColumn(key, vocabulary, chosen, default_value, num_oov_buckets)


@dataclasses.dataclass(frozen=True)
class VocabularyFileCategoricalColumn(KeyedCategoricalColumn):
    """Ids that are line numbers in a vocabulary file."""

    key: str
    vocabulary_file: str
    vocabulary_size: int
    num_oov_buckets: int
    dtype: dtypes.DType
    default_value: int = -1

    @property
    def num_buckets(self) -> int:
        return self.vocabulary_size + self.num_oov_buckets

    def transform(self, builder: column_base.FeatureBuilder) -> sparse_tensor.SparseTensor:
        ids = self._sparse_input(builder)
        key_dtype = dtypes.int64 if self.dtype.is_integer else self.dtype
        if ids.dtype.base_dtype != key_dtype:
            ids = column_base.as_int64_ids(ids)
        table = lookup_ops.index_table_from_file(
            vocabulary_file=self.vocabulary_file, num_oov_buckets=self.num_oov_buckets,
            vocab_size=self.vocabulary_size, default_value=self.default_value, key_dtype=key_dtype,
            name=f"{self.key}_lookup")
        looked_up: sparse_tensor.SparseTensor = typing.cast(Any, table).lookup(ids)
        return looked_up


def _count_lines(path: str) -> int:
    with open(path, "rb") as vocabulary:
        return sum(1 for _ in vocabulary)


def categorical_column_with_vocabulary_file(key: str, vocabulary_file: str, vocabulary_size: Optional[int] = None,
                                            num_oov_buckets: int = 0, default_value: Optional[int] = None,
                                            dtype: Any = dtypes.string) -> VocabularyFileCategoricalColumn:
    """Ids that are line numbers in ``vocabulary_file`` (its first ``vocabulary_size`` lines;
    all of them when None)."""
    _check_key(key)
    if not vocabulary_file:
        raise ValueError(f"Missing vocabulary_file in {key}.")
    if vocabulary_size is None:
        vocabulary_size = _count_lines(vocabulary_file)
        if vocabulary_size < 1:
            raise ValueError(f"Invalid vocabulary_size in {key}: the file {vocabulary_file} is empty.")
    if isinstance(vocabulary_size, bool) or not isinstance(vocabulary_size, int) or vocabulary_size < 1:
        raise ValueError(f"Invalid vocabulary_size in {key}.")
    default = -1 if default_value is None else default_value
    _check_vocabulary_options(key, num_oov_buckets, default)
    chosen = dtypes.as_dtype(dtype)
    column_base.check_string_or_int(chosen, f"column_name: {key}")
    return VocabularyFileCategoricalColumn(key, vocabulary_file, vocabulary_size, num_oov_buckets, chosen, default)


@dataclasses.dataclass(frozen=True)
class WeightedCategoricalColumn(column_base.CategoricalColumn):
    """A categorical column whose ids carry the weights of a second feature."""

    categorical_column: column_base.CategoricalColumn
    weight_feature_key: str
    dtype: dtypes.DType = dtypes.float32

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_weighted_by_{self.weight_feature_key}"

    @property
    def num_buckets(self) -> int:
        return self.categorical_column.num_buckets

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        spec = dict(self.categorical_column.parse_example_spec)
        if self.weight_feature_key in spec:
            raise ValueError(f"Parse config {spec[self.weight_feature_key]} already exists for "
                             f"{self.weight_feature_key}.")
        spec[self.weight_feature_key] = parsing_ops.VarLenFeature(self.dtype)
        return spec

    def transform(self, builder: column_base.FeatureBuilder) -> column_base.IdsAndWeights:
        weights = builder.get(self.weight_feature_key)
        if weights.dtype.base_dtype != self.dtype:
            raise ValueError(f"Bad dtype, expected {self.dtype.name}, but got {weights.dtype.base_dtype.name}.")
        weights = sparse_inputs.to_sparse_input(weights, ignore_value=0.0)
        if not weights.dtype.base_dtype.is_floating:
            weights = sparse_tensor.SparseTensor(weights.indices, math_ops.cast(weights.values, dtypes.float32),
                                                 weights.dense_shape)
        return column_base.IdsAndWeights(builder.get(self.categorical_column), weights)

    def sparse_tensors(self, builder: column_base.FeatureBuilder, weight_collections: Optional[list[str]],
                       trainable: bool) -> column_base.IdsAndWeights:
        ids_and_weights: column_base.IdsAndWeights = builder.get(self)
        return ids_and_weights

    def make_weights(self, name: str, dimension: int, initializer: Any, trainable: bool,
                     collections: Optional[list[str]]) -> Any:
        return self.categorical_column.make_weights(name, dimension, initializer, trainable, collections)


def weighted_categorical_column(categorical_column: column_base.CategoricalColumn, weight_feature_key: str,
                                dtype: Any = dtypes.float32) -> WeightedCategoricalColumn:
    """``categorical_column``'s ids, each weighted by the value at its place in ``weight_feature_key``."""
    if not isinstance(categorical_column, column_base.CategoricalColumn):
        raise ValueError(f"categorical_column must be a categorical column, got {categorical_column!r}")
    chosen = dtypes.as_dtype(dtype)
    if chosen is None or not (chosen.is_integer or chosen.is_floating):
        raise ValueError(f"dtype {dtype} is not convertible to float.")
    return WeightedCategoricalColumn(categorical_column, _check_key(weight_feature_key), chosen)


@dataclasses.dataclass(frozen=True)
class CrossedColumn(column_base.CategoricalColumn):
    """Ids of the combinations of several features' values, hashed into ``hash_bucket_size``."""

    keys: tuple[Any, ...]
    hash_bucket_size: int
    hash_key: Optional[int] = None

    def leaf_keys(self) -> list[Any]:
        """The keys crossed, crosses of crosses flattened."""
        leaves: list[Any] = []
        for key in self.keys:
            leaves.extend(key.leaf_keys() if isinstance(key, CrossedColumn) else [key])
        return leaves

    @property
    def name(self) -> str:
        return "_X_".join(sorted(key if isinstance(key, str) else key.name for key in self.leaf_keys()))

    @property
    def num_buckets(self) -> int:
        return self.hash_bucket_size

    @property
    def parse_example_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        for key in self.keys:
            if isinstance(key, str):
                spec[key] = parsing_ops.VarLenFeature(dtypes.string)
            else:
                spec.update(key.parse_example_spec)
        return spec

    def transform(self, builder: column_base.FeatureBuilder) -> sparse_tensor.SparseTensor:
        inputs = []
        for key in self.leaf_keys():
            if isinstance(key, str):
                inputs.append(builder.get(key))
                continue
            ids, weights = key.sparse_tensors(builder, None, True)
            if weights is not None:
                raise ValueError(f"crossed_column does not support weight_tensor, but the given column populates "
                                 f"weight_tensor. Given column: {key.name}")
            inputs.append(ids)
        crossed: sparse_tensor.SparseTensor = sparse_cross_ops.sparse_cross_hashed(
            inputs, num_buckets=self.hash_bucket_size, hash_key=self.hash_key)
        return crossed

    def sparse_tensors(self, builder: column_base.FeatureBuilder, weight_collections: Optional[list[str]],
                       trainable: bool) -> column_base.IdsAndWeights:
        return column_base.IdsAndWeights(builder.get(self), None)


def crossed_column(keys: Sequence[Any], hash_bucket_size: int, hash_key: Optional[int] = None) -> CrossedColumn:
    """The cross of ``keys`` (feature names, bucketized or other categorical columns but hashed
    ones, or crosses), as TF hashes it: ``FingerprintCat64`` of the values, modulo ``hash_bucket_size``."""
    if isinstance(hash_bucket_size, bool) or not isinstance(hash_bucket_size, int) or hash_bucket_size < 1:
        raise ValueError(f"hash_bucket_size must be > 1. hash_bucket_size: {hash_bucket_size}")
    if not keys or len(keys) < 2:
        raise ValueError(f"keys must be a list with length > 1. Given: {keys}")
    for key in keys:
        if not isinstance(key, (str, column_base.CategoricalColumn)):
            raise ValueError(f"Unsupported key type. All keys must be either string, or categorical column except "
                             f"HashedCategoricalColumn. Given: {key}")
        if isinstance(key, HashedCategoricalColumn):
            raise ValueError(f"categorical_column_with_hash_bucket is not supported for crossing. Hashing before "
                             f"crossing will increase probability of collision. Instead, use the feature name as a "
                             f"string. Given: {key}")
    return CrossedColumn(tuple(keys), hash_bucket_size, hash_key)
