"""``tf.strings``: the string ops tensorgrid has, re-exported from the ops layer."""

from __future__ import annotations

from tensorgrid.ops.string_ops import (
    as_string, string_to_hash_bucket as to_hash_bucket, string_to_hash_bucket_fast as to_hash_bucket_fast,
    string_to_hash_bucket_strong as to_hash_bucket_strong,
)

__all__ = ["as_string", "to_hash_bucket", "to_hash_bucket_fast", "to_hash_bucket_strong"]
