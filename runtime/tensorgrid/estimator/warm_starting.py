"""``Estimator(warm_start_from=...)`` and ``tf.estimator.WarmStartSettings``: a new model that starts from
another model's checkpoint.

When training starts with no checkpoint of its own in ``model_dir``, the selected variables take
their first values from ``ckpt_to_initialize_from`` (a checkpoint, a model directory's latest, or
an export's ``variables``) instead of their initializers; once the model has a checkpoint, that
checkpoint wins, as in TensorFlow. The selection is TensorFlow's: a regex over the trainable
variables (``'.*'``, the default: all of them), or a list of regexes over all global variables
(optimizer slots, the global step); a partitioned variable is one variable, by its full name;
``var_name_to_prev_var_name`` reads a variable from a checkpoint tensor of another name;
``var_name_to_vocab_info`` remaps a variable's rows (or columns) from an old vocabulary to a new one
(``vocab_remapping.py``).

TensorFlow does it by replacing the variables' initializers; here the chief's Scaffold ``init_fn``
(run only when the model is initialized, after the initializers) restores them with a Saver of
the checkpoint's names, so the PS tasks of a cluster receive them as any restore.
"""

from __future__ import annotations

import collections
import logging
import os
from typing import Any, Optional

from tensorgrid.estimator import vocab_remapping
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import variables
from tensorgrid.train import checkpoint_management
from tensorgrid.train import monitored_session
from tensorgrid.train import saved_model_io
from tensorgrid.train import saver as saver_lib

log = logging.getLogger("tensorgrid.estimator")


class WarmStartSettings(collections.namedtuple("WarmStartSettings", [
        "ckpt_to_initialize_from", "vars_to_warm_start", "var_name_to_vocab_info", "var_name_to_prev_var_name"])):
    """Which variables to warm-start from which checkpoint (``tf.estimator.WarmStartSettings``)."""

    def __new__(cls, ckpt_to_initialize_from: Any, vars_to_warm_start: Any = ".*",
                var_name_to_vocab_info: Optional[dict[str, Any]] = None,
                var_name_to_prev_var_name: Optional[dict[str, str]] = None) -> "WarmStartSettings":
        if not ckpt_to_initialize_from:
            raise ValueError("`ckpt_to_initialize_from` MUST be set in WarmStartSettings")
        return super().__new__(cls, ckpt_to_initialize_from, vars_to_warm_start, dict(var_name_to_vocab_info or {}),
                               dict(var_name_to_prev_var_name or {}))


def settings_from(warm_start_from: Any) -> Optional[WarmStartSettings]:
    """Estimator's ``warm_start_from`` as settings: a path (a checkpoint, a model directory or an
    export directory, whose ``variables`` are read) warm-starts every trainable variable."""
    if warm_start_from is None:
        return None
    if isinstance(warm_start_from, (str, bytes, os.PathLike)):
        path = os.fsdecode(warm_start_from)
        if saved_model_io.contains_saved_model(path):
            log.info("Warm-starting from a SavedModel")
            return WarmStartSettings(ckpt_to_initialize_from=saved_model_io.variables_prefix(path))
        return WarmStartSettings(ckpt_to_initialize_from=path)
    if isinstance(warm_start_from, WarmStartSettings):
        return warm_start_from
    raise ValueError(f"warm_start_from must be a string or a WarmStartSettings, instead got {type(warm_start_from)}")


def _variables_to_warm_start(vars_to_warm_start: Any, graph: graph_lib.Graph) -> list[Any]:
    keys = graph_lib.GraphKeys
    if vars_to_warm_start is None or isinstance(vars_to_warm_start, str):
        log.info("Warm-starting variables only in TRAINABLE_VARIABLES.")
        return graph.get_collection(keys.TRAINABLE_VARIABLES, scope=vars_to_warm_start)
    if isinstance(vars_to_warm_start, list):
        if all(isinstance(pattern, str) for pattern in vars_to_warm_start):
            selected: list[Any] = []
            for pattern in vars_to_warm_start:
                selected += graph.get_collection(keys.GLOBAL_VARIABLES, scope=pattern)
            return selected
        if all(isinstance(variable, variables.Variable) for variable in vars_to_warm_start):
            return list(vars_to_warm_start)
        raise ValueError("If `vars_to_warm_start` is a list, it must be all `Variable` or all `str`.  Given types "
                         f"are {[type(item).__name__ for item in vars_to_warm_start]}")
    raise ValueError(f"`vars_to_warm_start must be a `list` or `str`.  Given type is {type(vars_to_warm_start)}")


def _grouped_by_name(selected: list[Any]) -> dict[str, list[Any]]:
    """The selected variables by checkpoint name: a partitioned variable's parts under its full name."""
    grouped: dict[str, list[Any]] = {}
    for variable in selected:
        info = variable._get_save_slice_info()
        name = info.full_name if info is not None else variable.op.name
        if variable not in grouped.setdefault(name, []):
            grouped[name].append(variable)
    return grouped


def _full_shape(parts: list[Any]) -> list[Optional[int]]:
    info = parts[0]._get_save_slice_info()
    return list(info.full_shape) if info is not None else parts[0].get_shape().as_list()


class WarmStart:
    """What the warm start runs, once, when the model is first initialized: a Saver restoring the
    variables taken as they are (None when there are none) from ``checkpoint``, and the assigns of
    the variables remapped by vocabulary (``var_name_to_vocab_info``)."""

    def __init__(self, saver: Optional[saver_lib.Saver], checkpoint: str, remapping_assigns: list[Any]) -> None:
        self.saver = saver
        self.checkpoint = checkpoint
        self.remapping_assigns = remapping_assigns

    def run(self, session: Any) -> None:
        if self.saver is not None:
            self.saver.restore(session, self.checkpoint)
        if self.remapping_assigns:
            session.run(self.remapping_assigns)


def _unused_names_error(argument: str, unused: list[str], viable: list[str]) -> ValueError:
    return ValueError(f"You provided the following variables in {argument} that were not used: {unused}.  "
                      f"Perhaps you misspelled them?  Here is the list of viable variable names: {viable}")


def planned_warm_start(settings: WarmStartSettings, graph: graph_lib.Graph) -> Optional[WarmStart]:
    """The restores and remapping assigns of the selected variables, None when nothing is selected.
    ValueError for a tensor missing from the checkpoint, a shape that differs, or a
    ``var_name_to_prev_var_name`` or ``var_name_to_vocab_info`` key that names no selected variable.
    With ``vars_to_warm_start`` None, only the variables with a VocabInfo are warm-started, as in TF."""
    checkpoint = os.fsdecode(settings.ckpt_to_initialize_from)
    if os.path.isdir(checkpoint):
        latest = checkpoint_management.latest_checkpoint(checkpoint)
        if latest is None:
            raise ValueError(f"Couldn't find a checkpoint to warm-start from in {checkpoint}")
        checkpoint = latest
    shapes = dict(checkpoint_management.list_variables(checkpoint))
    grouped = _grouped_by_name(_variables_to_warm_start(settings.vars_to_warm_start, graph))
    renames = settings.var_name_to_prev_var_name
    vocab_infos = settings.var_name_to_vocab_info
    for argument, names in (("var_name_to_prev_var_name", renames), ("var_name_to_vocab_info", vocab_infos)):
        unused = sorted(set(names) - set(grouped))
        if unused:
            raise _unused_names_error(argument, unused, sorted(grouped))
    var_list: dict[str, Any] = {}
    assigns: list[Any] = []
    for name, parts in sorted(grouped.items()):
        previous = renames.get(name, name)
        vocab_info = vocab_remapping.vocab_info_for(name, vocab_infos)
        if vocab_info is not None:
            assigns += vocab_remapping.remapping_assigns(name, parts, vocab_info, checkpoint, previous)
            continue
        if not settings.vars_to_warm_start:
            continue
        if previous not in shapes:
            raise ValueError(f"Tensor {previous} is not found in {checkpoint} checkpoint (to warm-start {name}); "
                             f"it has {sorted(shapes)}")
        if list(shapes[previous]) != _full_shape(parts):
            raise ValueError(f"Shape of variable {name} ({_full_shape(parts)}) doesn't match with shape of tensor "
                             f"{previous} ({list(shapes[previous])}) from checkpoint reader.")
        log.info("Warm-starting variable: %s; prev_var_name: %s", name, previous)
        var_list[previous] = parts if len(parts) > 1 or parts[0]._get_save_slice_info() is not None else parts[0]
    if not var_list and not assigns:
        return None
    saver = saver_lib.Saver(var_list=var_list, name="warm_start_saver") if var_list else None
    return WarmStart(saver, checkpoint, assigns)


def warm_started_scaffold(scaffold: monitored_session.Scaffold, settings: WarmStartSettings,
                          graph: graph_lib.Graph) -> monitored_session.Scaffold:
    """``scaffold`` with an ``init_fn`` that first restores the warm-started variables (then runs its own)."""
    warm_start = planned_warm_start(settings, graph)
    if warm_start is None:
        return scaffold
    own_init_fn = scaffold.init_fn  # the model_fn's, bound to its scaffold

    def init_fn(unused_scaffold: monitored_session.Scaffold, session: Any) -> None:
        warm_start.run(session)
        if own_init_fn is not None:
            own_init_fn(session)

    return monitored_session.Scaffold(init_fn=init_fn, summary_op=scaffold.summary_op, copy_from_scaffold=scaffold)
