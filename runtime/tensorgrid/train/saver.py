"""``tf.train.Saver``: save variables to checkpoints and restore them, from the client.

Saving fetches the variables' values with ``sess.run`` and writes the files on the
machine running the program; restoring reads the files there and feeds the values
to assign ops built once, in the constructor, next to each variable. So the same
code works in-process and against a remote cluster whose variables live on
parameter servers (TF1 instead writes on the tasks holding the variables, which
needs a file system shared by all of them). The format is in checkpoint_format.

A partitioned variable is saved as one logical tensor under its name (``emb``, and
``emb/Adam`` for a slot of its parts): the parts' values are assembled on the client
and restored by slicing, so a checkpoint written with 3 parts restores into 2, or into
an unpartitioned variable of the same shape. (TF1 writes each part as a slice.)

An embedding variable (``tf.get_embedding_variable``) is saved as its keys, values, frequencies,
versions and slots (embedding_variable_saver).

``Saver(incremental=True, full_save_every=N)`` (or ``IncrementalSaver``) writes, between full
checkpoints, deltas holding only the rows written since its previous save (incremental_saves);
``restore`` reads any checkpoint, full or delta, through checkpoint_chain.
"""

from __future__ import annotations

import dataclasses
import logging
import numbers
import os
import time
from typing import Any, Optional

import numpy as np

from tensorgrid.framework import errors
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import control_flow_ops
from tensorgrid.ops import embedding_variable_ops
from tensorgrid.ops import partitioned_variables
from tensorgrid.ops import state_ops
from tensorgrid.ops import variables
from tensorgrid.train import checkpoint_chain
from tensorgrid.train import checkpoint_format
from tensorgrid.train import checkpoint_management
from tensorgrid.train import embedding_variable_saver
from tensorgrid.train import incremental_saves
from tensorgrid.train import training_util

GraphKeys = graph_lib.GraphKeys

_log = logging.getLogger(__name__)


def _checkpoint_key(var: Any) -> str:
    op = getattr(var, "op", None)
    if not isinstance(op, graph_lib.Operation):
        raise TypeError(f"Saver can only save Variables (or variable reference tensors), got {var!r}")
    return op.name


def _as_ref(var: Any) -> graph_lib.Tensor:
    if isinstance(var, variables.Variable):
        return var._ref()
    if isinstance(var, graph_lib.Tensor) and var.dtype.is_ref_dtype:
        return var
    raise TypeError(f"Saver can only save Variables (or variable reference tensors), got {var!r}")


def _slice_info(var: Any) -> Any:
    getter = getattr(var, "_get_save_slice_info", None)
    return getter() if callable(getter) else None


def _names_to_variables(var_list: Any) -> dict[str, list[Any]]:
    """``{checkpoint key: [variable]}``, or the parts of a partitioned variable under its name, from a
    dict or a list of variables, PartitionedVariables and parts; checks for clashes."""
    result: dict[str, list[Any]] = {}
    saved_ops: set[graph_lib.Operation] = set()  # each variable's op: a variable is saved once

    def add(name: str, var: Any, partitioned: bool, twice: str = "The same saveable will be restored with two names") -> None:
        variable_op = _as_ref(var).op
        if variable_op in saved_ops:
            raise ValueError(f"{twice}: {name}")
        saved_ops.add(variable_op)
        vars_of_name = result.setdefault(name, [])
        if vars_of_name and not (partitioned and all(_slice_info(v) is not None for v in vars_of_name)):
            raise ValueError(f"At least two variables have the same name: {name}")
        vars_of_name.append(var)

    if isinstance(var_list, dict):
        for name, value in var_list.items():
            if not isinstance(name, str):
                raise TypeError(f"Saver var_list keys must be checkpoint names (strings), got {name!r}")
            parts = list(value) if isinstance(value, (partitioned_variables.PartitionedVariable, list, tuple)) else None
            for var in parts if parts is not None else [value]:
                add(name, var, parts is not None)
        return result
    if not isinstance(var_list, (list, tuple, set)):
        raise TypeError(f"Saver var_list must be a list or dict of variables, got {type(var_list).__name__}")
    for var in var_list:
        if isinstance(var, partitioned_variables.PartitionedVariable):
            if var.name in result:
                raise ValueError(f"At least two variables have the same name: {var.name}")
            for part in var:
                add(var.name, part, True)
        elif _slice_info(var) is not None:
            add(_slice_info(var).full_name, var, True)
        else:
            add(_checkpoint_key(var), var, False, twice="At least two variables have the same name")
    return result


@dataclasses.dataclass
class _Saved:
    """One checkpoint entry: a whole variable, or the parts that make up a partitioned one."""

    name: str
    parts: list[Any]
    """The variables (or reference tensors) saved under ``name``, in order of their offsets."""
    full_shape: Optional[list[int]]
    """The logical shape when the entry is assembled from parts (None for a whole variable)."""
    slices: list[tuple[slice, ...]]
    """Where each part sits in the logical tensor."""

    @classmethod
    def of(cls, name: str, parts: list[Any]) -> "_Saved":
        infos = [_slice_info(v) for v in parts]
        if len(parts) == 1 and infos[0] is None:
            return cls(name, [parts[0]], None, [])
        if any(info is None for info in infos):
            raise ValueError(f"Saver: {name} mixes parts of a partitioned variable with whole variables")
        full_shape = list(infos[0].full_shape)
        if any(list(info.full_shape) != full_shape for info in infos):
            raise ValueError(f"Saver: the parts of {name} disagree on its full shape: "
                             f"{sorted({tuple(info.full_shape) for info in infos})}")
        order = sorted(range(len(parts)), key=lambda i: list(infos[i].var_offset))
        covered = sum(int(np.prod(infos[i].var_shape)) for i in order)
        if covered != int(np.prod(full_shape)) or len({tuple(infos[i].var_offset) for i in order}) != len(order):
            raise ValueError(
                f"Saver needs every part of the partitioned variable {name} (shape {full_shape}) to save it as one "
                f"tensor; got {', '.join(_checkpoint_key(parts[i]) for i in order)}"
            )
        slices = [tuple(slice(o, o + n) for o, n in zip(infos[i].var_offset, infos[i].var_shape)) for i in order]
        return cls(name, [parts[i] for i in order], full_shape, slices)

    @property
    def shape(self) -> tensor_shape.TensorShape:
        """The static shape of the tensor in the checkpoint."""
        if self.full_shape is None:
            return _as_ref(self.parts[0]).shape
        return tensor_shape.TensorShape(self.full_shape)

    def assemble(self, values: list[np.ndarray]) -> np.ndarray:
        if self.full_shape is None:
            return values[0]
        whole = np.empty(self.full_shape, dtype=values[0].dtype)
        for where, value in zip(self.slices, values):
            whole[where] = value
        return whole

    def split(self, value: np.ndarray) -> list[np.ndarray]:
        if self.full_shape is None:
            return [value]
        value = np.reshape(value, self.full_shape)
        return [value[where] for where in self.slices]


def _restore_error(kind: type[errors.OpError], likely_cause: str, detail: str) -> errors.OpError:
    return kind(
        None, None,
        f"Restoring from checkpoint failed. This is most likely due to {likely_cause} from the checkpoint. "
        f"Please ensure that you have not altered the graph expected based on the checkpoint. "
        f"Original error:\n\n{detail}",
    )


class Saver:
    """Saves and restores variables (by default all global variables)."""

    def __init__(
        self,
        var_list: Any = None,
        reshape: bool = False,
        sharded: bool = False,
        max_to_keep: Optional[int] = 5,
        keep_checkpoint_every_n_hours: float = 10000.0,
        name: Optional[str] = None,
        restore_sequentially: bool = False,
        saver_def: Any = None,
        builder: Any = None,
        defer_build: bool = False,
        allow_empty: bool = False,
        write_version: Any = None,
        pad_step_number: bool = False,
        save_relative_paths: bool = False,
        filename: Optional[str] = None,
        incremental: bool = False,
        full_save_every: int = 10,
    ) -> None:
        """TF1's arguments, and tensorgrid's ``incremental``: save only the rows written since the
        previous save, as a delta beside the last full checkpoint, with a full save after every
        ``full_save_every`` deltas (docs/checkpoint-format.md, "Incremental checkpoints")."""
        if saver_def is not None or builder is not None:
            raise ValueError("tensorgrid's Saver builds its own ops; saver_def and builder are not supported")
        self._var_list = var_list
        self._reshape = reshape
        self._sharded = sharded
        self._max_to_keep = max_to_keep
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._name = name
        self._allow_empty = allow_empty
        self._pad_step_number = pad_step_number
        self._save_relative_paths = save_relative_paths
        self._filename = filename
        self._next_checkpoint_time = time.time() + keep_checkpoint_every_n_hours * 3600
        self._last_checkpoints: list[tuple[str, float]] = []
        self._checkpoints_to_be_deleted: list[tuple[str, float]] = []
        self._last_preserved_timestamp = 0.0
        self._preserved: list[str] = []
        """Checkpoints kept for good (keep_checkpoint_every_n_hours)."""
        self._built = False
        self._is_empty = False
        self._graph: Optional[graph_lib.Graph] = None
        self._names: list[str] = []
        self._entries: list[_Saved] = []
        self._save_tensors: list[graph_lib.Tensor] = []
        self._restore_feeds: list[graph_lib.Tensor] = []
        self._restore_shapes: list[Any] = []
        self._restore_op: Optional[graph_lib.Operation] = None
        self._embedding_variables: Optional[embedding_variable_saver.EmbeddingVariableSaveables] = None
        if not isinstance(incremental, bool):
            raise TypeError(f"incremental must be True or False, got {incremental!r}")
        self._incremental = incremental
        self._full_save_every = full_save_every
        self._incremental_saves: Optional[incremental_saves.IncrementalSaves] = None
        if not defer_build:
            self.build()

    # ------------------------------------------------------------------ graph
    def build(self) -> None:
        """Adds the restore ops to the graph (done by the constructor unless ``defer_build``)."""
        if self._built:
            return
        graph = graph_lib.get_default_graph()
        var_list = self._var_list
        if var_list is None:
            var_list = graph.get_collection(GraphKeys.GLOBAL_VARIABLES)
        if isinstance(var_list, (list, tuple, set)):
            evs = [v for v in var_list if isinstance(v, embedding_variable_ops.EmbeddingVariable)]
            var_list = [v for v in var_list if not isinstance(v, embedding_variable_ops.EmbeddingVariable)]
            if evs:
                with graph.as_default(), graph.control_dependencies(None), graph.name_scope(self._name or "save"):
                    self._embedding_variables = embedding_variable_saver.EmbeddingVariableSaveables(
                        evs, graph, incremental=self._incremental)
        names_to_vars = _names_to_variables(var_list)
        self._built = True
        if not names_to_vars and self._embedding_variables is not None:
            self._graph = graph
        elif not names_to_vars:
            if self._allow_empty:
                self._is_empty = True
                return
            raise ValueError("No variables to save")
        self._graph = graph
        self._entries = [_Saved.of(name, names_to_vars[name]) for name in sorted(names_to_vars)]
        with graph.as_default(), graph.control_dependencies(None), graph.name_scope(self._name or "save"):
            assigns = []
            for entry in self._entries:
                for var in entry.parts:
                    ref = _as_ref(var)
                    with graph.colocate_with(ref.op):
                        if isinstance(var, variables.Variable):
                            self._save_tensors.append(var.value())
                        else:
                            self._save_tensors.append(array_ops.identity(ref))
                        feed = array_ops.placeholder(ref.dtype.base_dtype, ref.shape, name="restore_value")
                        assigns.append(state_ops.assign(ref, feed, validate_shape=ref.shape.is_fully_defined()))
                    self._restore_feeds.append(feed)
                self._names.append(entry.name)
                self._restore_shapes.append(entry.shape)
            self._restore_op = control_flow_ops.group(*assigns, name="restore_all")
            if self._incremental:
                self._incremental_saves = incremental_saves.IncrementalSaves(
                    self._entries, _as_ref, self._full_save_every,
                    self._embedding_variables.changes if self._embedding_variables is not None else [])

    @property
    def last_checkpoints(self) -> list[str]:
        """The kept checkpoints' prefixes, oldest first."""
        return [path for path, _ in self._last_checkpoints]

    def set_last_checkpoints(self, last_checkpoints: list[str]) -> None:
        if not isinstance(last_checkpoints, list):
            raise TypeError(f"last_checkpoints must be a list, got {last_checkpoints!r}")
        self._last_checkpoints = [(path, time.time()) for path in last_checkpoints]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time: list[tuple[str, float]]) -> None:
        if not isinstance(last_checkpoints_with_time, list):
            raise TypeError(f"last_checkpoints_with_time must be a list, got {last_checkpoints_with_time!r}")
        self._last_checkpoints = list(last_checkpoints_with_time)

    def recover_last_checkpoints(self, checkpoint_paths: list[str]) -> None:
        """Adopts existing checkpoints (by their index mtimes) so ``max_to_keep`` applies to them."""
        existing = [p for p in checkpoint_paths if checkpoint_management.checkpoint_exists(p)]
        mtimes = checkpoint_management.get_checkpoint_mtimes(existing)
        self.set_last_checkpoints_with_time(list(zip(existing, mtimes)))

    # ------------------------------------------------------------------ save
    def save(
        self,
        sess: Any,
        save_path: Any,
        global_step: Any = None,
        latest_filename: Optional[str] = None,
        meta_graph_suffix: str = "meta",
        write_meta_graph: bool = True,
        write_state: bool = True,
        strip_default_attrs: bool = False,
        save_debug_info: bool = False,
    ) -> Optional[str]:
        """Writes a checkpoint of the variables' current values; returns its path prefix.

        With ``global_step`` the prefix is ``save_path-<step>``. The state file in the
        same directory then names it, and checkpoints beyond ``max_to_keep`` are
        deleted. With ``write_meta_graph`` (the default, as in TensorFlow) the session's
        graph is written beside it as ``<prefix>.<meta_graph_suffix>``, in tensorgrid's
        meta graph format (``tf.train.import_meta_graph`` reads it).
        """
        if not self._built:
            raise RuntimeError("`build()` should be called before save if defer_build==True")
        latest_filename = latest_filename or checkpoint_management.DEFAULT_STATE_FILENAME
        if os.path.split(latest_filename)[0]:
            raise ValueError("'latest_filename' must not contain path components")
        save_path = os.fspath(save_path)
        if global_step is not None:
            if not isinstance(global_step, numbers.Integral):
                global_step = training_util.global_step(sess, global_step)
            step = int(global_step)
            checkpoint_file = f"{save_path}-{step:08d}" if self._pad_step_number else f"{save_path}-{step}"
        else:
            checkpoint_file = save_path
        save_dir = os.path.dirname(save_path)
        if self._is_empty:
            return None
        if save_dir and not os.path.isdir(save_dir):
            # As TensorFlow's SaveV2 does: it makes the prefix's directory when that directory's own
            # parent exists, and refuses a path missing more than one level.
            if not os.path.isdir(os.path.dirname(save_dir) or "."):
                raise ValueError(f"Parent directory of {save_path} doesn't exist, can't save.")
            os.makedirs(save_dir, exist_ok=True)
        if self._incremental_saves is not None:
            self._incremental_saves.save(sess, checkpoint_file)
        else:
            evs = self._embedding_variables
            fetched, ev_values = sess.run([self._save_tensors, evs.save_tensors if evs is not None else []])
            values = iter(fetched)
            tensors = {entry.name: entry.assemble([next(values) for _ in entry.parts]) for entry in self._entries}
            if evs is not None:
                tensors.update(zip(evs.names, ev_values))
            checkpoint_format.write_checkpoint(checkpoint_file, tensors)
        if write_meta_graph:
            self._write_meta_graph(self._graph or sess.graph, f"{checkpoint_file}.{meta_graph_suffix}")
        if write_state:
            self._record_last_checkpoint(checkpoint_file)
            checkpoint_management.update_checkpoint_state_internal(
                save_dir=save_dir,
                model_checkpoint_path=checkpoint_file,
                all_model_checkpoint_paths=self.last_checkpoints,
                latest_filename=latest_filename,
                save_relative_paths=self._save_relative_paths,
                all_model_checkpoint_timestamps=(
                    [t for _, t in self._last_checkpoints] if self._last_checkpoints else None),
                last_preserved_timestamp=self._last_preserved_timestamp,
            )
            self._maybe_delete_old_checkpoints(meta_graph_suffix)
        return checkpoint_file

    def export_meta_graph(self, filename: Optional[str] = None, collection_list: Any = None, as_text: bool = False,
                          export_scope: Any = None, clear_devices: bool = False, clear_extraneous_savers: bool = False,
                          strip_default_attrs: bool = False, save_debug_info: bool = False) -> Any:
        """``tf.train.export_meta_graph`` of this saver's graph (tensorgrid's meta graph format)."""
        # meta_graph imports this module (import_meta_graph returns a Saver): imported here.
        from tensorgrid.train import meta_graph

        return meta_graph.export_meta_graph(filename, collection_list=collection_list, as_text=as_text,
                                            graph=self._graph or graph_lib.get_default_graph(),
                                            clear_devices=clear_devices)

    def _write_meta_graph(self, graph: graph_lib.Graph, filename: str) -> None:
        from tensorgrid.train import meta_graph

        try:
            meta_graph.export_meta_graph(filename, graph=graph)
        except (TypeError, ValueError) as e:
            # The checkpoint is written; a graph with values that have no wire form (Python objects in
            # attributes) only has no meta graph to rebuild it from.
            _log.warning("Checkpoint written without %s: the graph cannot be exported: %s", filename, e)

    def _record_last_checkpoint(self, latest_save_path: str) -> None:
        if not self._max_to_keep:
            return
        self._last_checkpoints = [(p, t) for p, t in self._last_checkpoints if p != latest_save_path]
        self._last_checkpoints.append((latest_save_path, time.time()))
        if len(self._last_checkpoints) > self._max_to_keep:
            self._checkpoints_to_be_deleted.append(self._last_checkpoints.pop(0))

    def _maybe_delete_old_checkpoints(self, meta_graph_suffix: str) -> None:
        # Called after the state file stops naming them: a crash never leaves it
        # pointing at a deleted checkpoint.
        still_needed: list[tuple[str, float]] = []
        needed: Optional[set[str]] = None
        while self._checkpoints_to_be_deleted:
            path, timestamp = self._checkpoints_to_be_deleted.pop(0)
            if timestamp > self._next_checkpoint_time:
                # One checkpoint every keep_checkpoint_every_n_hours is kept for good.
                self._next_checkpoint_time += self._keep_checkpoint_every_n_hours * 3600
                self._last_preserved_timestamp = timestamp
                self._preserved.append(path)
                continue
            if needed is None:
                needed = checkpoint_chain.needed_by(self.last_checkpoints + self._preserved)
            if path in needed:
                still_needed.append((path, timestamp))  # in a kept delta's chain: deleted after the last one needing it
                continue
            try:
                checkpoint_management.remove_checkpoint(path, meta_graph_suffix=meta_graph_suffix)
            except OSError as e:
                _log.warning("Ignoring: could not delete old checkpoint %s: %s", path, e)
        self._checkpoints_to_be_deleted = still_needed

    # ------------------------------------------------------------------ restore
    def restore(self, sess: Any, save_path: Any) -> None:
        """Loads the variables from checkpoint ``save_path`` (a prefix, as ``save`` returns).

        Raises NotFoundError when a variable is not in the checkpoint,
        InvalidArgumentError when a shape or dtype differs, and DataLossError naming
        the file when the checkpoint is corrupted.
        """
        if self._is_empty:
            return
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        save_path = os.fspath(save_path)
        if not checkpoint_management.checkpoint_exists(save_path):
            raise ValueError("The passed save_path is not a valid checkpoint: " + save_path)
        _log.info("Restoring parameters from %s", save_path)
        index = checkpoint_chain.LogicalCheckpoint(save_path)
        missing = [name for name in self._names if name not in index.tensors]
        if missing:
            raise _restore_error(
                errors.NotFoundError, "a Variable name or other graph key that is missing",
                f"Key{'s' if len(missing) > 1 else ''} {', '.join(missing)} not found in checkpoint {save_path}",
            )
        for name, saved, shape in zip(self._names, self._entries, self._restore_shapes):
            entry = index.tensors[name]
            wanted = _as_ref(saved.parts[0]).dtype.base_dtype.name
            if entry.dtype != wanted:
                raise _restore_error(
                    errors.InvalidArgumentError, "a mismatch between the current graph and the graph",
                    f"tensor_name = {name}; expected dtype {wanted} does not equal original dtype {entry.dtype} "
                    f"in checkpoint {save_path}",
                )
            if not shape.is_compatible_with(entry.shape) and not self._reshape_allowed(shape, entry.shape):
                raise _restore_error(
                    errors.InvalidArgumentError, "a mismatch between the current graph and the graph",
                    f"Assign requires shapes of both tensors to match. lhs shape= {shape.as_list()} "
                    f"rhs shape= {list(entry.shape)} (variable {name} in checkpoint {save_path})",
                )
        values = index.read(self._names)
        feeds = iter(self._restore_feeds)
        feed_dict = {}
        for saved, shape in zip(self._entries, self._restore_shapes):
            value = values[saved.name]
            if not shape.is_compatible_with(value.shape):
                value = np.reshape(value, shape.as_list())
            for part in saved.split(value):
                feed_dict[next(feeds)] = part
        evs = self._embedding_variables
        if evs is not None:
            feed_dict.update(evs.restore_feeds(index, save_path))
        sess.run([op for op in (self._restore_op, evs and evs.restore_op) if op is not None], feed_dict)
        if self._incremental_saves is not None:
            self._incremental_saves.forget_baselines()

    def _reshape_allowed(self, shape: Any, stored: tuple[int, ...]) -> bool:
        return bool(self._reshape) and shape.is_fully_defined() and shape.num_elements() == int(np.prod(stored))


class IncrementalSaver(Saver):
    """A ``Saver`` whose saves write only the rows written since its previous save, between full
    checkpoints every ``full_save_every`` deltas (``Saver(incremental=True)``)."""

    def __init__(self, var_list: Any = None, full_save_every: int = 10, **kwargs: Any) -> None:
        super().__init__(var_list, incremental=True, full_save_every=full_save_every, **kwargs)


# TF1's saver module also exports the checkpoint-finding functions.
latest_checkpoint = checkpoint_management.latest_checkpoint
get_checkpoint_state = checkpoint_management.get_checkpoint_state
checkpoint_exists = checkpoint_management.checkpoint_exists
update_checkpoint_state = checkpoint_management.update_checkpoint_state
