"""Random ops: normal, truncated normal, uniform, with TF1's seeding rules.

``tf.set_random_seed(s)`` plus an op's ``seed`` decide its stream: with both unset
the stream is fresh each process; with a graph seed only, the op seed is derived
from the op's position in the graph, so re-running the same program repeats it.
"""

from __future__ import annotations

from typing import Any, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import op_registry
from tensorgrid.ops import array_ops
from tensorgrid.ops import op_util

for _op_type in ("RandomStandardNormal", "TruncatedNormal", "RandomUniform", "RandomUniformInt", "RandomShuffle"):
    op_registry.register_op(_op_type, stateful=True)
    op_registry.NotDifferentiable(_op_type)

DEFAULT_GRAPH_SEED = 87654321


def get_seed(op_seed: Optional[int]) -> tuple[Optional[int], Optional[int]]:
    """The (graph seed, op seed) pair of a new random op, as ``tf.get_seed`` computes it."""
    graph = graph_lib.get_default_graph()
    graph_seed = graph.seed
    if graph_seed is not None:
        if op_seed is None:
            op_seed = graph._last_id
        return graph_seed, op_seed
    if op_seed is not None:
        return DEFAULT_GRAPH_SEED, op_seed
    return None, None


def _random(op_type: str, shape: Any, dtype: Any, seed: Optional[int], name: str) -> graph_lib.Tensor:
    dt = dtypes.as_dtype(dtype).base_dtype
    if not dt.is_floating:
        raise TypeError(f"{op_type} generates floating-point values, got dtype {dt.name}")
    shape_tensor = shape if isinstance(shape, graph_lib.Tensor) else array_ops.constant(shape, dtype=dtypes.int32)
    seed1, seed2 = get_seed(seed)
    static = array_ops.shape_from_tensor_value(shape_tensor)
    return op_util.make_tensor(op_type, [shape_tensor], dt, static, name,
                               {"dtype": dt.name, "seed": seed1 or 0, "seed2": seed2 or 0})


def random_normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = dtypes.float32,
                  seed: Optional[int] = None, name: Optional[str] = None) -> graph_lib.Tensor:
    from tensorgrid.ops import math_ops

    graph = graph_lib.get_default_graph()
    with graph.name_scope(name or "random_normal"):
        sample = _random("RandomStandardNormal", shape, dtype, seed, "RandomStandardNormal")
        return math_ops.add(math_ops.multiply(sample, stddev), mean)


def truncated_normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = dtypes.float32,
                     seed: Optional[int] = None, name: Optional[str] = None) -> graph_lib.Tensor:
    """Normal samples more than two standard deviations from the mean are redrawn."""
    from tensorgrid.ops import math_ops

    graph = graph_lib.get_default_graph()
    with graph.name_scope(name or "truncated_normal"):
        sample = _random("TruncatedNormal", shape, dtype, seed, "TruncatedNormal")
        return math_ops.add(math_ops.multiply(sample, stddev), mean)


def random_uniform(shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = dtypes.float32,
                   seed: Optional[int] = None, name: Optional[str] = None) -> graph_lib.Tensor:
    """Uniform samples in [minval, maxval) (maxval defaults to 1 for floats)."""
    from tensorgrid.ops import math_ops

    dt = dtypes.as_dtype(dtype).base_dtype
    if maxval is None:
        if not dt.is_floating:
            raise ValueError(f"maxval must be given for integer dtype {dt.name}")
        maxval = 1
    graph = graph_lib.get_default_graph()
    if dt.is_integer:
        return _random_uniform_int(shape, minval, maxval, dt, seed, name or "random_uniform")
    with graph.name_scope(name or "random_uniform"):
        sample = _random("RandomUniform", shape, dt, seed, "RandomUniform")
        lo = op_util.to_tensor(minval, dtype=dt)
        hi = op_util.to_tensor(maxval, dtype=dt)
        return math_ops.add(math_ops.multiply(sample, math_ops.subtract(hi, lo)), lo)


def _random_uniform_int(shape: Any, minval: Any, maxval: Any, dt: dtypes.DType, seed: Optional[int],
                        name: str) -> graph_lib.Tensor:
    """Integers in [minval, maxval) (TF's RandomUniformInt; minval < maxval is checked when it runs)."""
    if dt not in op_util.INDICES:
        raise TypeError(f"random_uniform makes int32 or int64 integers, got dtype {dt.name}")
    shape_tensor = shape if isinstance(shape, graph_lib.Tensor) else array_ops.constant(shape, dtype=dtypes.int32)
    lo, hi = op_util.to_tensor(minval, dtype=dt), op_util.to_tensor(maxval, dtype=dt)
    seed1, seed2 = get_seed(seed)
    return op_util.make_tensor("RandomUniformInt", [shape_tensor, lo, hi], dt,
                               array_ops.shape_from_tensor_value(shape_tensor), name,
                               {"Tout": dt.name, "seed": seed1 or 0, "seed2": seed2 or 0})


def random_shuffle(value: Any, seed: Optional[int] = None, name: Optional[str] = None) -> graph_lib.Tensor:
    """``value`` with its first dimension in a random order (``tf.random_shuffle``)."""
    t = op_util.to_tensor(value)
    seed1, seed2 = get_seed(seed)
    return op_util.make_tensor("RandomShuffle", [t], t.dtype.base_dtype, t.shape, name or "RandomShuffle",
                               {"seed": seed1 or 0, "seed2": seed2 or 0})
