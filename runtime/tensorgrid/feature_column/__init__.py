"""``tf.feature_column``: TF1's feature columns (``tensorflow/python/feature_column/feature_column.py``),
built with the ops layer: categorical columns read ids with TensorFlow's hashes, vocabularies and
crosses; ``input_layer`` and ``linear_model`` make the deep and the wide model's inputs."""

from __future__ import annotations

from tensorgrid.feature_column.categorical import (
    categorical_column_with_hash_bucket, categorical_column_with_identity, categorical_column_with_vocabulary_file,
    categorical_column_with_vocabulary_list, crossed_column, weighted_categorical_column,
)
from tensorgrid.feature_column.embedding_variable_column import categorical_column_with_embedding
from tensorgrid.feature_column.dense import (
    bucketized_column, embedding_column, indicator_column, numeric_column, shared_embedding_columns,
)
from tensorgrid.feature_column.models import input_layer, linear_model, make_parse_example_spec

__all__ = [
    "bucketized_column", "categorical_column_with_embedding", "categorical_column_with_hash_bucket", "categorical_column_with_identity",
    "categorical_column_with_vocabulary_file", "categorical_column_with_vocabulary_list", "crossed_column",
    "embedding_column", "indicator_column", "input_layer", "linear_model", "make_parse_example_spec",
    "numeric_column", "shared_embedding_columns", "weighted_categorical_column",
]
