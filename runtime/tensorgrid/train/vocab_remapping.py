"""``tf.train.VocabInfo`` (also ``tf.estimator.VocabInfo``): warm-starting a variable whose rows (or
columns) follow a vocabulary that changed between the old model and the new one.

A row of an embedding or of linear weights belongs to a vocabulary entry, not to a position: when the
new vocabulary reorders, adds or drops entries, each new row must take the old row of the same entry.
As TensorFlow's ``warm_starting_util`` does, row ``i`` of the new variable takes the old row of
``new_vocab[i]`` when that entry is among the first ``old_vocab_size`` of the old vocabulary; a new
entry, and each of the ``num_oov_buckets`` out-of-vocabulary rows after the vocabulary, takes the
``backup_initializer``'s value (zeros without one). With ``axis=1`` the vocabulary indexes the
columns instead (a multi-class output layer over class names) and the rows are taken as they are.
The variable must have rank 2, as in TensorFlow.
A partitioned variable is remapped whole, then each part takes its slice.

The arguments, the vocabulary files and the shapes are checked when the graph is built; the values
are computed from the checkpoint and the vocabulary files when the assign runs (``warm_start_reads``),
once, when the model is first initialized, so a big table does not make a big graph.
"""

from __future__ import annotations

import collections
import logging
import os
from typing import Any, Optional

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.ops import array_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import state_ops
from tensorgrid.train import checkpoint_management
from tensorgrid.train import warm_start_reads

log = logging.getLogger("tensorgrid.train")


class VocabInfo(collections.namedtuple("VocabInfo", [
        "new_vocab", "new_vocab_size", "num_oov_buckets", "old_vocab", "old_vocab_size", "backup_initializer",
        "axis"])):
    """How a warm-started variable's vocabulary changed (``tf.train.VocabInfo``, ``tf.estimator.VocabInfo``): the
    new and old vocabulary files, how many of their entries count, the new variable's OOV buckets, the
    initializer of rows (columns) with no old value, and the axis the vocabulary indexes (0 or 1)."""

    def __new__(cls, new_vocab: Any, new_vocab_size: int, num_oov_buckets: int, old_vocab: Any,
                old_vocab_size: int = -1, backup_initializer: Any = None, axis: int = 0) -> "VocabInfo":
        if axis not in (0, 1):
            raise ValueError(f"The only supported values for the axis argument are 0 and 1.  Provided axis: {axis}")
        return super().__new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab, old_vocab_size,
                               backup_initializer, axis)


def _vocabulary(path: Any, size: int, which: str) -> list[str]:
    """The first ``size`` lines of a vocabulary file (all of them for ``size`` -1), each line an entry."""
    with open(os.fsdecode(path), encoding="utf-8") as file:
        entries = file.read().split("\n")
    if entries and entries[-1] == "":
        entries.pop()
    if size == -1:
        return entries
    if size > len(entries):
        raise ValueError(f"VocabInfo: the {which} vocabulary {os.fsdecode(path)!r} has {len(entries)} entries, "
                         f"fewer than its size {size}")
    return entries[:size]


def checked_vocabularies(info: VocabInfo, old_shape: list[int], full_shape: list[Any]) -> tuple[list[str], list[str]]:
    """The new and the old vocabulary's entries; ValueError unless ``info`` can remap a checkpoint tensor
    of ``old_shape`` into a variable of ``full_shape`` (its arguments, its vocabulary files' sizes, the
    ranks and the other axis)."""
    if not (info.new_vocab and info.new_vocab_size and info.old_vocab):
        raise ValueError(f"Invalid args: Must provide all of [current_vocab_path, current_vocab_size, prev_ckpt, "
                         f"prev_vocab_path}}; got {info!r}")
    if info.num_oov_buckets < 0:
        raise ValueError(f"VocabInfo: num_oov_buckets must be >= 0, but received {info.num_oov_buckets}")
    new_entries = _vocabulary(info.new_vocab, info.new_vocab_size, "new")
    old_entries = _vocabulary(info.old_vocab, info.old_vocab_size, "old")
    axis = info.axis
    if len(full_shape) != 2:
        raise ValueError(f"VocabInfo: only a variable of rank 2 (rows or columns by vocabulary entry) can be "
                         f"remapped, as in TensorFlow; this one has shape {full_shape}")
    expected = info.new_vocab_size + info.num_oov_buckets
    if full_shape[axis] != expected:
        raise ValueError(f"VocabInfo: the variable's shape {full_shape} does not have new_vocab_size "
                         f"({info.new_vocab_size}) + num_oov_buckets ({info.num_oov_buckets}) = {expected} along "
                         f"axis {axis}")
    moved_old = [old_shape[axis]] + [d for i, d in enumerate(old_shape) if i != axis] if len(old_shape) == 2 else []
    moved_new = [full_shape[axis]] + [d for i, d in enumerate(full_shape) if i != axis]
    if moved_old[1:] != moved_new[1:]:
        raise ValueError(f"VocabInfo: the checkpoint's tensor of shape {list(old_shape)} and the "
                         f"variable of shape {full_shape} differ in more than axis {axis}, the vocabulary's")
    return new_entries, old_entries


def remapped_value(info: VocabInfo, old_value: np.ndarray, full_shape: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """The new variable's value taken from ``old_value`` by vocabulary entry, and the mask of the
    elements that took one (the others are the backup initializer's)."""
    new_entries, old_entries = checked_vocabularies(info, list(np.shape(old_value)), full_shape)
    old_index: dict[str, int] = {}
    for index, entry in enumerate(old_entries):
        old_index.setdefault(entry, index)
    axis = info.axis
    old = np.moveaxis(np.asarray(old_value), axis, 0)
    moved_shape = [full_shape[axis]] + [d for i, d in enumerate(full_shape) if i != axis]
    value = np.zeros(moved_shape, dtype=old.dtype)
    found = np.zeros(moved_shape, dtype=bool)
    for new_position, entry in enumerate(new_entries):
        old_position = old_index.get(entry)
        if old_position is not None and old_position < old.shape[0]:
            value[new_position] = old[old_position]
            found[new_position] = True
    return np.moveaxis(value, 0, axis), np.moveaxis(found, 0, axis)


def remapping_assigns(name: str, parts: list[Any], info: VocabInfo, checkpoint: str, previous: str) -> list[Any]:
    """One assign per part of the variable ``name``: its remapped slice where the old model had the
    entry, the backup initializer's value (zeros without one) elsewhere. The checkpoint and the
    vocabularies are checked now and read when the assign runs (``warm_start_reads``)."""
    shapes = dict(checkpoint_management.list_variables(checkpoint))
    if previous not in shapes:
        raise ValueError(f"Tensor {previous} is not found in {checkpoint} checkpoint (to warm-start {name}); "
                         f"it has {sorted(shapes)}")
    full_shape = warm_start_reads.full_shape(parts)
    checked_vocabularies(info, list(shapes[previous]), full_shape)
    log.info("Warm-starting variable: %s; current_vocab: %s current_vocab_size: %s prev_vocab: %s "
             "prev_vocab_size: %s current_oov: %s prev_tensor: %s initializer: %s", name, info.new_vocab,
             info.new_vocab_size, info.old_vocab, info.old_vocab_size if info.old_vocab_size > 0 else "All",
             info.num_oov_buckets, previous, info.backup_initializer or "zero-initialized")

    def whole_remapped() -> tuple[np.ndarray, np.ndarray]:
        return remapped_value(info, checkpoint_management.load_variable(checkpoint, previous), full_shape)

    assigns = []
    for part in parts:
        dtype = part.dtype.base_dtype
        loaded, found = warm_start_reads.read_when_run(part, full_shape, whole_remapped, [dtype, dtypes.bool_],
                                                       name="read_remapped_checkpoint_value")
        if info.backup_initializer is None:
            new_value: Any = loaded
        else:
            backup = info.backup_initializer(part.get_shape().as_list(), dtype=dtype)
            new_value = indexing_ops.where(found, loaded, array_ops.identity(backup))
        assigns.append(state_ops.assign(part, new_value))
    return assigns


def vocab_info_for(name: str, var_name_to_vocab_info: dict[str, Any]) -> Optional[VocabInfo]:
    info = var_name_to_vocab_info.get(name)
    if info is not None and not isinstance(info, VocabInfo):
        raise TypeError(f"var_name_to_vocab_info[{name!r}] must be a tf.train.VocabInfo, got {info!r}")
    return info
