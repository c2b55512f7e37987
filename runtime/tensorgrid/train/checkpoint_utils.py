"""``tf.train.init_from_checkpoint`` (TF's ``checkpoint_utils``): variables named by an assignment map take their first values from
a checkpoint (fine-tuning a model trained before, with TensorFlow or tensorgrid).

TF1's rules (``checkpoint_utils.init_from_checkpoint``): each ``(tensor in the checkpoint, current
variable)`` pair, in the order of the checkpoint names, is either one to one (the current side a
Variable, a list of the parts of a partitioned variable, or the name of a variable made by
``tf.get_variable``, a partitioned one by its full name) or scope to scope (``'old_scope/':
'new_scope/'``, ``'/'`` for the root on either side: every ``get_variable`` variable under the
new scope reads the tensor of the same name under the old one). Like ``warm_start``
(warm_starting_util), it replaces the variables' initializers with assigns of values read from the
checkpoint when they run; names and shapes are checked at the call, with TF's ValueErrors.
"""

from __future__ import annotations

import collections.abc
import logging
from typing import Any, Optional

from tensorgrid.ops import partitioned_variables
from tensorgrid.ops import variable_scope
from tensorgrid.ops import variables
from tensorgrid.train import checkpoint_management
from tensorgrid.train import warm_start_reads
from tensorgrid.train import warm_starting_util

log = logging.getLogger("tensorgrid.train")


def _as_parts(current: Any, store: dict[str, variables.Variable]) -> Optional[list[variables.Variable]]:
    """The variable(s) ``current`` names one to one, or None when it is a scope."""
    if isinstance(current, variables.Variable):
        return [current]
    if isinstance(current, partitioned_variables.PartitionedVariable):
        return list(current)
    if isinstance(current, list) and current and all(isinstance(v, variables.Variable) for v in current):
        return list(current)
    if not isinstance(current, str):
        raise ValueError(f"The current side of an assignment map entry must be a Variable, a list of the parts of "
                         f"a partitioned variable, a variable's name or a scope ('scope/'), got {current!r}")
    return _by_name(current, store)


def _by_name(name: str, store: dict[str, variables.Variable]) -> Optional[list[variables.Variable]]:
    if name in store:
        return [store[name]]
    parts: list[variables.Variable] = []
    while f"{name}/part_{len(parts)}" in store:
        parts.append(store[f"{name}/part_{len(parts)}"])
    return parts or None


def _initialize(parts: list[variables.Variable], checkpoint: str, tensor_name: str,
                shapes: dict[str, list[int]]) -> None:
    if tensor_name not in shapes:
        raise ValueError(f"Tensor {tensor_name} is not found in {checkpoint} checkpoint {shapes}")
    infos = [part._get_save_slice_info() for part in parts]
    if len(parts) > 1:
        full_names = {info.full_name if info is not None else part.op.name for part, info in zip(parts, infos)}
        if len(full_names) > 1 or any(info is None for info in infos):
            raise ValueError(f"Slices must all be from the same tensor: {', '.join(sorted(full_names))}")
    shape = warm_start_reads.full_shape(parts) if infos[0] is not None else parts[0].get_shape().as_list()
    saved = list(shapes[tensor_name])
    if len(shape) != len(saved) or any(d is not None and d != s for d, s in zip(shape, saved)):
        raise ValueError(f"Shape of variable {parts[0].op.name if infos[0] is None else infos[0].full_name} "
                         f"({shape}) doesn't match with shape of tensor {tensor_name} ({saved}) from checkpoint "
                         "reader.")
    name = infos[0].full_name if infos[0] is not None else parts[0].op.name
    planned = warm_starting_util.WarmStartedVariable(name, parts, tensor_name, None)
    for part, assign in zip(parts, warm_starting_util.checkpoint_assigns(planned, checkpoint)):
        part._initializer_op = assign.op


def init_from_checkpoint(ckpt_dir_or_file: Any, assignment_map: Any) -> None:
    """Makes the variables of ``assignment_map`` (``{checkpoint name or 'scope/': variable, name or
    'scope/'}``, or a list of pairs) initialize from checkpoint ``ckpt_dir_or_file`` (a prefix, either
    format, or a directory's latest); call it before the initializer op is built."""
    checkpoint = warm_starting_util.checkpoint_to_read(ckpt_dir_or_file)
    shapes = dict(checkpoint_management.list_variables(checkpoint))
    store = variable_scope.variables_by_name()
    pairs = list(assignment_map.items() if isinstance(assignment_map, collections.abc.Mapping) else assignment_map)
    for tensor_name, current in sorted(pairs, key=lambda pair: str(pair[0])):
        parts = _as_parts(current, store)
        if parts is not None:
            _initialize(parts, checkpoint, tensor_name, shapes)
            log.debug("Initialize variable %s from checkpoint %s with %s", current, checkpoint, tensor_name)
            continue
        scope = current[:current.rindex("/")] if "/" in current else ""
        if not tensor_name.endswith("/"):
            raise ValueError(f"Assignment map with scope only name {scope} should map to scope only {tensor_name}. "
                             "Should be 'scope/': 'other_scope/'.")
        in_scope = sorted({name[:name.index("/part_")] if "/part_" in name else name
                           for name in store if not scope or name.startswith(scope + "/")})
        for variable_name in in_scope:
            full_name = variable_name[len(scope):]
            if current != "/":
                full_name = full_name[1:]
            if tensor_name != "/":
                full_name = tensor_name + full_name
            full_name = full_name[:-1] if full_name.endswith("/") else full_name
            if full_name not in shapes:
                raise ValueError(f"Tensor {full_name} ({variable_name[len(scope) + 1:]} in {tensor_name}) is not "
                                 f"found in {ckpt_dir_or_file} checkpoint")
            found = _by_name(variable_name, store)
            assert found is not None  # every name of in_scope is a variable's or a partitioned one's
            _initialize(found, checkpoint, full_name, shapes)
