"""Partitioned variables: one logical variable stored as several parts, spread over parameter servers.

``tf.get_variable(name, shape, partitioner=...)`` asks the partitioner how many parts
to cut along one axis (``fixed_size_partitioner(n)``, ``min_max_variable_partitioner``,
``variable_axis_size_partitioner``), then creates ``<name>/part_0``, ``<name>/part_1``...
as ordinary variables, so ``replica_device_setter`` places them round-robin like any
other. The first ``dim % n`` parts get one extra row, as in TF. Each part's
initializer is called with the part's shape and a ``partition_info`` (the full shape
and the part's offset), and a value initializer is sliced; every part records its
``SaveSliceInfo`` so that a Saver can write the logical variable as one tensor.

A ``PartitionedVariable`` is the list of parts: iterate it, pass it to
``tf.nn.embedding_lookup``, or use it as a tensor (the parts concatenated).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterator, Optional

from tensorgrid.framework import dtypes
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import tensor_conversion
from tensorgrid.framework import tensor_shape
from tensorgrid.ops import array_ops
from tensorgrid.ops import indexing_ops
from tensorgrid.ops import variables


# ---------------------------------------------------------------- partitioners

def fixed_size_partitioner(num_shards: int, axis: int = 0) -> Callable[..., list[int]]:
    """``num_shards`` parts along ``axis`` (fewer if the axis is shorter)."""

    def _partitioner(shape: tensor_shape.TensorShape, **unused_args: Any) -> list[int]:
        partitions = [1] * len(shape)
        partitions[axis] = min(num_shards, _dim(shape, axis))
        return partitions

    return _partitioner


def _dim(shape: tensor_shape.TensorShape, axis: int) -> int:
    size = shape.as_list()[axis]
    if size is None:
        raise ValueError(f"Cannot partition along axis {axis} of unknown size in shape {shape}")
    return size


def _element_size(dtype: Any, bytes_per_string_element: int) -> int:
    dt = dtypes.as_dtype(dtype).base_dtype
    return bytes_per_string_element if dt == dtypes.string else int(dt.size)


def min_max_variable_partitioner(max_partitions: int = 1, axis: int = 0, min_slice_size: int = 256 << 10,
                                 bytes_per_string_element: int = 16) -> Callable[..., list[int]]:
    """As many parts as keep each at least ``min_slice_size`` bytes, at most ``max_partitions``."""

    def _partitioner(shape: tensor_shape.TensorShape, dtype: Any) -> list[int]:
        if axis >= len(shape):
            raise ValueError(f"Cannot partition variable along axis {axis} when shape is only {shape}")
        total_size_bytes = (shape.num_elements() or 0) * _element_size(dtype, bytes_per_string_element)
        partitions = [1] * len(shape)
        partitions[axis] = max(1, min(_dim(shape, axis), max_partitions,
                                      int(math.ceil(total_size_bytes / min_slice_size))))
        return partitions

    return _partitioner


def variable_axis_size_partitioner(max_shard_bytes: int, axis: int = 0, bytes_per_string_element: int = 16,
                                   max_shards: Optional[int] = None) -> Callable[..., list[int]]:
    """As few parts along ``axis`` as keep each under ``max_shard_bytes`` (at least one slice each)."""
    if max_shard_bytes < 1 or bytes_per_string_element < 1:
        raise ValueError(
            "Both max_shard_bytes and bytes_per_string_element must be positive. Currently, max_shard_bytes "
            f"is {max_shard_bytes} and bytes_per_string_element is {bytes_per_string_element}"
        )
    if max_shards and max_shards < 1:
        raise ValueError("max_shards must be positive.")

    def _partitioner(shape: tensor_shape.TensorShape, dtype: Any) -> list[int]:
        if not isinstance(shape, tensor_shape.TensorShape):
            raise ValueError(f"shape is not a TensorShape: {shape}")
        if not shape.is_fully_defined():
            raise ValueError(f"shape is not fully defined: {shape}")
        dims = [int(d) for d in shape.as_list() if d is not None]
        bytes_per_slice = 1.0 * ((shape.num_elements() or 0) / dims[axis]) * _element_size(
            dtype, bytes_per_string_element)
        slices_per_shard = max(1, math.floor(max_shard_bytes / bytes_per_slice))
        axis_shards = int(math.ceil(1.0 * dims[axis] / slices_per_shard))
        if max_shards:
            axis_shards = min(max_shards, axis_shards)
        partitions = [1] * len(dims)
        partitions[axis] = axis_shards
        return partitions

    return _partitioner


# ---------------------------------------------------------------- the logical variable

@dataclasses.dataclass(frozen=True)
class PartitionInfo:
    """What an initializer of one part is told: the logical shape and where the part starts."""

    full_shape: list[int]
    var_offset: list[int]

    def single_offset(self, shape: Any) -> int:
        """The part's offset along its partitioned dimension."""
        return self.var_offset[self.single_slice_dim(shape)]

    def single_slice_dim(self, shape: Any) -> int:
        """The dimension along which ``shape`` (the part's) is a slice of the full shape."""
        dims = [int(d) for d in tensor_shape.as_shape(shape).as_list() if d is not None]
        if len(dims) != len(self.full_shape):
            raise ValueError(f"Expected a part shape of rank {len(self.full_shape)}, got {dims}")
        sliced = [i for i, (d, full) in enumerate(zip(dims, self.full_shape)) if d != full]
        if len(sliced) > 1:
            raise ValueError(f"Cannot use single_slice_dim() with shape {dims} and full shape {self.full_shape}")
        return sliced[0] if sliced else 0


class PartitionedVariable:
    """A variable stored as parts (``tf.get_variable`` with a partitioner returns one)."""

    def __init__(self, name: str, shape: Any, dtype: Any, variable_list: list[variables.Variable],
                 partitions: list[int]) -> None:
        if not isinstance(variable_list, (list, tuple)):
            raise TypeError(f"variable_list is not a list or tuple: {variable_list!r}")
        if not isinstance(partitions, (list, tuple)):
            raise TypeError(f"partitions is not a list or tuple: {partitions!r}")
        if not all(p >= 1 for p in partitions):
            raise ValueError(f"partition values must be positive: {partitions}")
        if not variable_list:
            raise ValueError("variable_list may not be empty")
        full_shape = tensor_shape.as_shape(shape)
        for v in variable_list:
            if v._get_save_slice_info() is None:
                raise ValueError(f"All variables must have a save_slice_info available: {v.name}")
            if len(v.get_shape()) != len(full_shape):
                raise ValueError(f"All variables' shapes must have the rank of {full_shape}: {v.name} is {v.get_shape()}")
            if v.dtype.base_dtype != dtypes.as_dtype(dtype).base_dtype:
                raise ValueError(f"All variables must have dtype {dtypes.as_dtype(dtype).name}: {v.name} is {v.dtype.name}")
        self._variable_list = sorted(variable_list, key=_offset)
        self._name = name
        self._shape = full_shape
        self._dtype = dtypes.as_dtype(dtype).base_dtype
        self._partitions = list(partitions)

    def __iter__(self) -> Iterator[variables.Variable]:
        return iter(self._variable_list)

    def __len__(self) -> int:
        axes = self._partition_axes()
        if len(axes) > 1:
            raise ValueError(f"Cannot get a length of {len(axes)} > 1-dim partition")
        return len(self._variable_list)

    def _partition_axes(self) -> list[int]:
        if all(p == 1 for p in self._partitions):
            return [0]
        return [i for i, p in enumerate(self._partitions) if p > 1]

    def _concat(self) -> graph_lib.Tensor:
        graph = self._variable_list[0].graph
        if len(self._variable_list) == 1:
            with graph.name_scope(None):
                return array_ops.identity(self._variable_list[0], name=self._name)
        axes = self._partition_axes()
        if len(axes) > 1:
            raise NotImplementedError(f"Cannot concatenate along more than one dimension: {axes}")
        with graph.name_scope(self._name + "/ConcatPartitions/"):
            concatenated = array_ops.concat(self._variable_list, axes[0])
        with graph.name_scope(None):
            return array_ops.identity(concatenated, name=self._name)

    def as_tensor(self) -> graph_lib.Tensor:
        """The logical value: the parts concatenated (built outside any control dependencies)."""
        with self._variable_list[0].graph.control_dependencies(None):
            return self._concat()

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype

    @property
    def shape(self) -> tensor_shape.TensorShape:
        return self._shape

    def get_shape(self) -> tensor_shape.TensorShape:
        return self._shape

    def _get_variable_list(self) -> list[variables.Variable]:
        return self._variable_list

    def _get_partitions(self) -> list[int]:
        return self._partitions

    def _apply_assign_fn(self, assign_fn: Callable[[variables.Variable, Any], Any], value: Any) -> list[Any]:
        axes = self._partition_axes()
        if len(axes) > 1:
            raise NotImplementedError(f"Cannot assign along more than one dimension: {axes}")
        if isinstance(value, list):
            if len(value) != len(self._variable_list):
                raise ValueError(f"Expected {len(self._variable_list)} values, one per part, got {len(value)}")
            value_list = value
        elif isinstance(value, PartitionedVariable):
            value_list = list(value)
        else:
            sizes = [_dim(v.get_shape(), axes[0]) for v in self._variable_list]
            value_list = array_ops.split(value, sizes, axis=axes[0])
        return [assign_fn(var, part) for var, part in zip(self._variable_list, value_list)]

    def assign(self, value: Any, use_locking: bool = False, name: Optional[str] = None, read_value: bool = True) -> list[Any]:
        return self._apply_assign_fn(
            lambda var, part: var.assign(part, use_locking=use_locking, name=name, read_value=read_value), value)

    def assign_add(self, value: Any, use_locking: bool = False, name: Optional[str] = None,
                   read_value: bool = True) -> list[Any]:
        return self._apply_assign_fn(
            lambda var, part: var.assign_add(part, use_locking=use_locking, name=name, read_value=read_value), value)

    def assign_sub(self, value: Any, use_locking: bool = False, name: Optional[str] = None,
                   read_value: bool = True) -> list[Any]:
        return self._apply_assign_fn(
            lambda var, part: var.assign_sub(part, use_locking=use_locking, name=name, read_value=read_value), value)

    def __repr__(self) -> str:
        return f"<tf.PartitionedVariable '{self._name}' shape={self._shape} parts={len(self._variable_list)}>"


def _offset(part: variables.Variable) -> list[int]:
    info = part._get_save_slice_info()
    assert info is not None
    return info.var_offset


def _conversion(value: PartitionedVariable, dtype: Any = None, name: Optional[str] = None,
                as_ref: bool = False) -> graph_lib.Tensor:
    if dtype is not None and dtypes.as_dtype(dtype).base_dtype != value.dtype:
        raise ValueError(f"Incompatible type conversion requested to type {dtypes.as_dtype(dtype).name} "
                         f"for variable of type {value.dtype.name}")
    if as_ref:
        raise NotImplementedError("PartitionedVariable doesn't support being used as a reference.")
    return value.as_tensor()


tensor_conversion.register_tensor_conversion_function(PartitionedVariable, _conversion)


# ---------------------------------------------------------------- creation (for the variable store)

def call_partitioner(partitioner: Callable[..., Any], shape: tensor_shape.TensorShape, dtype: Any) -> list[int]:
    """The partitioner's answer for ``shape``, checked: one entry per dimension, one axis cut at most."""
    if not shape.is_fully_defined():
        raise ValueError(f"Shape of a new partitioned variable must be fully defined, but instead was {shape}.")
    if (shape.ndims or 0) < 1:
        raise ValueError(f"A partitioned Variable must have rank at least 1, shape: {shape}")
    slicing = partitioner(shape=shape, dtype=dtype)
    if not isinstance(slicing, (list, tuple)):
        raise ValueError(f"Partitioner must return a sequence, but saw: {slicing}")
    if len(slicing) != shape.ndims:
        raise ValueError(
            f"Partitioner returned a partition list that does not match the Variable's rank: {slicing} vs. {shape}")
    if any(p < 1 for p in slicing):
        raise ValueError(f"Partitioner returned zero partitions for some axes: {slicing}")
    if sum(p > 1 for p in slicing) > 1:
        raise ValueError(f"Can only slice a variable along one dimension: shape: {shape}, partitioning: {slicing}")
    return [int(p) for p in slicing]


def slice_dim_and_num_slices(partitions: list[int]) -> tuple[int, int]:
    for dim, count in enumerate(partitions):
        if count > 1:
            return dim, count
    return 0, 1


def iter_slices(full_shape: list[int], num_slices: int, slice_dim: int) -> Iterator[tuple[list[int], list[int]]]:
    """(offset, shape) of each part: the first ``full % num_slices`` parts get one extra row."""
    with_excess = full_shape[slice_dim] % num_slices
    offset = [0] * len(full_shape)
    min_slice = full_shape[slice_dim] // num_slices
    for i in range(num_slices):
        shape = list(full_shape)
        shape[slice_dim] = min_slice + (1 if i < with_excess else 0)
        yield list(offset), shape
        offset[slice_dim] += shape[slice_dim]


def part_initializer(initializer: Any, dtype: Any, offset: list[int], shape: list[int]) -> tuple[Any, Any, Any]:
    """(initializer, shape to ask for, dtype) of one part: a callable as it is, a value sliced (and its
    dtype is the variable's, as in TF)."""
    if callable(initializer):
        return initializer, shape, dtype
    value = tensor_conversion.convert_to_tensor(initializer, dtype=None if isinstance(initializer, graph_lib.Tensor) else dtype)
    return indexing_ops.slice(value, offset, shape), None, value.dtype.base_dtype


def get_partitioned_variable(
    name: str, partitioner: Any, shape: Any, dtype: dtypes.DType, initializer: Any, reuse: Any,
    single_variables: dict[str, variables.Variable], partitioned: dict[str, PartitionedVariable],
    make_part: Callable[[str, Any, Any, Any, PartitionInfo], variables.Variable],
    default_initializer: Callable[[], Any],
) -> PartitionedVariable:
    """The partitioned variable ``name`` of a variable store, reused or made part by part (TF's rules).

    ``single_variables`` and ``partitioned`` are the store's variables by name; ``make_part``
    creates one part as a single variable, with its initializer, shape and partition info.
    """
    if name in single_variables:
        raise ValueError(
            f"A partitioner was provided, but an unpartitioned version of the variable was found: {name}.  "
            "Perhaps a variable of the same name was already created without partitioning?"
        )
    static = tensor_shape.as_shape(shape)
    if isinstance(initializer, graph_lib.Tensor):
        static = static.merge_with(initializer.shape)
    partitions = call_partitioner(partitioner, static, dtype) if not reuse or partitioner else None
    existing = partitioned.get(name)
    if existing is not None:
        if reuse is False or reuse is None:
            raise ValueError(f"Partitioned variable with name {name} already exists. Did you mean to set "
                             "reuse=True or reuse=tf.AUTO_REUSE in VarScope?")
        if not static.is_compatible_with(existing.get_shape()):
            raise ValueError(f"Trying to reuse partitioned variable {name}, but specified shape {static} "
                             f"and found shape {existing.get_shape()}.")
        if dtype != existing.dtype:
            raise ValueError(f"Trying to reuse partitioned variable {name}, but specified dtype {dtype.name} "
                             f"and found dtype {existing.dtype.name}.")
        if partitions is not None and existing._get_partitions() != partitions:
            raise ValueError(f"Trying to reuse partitioned variable {name}, but specified partitions "
                             f"{partitions} and found partitions {existing._get_partitions()}.")
        return existing
    if reuse is True or partitions is None:
        raise ValueError(f"PartitionedVariable {name} does not exist, or was not created with tf.get_variable(). "
                         "Did you mean to set reuse=False or reuse=tf.AUTO_REUSE in VarScope?")
    slice_dim, num_slices = slice_dim_and_num_slices(partitions)
    if f"{name}/part_0" in single_variables:
        if f"{name}/part_{num_slices - 1}" not in single_variables:
            raise ValueError(
                f"Partitioner returned a different partitioning than what was already found.  Partitioner returned "
                f"{num_slices} shards, and shard {name}/part_0 was found, but {name}/part_{num_slices - 1} was not.")
        if f"{name}/part_{num_slices}" in single_variables:
            raise ValueError(
                f"Partitioner returned a different partitioning than what was already found.  Partitioner returned "
                f"{num_slices} shards, and shard {name}/part_0 was found, but so was the extra shard "
                f"{name}/part_{num_slices}.")
    graph = graph_lib.get_default_graph()
    full_shape = [int(d) for d in static.as_list() if d is not None]
    parts = []
    for i, (offset, part_shape) in enumerate(iter_slices(full_shape, num_slices, slice_dim)):
        part_name = f"{name}/part_{i}"
        with graph.name_scope(part_name + "/PartitionedInitializer"):
            init = initializer if initializer is not None else default_initializer()
            init, init_shape, dtype = part_initializer(init, dtype, offset, part_shape)
        with graph.name_scope(None):
            var = make_part(part_name, init_shape, dtype, init, PartitionInfo(full_shape, offset))
        var._set_save_slice_info(variables.SaveSliceInfo(name, full_shape, offset, part_shape))
        parts.append(var)
    result = PartitionedVariable(name, static, dtype, parts, partitions)
    partitioned[name] = result
    return result
