"""Placement and partitioning of a step's graph by task, with Send/Recv on cut edges.

Pure functions of (graph, feeds, fetches, targets, cluster, incarnations): the master
calls them once per step signature and registers one partition per task. Every edge
between tasks becomes a ``_Send`` on the producer's task and a ``_Recv`` on the
consumer's; a control edge between tasks becomes a Send/Recv of a dummy scalar.
Fed tensors become placeholders in the partitions that consume them.
"""

from __future__ import annotations

import dataclasses
import heapq
from typing import Callable, Optional, Sequence

import numpy as np

from tensorgrid.distributed import cluster as cluster_lib
from tensorgrid.execution import executor
from tensorgrid.framework import device as device_lib
from tensorgrid.framework import errors
from tensorgrid.framework import graph as graph_lib
from tensorgrid.framework import graph_def as graph_def_lib
from tensorgrid.ops import transfer_ops


@dataclasses.dataclass
class Partition:
    """What one task runs for a step signature."""

    task: str
    """``/job:J/replica:0/task:T``."""
    graph_def: graph_def_lib.GraphDef
    feeds: dict[str, str]
    """Client tensor name -> placeholder tensor name in this partition."""
    fetches: list[str]
    """Tensor names this partition returns to the master."""
    targets: list[str]
    """Op names to run for their effect (user targets and every _Send)."""


def resolve_device(op: graph_lib.Operation, default_task: device_lib.DeviceSpec,
                   cluster: cluster_lib.ClusterSpec) -> device_lib.DeviceSpec:
    """The fully-qualified device of ``op``: unset job/task fields come from ``default_task``."""
    spec = device_lib.DeviceSpec.from_string(op.device)
    if spec.job is None:
        resolved = default_task.copy()
        resolved.merge_from(spec)
    else:
        resolved = spec.copy()
        if resolved.task is None:
            resolved.task = 0
    resolved.replica = resolved.replica or 0
    if resolved.job not in cluster.jobs or resolved.task not in cluster.task_indices(resolved.job):
        tasks = ", ".join(cluster_lib.task_name(j, i) for j, i, _ in cluster.all_tasks())
        raise errors.InvalidArgumentError(
            None, op,
            f"Operation {op.name!r} ({op.type}) is placed on {resolved.to_string()}, which is not a task of "
            f"the cluster; tasks are: {tasks}",
        )
    return resolved


def place(ops: Sequence[graph_lib.Operation], default_task: device_lib.DeviceSpec,
          cluster: cluster_lib.ClusterSpec) -> dict[graph_lib.Operation, device_lib.DeviceSpec]:
    """Devices of ``ops``; colocated ops take the device of their group's op (TF's ``_class``)."""
    devices: dict[graph_lib.Operation, device_lib.DeviceSpec] = {}
    graph = ops[0].graph if ops else None
    for op in ops:
        groups = op._attrs.get("_class")
        leader = op
        if groups and graph is not None:
            leader_name = groups[0][len("loc:@"):]
            leader = graph._ops_by_name.get(leader_name, op)
        if leader is not op and leader not in devices:
            devices[leader] = resolve_device(leader, default_task, cluster)
        resolved = devices[leader] if leader is not op else resolve_device(op, default_task, cluster)
        if leader is not op and op.device:
            own = device_lib.DeviceSpec.from_string(op.device)
            if not own.is_compatible_with(resolved):
                raise errors.InvalidArgumentError(
                    None, op,
                    f"Cannot colocate {op.name!r} (pinned to {op.device}) with {leader.name!r} on "
                    f"{resolved.to_string()}: conflicting device specs",
                )
        devices[op] = resolved
    return devices


def _move_control_relays(needed: Sequence[graph_lib.Operation],
                         devices: dict[graph_lib.Operation, device_lib.DeviceSpec]) -> None:
    """Places each NoOp that only relays control edges (no data inputs) on the task of the
    ops that wait for it (or, when none does, on the task most of its control inputs come
    from), so that a token crosses the network once instead of twice. The typical case is
    an optimizer's ``update`` group on the worker between the PS tasks' apply ops and the
    global step's increment on ps0: without the move, every PS sends its tokens to the
    worker and the worker one to ps0, a serial trip more per step. A NoOp computes
    nothing, so where it runs changes only where its tokens travel."""
    waiting_on: dict[graph_lib.Operation, list[graph_lib.Operation]] = {}
    for op in needed:
        for c in op.control_inputs:
            waiting_on.setdefault(c, []).append(op)
    for op in reversed(needed):  # consumers first: a relay of relays follows the outer one
        if op.type != "NoOp" or op.inputs or not op.control_inputs or op.name.startswith("_"):
            continue
        consumers = waiting_on.get(op, [])
        if consumers:
            tasks = {devices[c].task_name() for c in consumers}
            if len(tasks) != 1:
                continue
            target = devices[consumers[0]]
        else:
            sources = [devices[c] for c in op.control_inputs if c in devices]
            counts: dict[str, int] = {}
            for spec in sources:
                counts[spec.task_name()] = counts.get(spec.task_name(), 0) + 1
            own = devices[op].task_name()
            best = max(counts, key=lambda task: (counts[task], task == own), default=own)
            if counts.get(best, 0) <= counts.get(own, 0):
                continue
            target = next(spec for spec in sources if spec.task_name() == best)
        if target.task_name() != devices[op].task_name():
            devices[op] = target.copy()


def rendezvous_key(src_device: str, src_incarnation: int, dst_device: str, tensor_name: str) -> str:
    """TF's rendezvous key: source device and incarnation, destination device, tensor, frame."""
    return f"{src_device};{src_incarnation:016x};{dst_device};{tensor_name};0:0"


def partition(
    graph: graph_lib.Graph,
    feeds: Sequence[graph_lib.Tensor],
    fetches: Sequence[graph_lib.Tensor],
    targets: Sequence[graph_lib.Operation],
    default_task: device_lib.DeviceSpec,
    cluster: cluster_lib.ClusterSpec,
    incarnation_of: Callable[[str], int],
) -> dict[str, Partition]:
    """Splits the ops that the step needs into one Partition per task."""
    fed = set(feeds)
    needed_set = executor.prune(fetches, targets, fed)
    needed = [op for op in graph.get_operations() if op in needed_set]
    devices = place(needed, default_task, cluster)
    _move_control_relays(needed, devices)
    task_of = {op: devices[op].task_name() for op in needed}

    nodes: dict[str, list[graph_def_lib.NodeDef]] = {}
    parts: dict[str, Partition] = {}

    def part(task: str) -> Partition:
        if task not in parts:
            parts[task] = Partition(task, graph_def_lib.GraphDef(nodes=[]), {}, [], [])
            nodes[task] = []
        return parts[task]

    send_recv: dict[tuple[str, str], str] = {}  # (tensor or ^op, dst task) -> recv tensor name

    def cross(source: str, src_device: str, dst_task: str, dst_device: str, dtype: str,
              shape: Optional[tuple[Optional[int], ...]], control_of: Optional[str]) -> str:
        key_id = (source, dst_task)
        if key_id in send_recv:
            return send_recv[key_id]
        src_task = device_lib.DeviceSpec.from_string(src_device).task_name()
        edge = source.replace(":", "_").lstrip("^")
        dst_tag = dst_task.replace("/", "_").replace(":", "")
        key = rendezvous_key(src_device, incarnation_of(src_task), dst_device, source)
        inputs = [source]
        if control_of is not None:
            const_name = f"_ctrl/{edge}{dst_tag}"
            nodes[src_task].append(graph_def_lib.NodeDef(
                const_name, "Const", [f"^{control_of}"], src_device,
                {"value": np.zeros((), np.float32), "dtype": "float32"}, ["float32"], [()]))
            inputs = [f"{const_name}:0"]
        send_name = f"_send/{edge}{dst_tag}"
        attrs = {"key": key, "send_task": src_task, "recv_task": dst_task}
        nodes[src_task].append(graph_def_lib.NodeDef(send_name, transfer_ops.SEND, inputs, src_device, dict(attrs), [], []))
        part(src_task).targets.append(send_name)
        recv_name = f"_recv/{edge}{dst_tag}"
        nodes[dst_task].append(graph_def_lib.NodeDef(recv_name, transfer_ops.RECV, [], dst_device, dict(attrs), [dtype], [shape]))
        send_recv[key_id] = f"{recv_name}:0"
        return send_recv[key_id]

    for op in needed:
        task = task_of[op]
        part(task)
    for op in needed:
        task = task_of[op]
        device = devices[op].to_string()
        node = op.node_def
        node.device = device
        inputs: list[str] = []
        for t in op.inputs:
            if t in fed:
                placeholder = f"_feed/{t.op.name}_{t.value_index}"
                if t.name not in parts[task].feeds:
                    parts[task].feeds[t.name] = f"{placeholder}:0"
                    nodes[task].append(graph_def_lib.NodeDef(
                        placeholder, "Placeholder", [], device,
                        {"dtype": t.dtype.base_dtype.name, "shape": t.shape.as_tuple_or_none()},
                        [t.dtype.base_dtype.name], [t.shape.as_tuple_or_none()]))
                inputs.append(f"{placeholder}:0")
            elif task_of[t.op] != task:
                if t.dtype.is_ref_dtype and op.op_def.ref_inputs and op.inputs.index(t) in op.op_def.ref_inputs:
                    raise errors.InvalidArgumentError(
                        None, op,
                        f"{op.name!r} on {device} updates variable {t.op.name!r} on "
                        f"{devices[t.op].to_string()}: an op that updates a variable must be colocated with it",
                    )
                inputs.append(cross(t.name, devices[t.op].to_string(), task, device,
                                    t.dtype.base_dtype.name, t.shape.as_tuple_or_none(), None))
            else:
                inputs.append(t.name)
        for c in op.control_inputs:
            if executor.is_fed_placeholder(c, fed):
                continue
            if task_of[c] != task:
                recv = cross(f"^{c.name}", devices[c].to_string(), task, device, "float32", (), c.name)
                inputs.append("^" + recv.rsplit(":", 1)[0])
            else:
                inputs.append(f"^{c.name}")
        node.inputs = inputs
        nodes[task].append(node)
    for t in fetches:
        if t not in fed:
            part(task_of[t.op]).fetches.append(t.name)
    for op in targets:
        part(task_of[op]).targets.append(op.name)
    for task, p in parts.items():
        p.graph_def = graph_def_lib.GraphDef(nodes=topological_order(nodes[task]), version=graph.version)
    return parts


def topological_order(nodes: list[graph_def_lib.NodeDef]) -> list[graph_def_lib.NodeDef]:
    """Nodes reordered so that every node comes after its inputs (Kahn's algorithm, stable)."""
    by_name = {n.name: n for n in nodes}
    position = {n.name: i for i, n in enumerate(nodes)}
    pending = {n.name: 0 for n in nodes}
    consumers: dict[str, list[str]] = {n.name: [] for n in nodes}
    for n in nodes:
        for name in n.inputs:
            producer = name[1:] if name.startswith("^") else name.rsplit(":", 1)[0]
            if producer in by_name:
                pending[n.name] += 1
                consumers[producer].append(n.name)
    ordered: list[graph_def_lib.NodeDef] = []
    heap = [position[name] for name, count in pending.items() if count == 0]
    heapq.heapify(heap)
    while heap:
        node = nodes[heapq.heappop(heap)]
        ordered.append(node)
        for consumer in consumers[node.name]:
            pending[consumer] -= 1
            if pending[consumer] == 0:
                heapq.heappush(heap, position[consumer])
    if len(ordered) != len(nodes):
        stuck = sorted(name for name, count in pending.items() if count > 0)[:5]
        raise errors.InvalidArgumentError(None, None, f"Graph has a cycle through nodes {stuck}")
    return ordered
