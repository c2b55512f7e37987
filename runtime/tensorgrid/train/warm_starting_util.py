"""``tf.train.warm_start``: a new model's variables take their first values from another model's checkpoint.

Which variables, and from which checkpoint tensors, is TensorFlow's rule, shared with the
Estimator's ``WarmStartSettings`` (``estimator/warm_starting.py``): a regex over the trainable
variables (``'.*'``, the default: all of them), a list of regexes over all global variables
(optimizer slots, the global step) or a list of variables; a partitioned variable is one variable,
by its full name; ``var_name_to_prev_var_name`` reads a variable from a checkpoint tensor of
another name; ``var_name_to_vocab_info`` remaps a variable's rows (or columns) from an old
vocabulary to a new one (``vocab_remapping.py``). With ``vars_to_warm_start`` None only the
variables with a VocabInfo are warm-started.

``warm_start`` does what TensorFlow's does: it replaces the initializers of the selected variables
(each part of a partitioned one), so that whatever runs them (``global_variables_initializer``, a
Scaffold, a MonitoredTrainingSession) gives the checkpoint's values. The checkpoint's names and
shapes are checked when ``warm_start`` is called; the values are read when the initializer runs
(``warm_start_reads``), as TensorFlow reads them, so a big table does not make a big graph.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Optional

from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import state_ops
from tensorgrid.ops import variables
from tensorgrid.train import checkpoint_management
from tensorgrid.train import vocab_remapping
from tensorgrid.train import warm_start_reads

log = logging.getLogger("tensorgrid.train")


@dataclasses.dataclass(frozen=True)
class WarmStartedVariable:
    """One variable to warm-start: its name, its parts, the checkpoint tensor it reads and its VocabInfo."""

    name: str
    """The variable's name (a partitioned variable's full name)."""
    parts: list[Any]
    """Its Variables: one, or the parts of a partitioned variable."""
    previous_name: str
    """The checkpoint tensor it takes its value from."""
    vocab_info: Optional[vocab_remapping.VocabInfo]
    """How its rows (columns) are remapped by vocabulary, None to take the tensor as it is."""


def checkpoint_to_read(ckpt_to_initialize_from: Any) -> str:
    """A checkpoint prefix: ``ckpt_to_initialize_from`` itself, or the latest checkpoint of a directory."""
    checkpoint = os.fsdecode(ckpt_to_initialize_from)
    if os.path.isdir(checkpoint):
        latest = checkpoint_management.latest_checkpoint(checkpoint)
        if latest is None:
            raise ValueError(f"Couldn't find a checkpoint to warm-start from in {checkpoint}")
        checkpoint = latest
    return checkpoint


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


def _unused_names_error(argument: str, unused: list[str], viable: list[str]) -> ValueError:
    return ValueError(f"You provided the following variables in {argument} that were not used: {unused}.  "
                      f"Perhaps you misspelled them?  Here is the list of viable variable names: {viable}")


def variables_to_warm_start(checkpoint: str, vars_to_warm_start: Any, var_name_to_vocab_info: dict[str, Any],
                            var_name_to_prev_var_name: dict[str, str],
                            graph: graph_lib.Graph) -> list[WarmStartedVariable]:
    """The variables of ``graph`` to warm-start from ``checkpoint`` (a prefix), by name. ValueError for a
    tensor missing from the checkpoint, a shape that differs, or a ``var_name_to_prev_var_name`` or
    ``var_name_to_vocab_info`` key that names no selected variable."""
    shapes = dict(checkpoint_management.list_variables(checkpoint))
    grouped = _grouped_by_name(_variables_to_warm_start(vars_to_warm_start, graph))
    for argument, names in (("var_name_to_prev_var_name", var_name_to_prev_var_name),
                            ("var_name_to_vocab_info", var_name_to_vocab_info)):
        unused = sorted(set(names) - set(grouped))
        if unused:
            raise _unused_names_error(argument, unused, sorted(grouped))
    planned = []
    for name, parts in sorted(grouped.items()):
        previous = var_name_to_prev_var_name.get(name, name)
        vocab_info = vocab_remapping.vocab_info_for(name, var_name_to_vocab_info)
        if vocab_info is None and not vars_to_warm_start:
            continue
        if previous not in shapes:
            raise ValueError(f"Tensor {previous} is not found in {checkpoint} checkpoint (to warm-start {name}); "
                             f"it has {sorted(shapes)}")
        shape = warm_start_reads.full_shape(parts)
        if vocab_info is None and list(shapes[previous]) != shape:
            raise ValueError(f"Shape of variable {name} ({shape}) doesn't match with shape of tensor "
                             f"{previous} ({list(shapes[previous])}) from checkpoint reader.")
        planned.append(WarmStartedVariable(name, parts, previous, vocab_info))
    return planned


def checkpoint_assigns(variable: WarmStartedVariable, checkpoint: str) -> list[Any]:
    """One assign per part of the checkpoint tensor's slice that part holds, read when it runs."""
    log.info("Warm-starting variable: %s; prev_var_name: %s", variable.name, variable.previous_name)

    def whole_value() -> tuple[Any, ...]:
        return (checkpoint_management.load_variable(checkpoint, variable.previous_name),)

    shape = warm_start_reads.full_shape(variable.parts)
    assigns = []
    for part in variable.parts:
        value, = warm_start_reads.read_when_run(part, shape, whole_value, [part.dtype.base_dtype],
                                                name="read_checkpoint_value")
        assigns.append(state_ops.assign(part, value, name="warm_start_assign"))
    return assigns


def warm_start(ckpt_to_initialize_from: Any, vars_to_warm_start: Any = ".*",
               var_name_to_vocab_info: Optional[dict[str, Any]] = None,
               var_name_to_prev_var_name: Optional[dict[str, str]] = None) -> None:
    """Makes the selected variables of the default graph initialize from ``ckpt_to_initialize_from`` (a
    checkpoint prefix or a directory's latest checkpoint) instead of their initializers
    (``tf.compat.v1.train.warm_start``); call it before the initializer op is built."""
    if not ckpt_to_initialize_from:
        raise ValueError(f"ckpt_to_initialize_from must name a checkpoint, got {ckpt_to_initialize_from!r}")
    graph = graph_lib.get_default_graph()
    checkpoint = checkpoint_to_read(ckpt_to_initialize_from)
    planned = variables_to_warm_start(checkpoint, vars_to_warm_start, dict(var_name_to_vocab_info or {}),
                                      dict(var_name_to_prev_var_name or {}), graph)
    for variable in planned:
        with graph.name_scope(f"warm_start/{variable.name}"):
            if variable.vocab_info is not None:
                assigns = vocab_remapping.remapping_assigns(variable.name, variable.parts, variable.vocab_info,
                                                            checkpoint, variable.previous_name)
            else:
                assigns = checkpoint_assigns(variable, checkpoint)
        for part, assign in zip(variable.parts, assigns):
            part._initializer_op = assign.op
    log.info("Warm-started %d variables.", len(planned))
