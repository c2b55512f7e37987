"""Lookup tables (``tf.lookup``): immutable hash tables living in a task's resource manager.

A table is a resource like a queue: the ``HashTableV2`` op finds or makes it by its shared
name in its container on the task it is placed on, and every op on it (import, find, size)
is colocated with it, so a table placed on a PS is filled and looked up there. A table is
empty and uninitialized until an initializer op fills it (``tf.tables_initializer()``);
finding keys before that fails with FailedPreconditionError, as in TensorFlow. Filling it
again with the same entries does nothing; with others, it fails.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels.registry import register_kernel

WHOLE_LINE = -2
"""``TextFileIndex.WHOLE_LINE``: the key or value is the whole line."""
LINE_NUMBER = -1
"""``TextFileIndex.LINE_NUMBER``: the key or value is the line's number, from 0."""


class HashTable:
    """An immutable map from keys to values of one dtype each (TensorFlow's ``HashTable``).

    String keys are looked up in a dict; numeric keys by binary search in the sorted keys,
    so a batch of ids is one vectorised search."""

    def __init__(self, name: str, key_dtype: str, value_dtype: str) -> None:
        self.name = name
        self.key_dtype = key_dtype
        self.value_dtype = value_dtype
        self._lock = threading.Lock()
        self._entries: Optional[dict[Any, Any]] = None
        self._sorted_keys: Any = None
        self._sorted_values: Any = None

    def size(self) -> int:
        entries = self._entries
        return 0 if entries is None else len(entries)

    def check_same_definition(self, key_dtype: str, value_dtype: str) -> None:
        if (key_dtype, value_dtype) != (self.key_dtype, self.value_dtype):
            raise errors.InvalidArgumentError(
                None, None, f"Shared lookup table '{self.name}' maps {self.key_dtype} to {self.value_dtype}, "
                f"but requested {key_dtype} to {value_dtype}")

    def initialize(self, keys: list[Any], values: list[Any]) -> None:
        """Fills the table once; filling it again with the same entries is a no-op."""
        entries: dict[Any, Any] = {}
        for key, value in zip(keys, values):
            existing = entries.setdefault(key, value)
            if existing != value:
                raise errors.FailedPreconditionError(
                    None, None, f"HashTable has different value for same key. Key {_shown(key)} has "
                    f"{_shown(existing)} and trying to add value {_shown(value)} (table {self.name})")
        with self._lock:
            if self._entries is not None:
                if self._entries != entries:
                    raise errors.FailedPreconditionError(
                        None, None, f"Table was already initialized with different data (table {self.name}).")
                return
            if self.key_dtype != "string":
                key_type = dtypes.as_dtype(self.key_dtype).as_numpy_dtype
                value_type = dtypes.as_dtype(self.value_dtype).as_numpy_dtype
                order = sorted(entries)
                self._sorted_keys = np.asarray(order, dtype=key_type)
                self._sorted_values = np.asarray([entries[key] for key in order], dtype=value_type)
            self._entries = entries

    def find(self, keys: Any, default: Any) -> Any:
        entries = self._entries
        if entries is None:
            raise errors.FailedPreconditionError(None, None, f"Table not initialized. (table {self.name}: run "
                                                 "tf.tables_initializer() or the table's initializer first)")
        value_type = dtypes.as_dtype(self.value_dtype).as_numpy_dtype
        keys = np.asarray(keys)
        if self.key_dtype == "string":
            found = [entries.get(key, default) for key in keys.ravel().tolist()]
            out = np.empty(len(found), dtype=value_type)
            out[:] = found
            return out.reshape(keys.shape)
        sorted_keys, sorted_values = self._sorted_keys, self._sorted_values
        out = np.full(keys.shape, default, dtype=value_type)
        if len(sorted_keys) and keys.size:
            at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
            hit = sorted_keys[at] == keys
            out[hit] = sorted_values[at[hit]]
        return out


def _shown(value: Any) -> str:
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)


def _python_values(array: Any) -> list[Any]:
    return np.asarray(array).ravel().tolist()


@register_kernel("HashTableV2", host_only=True)
def _hash_table(k: context.KernelContext, step: context.StepContext) -> Any:
    name = k.attrs["shared_name"] or k.name
    key_dtype, value_dtype = k.attrs["key_dtype"], k.attrs["value_dtype"]
    table = step.resources.lookup_or_create(k.attrs["container"], name, HashTable,
                                            lambda: HashTable(name, key_dtype, value_dtype))
    table.check_same_definition(key_dtype, value_dtype)
    return table


@register_kernel("LookupTableImportV2", host_only=True)
def _import(k: context.KernelContext, step: context.StepContext, table: HashTable, keys: Any, values: Any) -> None:
    keys, values = np.asarray(keys), np.asarray(values)
    if keys.shape != values.shape:
        raise errors.InvalidArgumentError(
            None, None, f"Expected shape {list(keys.shape)} for value, got {list(values.shape)} (table {table.name}: "
            "one value per key)")
    table.initialize(_python_values(keys), _python_values(values))


@register_kernel("LookupTableFindV2", host_only=True)
def _find(k: context.KernelContext, step: context.StepContext, table: HashTable, keys: Any, default: Any) -> Any:
    default_array = np.asarray(default)
    if default_array.ndim != 0:
        raise errors.InvalidArgumentError(
            None, None, f"Expected shape [] for default value, got {list(default_array.shape)} (table {table.name})")
    return table.find(keys, default_array.item())


@register_kernel("LookupTableSizeV2", host_only=True)
def _size(k: context.KernelContext, step: context.StepContext, table: HashTable) -> Any:
    return np.asarray(table.size(), dtype=np.int64)


@register_kernel("InitializeTableFromTextFileV2", host_only=True)
def _initialize_from_text_file(k: context.KernelContext, step: context.StepContext, table: HashTable,
                               filename: Any) -> None:
    path = filename.decode() if isinstance(filename := np.asarray(filename).item(), bytes) else str(filename)
    lines = _read_lines(path)
    vocab_size = int(k.attrs["vocab_size"])
    if vocab_size != -1:
        if len(lines) < vocab_size:
            raise errors.InvalidArgumentError(
                None, None, f"Invalid vocab_size in {path}: expected {vocab_size} but got {len(lines)}")
        lines = lines[:vocab_size]
    delimiter = k.attrs["delimiter"].encode()
    keys = [_field(path, number, line, k.attrs["key_index"], delimiter, table.key_dtype, 0)
            for number, line in enumerate(lines)]
    values = [_field(path, number, line, k.attrs["value_index"], delimiter, table.value_dtype, k.attrs["offset"])
              for number, line in enumerate(lines)]
    table.initialize(keys, values)


def _read_lines(path: str) -> list[bytes]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from None
    except OSError as failure:
        raise errors.InvalidArgumentError(None, None, f"Cannot read vocabulary file {path}: {failure}") from None
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    position = 0
    for line in lines:
        position += len(line) + 1
        if not line or line == b"\r":
            raise errors.InvalidArgumentError(
                None, None, f"Invalid content in {path}: empty line found at position {position}.")
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def _field(path: str, number: int, line: bytes, index: int, delimiter: bytes, dtype_name: str, offset: int) -> Any:
    """One key or value of a vocabulary file's line, as TensorFlow's text file initializer reads it."""
    if index == LINE_NUMBER:
        return number + offset
    if index == WHOLE_LINE:
        text = line
    else:
        columns = line.split(delimiter) if delimiter else line.split()
        if index >= len(columns):
            raise errors.InvalidArgumentError(
                None, None, f"Invalid number of columns in {path} line {number} ({_shown(line)}) : expected at "
                f"least {index + 1} got {len(columns)}")
        text = columns[index]
    if dtype_name == "string":
        return text
    try:
        return int(text) if dtypes.as_dtype(dtype_name).is_integer else float(text)
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, f"Field {_shown(text)} in line {number} of {path} is not a valid {dtype_name}") from None
