"""``tf.sparse``: the sparse-tensor functions tensorgrid has under TF1's ``tf.sparse`` names,
re-exported from the ops layer."""

from __future__ import annotations

from tensorgrid.framework.sparse_tensor import SparseTensor
from tensorgrid.ops.sparse_cross_ops import sparse_cross as cross, sparse_cross_hashed as cross_hashed
from tensorgrid.ops.sparse_ops import (
    sparse_placeholder as placeholder, sparse_segment_mean as segment_mean, sparse_segment_sqrt_n as segment_sqrt_n,
    sparse_segment_sum as segment_sum,
)

__all__ = ["SparseTensor", "cross", "cross_hashed", "placeholder", "segment_mean", "segment_sqrt_n", "segment_sum"]
