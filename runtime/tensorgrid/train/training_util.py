"""The global step: the int64 variable ``global_step`` that counts training steps.

It is created through ``get_variable`` (so it lands where the device scope puts
variables: a parameter server in distributed training), is not trainable, and is in
the GLOBAL_VARIABLES and GLOBAL_STEP collections, where hooks and savers find it.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import init_ops
from tensorgrid.ops import variable_scope
from tensorgrid.ops import variables

GraphKeys = graph_lib.GraphKeys

_log = logging.getLogger(__name__)


def global_step(sess: Any, global_step_tensor: Any) -> int:
    """The current value of the global step, as a Python int."""
    return int(sess.run(global_step_tensor))


def get_global_step(graph: Optional[graph_lib.Graph] = None) -> Any:
    """The global step variable of ``graph`` (or the default graph), or None if there is none."""
    graph = graph or graph_lib.get_default_graph()
    candidates = graph.get_collection(GraphKeys.GLOBAL_STEP)
    if len(candidates) > 1:
        _log.error("Multiple tensors in global_step collection.")
        return None
    if candidates:
        step = candidates[0]
    else:
        try:
            step = graph.get_tensor_by_name("global_step:0")
        except KeyError:
            return None
    assert_global_step(step)
    return step


def create_global_step(graph: Optional[graph_lib.Graph] = None) -> variables.Variable:
    """Creates the global step in ``graph``; raises ValueError if it already has one."""
    graph = graph or graph_lib.get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError('"global_step" already exists.')
    with graph.as_default(), graph.name_scope(None):
        step: variables.Variable = variable_scope.get_variable(
            GraphKeys.GLOBAL_STEP, shape=[], dtype=dtypes.int64, initializer=init_ops.zeros_initializer(),
            trainable=False, collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.GLOBAL_STEP],
        )
        return step


def get_or_create_global_step(graph: Optional[graph_lib.Graph] = None) -> Any:
    """The global step of ``graph``, created first if needed."""
    graph = graph or graph_lib.get_default_graph()
    step = get_global_step(graph)
    if step is None:
        step = create_global_step(graph)
    return step


def assert_global_step(global_step_tensor: Any) -> None:
    """Raises TypeError unless ``global_step_tensor`` is a scalar integer Variable or Tensor."""
    if not isinstance(global_step_tensor, (variables.Variable, graph_lib.Tensor)):
        raise TypeError(f'Existing "global_step" must be a Variable or Tensor: {global_step_tensor}.')
    if not global_step_tensor.dtype.base_dtype.is_integer:
        raise TypeError(f'Existing "global_step" does not have integer type: {global_step_tensor.dtype}')
    shape = global_step_tensor.get_shape()
    if shape.ndims != 0 and shape.is_fully_defined():
        raise TypeError(f'Existing "global_step" is not scalar: {shape}')
