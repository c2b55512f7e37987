"""Embedding variables (DeepRec's ``EmbeddingVariable``): hash tables of rows that grow with the ids.

A table is a resource like a lookup table or a queue: ``KvVarHandleOp`` finds or makes it by
name in its container on the task it is placed on, and every op on it (initialize, gather,
sparse apply, export, import) is colocated with it, so a table placed on a PS lives and is
updated there and only ids, rows and gradients travel.

A table maps any 64-bit id to a row of ``embedding_dim`` values, and keeps per key: the
optimizer's slots (Adagrad's accumulator), how often the key was looked up (its frequency)
and the global step of its last update (its version). With a counter filter, a key is stored
only once it has been looked up ``filter_freq`` times; until then a lookup gives
``default_value_no_permission`` and updates skip it (its count is kept: exactly per key, or in a
counting Bloom filter of fixed size, ``counting_bloom_filter.py``). A key stored for the
first time starts at the initializer's row ``key % default_value_dim`` (DeepRec's scheme, so a
row's start does not depend on the order keys arrive). Eviction (by global step or by L2
weight) runs when the table is exported, that is at every checkpoint save, as DeepRec does;
a table with ``max_entries`` also evicts its least recently updated keys whenever a lookup
takes it past that many, and one with ``evict_every_n_steps`` also evicts on the first update at
least that many global steps after its previous eviction (on the PS, between checkpoints).

The part of a partitioned table an id belongs to is ``partition_of_keys`` (a 64-bit mix of
the id, then modulo the part count), here so that the lookup's routing op and the Saver's
restore into another part count use the one function.
"""

from __future__ import annotations

import threading
from typing import Any, Optional, Sequence

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.kernels import context
from tensorgrid.kernels import counting_bloom_filter
from tensorgrid.kernels import embedding_key_index
from tensorgrid.kernels import embedding_variable_writes
from tensorgrid.kernels import hash_functions
from tensorgrid.kernels import numpy_backend
from tensorgrid.kernels.registry import register_kernel

NO_VERSION = -1
"""The version of a key never updated (or updated without a global step)."""
_MIN_UNCOUNTED = 1 << 16
"""Lookups whose frequencies wait to be added: at least this many (and as many as the table's rows) at most."""


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
    """The rows, slots, frequencies and versions of one embedding variable, by key.

    Rows live in arrays (grown by doubling, freed rows reused); an ``embedding_key_index.KeyIndex``
    maps keys to rows and another holds the lookup counts of keys not yet admitted, so a batch is
    handled by a few numpy calls, not a Python step per id."""

    def __init__(self, name: str, dim: int, value_dtype: Any, filter_freq: int, steps_to_live: int,
                 l2_weight_threshold: float, default_value_no_permission: float, max_entries: int = 0,
                 evict_every_n_steps: int = 0, bloom_filter_shape: tuple[int, int, str] = (0, 0, "")) -> None:
        self.name = name
        self.bloom_filter_shape = bloom_filter_shape
        """(counters, hash functions, counter type) of the counting Bloom filter that counts the lookups of
        keys not yet admitted; (0, 0, "") when the counts are kept per key instead."""
        self.max_entries = max_entries
        self.evict_every_n_steps = evict_every_n_steps
        self.dim = dim
        self.value_dtype = np.dtype(value_dtype)
        self.filter_freq = filter_freq
        self.steps_to_live = steps_to_live
        self.l2_weight_threshold = l2_weight_threshold
        self.default_value_no_permission = default_value_no_permission
        self.lock = threading.Lock()
        self._defaults: Optional[np.ndarray] = None
        self._writes = embedding_variable_writes.KeyWrites()
        """What changed since a reader's baseline (incremental checkpoints, live replicas)."""
        self._clear()

    def _clear(self) -> None:
        self._index = embedding_key_index.KeyIndex()
        self._pending = embedding_key_index.KeyIndex()
        """Keys seen but not yet admitted, with their lookup counts (a table without a Bloom filter)."""
        counters, hashes, counter_type = self.bloom_filter_shape
        self._bloom = counting_bloom_filter.CountingBloomFilter(counters, hashes, counter_type) if counters else None
        self._values = np.zeros((0, self.dim), self.value_dtype)
        self._freqs = np.zeros(0, np.int64)
        self._uncounted: list[np.ndarray] = []
        """The rows of counted lookups whose frequency ``_freqs`` does not hold yet (``_count_lookups``)..."""
        self._uncounted_lookups: list[np.ndarray] = []
        """...and how many lookups of each."""
        self._uncounted_ids = 0
        self._versions = np.zeros(0, np.int64)
        self._keys = np.zeros(0, np.int64)
        self._touched = np.zeros(0, np.int64)
        """The tick of each row's last update (or its storing): what ``max_entries`` evicts by."""
        self._tick = 0
        self._rows_used = 0
        self._slots: dict[str, np.ndarray] = {}
        self._slot_initial: dict[str, float] = {}
        self._free_rows = np.zeros(0, np.int64)
        self._evicted_at_step = 0
        """The global step of the last periodic eviction (``evict_every_n_steps``); 0 before the first."""
        self._updates_since_eviction = 0

    @property
    def initialized(self) -> bool:
        return self._defaults is not None

    def size(self) -> int:
        return len(self._index)

    def memory_bytes(self) -> dict[str, int]:
        """Bytes held, by part: ``keys`` (the key indexes, of stored and of not yet admitted keys, and
        each row's key), ``values`` (rows, frequencies, versions, recency: the arrays, with their spare
        capacity) and ``slots`` (the optimizer's rows)."""
        with self.lock:
            return {"keys": self._index.nbytes() + self._pending.nbytes() + self._keys.nbytes,
                    "filter": self._bloom.nbytes() if self._bloom is not None else 0,
                    "values": self._values.nbytes + self._freqs.nbytes + self._versions.nbytes + self._touched.nbytes
                    + self._writes.nbytes() + 2 * sum(rows.nbytes for rows in self._uncounted),
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
            self._writes.wrote_whole()

    def _check_initialized(self) -> np.ndarray:
        defaults = self._defaults
        if defaults is None:
            raise errors.FailedPreconditionError(
                None, None, f"Attempting to use uninitialized embedding variable {self.name}: run its initializer "
                "(tf.global_variables_initializer()) or restore it from a checkpoint first")
        return defaults

    def _new_rows(self, keys: np.ndarray, defaults: np.ndarray) -> np.ndarray:
        """Stores ``keys`` (unique, new) at the initializer's rows; their rows, freed ones first."""
        reused = self._free_rows[len(self._free_rows) - min(len(keys), len(self._free_rows)):]
        self._free_rows = self._free_rows[:len(self._free_rows) - len(reused)]
        fresh = np.arange(self._rows_used, self._rows_used + len(keys) - len(reused), dtype=np.int64)
        self._rows_used += len(fresh)
        if self._rows_used > len(self._values):
            capacity = max(16, 2 * self._rows_used)
            self._values = _grown(self._values, capacity)
            for slot in self._slots:
                self._slots[slot] = _grown(self._slots[slot], capacity)
            self._freqs, self._versions = _grown(self._freqs, capacity), _grown(self._versions, capacity)
            self._keys, self._touched = _grown(self._keys, capacity), _grown(self._touched, capacity)
        rows = np.concatenate([reused, fresh])
        self._values[rows] = np.take(defaults, keys % len(defaults), axis=0)
        for slot, initial in self._slot_initial.items():
            self._slots[slot][rows] = initial
        self._freqs[rows] = 0
        self._versions[rows] = NO_VERSION
        self._keys[rows] = keys
        self._touched[rows] = self._tick
        self._index.insert(keys, rows)
        self._writes.wrote_rows(rows)
        return rows

    def _admit(self, keys: np.ndarray, count: bool, defaults: np.ndarray) -> np.ndarray:
        """The row each lookup of ``keys`` (none stored) reads, -1 before its key's admission; counts
        the lookups and stores the keys they admit (a key on its ``filter_freq``-th lookup)."""
        unique, inverse, occurrences = np.unique(keys, return_inverse=True, return_counts=True)
        bloom = self._bloom
        prior = bloom.estimate(unique) if bloom is not None else np.maximum(self._pending.find(unique), 0)
        seen = prior + (occurrences if count else 0)
        admitted = seen >= self.filter_freq
        # Which lookup of its key each one is (1, 2, ...): a key is read from its admitting lookup on.
        order = np.argsort(inverse, kind="stable")
        rank = np.empty(len(keys), np.int64)
        rank[order] = np.arange(len(keys)) - np.repeat(np.cumsum(occurrences) - occurrences, occurrences) + 1
        reads = prior[inverse] + (rank if count else 0) >= self.filter_freq
        row_of_unique = np.full(len(unique), -1, np.int64)
        if admitted.any():
            row_of_unique[admitted] = self._new_rows(unique[admitted], defaults)
            self._freqs[row_of_unique[admitted]] = seen[admitted]
        if bloom is not None:
            if count:
                bloom.add(unique, occurrences)
            return np.where(reads, row_of_unique[inverse], -1)
        was_pending = self._pending.find(unique) >= 0
        if (admitted & was_pending).any():
            self._pending.remove(unique[admitted & was_pending])
        if count:
            waiting = ~admitted
            self._pending.assign(unique[waiting & was_pending], seen[waiting & was_pending])
            self._pending.insert(unique[waiting & ~was_pending], seen[waiting & ~was_pending])
        return np.where(reads, row_of_unique[inverse], -1)

    def gather(self, keys: np.ndarray, count: bool) -> np.ndarray:
        """The rows of ``keys``; counts each lookup and stores the keys it admits."""
        defaults = self._check_initialized()
        flat = keys.reshape(-1)
        with self.lock:
            # A big batch's distinct keys are probed about once each (no sort); ``probed`` and ``repeats`` say
            # which positions were and how many ids each answers, which is what the frequencies need.
            rows, probed, repeats = self._index.find_grouped(flat)
            stored = rows >= 0
            all_stored = bool(stored.all())
            if count:
                probed_rows = np.take(rows, probed)
                if all_stored:
                    self._count_lookups(probed_rows, repeats)
                else:
                    probed_stored = probed_rows >= 0
                    self._count_lookups(probed_rows[probed_stored], repeats[probed_stored])
            if not all_stored:
                rows[~stored] = self._admit(flat[~stored], count, defaults)
                if count:
                    self._writes.wrote_pending()
            reads = stored if all_stored else rows >= 0
            if all_stored or reads.all():
                out = np.take(self._values, rows, axis=0)
            else:
                out = np.full((len(flat), self.dim), self.default_value_no_permission, self.value_dtype)
                out[reads] = np.take(self._values, rows[reads], axis=0)
            if self.max_entries and len(self._index) > self.max_entries:
                self._evict_least_recently_updated(len(self._index) - self.max_entries)
            self._tick += 1
        return out.reshape(keys.shape + (self.dim,))

    def _count_lookups(self, rows: np.ndarray, lookups: np.ndarray) -> None:
        """Adds ``lookups`` to the frequency of each of ``rows`` (a row can repeat), later: ``_freqs`` is read
        only by exports, so the rows wait in a list until one (or a row's removal, or enough of them) adds them
        all at once. Adding them while the lookup also reads the index and the rows costs a cache miss per
        distinct id (about a tenth of a Zipf batch's lookup); together, about 10 ns a row."""
        self._uncounted.append(rows)
        self._uncounted_lookups.append(lookups)
        self._uncounted_ids += len(rows)
        self._writes.wrote_rows(rows)
        if self._uncounted_ids >= max(_MIN_UNCOUNTED, self._rows_used):
            self._add_uncounted()

    def _add_uncounted(self) -> None:
        """Adds the waiting lookups to ``_freqs`` (before it is read, or a row is freed)."""
        if self._uncounted:
            np.add.at(self._freqs, np.concatenate(self._uncounted), np.concatenate(self._uncounted_lookups))
            self._uncounted, self._uncounted_lookups, self._uncounted_ids = [], [], 0

    def _remove_rows(self, rows: np.ndarray) -> None:
        self._add_uncounted()  # before a freed row takes another key
        self._index.remove(self._keys[rows])
        self._free_rows = np.concatenate([self._free_rows, rows])
        self._writes.removed(self._keys[rows], len(self._index))

    def _evict_least_recently_updated(self, count: int) -> None:
        """Drops the ``count`` keys updated (or, if never updated, stored) longest ago."""
        rows = self._index.values()
        self._remove_rows(rows[np.argpartition(self._touched[rows], count - 1)[:count]])

    def ensure_slot(self, slot: str, initial: float) -> np.ndarray:
        """The rows of the optimizer slot ``slot``, made on its first use with every key at ``initial``.

        Making it is not a change of every key: an export names the slots the graph's optimizers keep,
        and gives a slot not made yet at its initial value, so every key not updated since holds
        the value the previous save or replica push gave it (only the keys updated are written)."""
        if slot not in self._slot_initial:
            self._slot_initial[slot] = initial
            self._slots[slot] = np.full(self._values.shape, initial, self.value_dtype)
        return self._slots[slot]

    def rows_to_update(self, keys: np.ndarray, grads: np.ndarray, version: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows of the stored keys among ``keys``, their summed gradients); stamps their version.

        Keys not admitted (or evicted since the lookup) are skipped, as DeepRec does."""
        self._check_initialized()
        grads = np.asarray(grads, self.value_dtype).reshape(len(keys), self.dim)
        rows = self._index.find(keys.reshape(-1))
        kept = rows >= 0
        if not kept.all():
            rows, grads = rows[kept], grads[kept]
        unique_rows, summed = numpy_backend.sorted_segment_sums(rows, grads)
        if version != NO_VERSION:
            self._versions[unique_rows] = version
        self._touched[unique_rows] = self._tick
        self._tick += 1
        self._writes.wrote_rows(unique_rows)
        return unique_rows, summed

    def values(self) -> np.ndarray:
        return self._values

    def evict(self, global_step: int) -> None:
        """Drops the keys the eviction option names (not updated in ``steps_to_live`` steps, or small rows)."""
        with self.lock:
            self._evict_locked(global_step)

    def _evict_locked(self, global_step: int) -> None:
        rows = self._index.values()
        doomed = np.zeros(len(rows), bool)
        if self.steps_to_live > 0 and global_step >= 0:
            doomed |= global_step - np.maximum(self._versions[rows], 0) > self.steps_to_live
        if self.l2_weight_threshold >= 0:
            norms = np.sqrt(np.sum(np.square(self._values[rows], dtype=np.float64), axis=1))
            doomed |= norms < self.l2_weight_threshold
        if doomed.any():
            self._remove_rows(rows[doomed])

    def evict_if_due(self, global_step: int) -> None:
        """With ``evict_every_n_steps`` K, evicts after an update once the global step is K or more past
        the previous periodic eviction (the first at step K); an update without a global step (-1)
        counts as one step, so such a table evicts every K updates."""
        if not self.evict_every_n_steps:
            return
        with self.lock:
            if global_step >= 0:
                due = global_step - self._evicted_at_step >= self.evict_every_n_steps
            else:
                self._updates_since_eviction += 1
                due = self._updates_since_eviction >= self.evict_every_n_steps
            if due:
                self._evict_locked(global_step)
                self._evicted_at_step = max(global_step, 0)
                self._updates_since_eviction = 0

    def export(self, slot_names: list[str], slot_initial: Sequence[float] = ()) -> list[np.ndarray]:
        """keys, values, freqs, versions, keys not yet admitted, their counts, the Bloom filter's counters
        (int64; only for a table with one), then one array per slot: a slot no update has made yet
        holds its initial value (``slot_initial``, by position; 0 where not given) for every key."""
        with self.lock:
            keys, rows = self._index.items()
            return self._exported(keys, rows, slot_names, True, slot_initial)

    def _exported(self, keys: np.ndarray, rows: np.ndarray, slot_names: list[str], with_pending: bool,
                  slot_initial: Sequence[float]) -> list[np.ndarray]:
        self._add_uncounted()
        slots = [self._slots[name][rows] if name in self._slots
                 else np.full((len(rows), self.dim), slot_initial[i] if i < len(slot_initial) else 0.0,
                              self.value_dtype) for i, name in enumerate(slot_names)]
        empty = np.zeros(0, np.int64)
        pending, counts = self._pending.items() if with_pending else (empty, empty)
        bloom = [] if self._bloom is None else [self._bloom.exported() if with_pending else empty]
        return [keys, self._values[rows], self._freqs[rows], self._versions[rows], pending, counts, *bloom, *slots]

    def initial_state(self) -> tuple[np.ndarray, dict[str, float]]:
        """(the initializer's rows new keys start from, each optimizer slot's value for new keys)."""
        with self.lock:
            return self._check_initialized(), dict(self._slot_initial)

    def changes_since(self, since: tuple[int, ...], slot_names: list[str], slot_initial: Sequence[float] = ()
                      ) -> tuple[tuple[int, int], bool, np.ndarray, bool, list[np.ndarray]]:
        """(baseline now, whole, keys removed, pending counts included, ``export``'s arrays of the keys changed
        after the baseline ``since``, or of the whole table when ``whole``): embedding_variable_writes."""
        self._check_initialized()
        with self.lock:
            token, changes = self._writes.changed_since(since[0], since[1])
            if changes is None:
                keys, rows = self._index.items()
                return token, True, np.zeros(0, np.int64), True, self._exported(keys, rows, slot_names, True, slot_initial)
            rows = changes.rows[changes.rows < self._rows_used]
            rows = rows[self._index.find(self._keys[rows]) == rows]  # rows freed since hold no key
            rows = rows[np.argsort(self._keys[rows])]
            return token, False, changes.removed, changes.pending_changed, self._exported(
                self._keys[rows], rows, slot_names, changes.pending_changed, slot_initial)

    def restore(self, defaults: np.ndarray, arrays: list[np.ndarray], slot_names: list[str],
                slot_initial: list[float]) -> None:
        """Replaces the table's contents with an export's arrays (in ``export``'s order); new keys
        start from ``defaults`` after it, as after ``initialize``.

        A table with a Bloom filter takes its counters (an empty array: start it empty) and adds the
        counts of keys not yet admitted (a checkpoint of a counter filter) to them."""
        keys, values, freqs, versions, pending, counts, *slots = arrays
        bloom_counters = slots.pop(0) if self.bloom_filter_shape[0] else None
        if bloom_counters is not None and len(bloom_counters) not in (0, self.bloom_filter_shape[0]):
            raise errors.InvalidArgumentError(
                None, None, f"Restoring embedding variable {self.name}: its Bloom filter has "
                f"{self.bloom_filter_shape[0]} counters, the checkpoint's has {len(bloom_counters)}")
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
            self._keys = np.array(keys, np.int64)
            self._touched = np.zeros(n, np.int64)
            self._rows_used = n
            self._index = embedding_key_index.KeyIndex(keys, np.arange(n, dtype=np.int64))
            if self._bloom is not None and bloom_counters is not None:
                if len(bloom_counters):
                    self._bloom.load(np.asarray(bloom_counters, np.int64))
                self._bloom.add(np.asarray(pending, np.int64), np.asarray(counts, np.int64))
            else:
                self._pending = embedding_key_index.KeyIndex(pending, counts)
            for name, initial, slot in zip(slot_names, slot_initial, slots):
                self._slot_initial[name] = initial
                self._slots[name] = np.array(slot, self.value_dtype).reshape(n, self.dim)
            self._writes.wrote_whole()  # a reader that asked since ``initialize`` saw it empty


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
                               attrs["default_value_no_permission"], attrs.get("max_entries", 0),
                               attrs.get("evict_every_n_steps", 0),
                               (attrs.get("cbf_num_counters", 0), attrs.get("cbf_num_hash_functions", 0),
                                attrs.get("cbf_counter_type", ""))))
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
    table.evict_if_due(int(global_step))


@register_kernel("KvResourceSparseApplyAdagrad", host_only=True)
def _apply_adagrad(k: context.KernelContext, step: context.StepContext, table: EmbeddingTable,
                   learning_rate: Any, grads: Any, keys: Any, global_step: Any) -> None:
    with table.lock:
        rows, summed = table.rows_to_update(np.asarray(keys, np.int64), np.asarray(grads), int(global_step))
        accumulator = table.ensure_slot(k.attrs["slot_name"], k.attrs["initial_accumulator_value"])
        accumulator[rows] += summed * summed
        table.values()[rows] -= np.asarray(learning_rate, table.value_dtype) * summed / np.sqrt(accumulator[rows])
    table.evict_if_due(int(global_step))


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
    table.evict_if_due(int(global_step))


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
    table.evict_if_due(int(global_step))


@register_kernel("KvStringToKey", host_only=True)
def _string_to_key(k: context.KernelContext, step: context.StepContext, strings: Any) -> Any:
    """Each string's ``Fingerprint64``, its 64 bits read as an int64 (no modulo)."""
    array = np.asarray(strings, dtype=object)
    return hash_functions.fingerprint64(array.ravel().tolist()).view(np.int64).reshape(array.shape)


@register_kernel("KvPartitionOfKeys", host_only=True)
def _partition_of_keys(k: context.KernelContext, step: context.StepContext, keys: Any) -> Any:
    return partition_of_keys(np.asarray(keys, np.int64), k.attrs["num_partitions"])


@register_kernel("KvResourceExport", host_only=True)
def _export(k: context.KernelContext, step: context.StepContext, table: EmbeddingTable, global_step: Any) -> Any:
    table._check_initialized()
    table.evict(int(global_step))
    return tuple(table.export(list(k.attrs["slot_names"]), list(k.attrs.get("slot_initial_values", ()))))


@register_kernel("KvResourceImport", host_only=True)
def _import(k: context.KernelContext, step: context.StepContext, table: EmbeddingTable, defaults: Any,
            *arrays: Any) -> None:
    table.restore(np.asarray(defaults), [np.asarray(a) for a in arrays], list(k.attrs["slot_names"]), list(k.attrs["slot_initial_values"]))
