"""String hashing into buckets (``tf.strings.to_hash_bucket*``) and ``tf.as_string`` for integers.

Feature columns and vocabulary tables turn strings into bucket ids with these ops; the
hashes are TensorFlow's own (``kernels/hash_functions.py``), so a string lands in the same
bucket under both libraries and models trained by either agree. ``as_string`` is here because
TensorFlow's tables hash an integer key out of the vocabulary through its decimal string.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.ops import op_util

for _op_type in ("StringToHashBucketFast", "StringToHashBucketStrong", "StringToHashBucket", "AsString"):
    op_registry.register_op(_op_type)
    op_registry.NotDifferentiable(_op_type)


def _strings(op_type: str, value: Any) -> graph_lib.Tensor:
    try:
        tensor = op_util.to_tensor(value, dtype=dtypes.string, name="input")
    except (TypeError, ValueError) as failure:
        raise TypeError(f"Expected string passed to parameter 'input' of op '{op_type}', got {value!r}: "
                        f"{failure}") from None
    if tensor.dtype.base_dtype != dtypes.string:
        raise TypeError(f"Expected string passed to parameter 'input' of op '{op_type}', got {tensor.name} "
                        f"of type {tensor.dtype.base_dtype.name}")
    return tensor


def _num_buckets(op_type: str, num_buckets: Any) -> int:
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, int):
        raise TypeError(f"num_buckets of {op_type} must be a Python int, got {num_buckets!r}")
    if num_buckets < 1:
        raise ValueError(f"Attr 'num_buckets' of '{op_type}' Op passed {num_buckets} less than minimum 1.")
    return num_buckets


def _bucket_op(op_type: str, value: Any, num_buckets: Any, name: Optional[str],
               attrs: Optional[dict[str, Any]] = None) -> graph_lib.Tensor:
    tensor = _strings(op_type, value)
    all_attrs = {"num_buckets": _num_buckets(op_type, num_buckets), **(attrs or {})}
    return op_util.make_tensor(op_type, [tensor], dtypes.int64, tensor.shape, name or op_type, all_attrs)


def string_to_hash_bucket_fast(input: Any, num_buckets: int,  # noqa: A002 - TF's name
                               name: Optional[str] = None) -> graph_lib.Tensor:
    """Each string's bucket: FarmHash ``Fingerprint64(string) % num_buckets``, as TensorFlow's."""
    return _bucket_op("StringToHashBucketFast", input, num_buckets, name)


def string_to_hash_bucket_strong(input: Any, num_buckets: int, key: Sequence[int],  # noqa: A002
                                 name: Optional[str] = None) -> graph_lib.Tensor:
    """Each string's bucket by SipHash-2-4 under ``key`` (two integers), as TensorFlow's; a key
    of another length fails when the op runs, as in TensorFlow."""
    if isinstance(key, (str, bytes)) or not all(isinstance(k, int) and not isinstance(k, bool) for k in key):
        raise TypeError(f"key of StringToHashBucketStrong must be a list of ints, got {key!r}")
    for k in key:
        if not -(2 ** 63) <= k < 2 ** 63:
            raise ValueError(f"Value out of range: {k} (the key's integers are int64)")
    return _bucket_op("StringToHashBucketStrong", input, num_buckets, name, {"key": [int(k) for k in key]})


def string_to_hash_bucket(string_tensor: Any = None, num_buckets: Any = None, name: Optional[str] = None,
                          input: Any = None) -> graph_lib.Tensor:  # noqa: A002
    """The legacy bucket op: TensorFlow's ``Hash64`` (MurmurHash64A) ``% num_buckets``.
    ``input`` is TensorFlow's other name for ``string_tensor``."""
    if (string_tensor is None) == (input is None):
        raise ValueError("string_to_hash_bucket takes exactly one of string_tensor and input")
    return _bucket_op("StringToHashBucket", string_tensor if input is None else input, num_buckets, name)


def as_string(input: Any, precision: int = -1, scientific: bool = False, shortest: bool = False,  # noqa: A002
              width: int = -1, fill: str = "", name: Optional[str] = None) -> graph_lib.Tensor:
    """Integers and booleans as their decimal strings (``tf.as_string``); TensorFlow's
    float formatting options are not implemented, so other dtypes are refused."""
    tensor = op_util.to_tensor(input)
    dtype = tensor.dtype.base_dtype
    if not (dtype.is_integer or dtype == dtypes.bool_):
        raise TypeError(f"as_string of {tensor.name}: tensorgrid formats integers and booleans, got "
                        f"{dtype.name} (TensorFlow's float formats are not implemented)")
    if (precision, scientific, shortest, width, fill) != (-1, False, False, -1, ""):
        raise ValueError("as_string: precision, scientific, shortest, width and fill are not implemented; "
                         f"got precision={precision}, scientific={scientific}, shortest={shortest}, "
                         f"width={width}, fill={fill!r}")
    return op_util.make_tensor("AsString", [tensor], dtypes.string, tensor.shape, name or "AsString")
