"""TensorFlow's own checkpoints (V2 "tensor bundles"), read and written, so TF1 users keep theirs.

A bundle with prefix P is ``P.index``, a sorted string table (``sstable``) whose first entry (the
empty key) is a ``BundleHeaderProto`` and each other entry a ``BundleEntryProto`` keyed by the
tensor's name, and the data files ``P.data-SSSSS-of-NNNNN`` the entries point into (``shard_id``,
``offset``, ``size``, and the masked CRC-32C of the bytes). Numbers and bools are stored raw,
little-endian; a string tensor is its elements' lengths as varints, the masked CRC-32C of those
lengths (each as a uint32), then the elements' bytes. A variable TensorFlow saved in parts (a
partitioned variable, each part with its ``save_slice_info``) has an entry under its full name
holding only the dtype, the full shape and the list of slices, and one entry per slice under a key
that encodes the name and the slice (``slice_key``).

``read_bundle``/``BundleReader`` give the tensors by their full names (slices assembled into the
whole tensor), so ``Saver.restore``, ``tf.train.load_variable`` and warm starting read a bundle as
they read tensorgrid's own format (checkpoint_chain detects which one a prefix is);
``write_bundle`` writes one that TensorFlow's ``Saver.restore`` and ``tf.train.load_variable`` read.
The facts come from TensorFlow's ``tensor_bundle.proto``, ``tensor_bundle.cc`` and
``saved_tensor_slice_util.cc``; docs/checkpoint-format.md, "TensorFlow's checkpoints".
"""

from __future__ import annotations

import dataclasses
import os
import struct
from typing import Any, Iterable, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.kernels import tf_record
from tensorgrid.train import checkpoint_format
from tensorgrid.train import sstable

HEADER_KEY = b""
BUNDLE_VERSION = 1
"""The bundle format version TensorFlow writes (``kTensorBundleVersion``) and the newest read here."""

FULL_EXTENT = -1
"""A slice's length along a dimension it covers whole (TensorFlow's ``kFullExtent``)."""


@dataclasses.dataclass(frozen=True)
class BundleEntry:
    """One tensor of a bundle: where its bytes are, or, for a tensor saved in slices, the slices."""

    name: str
    dtype: str
    """A tensorgrid dtype name such as ``float32`` (``string`` for TensorFlow's DT_STRING)."""
    shape: tuple[int, ...]
    shard_id: int = 0
    offset: int = 0
    size: int = 0
    crc32c: int = 0
    """The masked CRC-32C of the tensor's bytes in its data file, as TensorFlow stores it."""
    slices: tuple[tuple[tuple[int, int], ...], ...] = ()
    """Per slice, ``(start, length)`` for each dimension (length FULL_EXTENT: the whole dimension)."""


def data_file_name(prefix: str, shard: int, shards: int) -> str:
    return f"{prefix}.data-{shard:05d}-of-{shards:05d}"


def is_bundle(prefix: str) -> bool:
    """Whether checkpoint ``prefix`` is TensorFlow's: its index is a table (tensorgrid's is JSON)."""
    return sstable.is_table(checkpoint_format.index_path(prefix))


# ---------------------------------------------------------------------- protobuf wire format

def _fields(message: bytes) -> list[tuple[int, Any]]:
    """``(field number, value)`` of a serialized protobuf: an int for varint and fixed fields,
    bytes for length-delimited ones."""
    fields: list[tuple[int, Any]] = []
    position = 0
    while position < len(message):
        key, position = sstable.read_varint(message, position)
        number, wire_type = key >> 3, key & 7
        value: Any
        if wire_type == 0:
            value, position = sstable.read_varint(message, position)
        elif wire_type == 1:
            value, position = struct.unpack("<Q", message[position:position + 8])[0], position + 8
        elif wire_type == 5:
            value, position = struct.unpack("<I", message[position:position + 4])[0], position + 4
        elif wire_type == 2:
            length, position = sstable.read_varint(message, position)
            value, position = message[position:position + length], position + length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type} (field {number})")
        if position > len(message):
            raise ValueError(f"field {number} runs past the end of its {len(message)}-byte message")
        fields.append((number, value))
    return fields


def _signed(value: int) -> int:
    """A varint read as int64 (negative numbers are 10-byte two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _field(number: int, value: Any) -> bytes:
    """One field: an int as a varint (negative ints as int64), bytes length-delimited."""
    if isinstance(value, bytes):
        return sstable.varint(number << 3 | 2) + sstable.varint(len(value)) + value
    return sstable.varint(number << 3) + sstable.varint(value & ((1 << 64) - 1))


READABLE_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                   "uint64", "bool", "string")
"""The dtypes of the tensors read and written (TensorFlow's bfloat16, complex, variant and resource are not)."""


def _parse_entry(name: str, message: bytes) -> BundleEntry:
    shape: tuple[int, ...] = ()
    slices: list[tuple[tuple[int, int], ...]] = []
    values = {1: 0, 3: 0, 4: 0, 5: 0, 6: 0}
    for number, value in _fields(message):
        if number == 2:
            shape = _parse_shape(value)
        elif number == 7:
            slices.append(_parse_slice(value))
        elif number in values:
            values[number] = value
    try:
        dtype = dtypes.as_dtype(int(values[1])).name
    except TypeError:
        dtype = ""
    if dtype not in READABLE_DTYPES:
        raise errors.UnimplementedError(
            None, None, f"Tensor {name} has TensorFlow DataType {values[1]}, which tensorgrid does not read "
                        f"(it reads {', '.join(READABLE_DTYPES)})")
    return BundleEntry(name, dtype, shape, int(values[3]), _signed(values[4]), _signed(values[5]), int(values[6]),
                       tuple(slices))


def _parse_shape(message: bytes) -> tuple[int, ...]:
    dims = []
    for number, value in _fields(message):
        if number == 2:
            size = next((_signed(v) for n, v in _fields(value) if n == 1), 0)
            dims.append(size)
        elif number == 3 and value:
            raise ValueError("a tensor of unknown rank")
    if any(d < 0 for d in dims):
        raise ValueError(f"a tensor of shape {dims} (dimensions must be known and >= 0)")
    return tuple(dims)


def _parse_slice(message: bytes) -> tuple[tuple[int, int], ...]:
    """A TensorSliceProto's extents as ``(start, length)``; an extent without a length covers its
    whole dimension (FULL_EXTENT)."""
    extents = []
    for number, value in _fields(message):
        if number == 1:
            parsed = dict(_fields(value))
            extents.append((_signed(parsed.get(1, 0)), _signed(parsed[2]) if 2 in parsed else FULL_EXTENT))
    return tuple(extents)


def _shape_proto(shape: tuple[int, ...]) -> bytes:
    return b"".join(_field(2, _field(1, d) if d else b"") for d in shape)


# ---------------------------------------------------------------------- slice keys (OrderedCode)

def _ordered_number(value: int) -> bytes:
    """OrderedCode's WriteNumIncreasing: the byte count, then the bytes, most significant first."""
    raw = value.to_bytes((value.bit_length() + 7) // 8, "big") if value else b""
    return bytes([len(raw)]) + raw


def _ordered_string(text: bytes) -> bytes:
    """OrderedCode's WriteString: 0x00 and 0xff escaped (0x00 0xff, 0xff 0x00), ended by 0x00 0x01."""
    out = bytearray()
    for byte in text:
        out += b"\x00\xff" if byte == 0 else b"\xff\x00" if byte == 0xFF else bytes([byte])
    return bytes(out) + b"\x00\x01"


_SIGNED_HEADER = {1: (0x80, 0), 2: (0xC0, 0), 3: (0xE0, 0), 4: (0xF0, 0), 5: (0xF8, 0), 6: (0xFC, 0), 7: (0xFE, 0),
                  8: (0xFF, 0), 9: (0xFF, 0x80), 10: (0xFF, 0xC0)}
"""OrderedCode's length header of a signed number, XORed into its first two bytes: as many leading
1 bits as the encoding has bytes, so the encodings sort as the numbers do."""


def _ordered_signed(value: int) -> bytes:
    """OrderedCode's WriteSignedNumIncreasing: the two's complement value in the fewest bytes that
    leave room for the length header (7 bits of value a byte), most significant first."""
    magnitude = ~value if value < 0 else value
    length = magnitude.bit_length() // 7 + 1
    raw = bytearray((value & ((1 << (8 * length)) - 1)).to_bytes(length, "big"))
    first, second = _SIGNED_HEADER[length]
    raw[0] ^= first
    if length > 1:
        raw[1] ^= second
    return bytes(raw)


def slice_key(name: str, slice_spec: tuple[tuple[int, int], ...]) -> bytes:
    """The key of a slice's own entry (TensorFlow's EncodeTensorNameSlice)."""
    key = _ordered_number(0) + _ordered_string(name.encode("utf-8")) + _ordered_number(len(slice_spec))
    for start, length in slice_spec:
        key += _ordered_signed(start) + _ordered_signed(length)
    return key


# ---------------------------------------------------------------------- reading

class BundleReader:
    """The tensors of TensorFlow checkpoint ``prefix`` by name; the index is read and checked at once,
    a tensor's bytes when it is read."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        path = checkpoint_format.index_path(prefix)
        try:
            table = sstable.read_table(path)
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"Checkpoint index {path} not found") from None
        try:
            if not table or table[0][0] != HEADER_KEY:
                raise ValueError("its first entry is not the bundle header")
            self.num_shards = self._check_header(dict(_fields(table[0][1])))
            parsed = [_parse_entry(key.decode("utf-8", "backslashreplace"), value) for key, value in table[1:]]
        except (ValueError, TypeError, KeyError, struct.error) as e:
            raise errors.DataLossError(None, None, f"Unable to read file ({path}): it is corrupted or not a "
                                                   f"TensorFlow checkpoint index: {e}") from None
        by_key = {key: entry for (key, _), entry in zip(table[1:], parsed)}
        slice_keys = {slice_key(e.name, spec) for e in parsed for spec in e.slices}
        self._slices = {key: by_key[key] for key in slice_keys if key in by_key}
        self.entries: dict[str, BundleEntry] = {e.name: e for key, e in by_key.items() if key not in slice_keys}
        """The tensors by full name, as ``tf.train.list_variables`` shows them (slices' own entries hidden)."""

    def _check_header(self, header: dict[int, Any]) -> int:
        if header.get(2, 0) != 0:
            raise ValueError("the tensors are big-endian; this reader reads little-endian bundles (TensorFlow on "
                             "x86 and ARM writes those)")
        version = _fields(header.get(3, b""))
        min_consumer = next((v for n, v in version if n == 2), 0)
        bad = [v for n, v in version if n == 3]
        if min_consumer > BUNDLE_VERSION or BUNDLE_VERSION in bad:
            raise ValueError(f"it needs a reader of bundle version >= {min_consumer} (not {bad}); this reader is "
                             f"version {BUNDLE_VERSION}")
        shards = int(header.get(1, 0))
        if shards < 1:
            raise ValueError(f"the header gives {shards} data files")
        return shards

    def read(self, names: Iterable[str]) -> dict[str, np.ndarray]:
        """The named tensors (each in ``entries``), slices assembled; DataLossError naming the file when
        a data file is missing, short, or its bytes do not match their checksum."""
        files: dict[int, Any] = {}
        try:
            return {name: self._read(self.entries[name], files) for name in names}
        finally:
            for f in files.values():
                f.close()

    def _read(self, entry: BundleEntry, files: dict[int, Any]) -> np.ndarray:
        if not entry.slices:
            return self._read_stored(entry, files)
        dtype = np.dtype(dtypes.as_dtype(entry.dtype).as_numpy_dtype)
        whole = np.empty(entry.shape, dtype=dtype)
        filled = 0
        for spec in entry.slices:
            where = f"slice {_spec_text(spec)} of {entry.name} in checkpoint {self.prefix}"
            if len(spec) != len(entry.shape):
                raise errors.DataLossError(None, None, f"The {where} has {len(spec)} dimensions, the tensor "
                                                       f"{len(entry.shape)}")
            window = tuple(slice(0, size) if length == FULL_EXTENT else slice(start, start + length)
                           for (start, length), size in zip(spec, entry.shape))
            stored = self._slices.get(slice_key(entry.name, spec))
            target = whole[window]
            if stored is None or stored.shape != target.shape or stored.dtype != entry.dtype:
                raise errors.DataLossError(
                    None, None, f"The {where} is " + ("missing from the index" if stored is None else
                                                      f"stored as {stored.dtype} {list(stored.shape)}, not "
                                                      f"{entry.dtype} {list(target.shape)}"))
            whole[window] = self._read_stored(stored, files)
            filled += target.size
        if filled != whole.size:
            raise errors.DataLossError(None, None, f"The slices of {entry.name} in checkpoint {self.prefix} hold "
                                                   f"{filled} of its {whole.size} elements")
        return whole

    def _read_stored(self, entry: BundleEntry, files: dict[int, Any]) -> np.ndarray:
        path = data_file_name(self.prefix, entry.shard_id, self.num_shards)
        if not 0 <= entry.shard_id < self.num_shards:
            raise errors.DataLossError(None, None, f"Tensor {entry.name} of checkpoint {self.prefix} is in data file "
                                                   f"{entry.shard_id}, but the bundle has {self.num_shards}")
        if entry.shard_id not in files:
            try:
                files[entry.shard_id] = open(path, "rb")
            except FileNotFoundError:
                raise errors.DataLossError(None, None, f"Checkpoint data file {path} (named by "
                                                       f"{checkpoint_format.index_path(self.prefix)}) is missing") from None
        f = files[entry.shard_id]
        f.seek(entry.offset)
        raw = f.read(entry.size) if entry.offset >= 0 and entry.size >= 0 else b""
        if len(raw) != entry.size:
            raise errors.DataLossError(None, None, f"Checkpoint data file {path} ended while reading {entry.name} "
                                                   f"({entry.size} bytes at offset {entry.offset})")
        if entry.dtype == "string":
            values, checksummed = _decode_strings(raw, entry, path)
        else:
            checksummed = raw
        if tf_record.masked_crc(checksummed) != entry.crc32c:
            raise errors.DataLossError(None, None, f"Checksum does not match for tensor {entry.name} in checkpoint "
                                                   f"data file {path}; the file is corrupted")
        if entry.dtype == "string":
            return values
        dtype = np.dtype(dtypes.as_dtype(entry.dtype).as_numpy_dtype).newbyteorder("<")
        if entry.size != int(np.prod(entry.shape, dtype=np.int64)) * dtype.itemsize:
            raise errors.DataLossError(None, None, f"Invalid size in bundle entry {entry.name} of {path}: "
                                                   f"{entry.size} bytes for {entry.dtype} {list(entry.shape)}")
        return np.frombuffer(raw, dtype=dtype).reshape(entry.shape).astype(dtype.newbyteorder("="))


def _spec_text(spec: tuple[tuple[int, int], ...]) -> str:
    return ":".join("-" if length == FULL_EXTENT else f"{start},{length}" for start, length in spec)


def _decode_strings(raw: bytes, entry: BundleEntry, path: str) -> tuple[np.ndarray, bytes]:
    """The strings of a string tensor's bytes, and the bytes its checksum covers: the lengths as
    uint32 (uint64 above 4 GiB), the lengths' checksum, then the strings."""
    count = int(np.prod(entry.shape, dtype=np.int64))
    values = np.empty(count, dtype=object)
    checksummed = b""
    if raw:
        try:
            lengths, position = [], 0
            for _ in range(count):
                length, position = sstable.read_varint(raw, position)
                lengths.append(length)
            length_bytes = b"".join(struct.pack("<I" if n <= 0xFFFFFFFF else "<Q", n) for n in lengths)
            if struct.unpack("<I", raw[position:position + 4])[0] != tf_record.masked_crc(length_bytes) \
                    or position + 4 + sum(lengths) != len(raw):
                raise ValueError("the string lengths do not match their checksum or the entry's size")
        except (ValueError, struct.error) as e:
            raise errors.DataLossError(None, None, f"String tensor {entry.name} in checkpoint data file {path} is "
                                                   f"corrupted: {e}") from None
        checksummed = length_bytes + raw[position:]
        position += 4
        for number, length in enumerate(lengths):
            values[number] = raw[position:position + length]
            position += length
    return values.reshape(entry.shape), checksummed


# ---------------------------------------------------------------------- writing

def write_bundle(prefix: str, tensors: dict[str, Any]) -> None:
    """Writes ``tensors`` (name -> array: numbers, bools, or bytes/str objects for strings) as the
    TensorFlow checkpoint ``prefix``, one data file, each tensor whole; the data file first and the
    index last, each written to a temporary name and renamed (the index is the commit point)."""
    entries: list[tuple[bytes, bytes]] = []
    payloads: list[bytes] = []
    offset = 0
    for name in sorted(tensors, key=lambda n: n.encode("utf-8")):
        if not name:
            raise ValueError("A tensor of a TensorFlow checkpoint needs a name (the empty key is the header)")
        array = np.asarray(tensors[name])
        dtype, raw, checksummed = _encode_tensor(name, array)
        message = (_field(1, dtype.enum) + _field(2, _shape_proto(tuple(int(d) for d in array.shape)))
                   + (_field(4, offset) if offset else b"") + (_field(5, len(raw)) if raw else b"")
                   + sstable.varint(6 << 3 | 5) + struct.pack("<I", tf_record.masked_crc(checksummed)))
        entries.append((name.encode("utf-8"), message))
        payloads.append(raw)
        offset += len(raw)
    header = _field(1, 1) + _field(3, _field(1, BUNDLE_VERSION))
    table = sstable.build_table([(HEADER_KEY, header)] + entries)
    directory = os.path.dirname(prefix)
    if directory:
        os.makedirs(directory, exist_ok=True)

    def write_data(f: Any) -> None:
        for payload in payloads:
            f.write(payload)

    checkpoint_format.atomic_write(data_file_name(prefix, 0, 1), write_data)
    checkpoint_format.atomic_write_bytes(checkpoint_format.index_path(prefix), table)
    checkpoint_format.fsync_directory(directory)


def _encode_tensor(name: str, array: np.ndarray) -> tuple[dtypes.DType, bytes, bytes]:
    """The tensor's dtype, its bytes in the data file, and the bytes its checksum covers."""
    if array.dtype.kind in "OSU":
        items = [item.encode("utf-8") if isinstance(item, str) else item for item in array.reshape(-1).tolist()]
        if not all(isinstance(item, bytes) for item in items):
            raise TypeError(f"Tensor {name} holds objects that are not strings: a TensorFlow checkpoint holds "
                            "numbers, bools and strings (bytes or str)")
        lengths = [len(item) for item in items]
        length_bytes = b"".join(struct.pack("<I" if n <= 0xFFFFFFFF else "<Q", n) for n in lengths)
        length_checksum = struct.pack("<I", tf_record.masked_crc(length_bytes))
        strings = b"".join(items)
        return (dtypes.string, b"".join(sstable.varint(n) for n in lengths) + length_checksum + strings,
                length_bytes + length_checksum + strings)
    try:
        dtype = dtypes.as_dtype(array.dtype.newbyteorder("="))
    except TypeError:
        raise TypeError(f"Tensor {name} has numpy dtype {array.dtype}, which a TensorFlow checkpoint written by "
                        f"tensorgrid cannot hold (valid: {', '.join(READABLE_DTYPES)})") from None
    raw = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    return dtype, raw, raw


def read_bundle(prefix: str, names: Optional[Iterable[str]] = None) -> dict[str, np.ndarray]:
    """The named tensors of TensorFlow checkpoint ``prefix`` (all of them by default)."""
    reader = BundleReader(prefix)
    return reader.read(reader.entries if names is None else names)
