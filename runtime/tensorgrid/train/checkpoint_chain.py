"""The tensors a checkpoint stands for when it is a delta: its full checkpoint and every delta after it.

An incremental save (``Saver(incremental=True)``) writes a delta: a checkpoint of the same format
whose index (version 2) names the full checkpoint its chain starts from and the checkpoint its
changes apply to. A delta holds a tensor whole under its name, or only some rows of it as two
tensors, ``<name>:rows`` (int64 indices of the first dimension) and ``<name>:row_values``, or, for
the tensors of an embedding variable (one entry per key of its ``NAME-keys``), the keys changed and
removed since the previous checkpoint and the changed keys' entries of each column. This
module follows the chain back to the full checkpoint, checks every link, and applies the deltas
in order; ``Saver.restore``, ``tf.train.load_checkpoint`` and ``NewCheckpointReader`` read through
it, so a delta restores like any checkpoint. (docs/checkpoint-format.md, "Incremental checkpoints".) A
checkpoint TensorFlow wrote reads through the same class (tensorflow_bundle).
"""

from __future__ import annotations

import os
from typing import Iterable

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.kernels import embedding_variable_writes
from tensorgrid.train import checkpoint_format
from tensorgrid.train import tensorflow_bundle

ROWS_SUFFIX = ":rows"
ROW_VALUES_SUFFIX = ":row_values"
"""Checkpoint keys are op names, which never hold a ':', so these cannot clash with a variable's key."""
CHANGED_KEYS_SUFFIX = ":changed_keys"
REMOVED_KEYS_SUFFIX = ":removed_keys"
"""On a keys tensor ``K`` (an embedding variable's ``NAME-keys``): the keys stored or updated since the
previous checkpoint of the chain, and the keys removed (evicted) since."""
CHANGED_ROWS_OF = ":changed_rows_of:"
"""``<column>:changed_rows_of:<K>``: a column's entries (one per key of ``K``) for ``K``'s changed keys."""


def read_chain(prefix: str) -> list[checkpoint_format.Index]:
    """The indexes of the full checkpoint and the deltas up to ``prefix``, oldest first;
    DataLossError naming the broken link when one is missing or does not fit."""
    chain = [checkpoint_format.read_index(prefix)]
    directory = os.path.dirname(prefix)
    while chain[-1].delta is not None:
        link, delta = chain[-1], chain[-1].delta
        previous = os.path.join(directory, delta.previous)
        try:
            before = checkpoint_format.read_index(previous)
        except errors.NotFoundError:
            raise errors.DataLossError(
                None, None,
                f"Checkpoint {link.prefix} is delta {delta.sequence} of the chain that starts at the full checkpoint "
                f"{os.path.join(directory, delta.base)}, and the checkpoint it applies to, {previous}, is missing "
                f"({checkpoint_format.index_path(previous)} not found): restoring it needs the full checkpoint and "
                "every delta after it",
            ) from None
        fits = (before.delta is None and delta.sequence == 1 and delta.previous == delta.base) or (
            before.delta is not None and before.delta.base == delta.base and before.delta.sequence == delta.sequence - 1)
        if not fits:
            raise errors.DataLossError(
                None, None,
                f"Checkpoint {link.prefix} is delta {delta.sequence} on {delta.base}, but {previous} is "
                + ("a full checkpoint" if before.delta is None else
                   f"delta {before.delta.sequence} on {before.delta.base}")
                + ": the chain was overwritten",
            )
        chain.append(before)
    chain.reverse()
    return chain


def needed_by(kept: Iterable[str]) -> set[str]:
    """The checkpoints that restoring the ``kept`` ones reads: each one, and for a delta its full
    checkpoint and the deltas before it (what deleting old checkpoints must spare)."""
    needed = set()
    for prefix in kept:
        needed.add(prefix)
        try:
            needed.update(index.prefix for index in read_chain(prefix))
        except (errors.OpError, OSError):
            pass  # a broken or deleted chain spares nothing more
    return needed


class LogicalCheckpoint:
    """A checkpoint's tensors by name: a full checkpoint's own, or its chain's with the deltas applied,
    or those of a checkpoint TensorFlow wrote (its index is a table, not JSON: tensorflow_bundle)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._bundle = tensorflow_bundle.BundleReader(prefix) if tensorflow_bundle.is_bundle(prefix) else None
        self.chain = [] if self._bundle is not None else read_chain(prefix)
        self.tensors: dict[str, checkpoint_format.TensorEntry | tensorflow_bundle.BundleEntry] = (
            dict(self._bundle.entries) if self._bundle is not None else dict(self.chain[0].tensors))
        """Name -> the entry giving its dtype and shape (the last whole copy in the chain)."""
        for delta in self.chain[1:]:
            self.tensors.update((n, e) for n, e in delta.tensors.items() if not _is_row_part(n))

    @property
    def is_delta(self) -> bool:
        return len(self.chain) > 1

    def read(self, names: Iterable[str]) -> dict[str, np.ndarray]:
        """The named tensors (every one in ``tensors``), read, checked and brought up to date."""
        names = list(names)
        if self._bundle is not None:
            return self._bundle.read(names)
        keys_of = {column: keys_name for delta in self.chain[1:] for column, _, keys_name in
                   (n.partition(CHANGED_ROWS_OF) for n in delta.tensors if CHANGED_ROWS_OF in n) if column in names}
        """Column -> the keys tensor its changed entries are keyed by (read too: the merge needs it)."""
        reading = names + sorted(set(keys_of.values()) - set(names))
        full = self.chain[0]
        values = checkpoint_format.read_tensors(full, [n for n in reading if n in full.tensors])
        for delta in self.chain[1:]:
            whole = [n for n in reading if n in delta.tensors]
            by_rows = [n for n in reading if n + ROWS_SUFFIX in delta.tensors]
            keyed = [n for n in reading if n + CHANGED_KEYS_SUFFIX in delta.tensors]
            got = checkpoint_format.read_tensors(
                delta, whole + [n + s for n in by_rows for s in (ROWS_SUFFIX, ROW_VALUES_SUFFIX)]
                + [k + s for k in keyed for s in (CHANGED_KEYS_SUFFIX, REMOVED_KEYS_SUFFIX)]
                + [c + CHANGED_ROWS_OF + k for c, k in keys_of.items() if c + CHANGED_ROWS_OF + k in delta.tensors])
            values.update((n, got[n]) for n in whole)
            for name in by_rows:
                values[name] = _apply_rows(delta, name, values.get(name), got[name + ROWS_SUFFIX],
                                           got[name + ROW_VALUES_SUFFIX])
            for keys_name in keyed:
                columns = [c for c, k in keys_of.items() if k == keys_name and c + CHANGED_ROWS_OF + k in delta.tensors]
                values.update(_apply_keyed(delta, keys_name, columns, values, got))
        return {name: values[name] for name in names if name in values}


def _is_row_part(name: str) -> bool:
    return (name.endswith((ROWS_SUFFIX, ROW_VALUES_SUFFIX, CHANGED_KEYS_SUFFIX, REMOVED_KEYS_SUFFIX))
            or CHANGED_ROWS_OF in name)


def _apply_keyed(delta: checkpoint_format.Index, keys_name: str, columns: list[str], values: dict[str, np.ndarray],
                 got: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The keys tensor ``keys_name`` and its ``columns`` with the delta's removed and changed keys applied."""
    where = f"changed keys of {keys_name} in delta checkpoint {delta.prefix}"
    missing = [n for n in [keys_name, *columns] if n not in values]
    if missing:
        raise errors.DataLossError(None, None, f"The {where} apply to {', '.join(missing)}, which no earlier "
                                               "checkpoint of its chain has")
    changed = got[keys_name + CHANGED_KEYS_SUFFIX]
    entries = [got[c + CHANGED_ROWS_OF + keys_name] for c in columns]
    for column, old, new in zip(columns, (values[c] for c in columns), entries):
        if len(old) != len(values[keys_name]) or len(new) != len(changed) or old.shape[1:] != new.shape[1:]:
            raise errors.DataLossError(
                None, None, f"The {where} do not fit {column}: {len(new)} entries of shape {list(new.shape[1:])} for "
                            f"{len(changed)} keys, the column has {len(old)} of shape {list(old.shape[1:])} for "
                            f"{len(values[keys_name])} keys")
    keys, merged = embedding_variable_writes.merge_keyed(values[keys_name], [values[c] for c in columns],
                                                         got[keys_name + REMOVED_KEYS_SUFFIX], changed, entries)
    return {keys_name: keys, **dict(zip(columns, merged))}


def _apply_rows(delta: checkpoint_format.Index, name: str, value: np.ndarray | None, rows: np.ndarray,
                row_values: np.ndarray) -> np.ndarray:
    where = f"rows of {name} in delta checkpoint {delta.prefix}"
    if value is None:
        raise errors.DataLossError(None, None, f"The {where} apply to a tensor no earlier checkpoint of its chain has")
    if value.ndim < 1 or rows.ndim != 1 or row_values.shape != rows.shape + value.shape[1:]:
        raise errors.DataLossError(
            None, None, f"The {where} do not fit it: {rows.shape[0] if rows.ndim else rows.shape} rows of shape "
                        f"{list(row_values.shape)} for a tensor of shape {list(value.shape)}")
    if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= value.shape[0]):
        raise errors.DataLossError(None, None, f"The {where} name rows outside [0, {value.shape[0]})")
    if row_values.dtype != value.dtype:
        raise errors.DataLossError(None, None, f"The {where} are {row_values.dtype}, the tensor {value.dtype}")
    value = value if value.flags.writeable else value.copy()
    value[rows] = row_values
    return value


class CheckpointReader:
    """Reads tensors of one checkpoint by name (``tf.train.NewCheckpointReader``); a delta reads as
    its chain brought up to date."""

    def __init__(self, prefix: str) -> None:
        self._checkpoint = LogicalCheckpoint(prefix)

    def has_tensor(self, name: str) -> bool:
        return name in self._checkpoint.tensors

    def get_tensor(self, name: str) -> np.ndarray:
        if name not in self._checkpoint.tensors:
            raise errors.NotFoundError(None, None, f"Key {name} not found in checkpoint {self._checkpoint.prefix}")
        return self._checkpoint.read([name])[name]

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return {name: list(e.shape) for name, e in self._checkpoint.tensors.items()}

    def get_variable_to_dtype_map(self) -> dict[str, dtypes.DType]:
        return {name: dtypes.as_dtype(e.dtype) for name, e in self._checkpoint.tensors.items()}
