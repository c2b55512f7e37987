"""How ``tf.train.Saver`` saves and restores embedding variables (``tf.get_embedding_variable``).

A table has no fixed shape, so it is not one tensor of the checkpoint: as DeepRec does, it is
saved as ``NAME-keys``, ``NAME-values``, ``NAME-freqs`` and ``NAME-versions`` (one entry per
stored key, keys ascending), ``NAME-keys_filtered`` and ``NAME-freqs_filtered`` (the keys seen
but not yet admitted and their counts) and, per optimizer slot kept in the table,
``NAME/SLOT-values`` (one row per key of ``NAME-keys``), in tensorgrid's checkpoint format. A
table admitting by a counting Bloom filter (``tf.CBFFilter``) also saves its counters as
``NAME-cbf_counters`` (int64, tensorgrid's name).

Saving runs ``KvResourceExport`` next to the table; it evicts first (DeepRec evicts at every
save), with the global step's current value. Restoring feeds the arrays to ``KvResourceImport``,
which replaces the table's contents and sets the initializer's rows
that keys new after the restore start from (restoring stands for running the initializer).

Each part of a partitioned table is saved under its own name (``NAME/part_0-keys``, ...). A
restore reads every saved part of a table (or its one unpartitioned entry set), and sends each
key, with its row, counts and slots, to the part that owns it now: a checkpoint restores into
any part count. Bloom filter counters are per part and count keys by hash, not by key: restored
into as many parts as were saved, part ``i`` takes part ``i``'s counters; into another part count
each part takes the sum of all saved parts' counters (a key's estimate never drops below its
count, other keys' counts add to it); saved with another filter size, or without a filter, the
filter starts empty and takes the counts of the saved keys not yet admitted.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.framework import graph as graph_lib
from tensorgrid.kernels import embedding_variable_kernels
from tensorgrid.ops import array_ops
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import embedding_variable_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util
from tensorgrid.train import checkpoint_chain
from tensorgrid.train import training_util

_PER_KEY = ("keys", "values", "freqs", "versions", "keys_filtered", "freqs_filtered")


_BLOOM = "cbf_counters"


def checkpoint_names(ev: embedding_variable_ops.EmbeddingVariable) -> list[str]:
    """The checkpoint entries of ``ev``, in the order its export op gives them."""
    bloom = [f"{ev.op.name}-{_BLOOM}"] if ev.bloom_filter_counters else []
    return [f"{ev.op.name}-{part}" for part in _PER_KEY] + bloom + \
        [f"{ev.op.name}/{slot.name}-values" for slot in ev.slots]


@dataclasses.dataclass
class _Table:
    """The parts of one embedding variable that a Saver restores, with their restore feeds."""

    name: str
    part_count: int
    slot_names: list[str]
    bloom_filter_counters: int
    feeds_by_part: dict[int, list[graph_lib.Tensor]] = dataclasses.field(default_factory=dict)
    bloom_feed_by_part: dict[int, graph_lib.Tensor] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class TableChanges:
    """The ``KvResourceChangedKeys`` op of one table (or part) that an incremental save runs, fed its baseline."""

    prefix: str
    """The name its entries start with (``NAME`` of ``NAME-keys``)."""
    names: list[str]
    """Its checkpoint entries, in ``checkpoint_names``'s order."""
    since: graph_lib.Tensor
    fetches: list[graph_lib.Tensor]

    def checkpoint_tensors(self, result: list[Any], full: bool) -> dict[str, np.ndarray]:
        """What a save writes for it from the op's ``result``: every entry when the table came whole,
        else the keys changed and removed and the changed keys' entries (checkpoint_chain)."""
        _, whole, removed, pending_included, *arrays = result
        named = dict(zip(self.names, arrays))
        if bool(whole):
            return named
        if full:  # asked for EVERYTHING, which no baseline matches
            raise RuntimeError(f"Saver: a full save got the changed keys of {self.prefix} instead of all of it")
        keys_name = f"{self.prefix}-keys"
        tensors = {keys_name + checkpoint_chain.CHANGED_KEYS_SUFFIX: named[keys_name],
                   keys_name + checkpoint_chain.REMOVED_KEYS_SUFFIX: removed}
        pending_names = {f"{self.prefix}-{part}" for part in ("keys_filtered", "freqs_filtered", _BLOOM)}
        for name, array in named.items():
            if name in pending_names:
                if bool(pending_included):
                    tensors[name] = array
            elif name != keys_name:
                tensors[name + checkpoint_chain.CHANGED_ROWS_OF + keys_name] = array
        return tensors


def _saved_prefixes(index: Any, name: str) -> list[str]:
    """The names ``name``'s parts were saved under: ``[name]`` unpartitioned, else ``name/part_<i>`` in order."""
    if f"{name}-keys" in index.tensors:
        return [name]
    prefixes: list[str] = []
    while f"{name}/part_{len(prefixes)}-keys" in index.tensors:
        prefixes.append(f"{name}/part_{len(prefixes)}")
    return prefixes


class EmbeddingVariableSaveables:
    """The export and import ops of some embedding variables, built once with the Saver."""

    def __init__(self, evs: list[embedding_variable_ops.EmbeddingVariable], graph: graph_lib.Graph,
                 incremental: bool = False) -> None:
        """``incremental``: also build the ops an incremental save asks for the keys changed (``changes``)."""
        self.names: list[str] = []
        self.changes: list[TableChanges] = []
        self.save_tensors: list[graph_lib.Tensor] = []
        self._tables: dict[str, _Table] = {}
        imports = []
        global_step = training_util.get_global_step(graph)
        for ev in evs:
            slot_names = [slot.name for slot in ev.slots]
            slot_attrs = {"slot_names": slot_names, "slot_initial_values": [slot.initial_value for slot in ev.slots]}
            dim = ev.embedding_dim
            specs = [(dtypes.int64, [None]), (ev.dtype, [None, dim]), (dtypes.int64, [None]), (dtypes.int64, [None]),
                     (dtypes.int64, [None]), (dtypes.int64, [None])] + \
                [(dtypes.int64, [None])] * bool(ev.bloom_filter_counters) + [(ev.dtype, [None, dim])] * len(slot_names)
            with graph.colocate_with(ev.op):
                step = (array_ops.constant(-1, dtype=dtypes.int64) if global_step is None
                        else math_ops.cast(global_step, dtypes.int64))
                export = op_util.make_op("KvResourceExport", [ev.handle, step], specs, "KvResourceExport", slot_attrs)
                feeds = [array_ops.placeholder(dtype, shape, name="restore_value") for dtype, shape in specs]
                if incremental:
                    since = array_ops.placeholder(dtypes.int64, [2], name="changed_since")
                    changed = op_util.make_op(
                        "KvResourceChangedKeys", [ev.handle, step, since],
                        [(dtypes.int64, [2]), (dtypes.bool_, []), (dtypes.int64, [None]), (dtypes.bool_, []), *specs],
                        "KvResourceChangedKeys", slot_attrs)
                    self.changes.append(TableChanges(ev.op.name, checkpoint_names(ev), since, changed.outputs))
                imports.append(op_util.make_op(
                    "KvResourceImport", [ev.handle, ev.initial_rows, *feeds], [], "KvResourceImport", slot_attrs))
            self.names.extend(checkpoint_names(ev))
            self.save_tensors.extend(export.outputs)
            info = ev.partition_info
            table = self._tables.setdefault(info.full_name if info else ev.op.name,
                                            _Table(info.full_name if info else ev.op.name,
                                                   info.count if info else 1, slot_names,
                                                   ev.bloom_filter_counters))
            if ev.bloom_filter_counters:
                table.bloom_feed_by_part[info.index if info else 0] = feeds.pop(len(_PER_KEY))
            table.feeds_by_part[info.index if info else 0] = feeds
        self.restore_op = control_flow_ops.group(*imports, name="restore_embedding_variables")

    def restore_feeds(self, index: Any, save_path: str) -> dict[graph_lib.Tensor, np.ndarray]:
        """The feeds of the import ops from the checkpoint ``index``, each key sent to the part that owns it
        now; NotFoundError naming the entries ``save_path`` lacks, before anything is restored."""
        reads: list[tuple[_Table, list[str], list[str]]] = []
        missing: list[str] = []
        for table in self._tables.values():
            prefixes = _saved_prefixes(index, table.name)
            per_key = [f"{prefix}-{part}" for prefix in prefixes for part in _PER_KEY] + \
                [f"{prefix}/{slot}-values" for prefix in prefixes for slot in table.slot_names]
            missing.extend([f"{table.name}-keys"] if not prefixes else
                           [name for name in per_key if name not in index.tensors])
            reads.append((table, prefixes, per_key))
        if missing:
            raise errors.NotFoundError(
                None, None, f"Restoring from checkpoint failed: embedding variable entries {', '.join(missing)} "
                f"not found in checkpoint {save_path}")
        feeds: dict[graph_lib.Tensor, np.ndarray] = {}
        for table, prefixes, names in reads:
            saved = index.read(names)
            columns = [np.concatenate([saved[f"{prefix}-{part}"] for prefix in prefixes]) for part in _PER_KEY]
            columns += [np.concatenate([saved[f"{prefix}/{slot}-values"] for prefix in prefixes])
                        for slot in table.slot_names]
            keys, pending = columns[0], columns[4]
            key_part = embedding_variable_kernels.partition_of_keys(keys, table.part_count)
            pending_part = embedding_variable_kernels.partition_of_keys(pending, table.part_count)
            for index_of_part, part_feeds in table.feeds_by_part.items():
                mine, mine_pending = key_part == index_of_part, pending_part == index_of_part
                order, pending_order = np.argsort(keys[mine]), np.argsort(pending[mine_pending])
                for position, (feed, column) in enumerate(zip(part_feeds, columns)):
                    pending_column = position in (4, 5)
                    selected = column[mine_pending if pending_column else mine]
                    feeds[feed] = selected[pending_order if pending_column else order]
            if table.bloom_filter_counters:
                feeds.update(_bloom_feeds(table, prefixes, index))
        return feeds


def _bloom_feeds(table: _Table, prefixes: list[str], index: Any) -> dict[graph_lib.Tensor, np.ndarray]:
    """The Bloom filter counters each part of ``table`` starts from (empty: none usable were saved)."""
    names = [f"{prefix}-{_BLOOM}" for prefix in prefixes]
    saved = index.read(names) if all(name in index.tensors for name in names) else {}
    counters = [saved[name] for name in names if name in saved]
    if not counters or any(len(part) != table.bloom_filter_counters for part in counters):
        empty = np.zeros(0, np.int64)
        return {feed: empty for feed in table.bloom_feed_by_part.values()}
    if len(counters) == table.part_count:
        return {feed: counters[part] for part, feed in table.bloom_feed_by_part.items()}
    largest = np.iinfo(np.int64).max
    total = np.zeros(table.bloom_filter_counters, np.int64)
    for part in counters:
        total = np.minimum(total, largest - part) + part  # a sum that saturates instead of wrapping
    return {feed: total for feed in table.bloom_feed_by_part.values()}
