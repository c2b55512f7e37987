"""Warm-start values read from the checkpoint when the initializer runs, not when the graph is built.

``tf.train.warm_start`` and a ``VocabInfo`` remapping give each selected variable (each part of a
partitioned one) an initializer that assigns a value taken from another model's checkpoint. Held as
a constant of the graph, that value made the graph as big as the table: a 1,000,000 x 64 float
embedding put 256 MB into the graph, into every meta graph a Saver writes and into the partition a
cluster task registers, and a checkpoint written after the call was never seen. Here the value is
the output of a ``py_func`` op that reads the checkpoint (and, for a remapping, the vocabulary
files) each time the initializer runs, as TensorFlow's restore op does. The op runs in the process
that built the graph, on its own task, where tensorgrid reads and writes checkpoints
(``train/saver.py``); the assign carries the value to the variable's task. A part reads the whole
checkpoint tensor and keeps its slice, so a variable in N parts reads its tensor N times.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from tensorgrid.framework import graph as graph_lib
from tensorgrid.ops import script_ops


def full_shape(parts: list[Any]) -> list[Optional[int]]:
    """The shape of the whole variable the parts make up (a variable not partitioned is its one part)."""
    info = parts[0]._get_save_slice_info()
    return list(info.full_shape) if info is not None else parts[0].get_shape().as_list()


def part_window(part: Any) -> tuple[slice, ...]:
    """The slice of the whole (logical) variable that ``part`` holds: all of it when not partitioned."""
    info = part._get_save_slice_info()
    shape = part.get_shape().as_list()
    offset = list(info.var_offset) if info is not None else [0] * len(shape)
    return tuple(slice(start, start + size) for start, size in zip(offset, shape))


def read_when_run(part: Any, full_shape: list[Any], whole_values: Callable[[], tuple[np.ndarray, ...]],
                  dtypes_out: list[Any], name: str) -> list[graph_lib.Tensor]:
    """Tensors of ``part``'s shape whose values are ``whole_values()`` (arrays of the whole variable's
    ``full_shape``, read when the op runs) sliced to the part, cast to ``dtypes_out``."""
    window = part_window(part)
    shape = part.get_shape()
    numpy_dtypes = [np.dtype(dtype.as_numpy_dtype) for dtype in dtypes_out]

    def sliced() -> tuple[np.ndarray, ...]:
        values = [np.asarray(value) for value in whole_values()]
        for value in values:
            if list(value.shape) != list(full_shape):
                raise ValueError(f"warm start of {part.op.name}: the checkpoint now gives a value of shape "
                                 f"{list(value.shape)} for a variable of shape {list(full_shape)} (was the "
                                 f"checkpoint replaced after the graph was built?)")
        return tuple(np.array(value[window], dtype=dtype, order="C") for value, dtype in zip(values, numpy_dtypes))

    outputs = script_ops.py_func(sliced, [], list(dtypes_out), stateful=True, name=name)
    assert isinstance(outputs, list)
    for output in outputs:
        output.set_shape(shape)
    return outputs
