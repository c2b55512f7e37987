"""``Estimator(warm_start_from=...)`` and ``tf.estimator.WarmStartSettings``: a new model that starts from
another model's checkpoint.

When training starts with no checkpoint of its own in ``model_dir``, the selected variables take
their first values from ``ckpt_to_initialize_from`` (a checkpoint, a model directory's latest, or
an export's ``variables``) instead of their initializers; once the model has a checkpoint, that
checkpoint wins, as in TensorFlow. The selection is TensorFlow's, shared with ``tf.train.warm_start``
(``train/warm_starting_util.py``): a regex over the trainable variables (``'.*'``, the default: all
of them), or a list of regexes over all global variables (optimizer slots, the global step); a
partitioned variable is one variable, by its full name; ``var_name_to_prev_var_name`` reads a
variable from a checkpoint tensor of another name; ``var_name_to_vocab_info`` remaps a variable's
rows (or columns) from an old vocabulary to a new one (``train/vocab_remapping.py``).

TensorFlow does it by replacing the variables' initializers; here the chief's Scaffold ``init_fn``
(run only when the model is initialized, after the initializers) restores them with a Saver of
the checkpoint's names, so the PS tasks of a cluster receive them as any restore.
"""

from __future__ import annotations

import collections
import logging
import os
from typing import Any, Optional

from tensorgrid.framework import graph as graph_lib
from tensorgrid.train import monitored_session
from tensorgrid.train import saved_model_io
from tensorgrid.train import saver as saver_lib
from tensorgrid.train import vocab_remapping
from tensorgrid.train import warm_starting_util

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


def planned_warm_start(settings: WarmStartSettings, graph: graph_lib.Graph) -> Optional[WarmStart]:
    """The restores and remapping assigns of the selected variables (``train/warm_starting_util.py``'s
    selection), None when nothing is selected."""
    checkpoint = warm_starting_util.checkpoint_to_read(settings.ckpt_to_initialize_from)
    planned = warm_starting_util.variables_to_warm_start(
        checkpoint, settings.vars_to_warm_start, settings.var_name_to_vocab_info, settings.var_name_to_prev_var_name,
        graph)
    var_list: dict[str, Any] = {}
    assigns: list[Any] = []
    for variable in planned:
        if variable.vocab_info is not None:
            assigns += vocab_remapping.remapping_assigns(variable.name, variable.parts, variable.vocab_info,
                                                         checkpoint, variable.previous_name)
            continue
        log.info("Warm-starting variable: %s; prev_var_name: %s", variable.name, variable.previous_name)
        parts = variable.parts
        var_list[variable.previous_name] = (
            parts if len(parts) > 1 or parts[0]._get_save_slice_info() is not None else parts[0])
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
