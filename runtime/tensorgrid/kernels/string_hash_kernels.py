"""Kernels of the string bucket ops and ``AsString``: strings to int64 bucket ids.

The hashes themselves are in ``hash_functions.py``; a kernel flattens its string tensor,
hashes every element at once and takes the remainder by ``num_buckets`` in uint64, as
TensorFlow's kernels do (the result fits an int64 since ``num_buckets`` does). String tensors
are host arrays of bytes, so these kernels run on the CPU.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels import hash_functions
from tensorgrid.kernels.registry import register_kernel


def _buckets(k: context.KernelContext, strings: Any, hash_fn: Callable[[list[bytes]], np.ndarray]) -> Any:
    array = np.asarray(strings, dtype=object)
    hashes = hash_fn(array.ravel().tolist())
    buckets = (hashes % np.uint64(k.attrs["num_buckets"])).astype(np.int64)
    return buckets.reshape(array.shape)


@register_kernel("StringToHashBucketFast", host_only=True)
def _to_hash_bucket_fast(k: context.KernelContext, step: context.StepContext, strings: Any) -> Any:
    return _buckets(k, strings, hash_functions.fingerprint64)


@register_kernel("StringToHashBucket", host_only=True)
def _to_hash_bucket(k: context.KernelContext, step: context.StepContext, strings: Any) -> Any:
    return _buckets(k, strings, hash_functions.murmur_hash64)


@register_kernel("StringToHashBucketStrong", host_only=True)
def _to_hash_bucket_strong(k: context.KernelContext, step: context.StepContext, strings: Any) -> Any:
    key = list(k.attrs["key"])
    if len(key) != 2:
        raise errors.InvalidArgumentError(None, None, f"Key must have 2 elements, got {len(key)}: {key}")
    return _buckets(k, strings, lambda values: hash_functions.siphash24(values, key))


@register_kernel("AsString", host_only=True)
def _as_string(k: context.KernelContext, step: context.StepContext, values: Any) -> Any:
    array = np.asarray(values)
    if array.dtype == np.bool_:
        texts = [b"true" if v else b"false" for v in array.ravel().tolist()]
    else:
        texts = [str(v).encode() for v in array.ravel().tolist()]
    out = np.empty(len(texts), dtype=object)
    out[:] = texts
    return out.reshape(array.shape)
