"""The hash index of an embedding variable's keys: a batch-at-a-time open-addressing table from int64
keys to int64 values in one numpy array.

Apart from ``embedding_variable_kernels.py`` because it is a data structure with no knowledge of
embedding tables (rows, slots, admission and eviction live there): ``EmbeddingTable`` keeps two of
them, one from stored keys to their rows and one from keys not yet admitted to their lookup counts,
and its probing and growth are tested on their own against a Python dict.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

_EMPTY, _DELETED = -1, -2
"""The value of a slot that holds no key: never used, or its key removed (values stored are >= 0)."""
_PROBE_WINDOW = 8
"""How many slots a key not found in its home slot reads at once."""
_SHARED_PROBE_MIN = 1024
"""From how many keys ``KeyIndex.find`` probes each distinct key of a batch once (below, every key)."""
_SHARED_PROBE_MAX_SHARE = 0.75
"""Past this share of distinct keys in a batch, ``KeyIndex.find`` probes the next big batches key by key..."""
_SHARED_PROBE_RECHECK = 4
"""...until this many have gone by; then it shares probes again, and measures the share again. Few, as a
batch of repeating keys probed key by key costs about 1.8x a shared one, and a batch of distinct keys shared
about 1.15x: a table filled by distinct keys (a restore, a first pass) serves repeating ones soon after."""
_SHARED_PROBE_MAX_BITS = 20
"""The largest scratch array of ``KeyIndex.find``: 2**20 positions (8 MiB), for batches of 256K ids or more."""


def _mixed(keys: np.ndarray) -> np.ndarray:
    """Fibonacci hashing's product ``key * 0x9E3779B97F4A7C15`` (uint64, wrapping) of each key."""
    with np.errstate(over="ignore"):
        mixed: np.ndarray = np.ascontiguousarray(keys, np.int64).view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return mixed


def _top_bits(mixed: np.ndarray, bits: int) -> np.ndarray:
    """The top ``bits`` bits of each of the products ``mixed`` (shifted in place), as int64s."""
    mixed >>= np.uint64(64 - bits)
    top: np.ndarray = mixed.view(np.int64)  # below 2**bits: the same value as an int64, without a copy
    return top


class KeyIndex:
    """A hash table from int64 keys to int64 values >= 0 (a row, or a count), in one numpy array:
    open addressing with linear probing, every operation on a whole batch of keys at once, so a
    batch of ids costs a few numpy calls and about one random memory access per id (a sorted array
    and ``np.searchsorted`` cost about twenty, measured slower on a million keys).

    Each slot is a (key, value) pair of int64s side by side, the value ``_EMPTY`` or ``_DELETED``
    when the slot holds no key, so a probe reads one 16-byte pair (separate arrays of keys, values
    and states cost three random accesses). A key's first slot is Fibonacci hashing's top bits of
    ``key * 0x9E3779B97F4A7C15``, so it does not follow ``partition_of_keys``'s low bits. The table
    doubles past half full (deleted slots count)."""

    def __init__(self, keys: Optional[np.ndarray] = None, values: Optional[np.ndarray] = None) -> None:
        self._allocate(16)
        self._distinct_share = 0.0
        """The share of keys probed in the last batch ``find`` shared probes in (1.0: all distinct)."""
        self._plain_batches = 0
        """Big batches ``find`` has probed key by key since then."""
        self._last_writer = np.empty(0, np.int64)
        """``find``'s scratch array, kept between batches (made anew, its pages cost more than filling it): calls
        on one index must not overlap, which its owner's lock ensures (``EmbeddingTable.lock``)."""
        self._positions = np.arange(0, dtype=np.int64)
        """0, 1, 2, ...: the positions of a batch (a prefix of it), kept between batches."""
        if keys is not None and len(keys):
            self.insert(np.asarray(keys, np.int64), np.asarray(values, np.int64))

    def _allocate(self, capacity: int) -> None:
        self._bits = capacity.bit_length() - 1
        self._slots = np.zeros((capacity, 2), np.int64)
        self._slots[:, 1] = _EMPTY
        self._count = 0
        self._deleted = 0

    def __len__(self) -> int:
        return self._count

    def _home(self, keys: np.ndarray) -> np.ndarray:
        return _top_bits(_mixed(keys), self._bits)

    def _probe(self, keys: np.ndarray, home: Optional[np.ndarray] = None, with_slots: bool = True
               ) -> tuple[Optional[np.ndarray], np.ndarray]:
        """(the slot holding each of ``keys`` or None without ``with_slots``, its value); -1 and -1 for a key
        not in the table.

        A key's search ends at its slot or at an empty one. The first round reads each key's home
        slot (``home``, if the caller has them; most keys are there); the keys left read the next
        ``_PROBE_WINDOW`` slots at once (one or two cache lines), so a batch takes a few rounds of
        numpy calls, not one per probe."""
        slots = self._home(keys) if home is None else home
        # numpy's fancy indexing of 2-D rows is several times slower than take.
        pairs = np.take(self._slots, slots, axis=0)
        values = pairs[:, 1]
        hit = pairs[:, 0] == keys
        hit &= values >= 0
        found_slots = np.where(hit, slots, -1) if with_slots else None
        found_values = np.where(hit, values, -1)
        missed = np.invert(hit, out=hit)
        missed &= values != _EMPTY
        probing = np.flatnonzero(missed)
        keys, slots = keys[probing], slots[probing] + 1
        mask = len(self._slots) - 1
        offsets = np.arange(_PROBE_WINDOW)
        while len(probing):
            at = (slots[:, None] + offsets) & mask
            window = np.take(self._slots, at.reshape(-1), axis=0).reshape(len(probing), _PROBE_WINDOW, 2)
            values = window[:, :, 1]
            hit = (values >= 0) & (window[:, :, 0] == keys[:, None])
            ended = hit | (values == _EMPTY)
            first = ended.argmax(axis=1)
            each = np.arange(len(probing))
            found = hit[each, first]
            if found_slots is not None:
                found_slots[probing[found]] = at[each[found], first[found]]
            found_values[probing[found]] = values[each[found], first[found]]
            going_on = ~ended[each, first]
            probing, keys, slots = probing[going_on], keys[going_on], slots[going_on] + _PROBE_WINDOW
        return found_slots, found_values

    def _slots_of(self, keys: np.ndarray) -> np.ndarray:
        """The slot holding each of ``keys``, -1 for a key not in the table."""
        slots = self._probe(keys)[0]
        assert slots is not None
        return slots

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The value of each of ``keys``; -1 for a key not in the table (``find_grouped``'s first array)."""
        return self.find_grouped(keys)[0]

    def find_grouped(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the value of each of ``keys``, -1 for a key not in the table; the positions of the keys probed;
        how many of ``keys`` each of those answers): the probed positions' repeats add up to ``len(keys)``,
        and a key can be probed at more than one position, so counting by key is adding each probed
        position's repeats (``np.add.at``), a fraction of the batch's length when its ids repeat.

        A batch of ``_SHARED_PROBE_MIN`` keys or more probes each distinct key about once: the ids of
        a training batch repeat (a Zipf batch of 16,384 holds about 4,300 distinct ids), and probing
        the table is the costly part, a random memory access per key. A small scratch array, addressed
        by other bits of the key's hash, takes each id's position (the last writer wins); an id whose
        scratch entry holds a position of the same key copies that position's answer, and every other
        id (the writer itself, or a key that shares the entry with another) is probed. Unlike
        ``np.unique``, this costs no sort."""
        keys = np.ascontiguousarray(keys, np.int64).reshape(-1)
        if len(self._positions) < len(keys):
            self._positions = np.arange(len(keys), dtype=np.int64)
        positions = self._positions[:len(keys)]
        plain = len(keys) < _SHARED_PROBE_MIN
        if not plain and self._distinct_share > _SHARED_PROBE_MAX_SHARE and self._plain_batches < _SHARED_PROBE_RECHECK:
            # Batches of mostly distinct keys gain nothing from sharing probes and pay for its scratch
            # array (about 15% more per batch): they are probed key by key until the next recheck.
            self._plain_batches += 1
            plain = True
        if plain:
            return self._probe(keys, with_slots=False)[1], positions.copy(), np.ones(len(keys), np.int64)
        mixed = _mixed(keys)
        scratch_bits = min(_SHARED_PROBE_MAX_BITS, (4 * len(keys) - 1).bit_length())
        entry = np.right_shift(mixed, np.uint64(64 - scratch_bits)).view(np.int64)
        if len(self._last_writer) != 1 << scratch_bits:
            self._last_writer = np.empty(1 << scratch_bits, np.int64)
        last_writer = self._last_writer
        last_writer[entry] = positions
        writer = np.take(last_writer, entry)
        shared = np.take(keys, writer) == keys
        shared &= writer != positions
        probed = np.flatnonzero(~shared)
        self._distinct_share, self._plain_batches = len(probed) / len(keys), 0
        found = np.empty(len(keys), np.int64)
        found[probed] = self._probe(keys[probed], _top_bits(mixed[probed], self._bits), with_slots=False)[1]
        answered_by = writer
        answered_by[probed] = probed
        values: np.ndarray = np.take(found, answered_by)
        return values, probed, np.bincount(answered_by, minlength=len(keys))[probed]

    def insert(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Adds ``keys`` (unique, none in the table yet) with their ``values`` (>= 0)."""
        if len(values) and int(values.min()) < 0:
            raise ValueError(f"KeyIndex values must be >= 0 (a negative value marks a free slot), got {values.min()}")
        if 2 * (self._count + self._deleted + len(keys)) > len(self._slots):
            old_keys, old_values = self.items()
            capacity = len(self._slots)
            while 2 * (self._count + len(keys)) > capacity:
                capacity *= 2
            self._allocate(capacity)
            keys, values = np.concatenate([old_keys, keys]), np.concatenate([old_values, values])
        mask = len(self._slots) - 1
        slots = self._home(keys)
        waiting = np.arange(len(keys))
        claims = np.empty(len(self._slots), np.int64)
        while len(waiting):
            at = slots[waiting]
            held = self._slots[at, 1]
            free = held < 0
            # Of the keys reaching one free slot, one takes it (the last claim written); the others probe on.
            claims[at[free]] = waiting[free]
            winners = free & (claims[at] == waiting)
            taken = at[winners]
            self._deleted -= int(np.count_nonzero(held[winners] == _DELETED))
            self._slots[taken, 0] = keys[waiting[winners]]
            self._slots[taken, 1] = values[waiting[winners]]
            waiting = waiting[~winners]
            slots[waiting] = (at[~winners] + 1) & mask
        self._count += len(keys)

    def assign(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Sets the values (>= 0) of ``keys`` (all in the table)."""
        self._slots[self._slots_of(keys), 1] = values

    def remove(self, keys: np.ndarray) -> None:
        """Drops ``keys`` (all in the table)."""
        slots = self._slots_of(keys)
        self._slots[slots, 1] = _DELETED
        self._count -= len(slots)
        self._deleted += len(slots)

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys ascending, their values)."""
        full = self._slots[self._slots[:, 1] >= 0]
        order = np.argsort(full[:, 0])
        return full[order, 0], full[order, 1]

    def values(self) -> np.ndarray:
        """Every value, in no particular order."""
        column: np.ndarray = self._slots[:, 1]
        values: np.ndarray = column[column >= 0]
        return values

    def nbytes(self) -> int:
        return int(self._slots.nbytes)
