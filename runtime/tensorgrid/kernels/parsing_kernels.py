"""The kernel of ``ParseExample``: serialized ``tf.train.Example`` protos into dense and sparse arrays.

Each record is parsed with the Example message of ``protos/tensorgrid/v1/example.proto``
(TensorFlow's field numbers), then each key of the spec is read from its features:
a dense key must hold exactly its shape's number of values (or be missing and have a
default), a sequence key a multiple of its item size, a sparse key anything; a value
list of another kind than the key's dtype is an error, as in TensorFlow. Errors name the
key and the example's index in the batch.

``ParseSparseFeature`` merges a SparseFeature's parsed index and value lists into one
SparseTensor: per example, the n-th index of each index key positions the n-th value.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional, Sequence

import numpy as np
from google.protobuf import message

from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels.registry import register_kernel
from tensorgrid.v1 import example_pb2

_KIND_OF_DTYPE = {"int64": "int64_list", "float32": "float_list", "string": "bytes_list"}
_DTYPE_OF_KIND = {"int64_list": "int64", "float_list": "float", "bytes_list": "string"}


def _parse_record(record: Any, index: int) -> Any:
    data = record if isinstance(record, bytes) else str(record).encode()
    try:
        return example_pb2.Example.FromString(data).features.feature
    except message.DecodeError:
        shown = data[:40] + (b"..." if len(data) > 40 else b"")
        raise errors.InvalidArgumentError(
            None, None, f"Could not parse example input, value: {shown!r} (example {index} of the batch is not a "
            "serialized tf.train.Example)") from None


def _values(features: Any, key: str, dtype_name: str, index: int) -> Optional[Sequence[Any]]:
    """The values of ``key`` in one example (None: the example has no such key), the message's
    own repeated field (no copy)."""
    if key not in features:
        return None
    feature = features[key]
    kind = feature.WhichOneof("kind")
    if kind is None:
        return ()
    wanted = _KIND_OF_DTYPE[dtype_name]
    if kind != wanted:
        raise errors.InvalidArgumentError(
            None, None, f"Name: <unknown>, Feature: {key} (example {index}). Data types don't match. Data type: "
            f"{_DTYPE_OF_KIND[kind]} but expected type: {_DTYPE_OF_KIND[wanted]}")
    values: Sequence[Any] = getattr(feature, kind).value
    return values


_NUMPY_DTYPE = {"int64": np.int64, "float32": np.float32}


def _array(values: Sequence[Any], dtype_name: str) -> np.ndarray:
    """The values as a flat array of ``dtype_name``: one conversion, however many values."""
    if dtype_name == "string":
        array = np.empty(len(values), dtype=object)
        array[:] = values if isinstance(values, list) else list(values)
        return array
    return np.fromiter(values, dtype=_NUMPY_DTYPE[dtype_name], count=len(values))


def _sparse(examples: list[Any], key: str, dtype_name: str, single: bool) -> tuple[np.ndarray, ...]:
    lists = [_values(features, key, dtype_name, i) or [] for i, features in enumerate(examples)]
    longest = max((len(v) for v in lists), default=0)
    rows = np.repeat(np.arange(len(lists), dtype=np.int64), [len(v) for v in lists])
    positions = np.concatenate([np.arange(len(v), dtype=np.int64) for v in lists]) if lists else np.zeros(0, np.int64)
    values = _array([x for v in lists for x in v], dtype_name)
    if single:
        return positions.reshape(-1, 1), values, np.array([longest], np.int64)
    return np.stack([rows, positions], axis=1), values, np.array([len(lists), longest], np.int64)


def _dense(examples: list[Any], key: str, dtype_name: str, shape: list[int],
           default: Optional[np.ndarray]) -> np.ndarray:
    """The key's values of every example, shape ``[len(examples), *shape]``: each example's values
    are appended to one list, turned into an array once (a queue pipeline parses one example per
    call, a batched dataset hundreds)."""
    size = math.prod(shape)
    flat: list[Any] = []
    default_values: Optional[list[Any]] = None
    for i, features in enumerate(examples):
        values = _values(features, key, dtype_name, i)
        if values is None:
            if default is None:
                raise errors.InvalidArgumentError(
                    None, None, f"Name: <unknown>, Feature: {key} (data type: {_DTYPE_OF_KIND[_KIND_OF_DTYPE[dtype_name]]}) "
                    f"is required but could not be found (example {i}).")
            if default_values is None:
                default_values = np.asarray(default).reshape(size).tolist()
            flat.extend(default_values)
            continue
        if len(values) != size:
            raise errors.InvalidArgumentError(
                None, None, f"Name: <unknown>, Key: {key}, Index: {i}.  Number of {dtype_name} values != expected.  "
                f"Values size: {len(values)} but output shape: {shape}")
        flat.extend(values)
    return _array(flat, dtype_name).reshape([len(examples), *shape])


def _sequence(examples: list[Any], key: str, dtype_name: str, shape: list[int], default: np.ndarray) -> np.ndarray:
    size = int(np.prod(shape, dtype=np.int64))
    items = []
    for i, features in enumerate(examples):
        values = _values(features, key, dtype_name, i) or []
        if size == 0 or len(values) % size:
            raise errors.InvalidArgumentError(
                None, None, f"Name: <unknown>, Key: {key}, Index: {i}.  Number of {dtype_name} values is not a "
                f"multiple of {size} (the size of shape {shape}): {len(values)}")
        items.append(_array(values, dtype_name).reshape([len(values) // size, *shape]))
    longest = max((len(v) for v in items), default=0)
    numpy_dtype = dtypes.as_dtype(dtype_name).as_numpy_dtype
    pad = default.reshape(())
    out = np.empty([len(items), longest, *shape], dtype=numpy_dtype)
    out[...] = pad
    for i, item in enumerate(items):
        out[i, :len(item)] = item
    return out


@dataclasses.dataclass(frozen=True)
class _DenseKey:
    """One dense key of a ParseExample node, as its attributes give it."""

    key: str
    dtype_name: str
    shape: list[int]
    sequence: bool
    required: bool


def _dense_keys(k: context.KernelContext) -> list[_DenseKey]:
    """The node's dense keys, read from its attributes once per node."""
    keys: Optional[list[_DenseKey]] = k.state.get("dense_keys")
    if keys is None:
        attrs = k.attrs
        keys = [_DenseKey(key, t, [int(d) for d in shape], bool(sequence), bool(required))
                for key, t, shape, sequence, required in zip(
                    attrs["dense_keys"], attrs["dense_types"], attrs["dense_shapes"], attrs["dense_sequence"],
                    attrs["dense_required"])]
        k.state["dense_keys"] = keys
    return keys


def _one_example_dense(features: Any, spec: _DenseKey, default: Any) -> Any:
    """What ``_dense`` gives for an example alone, less its batch dimension: a queue pipeline
    parses each record on its own, so the batch's list and reshapes are skipped where the example
    holds the key with the right number of values (anything else goes through ``_dense``, which
    gives the default or the error)."""
    values = _values(features, spec.key, spec.dtype_name, 0)
    size = math.prod(spec.shape)
    if values is None or len(values) != size:
        return _dense([features], spec.key, spec.dtype_name, spec.shape, None if spec.required else default)[0]
    array = _array(values, spec.dtype_name)
    return array.reshape(spec.shape) if spec.shape else array[0]


@register_kernel("ParseExample", host_only=True)
def _parse_example(k: context.KernelContext, step: context.StepContext, serialized: Any, *defaults: Any) -> Any:
    attrs = k.attrs
    single = bool(attrs["single"])
    records = serialized if isinstance(serialized, np.ndarray) else np.asarray(serialized, dtype=object)
    if records.ndim != (0 if single else 1):
        raise errors.InvalidArgumentError(None, None, f"{k.name}: serialized must be a {'scalar' if single else 'vector'}"
                                          f", got shape {list(records.shape)}")
    examples = [_parse_record(records.item(), 0)] if single else [
        _parse_record(r, i) for i, r in enumerate(records.tolist())]
    sparse = [_sparse(examples, key, t, single) for key, t in zip(attrs["sparse_keys"], attrs["sparse_types"])]
    dense = []
    for spec, default in zip(_dense_keys(k), defaults):
        if spec.sequence:
            value = _sequence(examples, spec.key, spec.dtype_name, spec.shape, np.asarray(default))
        elif single:
            value = _one_example_dense(examples[0], spec, default)
        else:
            value = _dense(examples, spec.key, spec.dtype_name, spec.shape, None if spec.required else default)
        dense.append(value[0] if single and spec.sequence else value)
    outputs = [s[0] for s in sparse] + [s[1] for s in sparse] + [s[2] for s in sparse] + dense
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


@register_kernel("ParseSparseFeature", host_only=True)
def _parse_sparse_feature(k: context.KernelContext, step: context.StepContext, value_indices: Any, values: Any,
                          value_shape: Any, *index_parts: Any) -> Any:
    """(indices, values, dense_shape) of a SparseFeature: an index key's list and the value key's list of
    each example must be as long (InvalidArgumentError otherwise), each index within its size (TensorFlow
    does not check: it gives indices outside the dense shape)."""
    attrs = k.attrs
    single = bool(attrs["single"])
    sizes = [int(size) for size in attrs["sizes"]]
    value_indices = np.asarray(value_indices, dtype=np.int64)
    batch = 1 if single else int(np.asarray(value_shape)[0])
    value_rows = np.zeros(len(value_indices), np.int64) if single else value_indices[:, 0]
    value_counts = np.bincount(value_rows, minlength=batch)
    columns = []
    for position, (index_key, size) in enumerate(zip(attrs["index_keys"], sizes)):
        indices = np.asarray(index_parts[2 * position], dtype=np.int64)
        ids = np.asarray(index_parts[2 * position + 1], dtype=np.int64)
        rows = np.zeros(len(indices), np.int64) if single else indices[:, 0]
        counts = np.bincount(rows, minlength=batch)
        for example in np.flatnonzero(counts != value_counts):
            raise errors.InvalidArgumentError(
                None, None, f"SparseFeature {attrs['key']}: example {example} has {counts[example]} values of "
                f"index key {index_key} but {value_counts[example]} of value key {attrs['value_key']}; they must be "
                "as many")
        outside = np.flatnonzero((ids < 0) | (ids >= size))
        if len(outside):
            raise errors.InvalidArgumentError(
                None, None, f"SparseFeature {attrs['key']}: index {ids[outside[0]]} of key {index_key} (example "
                f"{rows[outside[0]]}) is outside [0, {size})")
        columns.append(ids)
    indices = np.stack(columns if single else [value_rows, *columns], axis=1).reshape(-1, len(columns) + (0 if single else 1))
    values = np.asarray(values)
    if not attrs["already_sorted"] and len(indices):
        order = np.lexsort(indices.T[::-1])
        indices, values = indices[order], values[order]
    dense_shape = np.array(sizes if single else [batch, *sizes], np.int64)
    return indices, values, dense_shape


def _parse_sequence_record(record: Any) -> Any:
    data = record if isinstance(record, bytes) else str(record).encode()
    try:
        return example_pb2.SequenceExample.FromString(data)
    except message.DecodeError:
        shown = data[:40] + (b"..." if len(data) > 40 else b"")
        raise errors.InvalidArgumentError(
            None, None, f"Could not parse example input, value: {shown!r} (not a serialized "
            "tf.train.SequenceExample)") from None


def _feature_list_sparse(steps: list[Any], key: str, dtype_name: str) -> tuple[np.ndarray, ...]:
    lists = [_values({key: step}, key, dtype_name, i) or [] for i, step in enumerate(steps)]
    longest = max((len(v) for v in lists), default=0)
    rows = np.repeat(np.arange(len(lists), dtype=np.int64), [len(v) for v in lists])
    positions = np.concatenate([np.arange(len(v), dtype=np.int64) for v in lists]) if lists else np.zeros(0, np.int64)
    return (np.stack([rows, positions], axis=1), _array([x for v in lists for x in v], dtype_name),
            np.array([len(lists), longest], np.int64))


def _feature_list_dense(steps: Optional[list[Any]], key: str, dtype_name: str, shape: list[int],
                        missing_allowed: bool) -> np.ndarray:
    if steps is None:
        if not missing_allowed:
            raise errors.InvalidArgumentError(
                None, None, f"Name: <unknown>, Feature list '{key}' is required but could not be found.  Did you "
                "mean to include it in feature_list_dense_missing_assumed_empty or feature_list_dense_defaults?")
        steps = []
    size = int(np.prod(shape, dtype=np.int64))
    values = [x for i, step in enumerate(steps) for x in _values({key: step}, key, dtype_name, i) or []]
    if size == 0 or len(values) % size:
        shown = "[?," + ",".join(str(d) for d in shape) + "]"
        raise errors.InvalidArgumentError(
            None, None, f"Feature list '{key}' has an unexpected number of values.  Total values size: "
            f"{len(values)} is not consistent with output shape: {shown}")
    for i, step in enumerate(steps):
        count = len(_values({key: step}, key, dtype_name, i) or [])
        if count != size:
            raise errors.InvalidArgumentError(
                None, None, f"Name: <unknown>, Key: {key}, Index: {i}.  Number of values != expected.  values size: "
                f"{count} but output shape: {shape}")
    return _array(values, dtype_name).reshape([len(steps), *shape])


@register_kernel("ParseSingleSequenceExample", host_only=True)
def _parse_single_sequence_example(k: context.KernelContext, step: context.StepContext, serialized: Any,
                                   *defaults: Any) -> Any:
    attrs = k.attrs
    record = np.asarray(serialized, dtype=object)
    if record.ndim != 0:
        raise errors.InvalidArgumentError(None, None, f"{k.name}: serialized must be a scalar, got shape "
                                          f"{list(record.shape)}")
    parsed = _parse_sequence_record(record.reshape(-1)[0])
    context = [parsed.context.feature]
    outputs: list[Any] = []
    sparse = [_sparse(context, key, t, single=True)
              for key, t in zip(attrs["context_sparse_keys"], attrs["context_sparse_types"])]
    outputs += [s[i] for i in range(3) for s in sparse]
    for key, t, shape, required, default in zip(attrs["context_dense_keys"], attrs["context_dense_types"],
                                                attrs["context_dense_shapes"], attrs["context_dense_required"],
                                                defaults):
        outputs.append(_dense(context, key, t, [int(d) for d in shape], None if required else np.asarray(default))[0])
    lists = parsed.feature_lists.feature_list
    sparse = [_feature_list_sparse(list(lists[key].feature) if key in lists else [], key, t)
              for key, t in zip(attrs["feature_list_sparse_keys"], attrs["feature_list_sparse_types"])]
    outputs += [s[i] for i in range(3) for s in sparse]
    for key, t, shape, missing_allowed in zip(attrs["feature_list_dense_keys"], attrs["feature_list_dense_types"],
                                              attrs["feature_list_dense_shapes"],
                                              attrs["feature_list_dense_missing_allowed"]):
        steps = list(lists[key].feature) if key in lists else None
        outputs.append(_feature_list_dense(steps, key, t, [int(d) for d in shape], missing_allowed))
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _decode_raw_dtypes(k: context.KernelContext) -> tuple[np.dtype[Any], np.dtype[Any]]:
    """(the dtype the bytes hold, the dtype of the output) of a DecodeRaw node, made once per node."""
    cached: Optional[tuple[np.dtype[Any], np.dtype[Any]]] = k.state.get("dtypes")
    if cached is None:
        native = np.dtype(dtypes.as_dtype(k.attrs["out_type"]).as_numpy_dtype)
        cached = native.newbyteorder("<" if k.attrs["little_endian"] else ">"), native.newbyteorder("=")
        k.state["dtypes"] = cached
    return cached


def _decode_raw_length_error(length: int, itemsize: int, out_type: Any) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        None, None, f"Input to DecodeRaw has length {length} that is not a multiple of {itemsize}, the size of "
        f"{out_type}")


@register_kernel("DecodeRaw", host_only=True)
def _decode_raw(k: context.KernelContext, step: context.StepContext, strings: Any) -> Any:
    stored, native = _decode_raw_dtypes(k)
    if isinstance(strings, bytes) or (isinstance(strings, np.ndarray) and strings.ndim == 0):
        # One string (a queue pipeline decodes each record on its own): read in place, one copy.
        item = strings if isinstance(strings, bytes) else strings.item()
        data = item if isinstance(item, bytes) else str(item).encode()
        if len(data) % stored.itemsize:
            raise _decode_raw_length_error(len(data), stored.itemsize, k.attrs["out_type"])
        return np.frombuffer(data, dtype=stored).astype(native)
    items = [s if isinstance(s, bytes) else str(s).encode() for s in np.asarray(strings, dtype=object).reshape(-1)]
    length = len(items[0]) if items else 0
    for i, item in enumerate(items):
        if len(item) != length:
            raise errors.InvalidArgumentError(
                None, None, f"DecodeRaw requires input strings to all be the same size, but element {i} has size "
                f"{len(item)} != {length}")
    if length % stored.itemsize:
        raise _decode_raw_length_error(length, stored.itemsize, k.attrs["out_type"])
    flat = np.frombuffer(b"".join(items), dtype=stored).astype(native)
    return flat.reshape([*np.shape(strings), length // stored.itemsize])
