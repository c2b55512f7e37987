"""DeepRec's ``tf.feature_column.categorical_column_with_embedding``: a categorical column whose ids
are the keys of an embedding variable (``tf.get_embedding_variable``) instead of rows of a fixed table.

Its ids are the feature's own int64 (or int32) values, or, for a string feature, each string's
64-bit ``Fingerprint64`` (``embedding_variable_ops.string_keys``): no bucket count, no modulo.
``embedding_column`` over it makes its ``embedding_weights`` an embedding variable (with the
column's ``ev_option``: admission, eviction, ``max_entries``), and ``linear_model`` (the canned
linear and wide-and-deep estimators) keeps its ``weights`` in one of ``units`` values per key, so
the wide and the deep part of a model both grow with the ids. ``partition_num`` splits the table
into that many parts (``tf.fixed_size_partitioner``); without it the variable scope's partitioner
(an estimator's ``input_layer_partitioner``) decides, as DeepRec does.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from tensorgrid.feature_column import categorical
from tensorgrid.feature_column import column_base
from tensorgrid.framework import dtypes
from tensorgrid.framework import sparse_tensor
from tensorgrid.ops import embedding_variable_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import partitioned_variables
from tensorgrid.ops import variable_scope


@dataclasses.dataclass(frozen=True)
class EmbeddingCategoricalColumn(categorical.KeyedCategoricalColumn):
    """Ids that key an embedding variable: the feature's integers, or its strings' 64-bit fingerprints."""

    key: str
    dtype: dtypes.DType
    partition_num: Optional[int]
    ev_option: embedding_variable_ops.EmbeddingVariableOption

    @property
    def num_buckets(self) -> int:
        raise ValueError(f"categorical_column_with_embedding {self.key!r} has no bucket count (its ids are any "
                         "64-bit keys): read it with embedding_column or linear_model, not indicator_column or "
                         "shared_embedding_columns")

    def transform(self, builder: column_base.FeatureBuilder) -> sparse_tensor.SparseTensor:
        ids = self._sparse_input(builder)
        graph = ids.values.graph
        with graph.name_scope(f"{self.key}_embedding_keys"):
            if ids.dtype.base_dtype == dtypes.string:
                keys = embedding_variable_ops.string_keys(ids.values)
            else:
                keys = math_ops.cast(ids.values, dtypes.int64)
        return sparse_tensor.SparseTensor(ids.indices, keys, ids.dense_shape)

    def make_weights(self, name: str, dimension: int, initializer: Any, trainable: bool,
                     collections: Optional[list[str]]) -> Any:
        """An embedding variable ``name`` of ``dimension``-wide rows keyed by this column's ids."""
        if self.partition_num is not None:
            partitioner = partitioned_variables.fixed_size_partitioner(self.partition_num)
        else:
            partitioner = variable_scope.get_variable_scope().partitioner
        return embedding_variable_ops.get_embedding_variable(
            name, dimension, key_dtype=dtypes.int64, initializer=initializer, trainable=trainable,
            collections=collections, partitioner=partitioner, ev_option=self.ev_option)


def categorical_column_with_embedding(key: str, dtype: Any = dtypes.string, partition_num: Optional[int] = None,
                                      ev_option: Optional[embedding_variable_ops.EmbeddingVariableOption] = None
                                      ) -> EmbeddingCategoricalColumn:
    """DeepRec's column of raw ids kept in an embedding variable: ``dtype`` tf.string (hashed to 64 bits),
    tf.int64 or tf.int32; ``partition_num`` parts; ``ev_option`` (``tf.EmbeddingVariableOption``) for
    admission, eviction and bounds."""
    if not isinstance(key, str):
        raise ValueError(f"key must be a string. Given: {key!r}")
    chosen = dtypes.as_dtype(dtype)
    if chosen not in (dtypes.string, dtypes.int64, dtypes.int32):
        raise ValueError(f"categorical_column_with_embedding {key!r}: dtype must be tf.string, tf.int64 or tf.int32, "
                         f"got {chosen.name}")
    if partition_num is not None and (isinstance(partition_num, bool) or not isinstance(partition_num, int)
                                      or partition_num < 1):
        raise ValueError(f"categorical_column_with_embedding {key!r}: partition_num must be None or an int >= 1, "
                         f"got {partition_num!r}")
    if ev_option is not None and not isinstance(ev_option, embedding_variable_ops.EmbeddingVariableOption):
        raise ValueError(f"categorical_column_with_embedding {key!r}: ev_option must be a tf.EmbeddingVariableOption, "
                         f"got {ev_option!r}")
    return EmbeddingCategoricalColumn(key, chosen, partition_num,
                                      ev_option or embedding_variable_ops.EmbeddingVariableOption())
