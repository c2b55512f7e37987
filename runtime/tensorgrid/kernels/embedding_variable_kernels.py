"""Embedding variables (DeepRec's ``EmbeddingVariable``): hash tables of rows that grow with the ids.

A table is a resource like a lookup table or a queue: ``KvVarHandleOp`` finds or makes it by
name in its container on the task it is placed on, and every op on it (initialize, gather,
sparse apply, export, import) is colocated with it, so a table placed on a PS lives and is
updated there and only ids, rows and gradients travel.

A table maps any 64-bit id to a row of ``embedding_dim`` values, and keeps per key: the
optimizer's slots (Adagrad's accumulator), how often the key was looked up (its frequency)
and the global step of its last update (its version). With a counter filter, a key is stored
only once it has been looked up ``filter_freq`` times; until then a lookup gives
``default_value_no_permission`` and updates skip it (its count is kept). A key stored for the
first time starts at the initializer's row ``key % default_value_dim`` (DeepRec's scheme, so a
row's start does not depend on the order keys arrive). Eviction (by global step or by L2
weight) runs when the table is exported, that is at every checkpoint save, as DeepRec does;
a table with ``max_entries`` also evicts its least recently updated keys whenever a lookup
takes it past that many.

The part of a partitioned table an id belongs to is ``partition_of_keys`` (a 64-bit mix of
the id, then modulo the part count), here so that the lookup's routing op and the Saver's
restore into another part count use the one function.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Optional

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels.registry import register_kernel

NO_VERSION = -1
"""The version of a key never updated (or updated without a global step)."""

_PYTHON_INT_BYTES = 32
"""What CPython spends on one int object of a key or row number (28 to 36 bytes): the dict's share."""


def partition_of_keys(keys: np.ndarray, num_partitions: int) -> np.ndarray:
    """The part (int32, ``0 <= p < num_partitions``) of each int64 key: splitmix64's finalizer, then modulo.

    A mix rather than ``key % num_partitions``, so keys that share a stride spread over all parts."""
    if num_partitions < 1:
        raise errors.InvalidArgumentError(None, None, f"num_partitions must be >= 1, got {num_partitions}")
    mixed = np.asarray(keys, np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        mixed = (mixed ^ (mixed >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        mixed = (mixed ^ (mixed >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        mixed = mixed ^ (mixed >> np.uint64(31))
    return (mixed % np.uint64(num_partitions)).astype(np.int32)


class EmbeddingTable:
    """The rows, slots, frequencies and versions of one embedding variable, by key."""

    def __init__(self, name: str, dim: int, value_dtype: Any, filter_freq: int, steps_to_live: int,
                 l2_weight_threshold: float, default_value_no_permission: float, max_entries: int = 0) -> None:
        self.name = name
        self.max_entries = max_entries
        self.dim = dim
        self.value_dtype = np.dtype(value_dtype)
        self.filter_freq = filter_freq
        self.steps_to_live = steps_to_live
        self.l2_weight_threshold = l2_weight_threshold
        self.default_value_no_permission = default_value_no_permission
        self.lock = threading.Lock()
        self._defaults: Optional[np.ndarray] = None
        self._clear()

    def _clear(self) -> None:
        self._row_of: dict[int, int] = {}
        self._values = np.zeros((0, self.dim), self.value_dtype)
        self._freqs = np.zeros(0, np.int64)
        self._versions = np.zeros(0, np.int64)
        self._keys = np.zeros(0, np.int64)
        self._touched = np.zeros(0, np.int64)
        self._tick = 0
        self._rows_used = 0
        self._slots: dict[str, np.ndarray] = {}
        self._slot_initial: dict[str, float] = {}
        self._free_rows: list[int] = []
        self._unadmitted_counts: dict[int, int] = {}

    @property
    def initialized(self) -> bool:
        return self._defaults is not None

    def size(self) -> int:
        return len(self._row_of)

    def memory_bytes(self) -> dict[str, int]:
        """Bytes held, by part: ``keys`` (the id index and the counts of keys not yet admitted, an
        estimate of the dicts' and ints' share), ``values`` (rows, frequencies, versions, recency:
        the arrays, with their spare capacity) and ``slots`` (the optimizer's rows)."""
        with self.lock:
            dicts = (sys.getsizeof(self._row_of) + sys.getsizeof(self._unadmitted_counts)
                     + 2 * _PYTHON_INT_BYTES * (len(self._row_of) + len(self._unadmitted_counts)))
            return {"keys": dicts + self._keys.nbytes,
                    "values": self._values.nbytes + self._freqs.nbytes + self._versions.nbytes + self._touched.nbytes,
                    "slots": sum(slot.nbytes for slot in self._slots.values())}

    def check_definition(self, dim: int, value_dtype: Any) -> None:
        if (dim, np.dtype(value_dtype)) != (self.dim, self.value_dtype):
            raise errors.InvalidArgumentError(
                None, None, f"Embedding variable '{self.name}' has rows of {self.dim} {self.value_dtype} values, "
                f"but was asked for {dim} {np.dtype(value_dtype)} values")

    def initialize(self, defaults: np.ndarray) -> None:
        """Empties the table and sets the initializer's rows new keys start from."""
        if defaults.ndim != 2 or defaults.shape[1] != self.dim or defaults.shape[0] == 0:
            raise errors.InvalidArgumentError(
                None, None, f"Embedding variable '{self.name}' needs initial rows of shape [N>0, {self.dim}], "
                f"got {list(defaults.shape)}")
        with self.lock:
            self._clear()
            self._defaults = defaults.astype(self.value_dtype)

    def _check_initialized(self) -> np.ndarray:
        defaults = self._defaults
        if defaults is None:
            raise errors.FailedPreconditionError(
                None, None, f"Attempting to use uninitialized embedding variable {self.name}: run its initializer "
                "(tf.global_variables_initializer()) or restore it from a checkpoint first")
        return defaults

    def _new_row(self, key: int, defaults: np.ndarray) -> int:
        if self._free_rows:
            row = self._free_rows.pop()
        else:
            row = self._rows_used
            self._rows_used += 1
            if row >= len(self._values):
                capacity = max(16, 2 * row)
                self._values = _grown(self._values, capacity)
                for slot in self._slots:
                    self._slots[slot] = _grown(self._slots[slot], capacity)
                self._freqs, self._versions = _grown(self._freqs, capacity), _grown(self._versions, capacity)
                self._keys, self._touched = _grown(self._keys, capacity), _grown(self._touched, capacity)
        self._values[row] = defaults[key % len(defaults)]
        for slot, initial in self._slot_initial.items():
            self._slots[slot][row] = initial
        self._freqs[row] = 0
        self._versions[row] = NO_VERSION
        self._keys[row] = key
        self._touched[row] = self._tick
        self._row_of[key] = row
        return row

    def gather(self, keys: np.ndarray, count: bool) -> np.ndarray:
        """The rows of ``keys``; counts each lookup and stores the keys it admits."""
        defaults = self._check_initialized()
        flat = keys.reshape(-1).tolist()
        out = np.empty((len(flat), self.dim), self.value_dtype)
        with self.lock:
            for position, key in enumerate(flat):
                row = self._row_of.get(key)
                if row is None:
                    seen = self._unadmitted_counts.get(key, 0) + (1 if count else 0)
                    if seen < self.filter_freq:
                        if count:
                            self._unadmitted_counts[key] = seen
                        out[position] = self.default_value_no_permission
                        continue
                    self._unadmitted_counts.pop(key, None)
                    row = self._new_row(key, defaults)
                    self._freqs[row] = seen - (1 if count else 0)
                if count:
                    self._freqs[row] += 1
                out[position] = self._values[row]
            if self.max_entries and len(self._row_of) > self.max_entries:
                self._evict_least_recently_updated(len(self._row_of) - self.max_entries)
            self._tick += 1
        return out.reshape(keys.shape + (self.dim,))

    def _evict_least_recently_updated(self, count: int) -> None:
        """Drops the ``count`` keys updated (or, if never updated, stored) longest ago."""
        rows = np.fromiter(self._row_of.values(), np.int64, len(self._row_of))
        oldest = rows[np.argpartition(self._touched[rows], count - 1)[:count]]
        for row in oldest.tolist():
            del self._row_of[int(self._keys[row])]
            self._free_rows.append(row)

    def ensure_slot(self, slot: str, initial: float) -> np.ndarray:
        if slot not in self._slot_initial:
            self._slot_initial[slot] = initial
            self._slots[slot] = np.full(self._values.shape, initial, self.value_dtype)
        return self._slots[slot]

    def rows_to_update(self, keys: np.ndarray, grads: np.ndarray, version: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows of the stored keys among ``keys``, their summed gradients); stamps their version.

        Keys not admitted (or evicted since the lookup) are skipped, as DeepRec does."""
        self._check_initialized()
        grads = grads.reshape(len(keys), self.dim)
        rows = np.asarray([self._row_of.get(key, -1) for key in keys.reshape(-1).tolist()], np.int64)
        kept = rows >= 0
        unique_rows, position = np.unique(rows[kept], return_inverse=True)
        summed = np.zeros((len(unique_rows), self.dim), self.value_dtype)
        np.add.at(summed, position, grads[kept])
        if version != NO_VERSION:
            self._versions[unique_rows] = version
        self._touched[unique_rows] = self._tick
        self._tick += 1
        return unique_rows, summed

    def values(self) -> np.ndarray:
        return self._values

    def evict(self, global_step: int) -> None:
        """Drops the keys the eviction option names (not updated in ``steps_to_live`` steps, or small rows)."""
        with self.lock:
            doomed = []
            for key, row in self._row_of.items():
                if self.steps_to_live > 0 and global_step >= 0 and \
                        global_step - max(int(self._versions[row]), 0) > self.steps_to_live:
                    doomed.append(key)
                elif self.l2_weight_threshold >= 0 and \
                        float(np.sqrt(np.sum(np.square(self._values[row], dtype=np.float64)))) < self.l2_weight_threshold:
                    doomed.append(key)
            for key in doomed:
                self._free_rows.append(self._row_of.pop(key))

    def export(self, slot_names: list[str]) -> list[np.ndarray]:
        """keys, values, freqs, versions, keys not yet admitted, their counts, then one array per slot."""
        with self.lock:
            keys = np.asarray(sorted(self._row_of), np.int64)
            rows = np.asarray([self._row_of[key] for key in keys.tolist()], np.int64)
            pending = np.asarray(sorted(self._unadmitted_counts), np.int64)
            counts = np.asarray([self._unadmitted_counts[key] for key in pending.tolist()], np.int64)
            slots = [self._slots[name][rows] if name in self._slots
                     else np.zeros((len(rows), self.dim), self.value_dtype) for name in slot_names]
            return [keys, self._values[rows].copy(), self._freqs[rows].copy(), self._versions[rows].copy(),
                    pending, counts, *[slot.copy() for slot in slots]]

    def restore(self, defaults: np.ndarray, arrays: list[np.ndarray], slot_names: list[str],
                slot_initial: list[float]) -> None:
        """Replaces the table's contents with an export's arrays (in ``export``'s order); new keys
        start from ``defaults`` after it, as after ``initialize``."""
        keys, values, freqs, versions, pending, counts, *slots = arrays
        n = len(keys)
        for what, array, shape in (("values", values, (n, self.dim)), ("freqs", freqs, (n,)),
                                   ("versions", versions, (n,)), ("freqs_filtered", counts, pending.shape),
                                   *((f"slot {s}", a, (n, self.dim)) for s, a in zip(slot_names, slots))):
            if tuple(array.shape) != tuple(shape):
                raise errors.InvalidArgumentError(
                    None, None, f"Restoring embedding variable {self.name}: {what} has shape {list(array.shape)}, "
                    f"expected {list(shape)} for {n} keys")
        self.initialize(defaults)
        with self.lock:
            self._values = np.array(values, self.value_dtype).reshape(n, self.dim)
            self._freqs = np.array(freqs, np.int64)
            self._versions = np.array(versions, np.int64)
            self._row_of = {key: row for row, key in enumerate(keys.tolist())}
            self._keys = np.array(keys, np.int64)
            self._touched = np.zeros(n, np.int64)
            self._rows_used = n
            for name, initial, slot in zip(slot_names, slot_initial, slots):
                self._slot_initial[name] = initial
                self._slots[name] = np.array(slot, self.value_dtype).reshape(n, self.dim)
            self._unadmitted_counts = dict(zip(pending.tolist(), counts.tolist()))


def _grown(array: np.ndarray, capacity: int) -> np.ndarray:
    grown = np.zeros((capacity,) + array.shape[1:], array.dtype)
    grown[:len(array)] = array
    return grown


def _table(step: context.StepContext, k: context.KernelContext) -> EmbeddingTable:
    attrs = k.attrs
    name = attrs["shared_name"] or k.name
    table = step.resources.lookup_or_create(
        attrs["container"], name, EmbeddingTable,
        lambda: EmbeddingTable(name, attrs["embedding_dim"], attrs["value_dtype"], attrs["filter_freq"],
                               attrs["steps_to_live"], attrs["l2_weight_threshold"],
                               attrs["default_value_no_permission"], attrs.get("max_entries", 0)))
    table.check_definition(attrs["embedding_dim"], attrs["value_dtype"])
    return table


@register_kernel("KvVarHandleOp", host_only=True)
def _handle(k: context.KernelContext, step: context.StepContext) -> Any:
    return _table(step, k)


@register_kernel("InitializeKvVariableOp", host_only=True)
def _initialize(k: context.KernelContext, step: context.StepContext, table: EmbeddingTable, defaults: Any) -> None:
    table.initialize(np.asarray(defaults))


@register_kernel("KvResourceGather", host_only=True)
def _gather(k: context.KernelContext, step: context.StepContext, table: EmbeddingTable, keys: Any) -> Any:
    return table.gather(np.asarray(keys, np.int64), count=k.attrs["counts"])


@register_kernel("KvVariableSize", host_only=True)
def _size(k: context.KernelContext, step: context.StepContext, table: EmbeddingTable) -> Any:
    return np.asarray(table.size(), np.int64)


@register_kernel("KvResourceSparseApplyGradientDescent", host_only=True)
def _apply_gradient_descent(k: context.KernelContext, step: context.StepContext, table: EmbeddingTable,
                            learning_rate: Any, grads: Any, keys: Any, global_step: Any) -> None:
    with table.lock:
        rows, summed = table.rows_to_update(np.asarray(keys, np.int64), np.asarray(grads), int(global_step))
        table.values()[rows] -= np.asarray(learning_rate, table.value_dtype) * summed


@register_kernel("KvResourceSparseApplyAdagrad", host_only=True)
def _apply_adagrad(k: context.KernelContext, step: context.StepContext, table: EmbeddingTable,
                   learning_rate: Any, grads: Any, keys: Any, global_step: Any) -> None:
    with table.lock:
        rows, summed = table.rows_to_update(np.asarray(keys, np.int64), np.asarray(grads), int(global_step))
        accumulator = table.ensure_slot(k.attrs["slot_name"], k.attrs["initial_accumulator_value"])
        accumulator[rows] += summed * summed
        table.values()[rows] -= np.asarray(learning_rate, table.value_dtype) * summed / np.sqrt(accumulator[rows])


@register_kernel("KvResourceSparseApplyAdam", host_only=True)
def _apply_adam(k: context.KernelContext, step: context.StepContext, table: EmbeddingTable, learning_rate: Any,
                grads: Any, keys: Any, global_step: Any, beta1_power: Any, beta2_power: Any, beta1: Any, beta2: Any,
                epsilon: Any) -> None:
    """Lazy Adam (DeepRec's AdamAsync): only the rows of the batch move, with TF1's bias-corrected step size."""
    dtype = table.value_dtype
    b1, b2, eps = (np.asarray(v, dtype) for v in (beta1, beta2, epsilon))
    alpha = np.asarray(learning_rate, dtype) * np.sqrt(1 - np.asarray(beta2_power, dtype)) \
        / (1 - np.asarray(beta1_power, dtype))
    with table.lock:
        rows, g = table.rows_to_update(np.asarray(keys, np.int64), np.asarray(grads), int(global_step))
        m = table.ensure_slot(k.attrs["m_slot_name"], 0.0)
        v = table.ensure_slot(k.attrs["v_slot_name"], 0.0)
        m_rows = m[rows] + (g - m[rows]) * (1 - b1)
        v_rows = v[rows] + (g * g - v[rows]) * (1 - b2)
        m[rows], v[rows] = m_rows, v_rows
        table.values()[rows] -= alpha * m_rows / (np.sqrt(v_rows) + eps)


@register_kernel("KvResourceSparseApplyFtrl", host_only=True)
def _apply_ftrl(k: context.KernelContext, step: context.StepContext, table: EmbeddingTable, learning_rate: Any,
                grads: Any, keys: Any, global_step: Any, l1: Any, l2: Any, l2_shrinkage: Any, lr_power: Any) -> None:
    """FTRL-proximal on the rows of the batch (TF's ``SparseApplyFtrlV2`` arithmetic), its ``accum`` and
    ``linear`` kept per key."""
    dtype = table.value_dtype
    lr, l1, l2, shrinkage = (np.asarray(v, dtype) for v in (learning_rate, l1, l2, l2_shrinkage))
    power = -float(lr_power)
    root = np.sqrt if power == 0.5 else (lambda x: np.power(x, np.asarray(power, dtype)))
    with table.lock:
        rows, g = table.rows_to_update(np.asarray(keys, np.int64), np.asarray(grads), int(global_step))
        accum = table.ensure_slot(k.attrs["accum_slot_name"], k.attrs["initial_accumulator_value"])
        linear = table.ensure_slot(k.attrs["linear_slot_name"], 0.0)
        w, a = table.values()[rows], accum[rows]
        new_accum = a + g * g
        g_linear = g + 2 * shrinkage * w if float(shrinkage) > 0 else g
        lin = linear[rows] + (g_linear - (root(new_accum) - root(a)) / lr * w)
        quadratic = root(new_accum) / lr + 2 * l2
        table.values()[rows] = (np.clip(lin, -l1, l1) - lin) / quadratic
        accum[rows], linear[rows] = new_accum, lin


@register_kernel("KvPartitionOfKeys", host_only=True)
def _partition_of_keys(k: context.KernelContext, step: context.StepContext, keys: Any) -> Any:
    return partition_of_keys(np.asarray(keys, np.int64), k.attrs["num_partitions"])


@register_kernel("KvResourceExport", host_only=True)
def _export(k: context.KernelContext, step: context.StepContext, table: EmbeddingTable, global_step: Any) -> Any:
    table._check_initialized()
    table.evict(int(global_step))
    return tuple(table.export(list(k.attrs["slot_names"])))


@register_kernel("KvResourceImport", host_only=True)
def _import(k: context.KernelContext, step: context.StepContext, table: EmbeddingTable, defaults: Any,
            *arrays: Any) -> None:
    table.restore(np.asarray(defaults), [np.asarray(a) for a in arrays], list(k.attrs["slot_names"]), list(k.attrs["slot_initial_values"]))
