"""Which keys of an embedding variable changed since a given moment: what an incremental checkpoint
and a live PS replica carry for it.

A table's rows move with its keys (a key evicted frees its row, a new key reuses it), so a variable's
"rows written" (``execution/written_rows.py``) is not enough: a reader needs the keys stored or
updated since its baseline, with all their columns (value, frequency, version, slots), and the keys
removed since (evicted, by any rule). ``KeyWrites`` counts every change of a table as a version;
each row keeps the version of its last change (an update, a lookup counting its frequency, its
storing) and each removal is logged with its version, so "what changed since version v" has an
exact answer for any number of readers, each with its own baseline. As for variables, rows are
tracked (8 bytes a row) only from the first question on: before that, for a baseline of another
table object, or after a change of the whole table (initialize, restore), the answer is "all of
it". An optimizer slot made by the first update is not such a change: every key not updated holds
the slot's initial value, which an export gives for a slot not made yet, so only the keys updated
are new to a reader. The counts of keys not yet admitted (and a Bloom filter's counters) are not
tracked per key: they travel whole, in the answers whose baseline is older than their last change.

``merge_keyed`` applies such a change to a table's arrays keyed by key (a checkpoint's chain, a
replica holder): what remains, then the changed keys, keys ascending as ``KvResourceExport`` gives them.
"""

from __future__ import annotations

import collections
import dataclasses
import secrets
from typing import Any, Optional, Protocol, Sequence

import numpy as np

from tensorgrid.kernels import context
from tensorgrid.kernels.registry import register_kernel

EVERYTHING = (0, 0)
"""The baseline that asks for the whole table (it matches no table)."""

_MIN_REMOVALS_KEPT = 1 << 16
"""The removal log keeps at least this many keys (and twice the table's size) before it forgets its oldest."""


@dataclasses.dataclass
class KeyChanges:
    """What changed in a table after a baseline."""

    rows: np.ndarray
    """Rows changed (int64): the table keeps those that still hold a key."""
    removed: np.ndarray
    """Keys removed (int64, unique); a key removed then stored again is also among the changed rows' keys."""
    pending_changed: bool
    """Whether the counts of keys not yet admitted (or the Bloom filter) changed."""


class KeyWrites:
    """The change versions of one table; every method is called under the table's lock."""

    def __init__(self) -> None:
        self.incarnation = secrets.randbits(62) + 1
        """Random per table object, never 0: a baseline taken from another object is refused."""
        self._version = 0
        self._whole_version = 0
        self._pending_version = 0
        self._row_versions: Optional[np.ndarray] = None
        self._tracked_from = 0
        self._removals: collections.deque[tuple[int, np.ndarray]] = collections.deque()
        self._removed_count = 0

    def wrote_whole(self) -> None:
        """Every key (and the counts of keys not admitted) may have changed, or the table was replaced."""
        self._version += 1
        self._whole_version = self._pending_version = self._version

    def wrote_rows(self, rows: np.ndarray) -> None:
        """The rows ``rows`` (values, frequency, version or slots; or a key newly stored there) changed."""
        if self._row_versions is None:
            return
        self._version += 1
        if rows.size:
            needed = int(rows.max()) + 1
            if needed > len(self._row_versions):
                grown = np.zeros(max(needed, 2 * len(self._row_versions)), np.int64)
                grown[:len(self._row_versions)] = self._row_versions
                self._row_versions = grown
            self._row_versions[rows] = self._version

    def wrote_pending(self) -> None:
        """The counts of keys not yet admitted (or the Bloom filter's counters) changed."""
        self._version += 1
        self._pending_version = self._version

    def removed(self, keys: np.ndarray, table_size: int) -> None:
        """``keys`` were removed from the table (which now holds ``table_size`` keys)."""
        if self._row_versions is None or not keys.size:
            return
        self._version += 1
        self._removals.append((self._version, np.array(keys, np.int64)))
        self._removed_count += keys.size
        kept = max(_MIN_REMOVALS_KEPT, 2 * table_size)
        while self._removed_count > kept and len(self._removals) > 1:
            version, dropped = self._removals.popleft()
            self._removed_count -= dropped.size
            self._tracked_from = max(self._tracked_from, version)  # older baselines can no longer list removals

    def nbytes(self) -> int:
        """The row versions and the removal log (0 until a reader first asked)."""
        rows = 0 if self._row_versions is None else self._row_versions.nbytes
        return rows + sum(keys.nbytes for _, keys in self._removals)

    def changed_since(self, incarnation: int, version: int
                      ) -> tuple[tuple[int, int], Optional[KeyChanges]]:
        """``((incarnation, version now), changes after ``version``)``; None when the whole table must be taken."""
        token = (self.incarnation, self._version)
        if self._row_versions is None:
            self._row_versions = np.zeros(16, np.int64)
            self._tracked_from = self._version
            return token, None
        if (incarnation != self.incarnation or version < self._tracked_from or version > self._version
                or self._whole_version > version):
            return token, None
        removed = [keys for at, keys in self._removals if at > version]
        return token, KeyChanges(np.flatnonzero(self._row_versions > version),
                                 np.unique(np.concatenate(removed)) if removed else np.zeros(0, np.int64),
                                 self._pending_version > version)


def merge_keyed(keys: np.ndarray, columns: list[np.ndarray], removed: np.ndarray, changed_keys: np.ndarray,
                changed_columns: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """``keys`` (with their ``columns``, one entry per key) less ``removed`` and with ``changed_keys``
    (and ``changed_columns``) stored or replaced; keys ascending."""
    kept = ~np.isin(keys, np.concatenate([removed, changed_keys]))
    merged_keys = np.concatenate([keys[kept], changed_keys])
    order = np.argsort(merged_keys, kind="stable")
    merged = [np.concatenate([column[kept], changed])[order] for column, changed in zip(columns, changed_columns)]
    return merged_keys[order], merged


class ChangeTrackedTable(Protocol):
    """What ``KvResourceChangedKeys`` asks of a table (``embedding_variable_kernels.EmbeddingTable``, which
    imports this module)."""

    def evict(self, global_step: int) -> None: ...

    def changes_since(self, since: tuple[int, ...], slot_names: list[str], slot_initial: Sequence[float] = ()
                      ) -> tuple[tuple[int, int], bool, np.ndarray, bool, list[np.ndarray]]: ...


@register_kernel("KvResourceChangedKeys", host_only=True)
def _changed_keys(k: context.KernelContext, step: context.StepContext,
                  table: ChangeTrackedTable, global_step: Any, since: Any) -> Any:
    """``baseline, whole, removed keys, whether the pending counts are included``, then ``KvResourceExport``'s
    arrays: the whole table when ``whole``, else the changed keys' (and the pending counts only when
    they changed, else empty). Evicts first, as an export does, so the eviction is in the answer."""
    table.evict(int(global_step))
    baseline, whole, removed, pending, arrays = table.changes_since(
        tuple(int(v) for v in np.asarray(since).reshape(2)), list(k.attrs["slot_names"]),
        list(k.attrs.get("slot_initial_values", ())))
    return (np.asarray(baseline, np.int64), np.asarray(whole), removed, np.asarray(pending), *arrays)
