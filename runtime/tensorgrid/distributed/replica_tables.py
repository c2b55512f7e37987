"""Embedding variable tables in a PS's live replica (``distributed/replication.py``): pushed by key.

A table's rows move with its keys (an evicted key frees its row for a new one), so it is not
replicated by rows as a variable is: each push carries the keys stored or updated since the last
acknowledged push with all their columns (row, frequency, version, slots) and the keys evicted since,
from the table's change tracking (``kernels/embedding_variable_writes.py``); the counts of keys not
yet admitted travel whole when they changed. The holder keeps the table as arrays by key
(``HeldTable``) and a restarted primary makes the table again from them (``load_table``), as a
checkpoint restore would. Kept apart from the variables' replication, which owns the push and the
holder's store.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import numpy as np

from tensorgrid.execution import resources as resources_lib
from tensorgrid.kernels import embedding_variable_kernels
from tensorgrid.kernels import embedding_variable_writes

PIECE_BYTES = 4 << 20
"""The most value bytes one message of a push or a snapshot carries."""

VariableKey = tuple[str, str]
"""(container, name) of a variable or table in a resource manager."""

Baseline = tuple[int, int]
"""(incarnation, version) of a variable's write tracking (``execution/written_rows.py``), or the
table's change tracking."""


@dataclasses.dataclass
class TableRows:
    """Some keys of one embedding variable table with all their columns, and what else changed in
    it (``ReplicaTableRows`` in the proto names the ``arrays``)."""

    key: VariableKey
    arrays: dict[str, np.ndarray]
    whole: bool = False
    """The held table is replaced, starting with this piece."""
    definition: Optional[dict[str, Any]] = None
    """With ``whole``: the table's options and its slots' initial values (``definition_of``)."""
    pending_included: bool = False



TABLE_HEAD = ("removed_keys", "pending_keys", "pending_counts", "bloom_counters", "defaults")
"""The arrays of a table piece that are not columns of its keys..."""
SLOT_INITIAL = "slot_initial:"
"""...nor are these, the first piece of a change's: ``slot_initial:SLOT``, the initial value of each
optimizer slot (one value), which a holder gives every key of a slot made after it took the table."""


def is_column(name: str) -> bool:
    return name != "keys" and name not in TABLE_HEAD and not name.startswith(SLOT_INITIAL)


def definition_of(table: embedding_variable_kernels.EmbeddingTable, slot_initial: dict[str, float]) -> dict[str, Any]:
    return {"name": table.name, "dim": table.dim, "value_dtype": table.value_dtype.name,
            "filter_freq": table.filter_freq, "steps_to_live": table.steps_to_live,
            "l2_weight_threshold": table.l2_weight_threshold,
            "default_value_no_permission": table.default_value_no_permission, "max_entries": table.max_entries,
            "evict_every_n_steps": table.evict_every_n_steps, "bloom_filter_shape": list(table.bloom_filter_shape),
            "slot_initial": slot_initial}


def split_table(key: VariableKey, keys: np.ndarray, columns: dict[str, np.ndarray], head: dict[str, np.ndarray],
                 whole: bool, definition: Optional[dict[str, Any]], pending_included: bool) -> list[TableRows]:
    """A table's changed ``keys`` (and ``columns``) in pieces of at most ``PIECE_BYTES`` of columns; the
    first piece also carries ``head`` (removed keys, pending counts, defaults) and the flags."""
    row_bytes = 8 + sum(array.nbytes // max(len(array), 1) for array in columns.values())
    step = max(PIECE_BYTES // row_bytes, 1)
    pieces = []
    for start in range(0, max(len(keys), 1), step):
        chunk = {"keys": keys[start:start + step], **{n: a[start:start + step] for n, a in columns.items()}}
        pieces.append(TableRows(key, {**head, **chunk}, whole, definition, pending_included) if start == 0
                      else TableRows(key, chunk))
    return pieces


def table_changes(key: VariableKey, table: embedding_variable_kernels.EmbeddingTable, since: Baseline
                   ) -> tuple[Baseline, list[TableRows]]:
    """The table's new baseline and the pieces of what changed in it after ``since`` (none: nothing did)."""
    defaults, slot_initial = table.initial_state()
    slots = sorted(slot_initial)
    baseline, whole, removed, pending, arrays = table.changes_since(since, slots)
    keys, values, freqs, versions, pending_keys, pending_counts, *rest = arrays
    bloom = {"bloom_counters": rest.pop(0)} if table.bloom_filter_shape[0] else {}
    if not (whole or keys.size or removed.size or pending):
        return baseline, []
    head = {"removed_keys": removed, **({"defaults": defaults} if whole else {}),
            **({} if whole else {SLOT_INITIAL + slot: np.array([slot_initial[slot]], np.float64) for slot in slots}),
            **({"pending_keys": pending_keys, "pending_counts": pending_counts, **bloom} if pending else {})}
    columns = {"values": values, "freqs": freqs, "versions": versions,
               **{f"slot:{slot}": array for slot, array in zip(slots, rest)}}
    return baseline, split_table(key, keys, columns, head, whole, definition_of(table, slot_initial) if whole else None,
                                  pending)


def tables_of(resources: resources_lib.ResourceManager
            ) -> list[tuple[VariableKey, embedding_variable_kernels.EmbeddingTable]]:
    return [((container, name), resource) for container, name, resource in resources.items()
            if isinstance(resource, embedding_variable_kernels.EmbeddingTable) and resource.initialized]

@dataclasses.dataclass
class HeldTable:
    """A replicated embedding variable table: its definition and arrays by key (keys ascending)."""

    definition: dict[str, Any]
    arrays: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def apply(self, piece: TableRows) -> bool:
        """Applies ``piece`` (removed keys first, then the changed keys); False when its columns are not
        this table's (the replica must be sent whole)."""
        given = piece.arrays
        columns = sorted(n for n in given if is_column(n))
        if "keys" not in self.arrays:
            self.arrays.update((n, given[n].copy()) for n in ["keys", *columns])
        elif "keys" in given:
            self._add_slots(given)
            held_columns = sorted(n for n in self.arrays if is_column(n))
            if columns != held_columns:
                return False
            keys, merged = embedding_variable_writes.merge_keyed(
                self.arrays["keys"], [self.arrays[n] for n in columns],
                given.get("removed_keys", np.zeros(0, np.int64)), given["keys"], [given[n] for n in columns])
            self.arrays["keys"] = keys
            self.arrays.update(zip(columns, merged))
        self.arrays.update((n, given[n].copy()) for n in TABLE_HEAD if n in given and n != "removed_keys")
        return True

    def _add_slots(self, given: dict[str, np.ndarray]) -> None:
        """Adds the slots ``given`` names (``slot_initial:SLOT``) that the table held lacks, every key at
        the slot's initial value: the first update made them after the table came whole, and a key it
        did not update holds that value."""
        slot_initial = dict(self.definition.get("slot_initial", {}))
        for name in sorted(n for n in given if n.startswith(SLOT_INITIAL)):
            slot = name[len(SLOT_INITIAL):]
            if f"slot:{slot}" not in self.arrays:
                initial = float(given[name].reshape(-1)[0])
                self.arrays[f"slot:{slot}"] = np.full(
                    (len(self.arrays["keys"]), self.definition["dim"]), initial, self.definition["value_dtype"])
                slot_initial[slot] = initial
        self.definition = {**self.definition, "slot_initial": slot_initial}

    def pieces(self, key: VariableKey) -> list[TableRows]:
        """The whole table, as pieces of a snapshot."""
        head = {n: self.arrays[n] for n in TABLE_HEAD if n in self.arrays}
        columns = {n: a for n, a in self.arrays.items() if is_column(n)}
        return split_table(key, self.arrays.get("keys", np.zeros(0, np.int64)), columns, head, True,
                            self.definition, True)



def load_table(resources: resources_lib.ResourceManager, key: VariableKey, held: HeldTable) -> None:
    """Makes the table ``key`` (or finds the one the graph made) and fills it with ``held``, as a restore does."""
    d = held.definition
    counters, hashes, counter_type = d["bloom_filter_shape"]
    table: embedding_variable_kernels.EmbeddingTable = resources.lookup_or_create(
        key[0], key[1], embedding_variable_kernels.EmbeddingTable,
        lambda: embedding_variable_kernels.EmbeddingTable(
            d["name"], d["dim"], d["value_dtype"], d["filter_freq"], d["steps_to_live"], d["l2_weight_threshold"],
            d["default_value_no_permission"], d["max_entries"], d["evict_every_n_steps"],
            (counters, hashes, counter_type)))
    a, slots = held.arrays, sorted(d["slot_initial"])
    bloom = [a.get("bloom_counters", np.zeros(0, np.int64))] if table.bloom_filter_shape[0] else []
    table.restore(a["defaults"], [a["keys"], a["values"], a["freqs"], a["versions"], a["pending_keys"],
                                  a["pending_counts"], *bloom, *(a[f"slot:{slot}"] for slot in slots)],
                  slots, [d["slot_initial"][slot] for slot in slots])
