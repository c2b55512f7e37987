"""The on-disk checkpoint format and crash-safe file writes (see docs/checkpoint-format.md).

A checkpoint with prefix P is two files: ``P.index``, JSON naming every tensor with
its dtype, shape, byte offset, length and CRC-32, and the data file it names (``P.data``,
or ``P.data.1`` when a save replaces a checkpoint of the same prefix), holding raw
little-endian bytes, each tensor starting on a 64-byte boundary. Every file is
written to a temporary name in the same directory, flushed and fsynced, then renamed
over its final name; the data file first and the index last, so the index is the
commit point: a crash at any moment leaves either the old checkpoint or the new one
complete, never an index that points at missing or partial data.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import zlib
from typing import Any, Callable, Iterable, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import errors

FORMAT_NAME = "tensorgrid-checkpoint"
FORMAT_VERSION = 1
DELTA_FORMAT_VERSION = 2
"""The version of a delta's index (an incremental save): a reader of version 1 only refuses it."""
ALIGNMENT = 64
INDEX_SUFFIX = ".index"
DATA_SUFFIXES = (".data", ".data.1")
_TEMP_MARKER = ".tmp-"
TENSORFLOW_DATA_FILE = re.compile(r"\.data-\d{5}-of-\d{5}")
"""The suffix of TensorFlow's data files (``P.data-00000-of-00001``): a TensorFlow checkpoint of the
same prefix (tensorflow_bundle), whose files deleting or replacing the checkpoint deletes too."""


@dataclasses.dataclass(frozen=True)
class TensorEntry:
    """Where one tensor's bytes are in the data file, and how to check and decode them."""

    name: str
    dtype: str
    """A tensorgrid dtype name such as ``float32``."""
    shape: tuple[int, ...]
    offset: int
    length: int
    crc32: int
    """zlib's CRC-32 of the tensor's bytes."""


@dataclasses.dataclass(frozen=True)
class DeltaOf:
    """What a delta checkpoint (an incremental save) applies to: docs/checkpoint-format.md."""

    base: str
    """Base name of the full checkpoint the chain starts from, in the same directory."""
    previous: str
    """Base name of the checkpoint (full or delta) this delta's changes apply to."""
    sequence: int
    """1 for the first delta after the full checkpoint, 2 for the next one, ..."""


@dataclasses.dataclass(frozen=True)
class Index:
    """The parsed ``.index`` file of one checkpoint."""

    prefix: str
    data_file: str
    """Base name of the data file, in the same directory as the index."""
    data_size: int
    tensors: dict[str, TensorEntry]
    delta: Optional[DeltaOf] = None
    """Set when this checkpoint is a delta: its tensors are changes to apply to ``delta.previous``."""

    @property
    def data_path(self) -> str:
        return os.path.join(os.path.dirname(self.prefix), self.data_file)


def index_path(prefix: str) -> str:
    return prefix + INDEX_SUFFIX


# ---------------------------------------------------------------------- crash-safe writes

def fsync_directory(directory: str) -> None:
    """Makes renames in ``directory`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, write: Callable[[Any], None]) -> None:
    """Calls ``write(file)`` on a temporary file beside ``path``, fsyncs it, then renames it to ``path``.

    Readers see the old file or the complete new one, never a partial one; on any
    failure the temporary file is removed and ``path`` is untouched.
    """
    temp = f"{path}{_TEMP_MARKER}{secrets.token_hex(4)}"
    try:
        with open(temp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException as e:
        try:
            os.unlink(temp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.errno is not None and e.filename is None:  # a full disk: no path
            raise OSError(e.errno, f"{e.strerror} while writing checkpoint file", path) from e
        raise


def is_temporary(name: str) -> bool:
    """Whether file ``name`` is the temporary file of a write (``atomic_write``) that
    did not finish."""
    return _TEMP_MARKER in name


def atomic_write_bytes(path: str, content: bytes) -> None:
    atomic_write(path, lambda f: f.write(content))


# ---------------------------------------------------------------------- writing

def _tensor_bytes(value: Any) -> tuple[np.ndarray, str]:
    array = np.asarray(value)
    try:
        dtype_name = dtypes.as_dtype(array.dtype.newbyteorder("=")).name
    except TypeError:
        raise TypeError(f"Cannot checkpoint a tensor of numpy dtype {array.dtype}") from None
    if array.dtype.kind not in "biuf":
        raise TypeError(f"Cannot checkpoint a tensor of dtype {dtype_name}: only numbers and bools are supported")
    little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    return little.reshape(-1).view(np.uint8), dtype_name


def write_checkpoint(prefix: str, tensors: dict[str, Any], delta: Optional[DeltaOf] = None) -> Index:
    """Writes ``tensors`` (name -> array) as checkpoint ``prefix`` (a delta when ``delta`` is given);
    returns its index."""
    directory = os.path.dirname(prefix)
    previous = _committed_data_file(prefix)
    data_file = os.path.basename(prefix) + (DATA_SUFFIXES[1] if previous == os.path.basename(prefix) + DATA_SUFFIXES[0]
                                            else DATA_SUFFIXES[0])
    entries: dict[str, TensorEntry] = {}
    payloads: list[tuple[int, np.ndarray]] = []
    offset = 0
    for name in sorted(tensors):
        raw, dtype_name = _tensor_bytes(tensors[name])
        offset = -(-offset // ALIGNMENT) * ALIGNMENT
        entries[name] = TensorEntry(name, dtype_name, tuple(int(d) for d in np.shape(tensors[name])), offset,
                                    int(raw.size), zlib.crc32(raw.data) & 0xFFFFFFFF)
        payloads.append((offset, raw))
        offset += int(raw.size)
    data_size = offset

    def write_data(f: Any) -> None:
        position = 0
        for start, raw in payloads:
            if start > position:
                f.write(b"\0" * (start - position))
            f.write(raw.data)
            position = start + raw.size

    atomic_write(os.path.join(directory, data_file), write_data)
    index = Index(prefix, data_file, data_size, entries, delta)
    atomic_write_bytes(index_path(prefix), _encode_index(index))
    fsync_directory(directory)
    if previous is not None and previous != data_file:
        _unlink_quietly(os.path.join(directory, previous))
    for path in checkpoint_files(prefix):
        if is_temporary(os.path.basename(path)) or TENSORFLOW_DATA_FILE.search(path):
            _unlink_quietly(path)  # left by an interrupted save of this prefix, or TensorFlow's replaced checkpoint
    return index


def _committed_data_file(prefix: str) -> Optional[str]:
    """The data file named by the current index of ``prefix``, if there is a readable one."""
    try:
        return read_index(prefix).data_file
    except (errors.OpError, OSError):
        return None


def _encode_index(index: Index) -> bytes:
    """The index as JSON with one line per tensor, so it stays readable with thousands of them."""
    header = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION if index.delta is None else DELTA_FORMAT_VERSION,
        "byte_order": "little",
        "alignment": ALIGNMENT,
        "data_file": index.data_file,
        "data_size": index.data_size,
    }
    if index.delta is not None:
        header["delta_of"] = dataclasses.asdict(index.delta)
    entries = [
        json.dumps({"name": e.name, "dtype": e.dtype, "shape": list(e.shape), "offset": e.offset,
                    "length": e.length, "crc32": e.crc32})
        for e in index.tensors.values()
    ]
    lines = ["{"] + [f" {json.dumps(key)}: {json.dumps(value)}," for key, value in header.items()]
    lines.append(' "tensors": [')
    lines += [f"  {entry}," for entry in entries[:-1]] + [f"  {entry}" for entry in entries[-1:]]
    lines += [" ]", "}", ""]
    return "\n".join(lines).encode("utf-8")


# ---------------------------------------------------------------------- reading

def read_index(prefix: str) -> Index:
    """Parses ``prefix.index``; NotFoundError if absent, DataLossError if it is not a valid index."""
    path = index_path(prefix)
    try:
        with open(path, "rb") as f:
            content = f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"Checkpoint index {path} not found") from None
    try:
        document = json.loads(content.decode("utf-8"))
        if document.get("format") != FORMAT_NAME:
            raise ValueError(f"format is {document.get('format')!r}, not {FORMAT_NAME!r}")
        version = document.get("version")
        if version not in (FORMAT_VERSION, DELTA_FORMAT_VERSION):
            raise ValueError(f"format version {version!r}; this tensorgrid reads versions {FORMAT_VERSION} "
                             f"and {DELTA_FORMAT_VERSION}")
        delta = None
        if version == DELTA_FORMAT_VERSION:
            of = document["delta_of"]
            delta = DeltaOf(str(of["base"]), str(of["previous"]), int(of["sequence"]))
            if any(os.path.basename(name) != name or not name for name in (delta.base, delta.previous)):
                raise ValueError(f"delta_of {of!r} must name checkpoints in the index's directory")
        data_file = document["data_file"]
        if not isinstance(data_file, str) or os.path.basename(data_file) != data_file:
            raise ValueError(f"data_file {data_file!r} must be a file name in the index's directory")
        tensors = {}
        for item in document["tensors"]:
            entry = TensorEntry(str(item["name"]), str(item["dtype"]), tuple(int(d) for d in item["shape"]),
                                int(item["offset"]), int(item["length"]), int(item["crc32"]))
            dtypes.as_dtype(entry.dtype)
            tensors[entry.name] = entry
        return Index(prefix, data_file, int(document["data_size"]), tensors, delta)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, AttributeError) as e:
        raise errors.DataLossError(None, None, f"Checkpoint index {path} is corrupted or not a checkpoint index: {e}") from None


def read_tensors(index: Index, names: Iterable[str]) -> dict[str, np.ndarray]:
    """Reads and checks the named tensors; DataLossError naming the file on any corruption."""
    path = index.data_path
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise errors.DataLossError(
            None, None, f"Checkpoint data file {path} (named by {index_path(index.prefix)}) is missing"
        ) from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size != index.data_size:
            raise errors.DataLossError(
                None, None,
                f"Checkpoint data file {path} has {size} bytes but its index says {index.data_size}: "
                "the file is truncated or was overwritten",
            )
        result = {}
        for name in names:
            entry = index.tensors[name]
            np_dtype = np.dtype(dtypes.as_dtype(entry.dtype).as_numpy_dtype).newbyteorder("<")
            expected = int(np.prod(entry.shape, dtype=np.int64)) * np_dtype.itemsize
            if entry.length != expected or entry.offset + entry.length > size or entry.offset < 0:
                raise errors.DataLossError(
                    None, None,
                    f"Checkpoint index {index_path(index.prefix)} has an invalid entry for {name}: "
                    f"{entry.length} bytes at offset {entry.offset} for shape {list(entry.shape)} {entry.dtype}",
                )
            raw = np.empty(entry.length, dtype=np.uint8)
            f.seek(entry.offset)
            if f.readinto(raw.data) != entry.length:
                raise errors.DataLossError(None, None, f"Checkpoint data file {path} ended while reading {name}")
            crc = zlib.crc32(raw.data) & 0xFFFFFFFF
            if crc != entry.crc32:
                raise errors.DataLossError(
                    None, None,
                    f"Checksum does not match for tensor {name} in checkpoint data file {path}: stored "
                    f"{entry.crc32:#010x}, computed {crc:#010x}; the file is corrupted",
                )
            result[name] = raw.view(np_dtype).reshape(entry.shape).astype(np_dtype.newbyteorder("="), copy=False)
        return result


def checkpoint_files(prefix: str) -> list[str]:
    """Every file that belongs to checkpoint ``prefix`` (including leftovers of interrupted saves, and the
    data files of a TensorFlow checkpoint of that prefix)."""
    directory = os.path.dirname(prefix) or "."
    base = os.path.basename(prefix)
    own = {base + INDEX_SUFFIX, *(base + s for s in DATA_SUFFIXES)}
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return [
        os.path.join(os.path.dirname(prefix), n) for n in names
        if n in own or any(n.startswith(o + _TEMP_MARKER) for o in own)
        or (n.startswith(base) and TENSORFLOW_DATA_FILE.fullmatch(n[len(base):]))
    ]


def remove_checkpoint(prefix: str) -> None:
    """Deletes checkpoint ``prefix``: the index (its commit point) first, then the rest."""
    _unlink_quietly(index_path(prefix))
    for path in checkpoint_files(prefix):
        _unlink_quietly(path)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
