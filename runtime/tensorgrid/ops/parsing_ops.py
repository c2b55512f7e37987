"""``tf.io.parse_example`` and ``parse_single_example``: serialized ``tf.train.Example`` protos into tensors.

What a TFRecord input pipeline maps its records through. A feature spec names each key's
kind, as in TF: ``FixedLenFeature(shape, dtype, default_value)`` (a dense tensor; without
a default, a required key), ``VarLenFeature(dtype)`` (a SparseTensor of each example's
list) and ``FixedLenSequenceFeature(shape, dtype, allow_missing=True, default_value)``
(a dense tensor of each example's list of ``shape``-sized items, padded to the longest
in the batch), ``SparseFeature(index_key, value_key, dtype, size, already_sorted)`` (a
SparseTensor of dense shape ``[batch, *size]`` whose entries are the values of ``value_key``
at the positions in the int64 lists of ``index_key``, one key per dimension; it is parsed as
VarLenFeatures of those keys, then merged by a ``ParseSparseFeature`` op).
The dtypes are those an Example can hold: int64, float32 and string.
One ``ParseExample`` op parses the batch (``kernels/parsing_kernels.py``); bad data is an
InvalidArgumentError naming the key and the example, bad specs a ValueError naming
the key.
"""

from __future__ import annotations

import collections
from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.framework import sparse_tensor
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import op_util

op_registry.register_op("ParseExample")
op_registry.NotDifferentiable("ParseExample")
op_registry.register_op("ParseSparseFeature")
op_registry.NotDifferentiable("ParseSparseFeature")
op_registry.register_op("ParseSingleSequenceExample")
op_registry.NotDifferentiable("ParseSingleSequenceExample")

EXAMPLE_DTYPES = (dtypes.int64, dtypes.float32, dtypes.string)
"""What a tf.train.Example holds: Int64List, FloatList and BytesList."""


class FixedLenFeature(collections.namedtuple("FixedLenFeature", ["shape", "dtype", "default_value"])):
    """A dense feature of a fixed ``shape``; without ``default_value`` every example must have it."""

    def __new__(cls, shape: Any, dtype: Any, default_value: Any = None) -> "FixedLenFeature":
        return super().__new__(cls, shape, dtype, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A feature of any length per example, parsed into a SparseTensor."""


class SparseFeature(collections.namedtuple(
        "SparseFeature", ["index_key", "value_key", "dtype", "size", "already_sorted"])):
    """A SparseTensor of dense shape ``[batch, *size]`` built from two features of each example: the
    positions (``index_key``, int64; a list of keys, one per dimension, when ``size`` is a list) and
    the values (``value_key``) at those positions; entries are sorted unless ``already_sorted``."""

    def __new__(cls, index_key: Any, value_key: str, dtype: Any, size: Any,
                already_sorted: bool = False) -> "SparseFeature":
        return super().__new__(cls, index_key, value_key, dtype, size, already_sorted)


class FixedLenSequenceFeature(collections.namedtuple(
        "FixedLenSequenceFeature", ["shape", "dtype", "allow_missing", "default_value"])):
    """A list of ``shape``-sized items per example, densified and padded with ``default_value``
    (a scalar) to the longest list of the batch."""

    def __new__(cls, shape: Any, dtype: Any, allow_missing: bool = False,
                default_value: Any = None) -> "FixedLenSequenceFeature":
        return super().__new__(cls, shape, dtype, allow_missing, default_value)


def _dtype_of(key: str, feature: Any) -> dtypes.DType:
    dtype = dtypes.as_dtype(feature.dtype).base_dtype
    if dtype not in EXAMPLE_DTYPES:
        raise ValueError(f"Unsupported dtype {dtype.name} of feature {key!r}: a tf.train.Example holds "
                         "int64, float32 or string features")
    return dtype


def _fixed_shape(key: str, feature: Any) -> list[int]:
    if feature.shape is None:
        raise ValueError(f"Missing shape for feature {key!r}: a {type(feature).__name__} needs a fully defined shape")
    shape = tensor_shape.as_shape(feature.shape)
    if not shape.is_fully_defined():
        raise ValueError(f"Feature {key!r}: the shape {shape} must be fully defined (no None dimension)")
    return [d for d in shape.as_list() if d is not None]  # all known: checked above


def _default(key: str, dtype: dtypes.DType, value: Any, shape: list[int], sequence: bool) -> graph_lib.Tensor:
    """The default of a dense feature as a tensor of ``shape``, or a scalar padding value for a
    sequence feature; without one (a required feature, or zero padding), a scalar zero or ""."""
    if value is None:
        return array_ops.constant(b"" if dtype == dtypes.string else 0, dtype=dtype, name=f"key_{key}")
    default = op_util.to_tensor(value, dtype=dtype, name=f"key_{key}")
    wanted = [] if sequence else shape
    known = default.shape
    if known.is_fully_defined() and known.num_elements() != int(np.prod(wanted, dtype=np.int64)):
        what = "a scalar (the padding)" if sequence else f"{int(np.prod(wanted, dtype=np.int64))} values (shape {wanted})"
        raise ValueError(f"The default_value of feature {key!r} has shape {known}; it must hold {what}")
    return array_ops.reshape(default, wanted)


def _sparse_feature_parts(key: str, feature: SparseFeature) -> tuple[list[str], list[int]]:
    """The index keys of a SparseFeature and the size along each; ValueError naming what is wrong."""
    index_keys = [feature.index_key] if isinstance(feature.index_key, str) else list(feature.index_key)
    sizes = [feature.size] if isinstance(feature.size, (int, np.integer)) else list(feature.size)
    if not index_keys or not all(isinstance(index_key, str) for index_key in index_keys):
        raise ValueError(f"SparseFeature {key!r}: index_key must be a string or a non-empty list of strings, "
                         f"got {feature.index_key!r}")
    if len(sizes) != len(index_keys) or not all(isinstance(size, (int, np.integer)) and size > 0 for size in sizes):
        raise ValueError(f"SparseFeature {key!r}: size must give a positive int per index key {index_keys}, "
                         f"got {feature.size!r}")
    if not isinstance(feature.value_key, str):
        raise ValueError(f"SparseFeature {key!r}: value_key must be a string, got {feature.value_key!r}")
    return index_keys, [int(size) for size in sizes]


def _parse_with_sparse_features(serialized: Any, features: dict[Any, Any], single: bool,
                                name: Optional[str]) -> dict[str, Any]:
    """Parses the SparseFeatures' index and value keys as VarLenFeatures beside the other features, then
    merges each SparseFeature's parts (the parts not asked for themselves are left out)."""
    plain = {key: feature for key, feature in features.items() if not isinstance(feature, SparseFeature)}
    composite = {key: feature for key, feature in features.items() if isinstance(feature, SparseFeature)}
    parts: dict[str, tuple[list[str], list[int]]] = {}
    needed: dict[str, VarLenFeature] = {}
    for key, feature in sorted(composite.items()):
        index_keys, sizes = _sparse_feature_parts(key, feature)
        parts[key] = (index_keys, sizes)
        wanted = [(index_key, VarLenFeature(dtypes.int64)) for index_key in index_keys]
        wanted.append((feature.value_key, VarLenFeature(_dtype_of(key, feature))))
        for part_key, part in wanted:
            for other in (plain.get(part_key), needed.get(part_key)):
                if other is not None and not (isinstance(other, VarLenFeature) and
                                              dtypes.as_dtype(other.dtype).base_dtype == part.dtype):
                    raise ValueError(f"SparseFeature {key!r} reads {part_key!r} as {part}, which the spec also "
                                     f"asks for as {other}")
            needed[part_key] = part
    parsed = _parse(serialized, {**plain, **needed}, single, name)
    result = {key: parsed[key] for key in plain}
    graph = op_util.graph_of(next(iter(parsed.values())).values)
    for key, feature in sorted(composite.items()):
        index_keys, sizes = parts[key]
        values = parsed[feature.value_key]
        indexes = [parsed[index_key] for index_key in index_keys]
        with graph.name_scope(f"SparseFeature_{key}"):
            op = op_util.make_op(
                "ParseSparseFeature",
                [values.indices, values.values, values.dense_shape,
                 *[tensor for index in indexes for tensor in (index.indices, index.values)]],
                [(dtypes.int64, [None, len(sizes) + (0 if single else 1)]), (values.dtype, [None]),
                 (dtypes.int64, [len(sizes) + (0 if single else 1)])],
                "ParseSparseFeature",
                {"key": key, "index_keys": index_keys, "value_key": feature.value_key, "sizes": sizes,
                 "already_sorted": bool(feature.already_sorted), "single": single})
        result[key] = sparse_tensor.SparseTensor(*op.outputs)
    return result


def _parse(serialized: Any, features: Any, single: bool, name: Optional[str]) -> dict[str, Any]:
    if isinstance(features, dict) and any(isinstance(feature, SparseFeature) for feature in features.values()):
        return _parse_with_sparse_features(serialized, features, single, name)
    if not isinstance(features, dict) or not features:
        raise ValueError(f"features must be a non-empty dict of feature key to FixedLenFeature, VarLenFeature or "
                         f"FixedLenSequenceFeature, got {features!r}")
    records = op_util.to_tensor(serialized, dtype=dtypes.string, name="serialized")
    want_rank = 0 if single else 1
    if records.shape.ndims not in (None, want_rank):
        raise ValueError(f"{'parse_single_example' if single else 'parse_example'}: serialized must be a string "
                         f"{'scalar' if single else 'vector'}, got shape {records.shape}")
    sparse_keys, sparse_types = [], []
    dense_keys, dense_types, dense_shapes, dense_sequence, defaults = [], [], [], [], []
    dense_required = []
    graph = op_util.graph_of(records)
    with graph.name_scope(name or ("ParseSingleExample" if single else "ParseExample")):
        for key in sorted(features):
            feature = features[key]
            if not isinstance(key, str):
                raise ValueError(f"Feature keys must be strings, got {key!r}")
            if isinstance(feature, VarLenFeature):
                sparse_keys.append(key)
                sparse_types.append(_dtype_of(key, feature))
                continue
            if not isinstance(feature, (FixedLenFeature, FixedLenSequenceFeature)):
                raise ValueError(f"Unsupported feature type for {key!r}: {feature!r}; valid are FixedLenFeature, "
                                 "VarLenFeature, SparseFeature and FixedLenSequenceFeature")
            sequence = isinstance(feature, FixedLenSequenceFeature)
            if isinstance(feature, FixedLenSequenceFeature) and not feature.allow_missing:
                raise ValueError(f"Unsupported: FixedLenSequenceFeature {key!r} requires allow_missing to be True")
            dtype, shape = _dtype_of(key, feature), _fixed_shape(key, feature)
            dense_keys.append(key)
            dense_types.append(dtype)
            dense_shapes.append(shape)
            dense_sequence.append(sequence)
            dense_required.append(feature.default_value is None and not sequence)
            defaults.append(_default(key, dtype, feature.default_value, shape, sequence))
        batch: list[Optional[int]] = [] if single else [records.shape[0].value if records.shape.ndims else None]
        rank = len(batch) + 1
        specs: list[tuple[dtypes.DType, Any]] = [(dtypes.int64, [None, rank]) for _ in sparse_keys]
        specs += [(dtype, [None]) for dtype in sparse_types]
        specs += [(dtypes.int64, [rank]) for _ in sparse_keys]
        specs += [(dtype, batch + ([None] if sequence else []) + shape)
                  for dtype, shape, sequence in zip(dense_types, dense_shapes, dense_sequence)]
        op = op_util.make_op("ParseExample", [records, *defaults], specs, "ParseExample", {
            "sparse_keys": sparse_keys, "sparse_types": [t.name for t in sparse_types],
            "dense_keys": dense_keys, "dense_types": [t.name for t in dense_types], "dense_shapes": dense_shapes,
            "dense_sequence": dense_sequence, "dense_required": dense_required, "single": single})
    outputs = op.outputs
    count = len(sparse_keys)
    parsed: dict[str, Any] = {}
    for i, key in enumerate(sparse_keys):
        parsed[key] = sparse_tensor.SparseTensor(outputs[i], outputs[count + i], outputs[2 * count + i])
    for i, key in enumerate(dense_keys):
        parsed[key] = outputs[3 * count + i]
    return parsed


def parse_example(serialized: Any, features: Any, name: Optional[str] = None,
                  example_names: Any = None) -> dict[str, Any]:
    """A batch of serialized Examples (a string vector) parsed by ``features``: a dict of each key's
    Tensor (``[batch, *shape]``, or ``[batch, longest, *shape]`` for a sequence feature) or
    SparseTensor (``[batch, longest]``). ``example_names`` is accepted as TF's and not used."""
    return _parse(serialized, features, single=False, name=name)


def parse_single_example(serialized: Any, features: Any, name: Optional[str] = None,
                         example_names: Any = None) -> dict[str, Any]:
    """One serialized Example (a string scalar) parsed by ``features``: as ``parse_example``
    without the batch dimension."""
    return _parse(serialized, features, single=True, name=name)


# ---------------------------------------------------------------- sequence examples

def parse_single_sequence_example(serialized: Any, context_features: Any = None, sequence_features: Any = None,
                                  example_name: Any = None, name: Optional[str] = None
                                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """One serialized ``tf.train.SequenceExample`` (a string scalar) parsed into ``(context,
    sequences)`` dicts, as TF1's ``tf.io.parse_single_sequence_example``.

    ``context_features`` reads the context as ``parse_single_example`` reads an Example
    (FixedLenFeature, VarLenFeature). ``sequence_features`` reads each feature list: a
    ``FixedLenSequenceFeature(shape)`` (or FixedLenFeature) becomes a ``[steps, *shape]`` tensor,
    every step holding exactly ``shape``'s number of values (a missing list is an error unless
    ``allow_missing``, then it has no steps); a ``VarLenFeature`` a SparseTensor of
    ``[steps, longest step]``. ``example_name`` is accepted as TF's and not used.
    """
    context_features = dict(context_features or {})
    sequence_features = dict(sequence_features or {})
    if not context_features and not sequence_features:
        raise ValueError("Missing features: pass context_features, sequence_features or both (dicts of feature key "
                         "to FixedLenFeature, FixedLenSequenceFeature or VarLenFeature)")
    records = op_util.to_tensor(serialized, dtype=dtypes.string, name="serialized")
    if records.shape.ndims not in (None, 0):
        raise ValueError(f"parse_single_sequence_example: serialized must be a string scalar, got shape {records.shape}")
    graph = op_util.graph_of(records)
    attrs: dict[str, Any] = {}
    defaults: list[graph_lib.Tensor] = []
    with graph.name_scope(name or "ParseSingleSequenceExample"):
        context_sparse, context_dense = _split_spec(context_features, "context_features", sequence=False)
        lists_sparse, lists_dense = _split_spec(sequence_features, "sequence_features", sequence=True)
        for prefix, keys, spec in (("context_sparse", context_sparse, context_features),
                                   ("feature_list_sparse", lists_sparse, sequence_features)):
            attrs[f"{prefix}_keys"] = keys
            attrs[f"{prefix}_types"] = [_dtype_of(key, spec[key]).name for key in keys]
        attrs["context_dense_keys"] = context_dense
        attrs["context_dense_types"] = [_dtype_of(key, context_features[key]).name for key in context_dense]
        attrs["context_dense_shapes"] = [_fixed_shape(key, context_features[key]) for key in context_dense]
        attrs["context_dense_required"] = [context_features[key].default_value is None for key in context_dense]
        for key, shape in zip(context_dense, attrs["context_dense_shapes"]):
            feature = context_features[key]
            defaults.append(_default(key, _dtype_of(key, feature), feature.default_value, shape, sequence=False))
        attrs["feature_list_dense_keys"] = lists_dense
        attrs["feature_list_dense_types"] = [_dtype_of(key, sequence_features[key]).name for key in lists_dense]
        attrs["feature_list_dense_shapes"] = [_fixed_shape(key, sequence_features[key]) for key in lists_dense]
        attrs["feature_list_dense_missing_allowed"] = [bool(getattr(sequence_features[key], "allow_missing", False))
                                                      for key in lists_dense]
        specs: list[tuple[dtypes.DType, Any]] = []
        for prefix, rank in (("context_sparse", 1), ("feature_list_sparse", 2)):
            keys, types = attrs[f"{prefix}_keys"], [dtypes.as_dtype(t) for t in attrs[f"{prefix}_types"]]
            specs += [(dtypes.int64, [None, rank]) for _ in keys]
            specs += [(t, [None]) for t in types]
            specs += [(dtypes.int64, [rank]) for _ in keys]
            if prefix == "context_sparse":
                specs += [(dtypes.as_dtype(t), shape)
                          for t, shape in zip(attrs["context_dense_types"], attrs["context_dense_shapes"])]
        specs += [(dtypes.as_dtype(t), [None, *shape])
                  for t, shape in zip(attrs["feature_list_dense_types"], attrs["feature_list_dense_shapes"])]
        op = op_util.make_op("ParseSingleSequenceExample", [records, *defaults], specs, "ParseSingleSequenceExample",
                             attrs)
    outputs = list(op.outputs)
    context: dict[str, Any] = {}
    sequences: dict[str, Any] = {}
    for keys, dense_keys, parsed in ((context_sparse, context_dense, context), (lists_sparse, lists_dense, sequences)):
        count = len(keys)
        for i, key in enumerate(keys):
            parsed[key] = sparse_tensor.SparseTensor(outputs[i], outputs[count + i], outputs[2 * count + i])
        del outputs[:3 * count]
        for key in dense_keys:
            parsed[key] = outputs.pop(0)
    return context, sequences


def _split_spec(features: dict[Any, Any], what: str, sequence: bool) -> tuple[list[str], list[str]]:
    """The sorted keys of a spec's sparse and dense features; ValueError naming a bad one."""
    sparse, dense = [], []
    dense_types: tuple[type, ...] = (FixedLenSequenceFeature, FixedLenFeature) if sequence else (FixedLenFeature,)
    for key in sorted(features, key=str):
        feature = features[key]
        if not isinstance(key, str):
            raise ValueError(f"Feature keys must be strings, got {key!r}")
        if isinstance(feature, VarLenFeature):
            sparse.append(key)
        elif isinstance(feature, dense_types):
            if sequence and getattr(feature, "default_value", None) is not None:
                raise ValueError(f"{what}[{key!r}]: a sequence feature takes no default_value (a missing list is "
                                 "empty with allow_missing=True, else an error)")
            dense.append(key)
        else:
            valid = " or ".join(t.__name__ for t in (*dense_types, VarLenFeature))
            raise ValueError(f"Unsupported feature type for {what}[{key!r}]: {feature!r}; valid are {valid}")
    return sparse, dense


# ---------------------------------------------------------------- raw bytes

op_registry.register_op("DecodeRaw")
op_registry.NotDifferentiable("DecodeRaw")

DECODE_RAW_DTYPES = (dtypes.float16, dtypes.float32, dtypes.float64, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64,
                     dtypes.uint8, dtypes.uint16)


def decode_raw(input_bytes: Any = None, out_type: Any = None, little_endian: bool = True, name: Optional[str] = None,
               bytes: Any = None) -> graph_lib.Tensor:  # noqa: A002 - TF1's keyword
    """Each string of ``input_bytes`` read as a vector of ``out_type`` (``tf.io.decode_raw``): the output
    has the input's shape plus one dimension; every string must have the same length, a multiple of
    the type's size."""
    if input_bytes is None:
        input_bytes = bytes
    if input_bytes is None or out_type is None:
        raise ValueError("decode_raw needs input_bytes (a string tensor) and out_type")
    dtype = dtypes.as_dtype(out_type).base_dtype
    if dtype not in DECODE_RAW_DTYPES:
        raise TypeError(f"decode_raw: out_type {dtype.name} is not supported; valid are "
                        f"{', '.join(d.name for d in DECODE_RAW_DTYPES)}")
    strings = op_util.to_tensor(input_bytes, dtype=dtypes.string)
    shape = strings.shape.concatenate([None]) if strings.shape.ndims is not None else tensor_shape.unknown_shape()
    return op_util.make_tensor("DecodeRaw", [strings], dtype, shape, name or "DecodeRaw",
                               {"out_type": dtype.name, "little_endian": bool(little_endian)})
