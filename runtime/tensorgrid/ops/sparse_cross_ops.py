"""``tf.sparse.cross`` and ``tf.sparse.cross_hashed``: the feature crosses of ``crossed_column``.

One ``SparseCross`` op, as TensorFlow builds it: each row of the batch gets every combination
of one feature from each input (sparse inputs first, then dense ones, whatever order they
were given in, as TensorFlow orders them). The hashed cross starts from ``hash_key`` and
folds each feature into it with ``FingerprintCat64`` (a string feature enters by its
Fingerprint64, an integer as it is), then takes the remainder by ``num_buckets``
(``kernels/hash_functions.py``), so a crossed column's ids are TensorFlow's.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import sparse_tensor
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util

op_registry.register_op("SparseCross")
op_registry.NotDifferentiable("SparseCross")

DEFAULT_HASH_KEY = 0xDECAFCAFFE
"""TensorFlow's ``hash_key`` when none (or 0) is given."""
DEFAULT_SEPARATOR = "_X_"


def _cross(inputs: Sequence[Any], hashed_output: bool, num_buckets: int, hash_key: Optional[int],
           separator: str, name: Optional[str]) -> sparse_tensor.SparseTensor:
    if not isinstance(inputs, (tuple, list)):
        raise TypeError(f"Inputs must be a list of Tensors and SparseTensors, got {type(inputs).__name__}")
    if not inputs:
        raise ValueError("sparse cross needs at least one input")
    if not all(isinstance(i, (sparse_tensor.SparseTensor, graph_lib.Tensor)) for i in inputs):
        raise TypeError(f"All inputs must be Tensors or SparseTensors, got {[type(i).__name__ for i in inputs]}")
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, int) or num_buckets < 0:
        raise ValueError(f"num_buckets must be an int >= 0 (0: no bucketing), got {num_buckets!r}")
    sparse_inputs = [i for i in inputs if isinstance(i, sparse_tensor.SparseTensor)]
    dense_inputs = [i for i in inputs if not isinstance(i, sparse_tensor.SparseTensor)]

    def as_feature(values: graph_lib.Tensor) -> graph_lib.Tensor:
        if values.dtype.base_dtype == dtypes.string:
            return values
        if not values.dtype.is_integer:
            raise TypeError(f"Crossed features must be strings or integers, got {values.name} of "
                            f"{values.dtype.base_dtype.name}")
        return math_ops.cast(values, dtypes.int64)

    for dense in dense_inputs:
        if dense.shape.ndims is not None and dense.shape.ndims != 2:
            raise ValueError(f"Dense inputs of a sparse cross must be matrices [batch, features], "
                             f"got {dense.name} of shape {dense.shape}")
    flat = ([s.indices for s in sparse_inputs] + [as_feature(s.values) for s in sparse_inputs]
            + [s.dense_shape for s in sparse_inputs] + [as_feature(d) for d in dense_inputs])
    out_type = dtypes.int64 if hashed_output else dtypes.string
    op = op_util.make_op(
        "SparseCross", flat, [(dtypes.int64, [None, 2]), (out_type, [None]), (dtypes.int64, [2])],
        name or "SparseCross",
        {"N": len(sparse_inputs), "num_dense": len(dense_inputs), "hashed_output": hashed_output,
         "num_buckets": num_buckets, "hash_key": int(hash_key or DEFAULT_HASH_KEY), "separator": separator,
         "out_type": out_type.name})
    return sparse_tensor.SparseTensor(*op.outputs)


def sparse_cross(inputs: Sequence[Any], name: Optional[str] = None,
                 separator: Optional[str] = None) -> sparse_tensor.SparseTensor:
    """Each row's crosses as strings: the features joined by ``separator`` (``"_X_"``)."""
    return _cross(inputs, False, 0, None, DEFAULT_SEPARATOR if separator is None else separator, name)


def sparse_cross_hashed(inputs: Sequence[Any], num_buckets: int = 0, hash_key: Optional[int] = None,
                        name: Optional[str] = None) -> sparse_tensor.SparseTensor:
    """Each row's crosses as int64 ids in ``[0, num_buckets)`` (0: the whole int64 range)."""
    return _cross(inputs, True, num_buckets, hash_key, DEFAULT_SEPARATOR, name)
