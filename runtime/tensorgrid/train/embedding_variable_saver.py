"""How ``tf.train.Saver`` saves and restores embedding variables (``tf.get_embedding_variable``).

A table has no fixed shape, so it is not one tensor of the checkpoint: as DeepRec does, it is
saved as ``NAME-keys``, ``NAME-values``, ``NAME-freqs`` and ``NAME-versions`` (one entry per
stored key, keys ascending), ``NAME-keys_filtered`` and ``NAME-freqs_filtered`` (the keys seen
but not yet admitted and their counts) and, per optimizer slot kept in the table,
``NAME/SLOT-values`` (one row per key of ``NAME-keys``), in tensorgrid's checkpoint format.

Saving runs ``KvResourceExport`` next to the table; it evicts first (DeepRec evicts at every
save), with the global step's current value. Restoring feeds the arrays to ``KvResourceImport``,
which replaces the table's contents and sets the initializer's rows
that keys new after the restore start from (restoring stands for running the initializer).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import array_ops
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import embedding_variable_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util
from tensorgrid.train import training_util

_PER_KEY = ("keys", "values", "freqs", "versions", "keys_filtered", "freqs_filtered")


def checkpoint_names(ev: embedding_variable_ops.EmbeddingVariable) -> list[str]:
    """The checkpoint entries of ``ev``, in the order its export op gives them."""
    return [f"{ev.op.name}-{part}" for part in _PER_KEY] + [f"{ev.op.name}/{slot.name}-values" for slot in ev.slots]


class EmbeddingVariableSaveables:
    """The export and import ops of some embedding variables, built once with the Saver."""

    def __init__(self, evs: list[embedding_variable_ops.EmbeddingVariable], graph: graph_lib.Graph) -> None:
        self.names: list[str] = []
        self.save_tensors: list[graph_lib.Tensor] = []
        self._feeds: list[graph_lib.Tensor] = []
        imports = []
        global_step = training_util.get_global_step(graph)
        for ev in evs:
            slot_names = [slot.name for slot in ev.slots]
            dim = ev.embedding_dim
            specs = [(dtypes.int64, [None]), (ev.dtype, [None, dim]), (dtypes.int64, [None]), (dtypes.int64, [None]),
                     (dtypes.int64, [None]), (dtypes.int64, [None])] + [(ev.dtype, [None, dim])] * len(slot_names)
            with graph.colocate_with(ev.op):
                step = (array_ops.constant(-1, dtype=dtypes.int64) if global_step is None
                        else math_ops.cast(global_step, dtypes.int64))
                export = op_util.make_op("KvResourceExport", [ev.handle, step], specs, "KvResourceExport",
                                         {"slot_names": slot_names})
                feeds = [array_ops.placeholder(dtype, shape, name="restore_value") for dtype, shape in specs]
                imports.append(op_util.make_op(
                    "KvResourceImport", [ev.handle, ev.initial_rows, *feeds], [], "KvResourceImport",
                    {"slot_names": slot_names, "slot_initial_values": [slot.initial_value for slot in ev.slots]}))
            self.names.extend(checkpoint_names(ev))
            self.save_tensors.extend(export.outputs)
            self._feeds.extend(feeds)
        self.restore_op = control_flow_ops.group(*imports, name="restore_embedding_variables")

    def check_in(self, index: Any, save_path: str) -> None:
        """Fails with NotFoundError naming the entries ``save_path`` lacks, before anything is restored."""
        missing = [name for name in self.names if name not in index.tensors]
        if missing:
            raise errors.NotFoundError(
                None, None, f"Restoring from checkpoint failed: embedding variable entries {', '.join(missing)} "
                f"not found in checkpoint {save_path}")

    def feed_dict(self, values: dict[str, np.ndarray]) -> dict[graph_lib.Tensor, np.ndarray]:
        return {feed: values[name] for feed, name in zip(self._feeds, self.names)}
