"""``tf.lookup`` (TF1's ``tf.compat.v1.lookup``): vocabulary and hash tables, re-exported from
the ops layer, with ``index_table_from_tensor`` / ``index_table_from_file`` (TF1's
``tf.contrib.lookup`` names, which feature columns use)."""

from __future__ import annotations

from tensorgrid.ops.lookup_ops import (
    FastHashSpec, HasherSpec, IdTableWithHashBuckets, KeyValueTensorInitializer, StaticHashTable,
    StaticVocabularyTable, StrongHashSpec, TextFileIdTableInitializer, TextFileIndex, TextFileInitializer,
    TextFileStringTableInitializer, index_table_from_file, index_table_from_tensor,
)

__all__ = [
    "FastHashSpec", "HasherSpec", "IdTableWithHashBuckets", "KeyValueTensorInitializer", "StaticHashTable",
    "StaticVocabularyTable", "StrongHashSpec", "TextFileIdTableInitializer", "TextFileIndex", "TextFileInitializer",
    "TextFileStringTableInitializer", "index_table_from_file", "index_table_from_tensor",
]
