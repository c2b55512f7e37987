"""``replica_device_setter``: place variables on parameter servers, everything else on the worker.

A device function for ``tf.device``: ops whose type is a PS op (variables and other
shared state) go to ``/job:ps/task:K`` with K chosen by a strategy (round-robin by
default, or greedy by byte size); all other ops go to the worker device. Devices
the program set explicitly win, field by field, exactly as in TensorFlow.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.framework import device as device_lib
from tensorgrid.framework import tensor_shape

STANDARD_PS_OPS = (
    "Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable", "MutableHashTableV2",
    "MutableHashTableOfTensors", "MutableHashTableOfTensorsV2", "MutableDenseHashTable",
    "MutableDenseHashTableV2", "VarHandleOp", "BoostedTreesEnsembleResourceHandleOp",
    "BoostedTreesQuantileStreamResourceHandleOp", "ResourceConditionalAccumulator",
    "DecisionTreeResource",
    "KvVarHandleOp",  # an embedding variable's table: placed on a PS like a variable
)


class _RoundRobinStrategy:
    """PS task 0, 1, ..., N-1, 0, ... in the order the PS ops are created."""

    def __init__(self, num_tasks: int) -> None:
        self._num_tasks = num_tasks
        self._next_task = 0

    def __call__(self, unused_op: Any) -> int:
        task = self._next_task
        self._next_task = (self._next_task + 1) % self._num_tasks
        return task


class GreedyLoadBalancingStrategy:
    """The PS task with the least load so far (ties: the lowest index) gets the next op."""

    def __init__(self, num_tasks: int, load_fn: Callable[[Any], float]) -> None:
        if num_tasks <= 0:
            raise ValueError(f"num_tasks must be positive, got {num_tasks}")
        self._num_tasks = num_tasks
        self._load_fn = load_fn
        self._ps_loads = np.zeros(num_tasks)

    def __call__(self, op: Any) -> int:
        task = int(np.argmin(self._ps_loads))
        self._ps_loads[task] += self._load_fn(op)
        return task


def byte_size_load_fn(op: Any) -> int:
    """Bytes of a single-output op's output (a variable's size), for greedy balancing."""
    if len(op.outputs) != 1:
        raise ValueError(f"Op {op.name} must have a single output to measure its byte size")
    output = op.outputs[0]
    shape = output.get_shape()
    if not shape.is_fully_defined():
        shape = tensor_shape.TensorShape(op.get_attr("shape"))
    if not shape.is_fully_defined():
        raise ValueError(f"Op {op.name} has a shape {shape} that is not fully defined; cannot measure its size")
    return int(shape.num_elements() or 0) * int(output.dtype.size)


class _ReplicaDeviceChooser:
    def __init__(self, ps_tasks: int, ps_device: str, worker_device: str, merge_devices: bool,
                 ps_ops: Sequence[str], ps_strategy: Callable[[Any], int]) -> None:
        self._ps_tasks = ps_tasks
        self._ps_device = ps_device
        self._worker_device = worker_device
        self._merge_devices = merge_devices
        self._ps_ops = set(ps_ops)
        self._ps_strategy = ps_strategy

    def device_function(self, op: Any) -> str:
        if not self._merge_devices and op.device:
            return str(op.device)
        current = device_lib.DeviceSpec.from_string(op.device or "")
        if self._ps_tasks and self._ps_device and op.type in self._ps_ops:
            ps = device_lib.DeviceSpec.from_string(self._ps_device)
            if ps.job and (not current.job or current.job == ps.job):
                ps.task = self._ps_strategy(op)
            return ps.make_merged_spec(current).to_string()
        worker = device_lib.DeviceSpec.from_string(self._worker_device or "")
        return worker.make_merged_spec(current).to_string()


def replica_device_setter(
    ps_tasks: int = 0,
    ps_device: str = "/job:ps",
    worker_device: str = "/job:worker",
    merge_devices: bool = True,
    cluster: Any = None,
    ps_ops: Optional[Sequence[str]] = None,
    ps_strategy: Optional[Callable[[Any], int]] = None,
) -> Optional[Callable[[Any], str]]:
    """A device function for between-graph replication (``tf.train.replica_device_setter``).

    Returns None (no placement) when there are no PS tasks, as TensorFlow does.
    """
    if cluster is not None:
        spec = cluster if isinstance(cluster, cluster_lib.ClusterSpec) else cluster_lib.ClusterSpec(cluster)
        ps_job = device_lib.DeviceSpec.from_string(ps_device).job
        if ps_job not in spec.jobs:
            return None
        ps_tasks = spec.num_tasks(ps_job)
    if ps_tasks < 0:
        raise ValueError(f"ps_tasks must be >= 0, got {ps_tasks}")
    if ps_tasks == 0:
        return None
    if ps_ops is None:
        ps_ops = list(STANDARD_PS_OPS)
    if ps_strategy is None:
        ps_strategy = _RoundRobinStrategy(ps_tasks)
    if not callable(ps_strategy):
        raise TypeError(f"ps_strategy must be callable, got {ps_strategy!r}")
    chooser = _ReplicaDeviceChooser(ps_tasks, ps_device, worker_device, merge_devices, ps_ops, ps_strategy)
    return chooser.device_function
