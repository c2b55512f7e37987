"""``tf.map_fn``: apply a function to each element along the first dimension, as TF1 builds it.

The elements are unstacked into TensorArrays; a ``tf.while_loop`` reads element ``i``
of each, calls ``fn`` and writes its results into output TensorArrays, which are
stacked after the loop. So ``map_fn`` is one While op (it runs whole on one device) and
its gradient is the While's gradient, through the TensorArrays' reads and writes.
``elems`` may be nested (tuples, lists, dicts); ``dtype`` gives the structure and dtypes
of ``fn``'s result when they differ from ``elems``'.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import functional_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import math_ops
from tensorgrid.ops import op_util
from tensorgrid.ops import tensor_array_ops
from tensorgrid.ops import while_ops


def _is_nested(value: Any) -> bool:
    return isinstance(value, (list, tuple, dict))


def map_fn(fn: Callable[[Any], Any], elems: Any, dtype: Any = None, parallel_iterations: Optional[int] = None,
           back_prop: bool = True, swap_memory: bool = False, infer_shape: bool = True,
           name: Optional[str] = None) -> Any:
    """``fn`` applied to each ``elems[i]`` (each a slice along the first dimension), stacked."""
    if not callable(fn):
        raise TypeError("fn must be callable.")
    if parallel_iterations is None:
        parallel_iterations = 10
    input_nested = _is_nested(elems)
    output_structure = elems if dtype is None else dtype
    output_nested = _is_nested(output_structure)

    def input_pack(leaves: list[Any]) -> Any:
        return functional_ops.pack_as(elems, leaves) if input_nested else leaves[0]

    def output_flatten(value: Any) -> list[Any]:
        return functional_ops.flatten(value) if output_nested else [value]

    graph = graph_lib.get_default_graph()
    with graph.name_scope(name or "map"):
        elems_flat = [op_util.to_tensor(e, name="elem") for e in (functional_ops.flatten(elems) if input_nested
                                                                   else [elems])]
        if not elems_flat:
            raise ValueError(f"elems must hold at least one tensor, got {elems!r}")
        if dtype is None:
            dtypes_flat = [e.dtype.base_dtype for e in elems_flat]
        else:
            dtypes_flat = [dtypes.as_dtype(d).base_dtype for d in output_flatten(dtype)]
        if elems_flat[0].shape.ndims == 0:
            raise ValueError("Elements in elems must be 1+ dimensional Tensors, not scalars")
        n_static = tensor_shape.Dimension(None)
        for e in elems_flat:
            if e.shape.ndims == 0:
                raise ValueError(f"elements in elems must be 1+ dimensional Tensors, not scalars: {e.name}")
            if e.shape.ndims is not None:
                n_static = n_static.merge_with(e.shape[0])
        n: Any = n_static.value
        if n is None:
            n = indexing_ops.strided_slice_from_key(array_ops.shape(elems_flat[0]), 0)
        elems_ta = [tensor_array_ops.TensorArray(dtype=e.dtype.base_dtype, size=n, dynamic_size=False,
                                                 infer_shape=True).unstack(e) for e in elems_flat]
        accs_ta = [tensor_array_ops.TensorArray(dtype=d, size=n, dynamic_size=False, infer_shape=infer_shape)
                   for d in dtypes_flat]

        def compute(i: Any, tas: list[Any]) -> tuple[Any, list[Any]]:
            packed_fn_values = fn(input_pack([ta.read(i) for ta in elems_ta]))
            functional_ops.assert_same_structure(output_structure, packed_fn_values,
                                                 "map_fn's dtype (or elems) and fn's result")
            flat_fn_values = output_flatten(packed_fn_values)
            return i + 1, [ta.write(i, value) for ta, value in zip(tas, flat_fn_values)]

        i = array_ops.constant(0)
        _, results_ta = while_ops.while_loop(
            lambda i, _: math_ops.less(i, n), compute, (i, accs_ta), parallel_iterations=parallel_iterations,
            back_prop=back_prop, swap_memory=swap_memory, maximum_iterations=n)
        results_flat = [r.stack() for r in results_ta]
        for r in results_flat:
            r.set_shape(tensor_shape.TensorShape([n_static]).concatenate(r.shape[1:]))
        return functional_ops.pack_as(output_structure, results_flat) if output_nested else results_flat[0]
