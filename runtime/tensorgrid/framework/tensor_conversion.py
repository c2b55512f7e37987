"""Turning Python values into graph Tensors: ``convert_to_tensor`` and its registry.

Op constructors accept numpy arrays, Python values, Variables and SparseTensors where a
Tensor is expected; each such type registers a conversion function here (constants
from the ops layer, Variables from theirs), so the graph itself knows none of them.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib

_conversion_functions: list[tuple[type, Callable[..., Any]]] = []


def register_tensor_conversion_function(base_type: Any, conversion_func: Callable[..., Any]) -> None:
    """Teaches ``convert_to_tensor`` a new type; later registrations are tried first."""
    _conversion_functions.insert(0, (base_type, conversion_func))


def convert_to_tensor(value: Any, dtype: Any = None, name: Optional[str] = None, as_ref: bool = False) -> graph_lib.Tensor:
    """Turns a Tensor, Variable, numpy array or Python value into a Tensor of this graph."""
    wanted = dtypes.as_dtype(dtype) if dtype is not None else None
    if isinstance(value, graph_lib.Tensor):
        result = value
    else:
        for base_type, fn in _conversion_functions:
            if isinstance(value, base_type):
                result = fn(value, dtype=wanted, name=name, as_ref=as_ref)
                break
        else:
            raise TypeError(f"Cannot convert {value!r} of type {type(value).__name__} to a Tensor")
    if wanted is not None and result.dtype.base_dtype != wanted.base_dtype:
        raise ValueError(
            f"Tensor conversion requested dtype {wanted.name} for Tensor {result.name} "
            f"with dtype {result.dtype.name}"
        )
    return result

