"""What ``Saver(incremental=True)`` saves: only the rows written since its previous save.

Every variable of the saver is read by a ``VariableChangedRows`` op on its own task, fed the
baseline the previous save returned: the op hands back the rows written since (or the whole
value when the variable was written whole, by a dense update or an assign) and the new
baseline. A save is full (the whole of every tensor, an ordinary checkpoint) the first time,
after ``full_save_every`` deltas, and whenever a delta could not follow the chain; otherwise it is
a delta beside the full checkpoint (checkpoint_chain): the bytes follow the rows touched.

A partitioned variable's parts give their rows at their offsets in the logical tensor, so a
delta, like a full checkpoint, restores into any number of parts. An embedding variable (each
part of one) is read by a ``KvResourceChangedKeys`` op the same way: it evicts, as a save does,
then hands back the keys stored or updated since the baseline with all their entries, and the
keys removed since (kernels/embedding_variable_writes.py).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import array_ops
from tensorgrid.ops import changed_rows_ops
from tensorgrid.train import checkpoint_chain
from tensorgrid.train import checkpoint_format
from tensorgrid.train import embedding_variable_saver


@dataclasses.dataclass
class _Part:
    """One variable (or part of a partitioned one) and the op that reads what changed in it."""

    entry: str
    """The checkpoint key it is saved under."""
    first_row: int
    """Where its rows start in the logical tensor."""
    by_rows: bool
    """Whether its changes may be saved row by row (else it is always read whole)."""
    since: graph_lib.Tensor
    fetches: tuple[graph_lib.Tensor, ...]


class IncrementalSaves:
    """The ops and the chain state of one incremental Saver."""

    def __init__(self, entries: list[Any], as_ref: Any, full_save_every: int,
                 tables: list[embedding_variable_saver.TableChanges]) -> None:
        """``entries`` are the Saver's ``_Saved`` (name, parts, full_shape, slices), ``tables`` its embedding
        variables' changed-keys ops; built in its name scope."""
        self._tables = tables
        if isinstance(full_save_every, bool) or not isinstance(full_save_every, int) or full_save_every < 1:
            raise ValueError(f"full_save_every must be a positive number of deltas between full saves, "
                             f"got {full_save_every!r}")
        self._full_save_every = full_save_every
        self._entries = entries
        self._parts: list[_Part] = []
        for entry in entries:
            row_split = entry.full_shape is None or all(
                where.start == 0 and where.stop == size for where, size in
                ((s, d) for sl in entry.slices for s, d in zip(sl[1:], entry.full_shape[1:])))
            for i, var in enumerate(entry.parts):
                ref = as_ref(var)
                with ref.graph.colocate_with(ref.op):
                    since = array_ops.placeholder(dtypes.int64, [2], name="changed_since")
                outputs = changed_rows_ops.variable_changed_rows(ref, since, name="changed_rows")
                first_row = entry.slices[i][0].start if entry.full_shape is not None and entry.slices[i] else 0
                by_rows = row_split and (ref.shape.ndims is None or ref.shape.ndims > 0)
                self._parts.append(_Part(entry.name, first_row, by_rows, since, outputs))
        self._baselines: Optional[list[tuple[int, int]]] = None
        """Each part's, then each table's."""
        self._chain: list[str] = []
        """The full checkpoint and the deltas after it that this saver wrote, oldest first."""

    def forget_baselines(self) -> None:
        """The next save is full (the variables were restored: the chain's rows no longer apply)."""
        self._baselines = None

    def save(self, sess: Any, checkpoint_file: str) -> bool:
        """Writes ``checkpoint_file``, full or a delta; returns whether it was full."""
        full = (self._baselines is None or len(self._chain) > self._full_save_every
                or checkpoint_file in self._chain)
        everything = np.asarray(changed_rows_ops.EVERYTHING, dtype=np.int64)
        feeds = {}
        for i, part in enumerate(self._parts):
            if full or not part.by_rows or self._baselines is None:
                feeds[part.since] = everything
            else:
                feeds[part.since] = np.asarray(self._baselines[i], dtype=np.int64)
        for i, table in enumerate(self._tables, start=len(self._parts)):
            feeds[table.since] = everything if full or self._baselines is None else np.asarray(
                self._baselines[i], dtype=np.int64)
        results, table_results = sess.run([[part.fetches for part in self._parts],
                                           [table.fetches for table in self._tables]], feeds)
        tensors = self._tensors(results, full)
        for table, table_result in zip(self._tables, table_results):
            tensors.update(table.checkpoint_tensors(table_result, full))
        if full:
            checkpoint_format.write_checkpoint(checkpoint_file, tensors)
            self._chain = [checkpoint_file]
        else:
            delta = checkpoint_format.DeltaOf(os.path.basename(self._chain[0]), os.path.basename(self._chain[-1]),
                                              len(self._chain))
            checkpoint_format.write_checkpoint(checkpoint_file, tensors, delta=delta)
            self._chain.append(checkpoint_file)
        # Only once the file is committed: a failed save leaves the baselines, so the next one has every change.
        self._baselines = [(int(r[0][0]), int(r[0][1])) for r in [*results, *table_results]]
        return full

    def _tensors(self, results: list[Any], full: bool) -> dict[str, np.ndarray]:
        by_entry: dict[str, list[tuple[_Part, Any]]] = {}
        for part, result in zip(self._parts, results):
            by_entry.setdefault(part.entry, []).append((part, result))
        tensors: dict[str, np.ndarray] = {}
        for entry in self._entries:
            parts = by_entry[entry.name]
            if all(bool(result[1]) for _, result in parts):
                tensors[entry.name] = entry.assemble([result[3] for _, result in parts])
                continue
            if full:  # every part was asked for EVERYTHING, which no baseline matches
                raise RuntimeError(f"Saver: a full save got some rows of {entry.name} instead of all of it")
            rows, values = [], []
            for part, (_, whole, part_rows, part_values) in parts:
                if bool(whole):
                    part_rows = np.arange(np.shape(part_values)[0], dtype=np.int64)
                rows.append(np.asarray(part_rows, dtype=np.int64) + part.first_row)
                values.append(np.asarray(part_values))
            all_rows = np.concatenate(rows)
            if all_rows.size:
                tensors[entry.name + checkpoint_chain.ROWS_SUFFIX] = all_rows
                tensors[entry.name + checkpoint_chain.ROW_VALUES_SUFFIX] = np.concatenate(values)
        return tensors
