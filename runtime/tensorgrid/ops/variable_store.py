"""The store behind ``tf.get_variable``: one graph's variables by full name, made or shared.

``variable_scope`` decides the name and the defaults (initializer, regularizer, reuse,
custom getter) of a variable; this store applies TF1's rules for that name: create it
once, share it on reuse, check that a shared variable's shape and dtype match, pick
the default initializer, add the regularizer's loss, and hand partitioned variables
to ``partitioned_variables``. One store lives in each graph's collections.
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable, Optional, Sequence

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import init_ops
from tensorgrid.ops import partitioned_variables
from tensorgrid.ops import variables

GraphKeys = graph_lib.GraphKeys


class VariableStore:
    """The variables of one graph created by ``get_variable``, by full name."""

    def __init__(self) -> None:
        self._vars: dict[str, variables.Variable] = {}
        self._partitioned_vars: dict[str, partitioned_variables.PartitionedVariable] = {}
        self._lock = threading.RLock()  # a regularizer or initializer may call get_variable

    def variables_by_name(self) -> dict[str, variables.Variable]:
        """Every variable made here by its full name, each part of a partitioned one under its own
        (``emb/part_0``), as TF's store holds them (what ``tf.train.init_from_checkpoint`` looks up)."""
        with self._lock:
            return dict(self._vars)

    def get_variable(
        self,
        name: str,
        shape: Any = None,
        dtype: Any = dtypes.float32,
        initializer: Any = None,
        regularizer: Any = None,
        reuse: Any = None,
        trainable: Optional[bool] = None,
        collections: Optional[Sequence[str]] = None,
        caching_device: Any = None,
        partitioner: Any = None,
        validate_shape: bool = True,
        use_resource: Any = None,
        custom_getter: Any = None,
        constraint: Any = None,
    ) -> Any:
        getter_kwargs = dict(
            name=name, shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
            reuse=reuse, trainable=trainable, collections=collections, caching_device=caching_device,
            partitioner=partitioner, validate_shape=validate_shape, use_resource=use_resource, constraint=constraint,
        )
        if custom_getter is not None:
            if not callable(custom_getter):
                raise ValueError(f"Passed a custom_getter which is not callable: {custom_getter!r}")
            return custom_getter(getter=self._true_getter, **getter_kwargs)
        return self._true_getter(**getter_kwargs)

    def _true_getter(
        self,
        name: str,
        shape: Any = None,
        dtype: Any = dtypes.float32,
        initializer: Any = None,
        regularizer: Any = None,
        reuse: Any = None,
        trainable: Optional[bool] = None,
        collections: Optional[Sequence[str]] = None,
        caching_device: Any = None,
        partitioner: Any = None,
        validate_shape: bool = True,
        use_resource: Any = None,
        constraint: Any = None,
        **unused: Any,
    ) -> Any:
        single_args = (regularizer, reuse, trainable, collections, caching_device, validate_shape, constraint)
        with self._lock:
            is_scalar = isinstance(shape, (list, tuple)) and not shape
            if partitioner is not None and not is_scalar:
                if not callable(partitioner):
                    raise ValueError(f"Partitioner must be callable, but received: {partitioner!r}")
                return self._get_partitioned_variable(name, partitioner, shape, dtype, initializer, *single_args)
            if reuse is True and partitioner is None and name in self._partitioned_vars:
                return self._get_partitioned_variable(name, None, shape, dtype, initializer, *single_args)
            if f"{name}/part_0" in self._vars:
                raise ValueError(
                    f"No partitioner was provided, but a partitioned version of the variable was found: "
                    f"{name}/part_0. Perhaps a variable of the same name was already created with partitioning?"
                )
            return self._get_single_variable(name, shape, dtype, initializer, *single_args)

    def _get_partitioned_variable(
        self, name: str, partitioner: Any, shape: Any, dtype: Any, initializer: Any, regularizer: Any,
        reuse: Any, trainable: Optional[bool], collections: Optional[Sequence[str]], caching_device: Any,
        validate_shape: bool, constraint: Any,
    ) -> partitioned_variables.PartitionedVariable:
        """TF's ``_get_partitioned_variable``: the parts ``<name>/part_<i>``, made or found."""
        dt = dtypes.as_dtype(dtype).base_dtype

        def make_part(part_name: str, init_shape: Any, part_dtype: Any, init: Any, info: Any) -> variables.Variable:
            return self._get_single_variable(part_name, init_shape, part_dtype, init, regularizer, reuse, trainable,
                                             collections, caching_device, validate_shape, constraint,
                                             partition_info=info)

        return partitioned_variables.get_partitioned_variable(
            name, partitioner, shape, dt, initializer, reuse, self._vars, self._partitioned_vars, make_part,
            lambda: _default_initializer(name, dt))

    def _get_single_variable(
        self, name: str, shape: Any, dtype: Any, initializer: Any, regularizer: Any, reuse: Any,
        trainable: Optional[bool], collections: Optional[Sequence[str]], caching_device: Any,
        validate_shape: bool, constraint: Any, partition_info: Any = None,
    ) -> variables.Variable:
        initializing_from_value = initializer is not None and not callable(initializer)
        if shape is not None and initializing_from_value:
            raise ValueError("If initializer is a constant, do not specify shape.")
        dt = dtypes.as_dtype(dtype)
        static = tensor_shape.as_shape(shape) if shape is not None else None

        found = self._vars.get(name)
        if found is not None:
            if reuse is False or reuse is None:
                raise ValueError(
                    f"Variable {name} already exists, disallowed. Did you mean to set reuse=True or "
                    "reuse=tf.AUTO_REUSE in VarScope?"
                )
            if static is not None and not static.is_compatible_with(found.get_shape()):
                raise ValueError(
                    f"Trying to share variable {name}, but specified shape {static} "
                    f"and found shape {found.get_shape()}."
                )
            if dt.base_dtype != found.dtype.base_dtype:
                raise ValueError(
                    f"Trying to share variable {name}, but specified dtype {dt.name} "
                    f"and found dtype {found.dtype.name}."
                )
            return found

        if reuse is True:
            raise ValueError(
                f"Variable {name} does not exist, or was not created with tf.get_variable(). "
                "Did you mean to set reuse=tf.AUTO_REUSE in VarScope?"
            )

        if initializer is None:
            if static is None:
                raise ValueError(f"Variable {name} did not get an initializer, so its `shape` argument must be specified.")
            initializer = _default_initializer(name, dt)
        initial_value: Any
        variable_dtype: Optional[dtypes.DType]
        if initializing_from_value:
            initial_value = initializer
            variable_dtype = None
        else:
            if inspect.isclass(initializer):
                initializer = initializer()
            if static is not None and static.is_fully_defined():
                dims = static.as_list()
                if _accepts(initializer, "partition_info"):
                    initial_value = functools.partial(initializer, dims, dtype=dt, partition_info=partition_info)
                else:
                    initial_value = functools.partial(initializer, dims, dtype=dt)
                variable_dtype = dt.base_dtype
            elif _needs_no_arguments(initializer):
                initial_value = initializer
                variable_dtype = None
            else:
                raise ValueError(
                    f"The initializer passed to variable {name} is not valid. It should be a callable with "
                    "no arguments and the shape should not be provided, or an initializer such as "
                    "tf.glorot_uniform_initializer() and `shape` should be fully defined (got shape "
                    f"{static})."
                )
        variable = variables.Variable(
            initial_value=initial_value, trainable=trainable, collections=collections,
            validate_shape=validate_shape, caching_device=caching_device, name=name, dtype=variable_dtype,
            constraint=constraint,
        )
        self._vars[name] = variable
        if regularizer:
            graph = variable.graph
            with graph.colocate_with(variable.op), graph.name_scope(name + "/Regularizer/"):
                loss = regularizer(variable)
            if loss is not None:
                graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
        return variable


def _default_initializer(name: str, dtype: dtypes.DType) -> Any:
    if dtype.is_floating:
        return init_ops.glorot_uniform_initializer()
    if dtype.is_integer or dtype.is_bool:
        return init_ops.zeros_initializer()
    raise ValueError(f"An initializer for variable {name} of {dtype.base_dtype.name} is required")


def _accepts(fn: Callable[..., Any], parameter: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return parameter in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _needs_no_arguments(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not inspect.Parameter.empty or p.kind in (inspect.Parameter.VAR_POSITIONAL,
                                                                inspect.Parameter.VAR_KEYWORD)
        for p in params
    )
