"""The executor: runs the part of a graph that one step needs, in dataflow order.

A ``Plan`` is built once per (feeds, fetches, targets) signature: the pruned set of
ops, each with its kernel, backend and input wiring resolved into slot indices, so
that a step is a tight loop over prepared nodes. Ops become ready when all their
producers are done; asynchronous kernels (Recv) complete later through a queue, so
one partition never blocks on a tensor while it still has other work to do.

Where a tensor's producer (or a feed, host memory) and its consumer sit on different
devices, the executor copies it to the consumer's device, once per step and device
however many ops there consume it.

The step context given to kernels implements ``kernels.context.StepContext``; its
function library runs each function a kernel calls (an If branch, a While body, a
dataset's ``map``) as a ``Plan`` of its own.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import queue
import threading
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tensorgrid.framework import device as device_lib
from tensorgrid.framework import dtypes
from tensorgrid.framework import errors
from tensorgrid.framework import func_graph
from tensorgrid.framework import graph as graph_lib
from tensorgrid.kernels import backend as backend_lib
from tensorgrid.kernels import context as kernel_context
from tensorgrid.kernels import registry as kernel_registry
from tensorgrid.kernels import row_writes


_CANCELLED = -1


@dataclasses.dataclass
class StepContext:
    """Per-step facts: where state lives and how tensors arrive from other tasks (what
    kernels see of it is ``kernels.context.StepContext``)."""

    step_id: int
    resources: kernel_context.ResourceManager
    rendezvous: Optional[kernel_context.Rendezvous] = None
    cancelled: threading.Event = dataclasses.field(default_factory=threading.Event)
    args: Sequence[Any] = ()
    """The arguments of the function call this step runs; empty outside a call."""
    recompute: bool = False
    """A gradient pass recomputing forward values: what the forward pass read is read again
    (a TensorArray read neither checks nor clears the element; docs/architecture.md)."""
    _wake: Optional[Callable[[BaseException], None]] = None

    def cancel(self, failure: BaseException) -> None:
        """Fails the step from another thread, even while it waits for a tensor or a queue."""
        self.cancelled.set()
        if self._wake is not None:
            self._wake(failure)

    @property
    def functions(self) -> kernel_context.FunctionLibrary:
        return FUNCTIONS

    def detached(self) -> StepContext:
        return StepContext(step_id=self.step_id, resources=self.resources)


@dataclasses.dataclass
class _Node:
    index: int
    kernel: Callable[..., Any]
    ctx: kernel_context.KernelContext
    is_async: bool
    input_slots: list[int]
    deref: list[bool]
    convert: list[Optional[backend_lib.Backend]]
    output_slot: int
    num_outputs: int
    consumers: list[int]
    pending: int
    plain_inputs: bool = False
    """No input needs a dereference or a device conversion: inputs are the slots' values."""


def _recording_whole_writes(kernel: Callable[..., Any], positions: list[int], is_async: bool) -> Callable[..., Any]:
    """``kernel``, recording after each call (an asynchronous one: when it calls ``done``) a whole
    write of the variables at input ``positions``: a kernel that does not report the rows it
    writes (kernels/row_writes.py)."""

    def record(inputs: Sequence[Any]) -> None:
        for position in positions:
            written = getattr(inputs[position], "written", None)
            if written is not None:
                written.wrote_whole()

    if is_async:
        def run_async(k: Any, step: Any, done: Callable[..., None], *inputs: Any) -> Any:
            def recorded_done(*args: Any, **kwargs: Any) -> None:
                record(inputs)
                done(*args, **kwargs)

            return kernel(k, step, recorded_done, *inputs)

        return run_async

    def run(k: Any, step: Any, *inputs: Any) -> Any:
        try:
            return kernel(k, step, *inputs)
        finally:
            record(inputs)

    return run


class Plan:
    """The prepared form of one step signature over a graph (or a partition of one)."""

    def __init__(
        self,
        graph: graph_lib.Graph,
        feeds: Sequence[graph_lib.Tensor],
        fetches: Sequence[graph_lib.Tensor],
        targets: Sequence[graph_lib.Operation],
        kernel_state: dict[str, dict[str, Any]],
        placement: Callable[[graph_lib.Operation], backend_lib.Backend],
    ) -> None:
        fed = set(feeds)
        needed = prune(fetches, targets, fed)
        order = [op for op in graph.get_operations() if op in needed]
        index_of = {op: i for i, op in enumerate(order)}
        self.ops = order

        slot_counter = itertools.count()
        self._slot_of: dict[graph_lib.Tensor, int] = {}
        for t in feeds:
            self._slot_of[t] = next(slot_counter)
        output_slot_of_op: dict[graph_lib.Operation, int] = {}
        for op in order:
            output_slot_of_op[op] = next(slot_counter)
            for _ in range(len(op.outputs) - 1):
                next(slot_counter)
            for t in op.outputs:
                if t not in self._slot_of:
                    self._slot_of[t] = output_slot_of_op[op] + t.value_index
        self.num_slots = next(slot_counter)
        self.feed_slots = [self._slot_of[t] for t in feeds]
        self.fetch_slots = [self._slot_of[t] for t in fetches]

        backends = {op: placement(op) for op in order}
        self.nodes: list[_Node] = []
        producers_of: list[set[int]] = []
        for i, op in enumerate(order):
            backend = backends[op]
            ref_inputs = op.op_def.ref_inputs
            input_slots, deref, convert = [], [], []
            producers: set[int] = set()
            any_device = kernel_registry.takes_any_input_device(op.type)
            on_host = kernel_registry.host_inputs(op.type)
            for position, t in enumerate(op.inputs):
                input_slots.append(self._slot_of[t])
                is_ref = t.dtype.is_ref_dtype and t not in fed
                deref.append(is_ref and position not in ref_inputs)
                if any_device or position in on_host:
                    needs_conversion = False
                elif t in fed:
                    needs_conversion = backend.device_type != "CPU"
                else:
                    needs_conversion = backends[t.op] is not backend
                convert.append(backend if needs_conversion else None)
                if t not in fed:
                    producers.add(index_of[t.op])
            for c in op.control_inputs:
                if not is_fed_placeholder(c, fed):
                    producers.add(index_of[c])
            producers_of.append(producers)
            state = kernel_state.setdefault(op.name, {})
            kernel = kernel_registry.get_kernel(op.type)
            by_reference = [p for p, t in enumerate(op.inputs)
                            if t.dtype.is_ref_dtype and t not in fed and p in ref_inputs]
            whole_writes = row_writes.unreported_positions(op.type, by_reference)
            if whole_writes:
                kernel = _recording_whole_writes(kernel, whole_writes, kernel_registry.is_async(op.type))
            self.nodes.append(
                _Node(
                    index=i,
                    kernel=kernel,
                    ctx=kernel_context.KernelContext(op, backend, state),
                    is_async=kernel_registry.is_async(op.type),
                    input_slots=input_slots,
                    deref=deref,
                    convert=convert,
                    output_slot=output_slot_of_op[op],
                    num_outputs=len(op.outputs),
                    consumers=[],
                    pending=len(producers),
                )
            )
        for node in self.nodes:
            node.plain_inputs = not any(node.deref) and all(c is None for c in node.convert)
        for i, producers in enumerate(producers_of):
            for p in producers:
                self.nodes[p].consumers.append(i)
        self.roots = [n.index for n in self.nodes if n.pending == 0]
        self.fetch_may_alias = [_may_share_a_variables_memory(t) for t in fetches]
        self.straight_order = None if any(n.is_async for n in self.nodes) else self.dataflow_order()
        """Without asynchronous kernels, the order the dataflow loop would run the nodes in,
        fixed once: a step then runs them one after the other (None: the dataflow loop runs)."""

    def dataflow_order(self) -> Optional[list[_Node]]:
        """The order ``run``'s dataflow loop takes when every kernel completes at once; None
        when some node never becomes ready (a cycle, which the loop reports)."""
        pending = [n.pending for n in self.nodes]
        ready = collections.deque(self.roots)
        order: list[_Node] = []
        while ready:
            node = self.nodes[ready.popleft()]
            order.append(node)
            for c in node.consumers:
                pending[c] -= 1
                if pending[c] == 0:
                    ready.append(c)
        return order if len(order) == len(self.nodes) else None

    def run(self, step: StepContext, feed_values: Sequence[Any]) -> list[Any]:
        """Runs one step; returns the fetched values (copied where they alias a variable)."""
        if self.straight_order is not None:
            return self._run_in_order(self.straight_order, step, feed_values)
        values: list[Any] = [None] * self.num_slots
        for slot, value in zip(self.feed_slots, feed_values):
            values[slot] = value
        pending = [n.pending for n in self.nodes]
        ready = collections.deque(self.roots)
        completions = completion_queue(step)
        if step.cancelled.is_set():
            raise errors.CancelledError(None, None, f"Step {step.step_id} was cancelled before it started")
        outstanding = 0
        remaining = len(self.nodes)
        nodes = self.nodes
        store = self.store_outputs
        copies: dict[tuple[int, int], Any] = {}  # (slot, id(backend)) -> the slot's value on that device
        while remaining:
            if not ready:
                index, result, failure = next_completion(step, completions, outstanding)
                outstanding -= 1
                if failure is not None:
                    step.cancelled.set()
                    raise annotate(failure, nodes[index].ctx.op)
                store(nodes[index], result, values)
                remaining -= 1
                for c in nodes[index].consumers:
                    pending[c] -= 1
                    if pending[c] == 0:
                        ready.append(c)
                continue
            node = nodes[ready.popleft()]
            try:
                if node.plain_inputs:
                    inputs = [values[s] for s in node.input_slots]
                else:
                    inputs = self.gather_inputs(node, values, copies)
                if node.is_async:
                    outstanding += 1
                    node.kernel(node.ctx, step, completion_callback(completions, node.index), *inputs)
                    continue
                result = node.kernel(node.ctx, step, *inputs)
            except BaseException as exc:  # annotated and re-raised
                step.cancelled.set()
                raise annotate(exc, node.ctx.op) from exc
            if node.num_outputs == 1:
                values[node.output_slot] = result
            else:
                store(node, result, values)
            remaining -= 1
            for c in node.consumers:
                pending[c] -= 1
                if pending[c] == 0:
                    ready.append(c)
        return [
            fetch_result(values[slot], may_alias)
            for slot, may_alias in zip(self.fetch_slots, self.fetch_may_alias)
        ]

    def _run_in_order(self, order: list[_Node], step: StepContext, feed_values: Sequence[Any]) -> list[Any]:
        """``run`` for a plan whose kernels all complete at once: the same order as the
        dataflow loop, without its bookkeeping (a loop body or a branch runs this per call)."""
        if step.cancelled.is_set():
            raise errors.CancelledError(None, None, f"Step {step.step_id} was cancelled before it started")
        values: list[Any] = [None] * self.num_slots
        for slot, value in zip(self.feed_slots, feed_values):
            values[slot] = value
        copies: dict[tuple[int, int], Any] = {}
        for node in order:  # the node step of run, inlined in both loops: no call per node
            try:
                inputs = ([values[s] for s in node.input_slots] if node.plain_inputs
                          else self.gather_inputs(node, values, copies))
                result = node.kernel(node.ctx, step, *inputs)
            except BaseException as exc:  # annotated and re-raised
                step.cancelled.set()
                raise annotate(exc, node.ctx.op) from exc
            if node.num_outputs == 1:
                values[node.output_slot] = result
            else:
                self.store_outputs(node, result, values)
        return [
            fetch_result(values[slot], may_alias)
            for slot, may_alias in zip(self.fetch_slots, self.fetch_may_alias)
        ]

    @staticmethod
    def gather_inputs(node: _Node, values: list[Any], copies: dict[tuple[int, int], Any]) -> list[Any]:
        inputs = [values[s] for s in node.input_slots]
        for i, value in enumerate(inputs):
            target = node.convert[i]
            if node.deref[i]:
                value = value.read()  # a variable's current value: never cached, it may change within a step
                inputs[i] = value if target is None else _to_device(value, target)
            elif target is not None:
                key = (node.input_slots[i], id(target))
                copied = copies.get(key)
                if copied is None:
                    copied = copies[key] = _to_device(value, target)
                inputs[i] = copied
        return inputs

    @staticmethod
    def store_outputs(node: _Node, result: Any, values: list[Any]) -> None:
        """Puts a kernel's ``result`` into the slots of ``node``'s outputs."""
        if node.num_outputs == 1:
            values[node.output_slot] = result
        elif node.num_outputs > 1:
            for i, value in enumerate(result):
                values[node.output_slot + i] = value


class CompiledFunction:
    """A function attribute prepared for running on one backend."""

    def __init__(self, attr: Any, backend: backend_lib.Backend, replay: bool = False,
                 recompute: bool = False) -> None:
        graph, _, outputs, targets = func_graph.function_from_attr(attr, replay=replay)
        self.recompute = replay or recompute
        host = backend_lib.for_device("CPU")

        def place(op: graph_lib.Operation) -> backend_lib.Backend:
            # Not the int32 rule of default_placement: a function's arguments arrive on the
            # calling op's device, which its _Arg ops pass on as they are.
            return backend if kernel_registry.has_gpu_kernel(op.type) else host

        self.plan = Plan(graph, [], outputs, targets, {}, place)
        from tensorgrid.execution import call_program  # it builds on this module's Plan

        self.program = call_program.CallProgram(self.plan) if self.plan.straight_order is not None else None
        """The plan flattened for calls in a loop; None where it has asynchronous kernels (a
        Recv), which the dataflow loop of ``Plan.run`` runs."""
        self._last_context: tuple[Any, StepContext] = (None, StepContext(step_id=0, resources=None))  # type: ignore[arg-type]

    def __call__(self, step: kernel_context.StepContext, args: Sequence[Any]) -> list[Any]:
        if self.program is None:
            call = StepContext(step_id=step.step_id, resources=step.resources, rendezvous=step.rendezvous,
                               cancelled=step.cancelled, args=args, recompute=self.recompute or step.recompute)
            return self.plan.run(call, [])
        # A loop calls its body with the same step a thousand times: the call's context is made
        # once per calling step. Its ``args`` stay empty: the program puts them in the _Arg slots.
        last_step, call = self._last_context
        if last_step is not step:
            call = StepContext(step_id=step.step_id, resources=step.resources, rendezvous=step.rendezvous,
                               cancelled=step.cancelled, recompute=self.recompute or step.recompute)
            self._last_context = (step, call)
        return self.program.run(call, args)


class FunctionLibrary:
    """Runs each function as a ``Plan`` whose ops run on the calling op's device (a host
    kernel on the CPU), with a step context that carries the call's arguments."""

    def instantiate(self, attr: Any, backend: backend_lib.Backend, replay: bool = False,
                    recompute: bool = False) -> CompiledFunction:
        return CompiledFunction(attr, backend, replay, recompute)


FUNCTIONS = FunctionLibrary()


def completion_queue(step: StepContext) -> "queue.SimpleQueue[tuple[int, Any, Optional[BaseException]]]":
    """Where a step's asynchronous kernels report (index, result, failure); cancelling ``step``
    puts its failure there too, so a step waiting for a completion wakes up."""
    completions: "queue.SimpleQueue[tuple[int, Any, Optional[BaseException]]]" = queue.SimpleQueue()
    step._wake = lambda failure: completions.put((_CANCELLED, None, failure))
    return completions


def completion_callback(completions: "queue.SimpleQueue[Any]", index: int) -> Callable[..., None]:
    """The ``done`` an asynchronous kernel calls when its work ``index`` completed (or failed)."""
    def done(result: Any = None, failure: Optional[BaseException] = None) -> None:
        completions.put((index, result, failure))

    return done


def next_completion(step: StepContext, completions: "queue.SimpleQueue[tuple[int, Any, Optional[BaseException]]]",
                    outstanding: int) -> tuple[int, Any, Optional[BaseException]]:
    """The next completion of a step with nothing ready to run and ``outstanding`` kernels running.
    Completions that arrived already (a push delivers several Recvs at once) are taken before
    flushing, so what they lead to is sent in one push; else the rendezvous is flushed (peers may be
    waiting for what this step sent) and the step waits. Raises the step's cancellation, and an
    InternalError when nothing is outstanding (a dependency cycle)."""
    if outstanding == 0:
        raise errors.InternalError(None, None, "Executor stalled: a dependency cycle in the graph")
    try:
        index, result, failure = completions.get_nowait()
    except queue.Empty:
        if step.rendezvous is not None:
            step.rendezvous.flush(step.step_id)  # peers may be waiting for what we sent
        index, result, failure = completions.get()
    if index == _CANCELLED:
        raise failure  # type: ignore[misc]
    return index, result, failure


def _to_device(value: Any, target: backend_lib.Backend) -> Any:
    """``value`` on ``target``'s device: as is when it is there or is a host object that
    stays on the host (a TensorArray's flow), else copied (through host memory when it is on
    another device)."""
    if target.is_native(value) or getattr(value, "stays_on_host", False):
        return value
    source = backend_lib.device_backend_of(value)
    return target.asarray(value if source is None else source.to_numpy(value))


def _may_share_a_variables_memory(fetch: graph_lib.Tensor) -> bool:
    """Whether a fetched value may be (a view of) a variable's buffer, which later steps update
    in place: a ref, an op reading a ref (a variable's read), or a kernel that forwards its
    input (``registry.forwards_input``: identity, reshape, slices...) of such a value. Those
    fetches are copied, so a returned array never changes after the step."""
    pending, seen = [fetch], set()
    while pending:
        tensor = pending.pop()
        if tensor.dtype.is_ref_dtype or any(x.dtype.is_ref_dtype for x in tensor.op.inputs):
            return True
        if kernel_registry.forwards_input(tensor.op.type):
            for x in tensor.op.inputs:
                if id(x) not in seen:
                    seen.add(id(x))
                    pending.append(x)
    return False


def fetch_result(value: Any, may_alias: bool) -> Any:
    read = getattr(value, "read", None)
    if callable(read):
        value = read()
    if not may_alias:
        return value
    if isinstance(value, np.ndarray):
        return value.copy()
    copy = getattr(value, "copy", None)
    return copy() if callable(copy) else value


def annotate(exc: BaseException, op: graph_lib.Operation) -> BaseException:
    """Names the failing op in the error, and maps plain Python errors to OpErrors."""
    where = f"[[node {op.name} ({op.type}) on {op.device or 'the local device'}]]"
    if isinstance(exc, errors.OpError):
        if exc.op is None and op.name not in exc.message:
            return type(exc)(None, op, f"{exc.message}\n\t {where}")
        return exc
    if isinstance(exc, (ValueError, TypeError, IndexError, FloatingPointError, ArithmeticError)):
        return errors.InvalidArgumentError(None, op, f"{type(exc).__name__}: {exc}\n\t {where}")
    if isinstance(exc, MemoryError):
        return errors.ResourceExhaustedError(None, op, f"Out of memory: {exc}\n\t {where}")
    if isinstance(exc, KeyboardInterrupt):
        return exc
    return errors.InternalError(None, op, f"{type(exc).__name__}: {exc}\n\t {where}")


def prune(
    fetches: Sequence[graph_lib.Tensor],
    targets: Sequence[graph_lib.Operation],
    fed: set[graph_lib.Tensor],
) -> set[graph_lib.Operation]:
    """The ops a step must run for ``fetches`` and ``targets``; fed tensors cut the walk."""
    needed: set[graph_lib.Operation] = set()
    stack = [t.op for t in fetches if t not in fed] + list(targets)
    while stack:
        op = stack.pop()
        if op in needed:
            continue
        needed.add(op)
        for t in op._inputs:
            if t not in fed:
                stack.append(t.op)
        stack.extend(c for c in op._control_inputs if not is_fed_placeholder(c, fed))
    return needed


def is_fed_placeholder(op: graph_lib.Operation, fed: set[graph_lib.Tensor]) -> bool:
    """A placeholder whose value is fed: as in TensorFlow (``subgraph.cc``, FeedInputs), the feed
    also satisfies a control dependency on it, and the placeholder itself never runs."""
    return op.type in ("Placeholder", "PlaceholderV2") and op.outputs[0] in fed


def default_placement(allow_soft_placement: bool = False) -> Callable[[graph_lib.Operation], backend_lib.Backend]:
    """Chooses a backend per op from its device: GPU ops on cupy, the rest on numpy.

    Ops with no device type run on GPU:0 when one exists (as in TensorFlow), else on
    CPU. Ops without a GPU kernel (queues, Send and Recv) and ops on string tensors
    run on the CPU wherever they are pinned: strings never leave host memory, as in
    TensorFlow (host-memory kernels). An explicit GPU placement on a machine without
    one, or on a CPU other than CPU:0 (a process has one), is an InvalidArgumentError
    naming the device unless soft placement is allowed, which runs the op on the CPU.
    """
    gpu = backend_lib.gpu_available()
    cache: dict[tuple[str, bool], backend_lib.Backend] = {}

    def unavailable(op: graph_lib.Operation, device: str, hint: str) -> errors.InvalidArgumentError:
        available = ["/job:localhost/replica:0/task:0/device:CPU:0"] + (
            ["/job:localhost/replica:0/task:0/device:GPU:0"] if gpu else [])
        return errors.InvalidArgumentError(
            None, op,
            f"Cannot assign a device for operation {op.name}: {{{{node {op.name}}}}} was explicitly assigned to "
            f"{device} but available devices are [ {', '.join(available)} ]. Make sure the device specification "
            f"refers to a valid device{hint} (or create the session with "
            "config=tf.ConfigProto(allow_soft_placement=True))",
        )

    def place(op: graph_lib.Operation) -> backend_lib.Backend:
        device = op.device
        host_only = (not kernel_registry.has_gpu_kernel(op.type) or _touches_strings(op)
                     or _only_int32(op))
        chosen = cache.get((device, host_only))
        if chosen is not None:
            return chosen
        spec = device_lib.DeviceSpec.from_string(device)
        device_type = spec.device_type
        if device_type is None:
            device_type = "CPU" if host_only or not gpu else "GPU"
        device_index = spec.device_index
        if device_type == "GPU" and not gpu:
            if not allow_soft_placement:
                raise unavailable(op, device, "; no GPU is available here (install cupy and a CUDA driver)")
            device_type, device_index = "CPU", None
        elif device_type == "CPU" and device_index not in (None, 0):
            if not allow_soft_placement:
                raise unavailable(op, device, "")
        if host_only:
            device_type = "CPU"
        chosen = backend_lib.for_device(device_type, device_index if device_type == "GPU" else None)
        cache[(device, host_only)] = chosen
        return chosen

    return place


def _touches_strings(op: graph_lib.Operation) -> bool:
    return any(t.dtype.base_dtype is dtypes.string for t in (*op.outputs, *op.inputs))


def _only_int32(op: graph_lib.Operation) -> bool:
    """An op whose outputs and inputs are all int32: shape arithmetic (a Const shape, a slice
    of a Shape, a Prod of sizes). It runs on the host, as TensorFlow keeps int32 in host
    memory on a GPU, so the shapes it makes reach the ops that read them without a copy
    to the device and back. Not an op with state or references (an int32 variable, its
    assignments): those stay with the ops that share the state."""
    tensors = (*op.outputs, *op.inputs)
    return (bool(op.outputs) and not op.op_def.is_stateful
            and all(t.dtype.base_dtype is dtypes.int32 and not t.dtype.is_ref_dtype for t in tensors))
