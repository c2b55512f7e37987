"""A plan with asynchronous kernels as a few generated functions, scheduled as the dataflow loop would.

A distributed step's partitions (the worker's and each PS's part of a training step) hold
``_Recv`` kernels, which complete when a peer's push arrives, so they cannot run as one
straight ``StepProgram``: ``Plan.run``'s dataflow loop ran them node by node, paying its
bookkeeping (a ready queue, a pending count per consumer, the input gathering of each node)
for the hundreds of nodes of a sparse model's step (bench/README.md, "Partition plans as
programs"). An ``AsyncStepProgram`` groups the plan's synchronous nodes by the set of
asynchronous kernels they depend on (``async ancestors``): every node of a group becomes
ready at the same moment (when the last of those kernels completed and the groups before
it ran), so the group runs as one generated function on local variables, in the order the
dataflow loop would take. What is left to schedule per step is a handful of units (the
groups and the asynchronous kernels), by the dataflow loop's own rules: every ready unit
runs before the step waits; before it blocks, it takes the completions already queued, then
flushes the rendezvous (peers may wait for what it sent) and waits; a completion's failure,
a step cancelled while it waits (``StepContext.cancel``) and an op failing end the step
with the error ``Plan.run`` raises, naming the same op. Like ``StepProgram``, a plan runs
through ``Plan.run`` for its first ``PLAN_RUNS_BEFORE_GENERATION`` runs.

Why that is the loop's behaviour: a group runs once its async ancestors completed and the
groups feeding it ran, and those groups depend on no more kernels than it does; so whenever
the step waits, every node whose async ancestors all completed has run, as in the loop.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Optional, Sequence

from tensorgrid.execution import call_program
from tensorgrid.execution import executor
from tensorgrid.framework import errors

Segment = Callable[[executor.StepContext, list[Any], dict[tuple[int, int], Any]], None]


def step_runner(plan: executor.Plan) -> "call_program.StepProgram | AsyncStepProgram":
    """What runs ``plan`` step after step: a ``StepProgram`` without asynchronous kernels, an
    ``AsyncStepProgram`` with them."""
    if plan.straight_order is not None:
        return call_program.StepProgram(plan)
    return AsyncStepProgram(plan)


class AsyncStepProgram:
    """Runs a step plan with asynchronous kernels (``Plan.straight_order`` None) for its feed
    values: what ``Plan.run(step, feed_values)`` returns and raises."""

    def __init__(self, plan: executor.Plan) -> None:
        if plan.straight_order is not None:
            raise ValueError("an AsyncStepProgram runs plans with asynchronous kernels; this one has none "
                             "(a call_program.StepProgram runs it)")
        self._plan = plan
        self._plan_runs = 0
        self._schedule: Optional[_Schedule] = None
        self._lock = threading.Lock()
        self.run: Callable[[executor.StepContext, Sequence[Any]], list[Any]] = self._run_plan_then_generate

    @property
    def plan(self) -> executor.Plan:
        return self._plan

    @property
    def generated(self) -> bool:
        """Whether steps run through the generated functions now (not ``Plan.run``)."""
        return self._schedule is not None and self.run == self._schedule.run

    def _run_plan_then_generate(self, step: executor.StepContext, feed_values: Sequence[Any]) -> list[Any]:
        self._plan_runs += 1  # two threads counting one run once: the program comes a run later
        if self._plan_runs >= call_program.PLAN_RUNS_BEFORE_GENERATION:
            self.run = self._first_run
        return self._plan.run(step, feed_values)

    def _first_run(self, step: executor.StepContext, feed_values: Sequence[Any]) -> list[Any]:
        with self._lock:
            if self._schedule is None:
                order = self._plan.dataflow_order()
                if order is None:  # a cycle: the loop reports it, every run
                    self.run = self._plan.run
                    return self._plan.run(step, feed_values)
                constants = call_program.constant_values(order, step)
                if constants is None:  # a Const failed: the plan raises it, annotated; next run tries again
                    return self._plan.run(step, feed_values)
                self._schedule = _Schedule(self._plan, order, constants)
            self.run = self._schedule.run
        return self.run(step, feed_values)


class _Schedule:
    """The units of a plan (groups of synchronous nodes, and asynchronous kernels) and how they
    depend on each other; ``run`` runs one step over them."""

    def __init__(self, plan: executor.Plan, order: list[Any], constants: dict[int, Any]) -> None:
        self._plan = plan
        nodes = plan.nodes
        producers: list[list[int]] = [[] for _ in nodes]
        for node in nodes:
            for consumer in node.consumers:
                producers[consumer].append(node.index)
        async_ancestors: dict[int, frozenset[int]] = {}
        unit_of: dict[int, int] = {}
        group_of: dict[frozenset[int], int] = {}
        members: list[list[Any]] = []  # per unit: its nodes in dataflow order (one for a kernel)
        self._async_nodes: list[Any] = []  # per unit: the asynchronous node, or None for a group
        for node in order:
            ancestors: set[int] = set()
            for p in producers[node.index]:
                ancestors |= async_ancestors[p]
                if nodes[p].is_async:
                    ancestors.add(p)
            key = frozenset(ancestors)
            async_ancestors[node.index] = key
            if node.is_async:
                unit = len(members)
                members.append([node])
                self._async_nodes.append(node)
            else:
                unit = group_of.get(key, -1)
                if unit < 0:
                    unit = group_of[key] = len(members)
                    members.append([])
                    self._async_nodes.append(None)
                members[unit].append(node)
            unit_of[node.index] = unit
        unit_producers: list[set[int]] = [set() for _ in members]
        for node in nodes:
            for p in producers[node.index]:
                if unit_of[p] != unit_of[node.index]:
                    unit_producers[unit_of[node.index]].add(unit_of[p])
        self._consumers: list[list[int]] = [[] for _ in members]
        for unit, before in enumerate(unit_producers):
            for p in sorted(before):
                self._consumers[p].append(unit)
        self._pending = [len(before) for before in unit_producers]
        self._roots = [unit for unit, count in enumerate(self._pending) if count == 0]
        unit_writing: dict[int, int] = {}  # slot -> the unit whose node outputs it (a feed: none)
        for node in nodes:
            for slot in range(node.output_slot, node.output_slot + node.num_outputs):
                unit_writing[slot] = unit_of[node.index]
        read_elsewhere: set[int] = set(plan.fetch_slots)
        for node in nodes:
            read_elsewhere.update(slot for slot in node.input_slots
                                  if unit_writing.get(slot) != unit_of[node.index])
        self._segments: list[Optional[Segment]] = [
            None if self._async_nodes[unit] is not None else _compile_segment(unit_nodes, constants, read_elsewhere)
            for unit, unit_nodes in enumerate(members)]
        self.units = len(members)
        """Units a step schedules (groups and asynchronous kernels), against the plan's nodes."""

    def run(self, step: executor.StepContext, feed_values: Sequence[Any]) -> list[Any]:
        """``Plan.run``'s dataflow loop over units instead of nodes."""
        plan = self._plan
        values: list[Any] = [None] * plan.num_slots
        for slot, value in zip(plan.feed_slots, feed_values):
            values[slot] = value
        pending = self._pending.copy()
        ready = collections.deque(self._roots)
        completions = executor.completion_queue(step)
        if step.cancelled.is_set():
            raise errors.CancelledError(None, None, f"Step {step.step_id} was cancelled before it started")
        outstanding = 0
        remaining = len(pending)
        segments, async_nodes, consumers = self._segments, self._async_nodes, self._consumers
        copies: dict[tuple[int, int], Any] = {}
        while remaining:
            if not ready:
                unit, result, failure = executor.next_completion(step, completions, outstanding)
                outstanding -= 1
                node = async_nodes[unit]
                if failure is not None:
                    step.cancelled.set()
                    raise executor.annotate(failure, node.ctx.op)
                executor.Plan.store_outputs(node, result, values)
            else:
                unit = ready.popleft()
                segment = segments[unit]
                if segment is not None:
                    segment(step, values, copies)
                else:
                    node = async_nodes[unit]
                    try:
                        inputs = ([values[s] for s in node.input_slots] if node.plain_inputs
                                  else executor.Plan.gather_inputs(node, values, copies))
                        outstanding += 1
                        node.kernel(node.ctx, step, executor.completion_callback(completions, unit), *inputs)
                    except BaseException as exc:  # annotated and re-raised
                        step.cancelled.set()
                        raise executor.annotate(exc, node.ctx.op) from exc
                    continue
            remaining -= 1
            for c in consumers[unit]:
                pending[c] -= 1
                if pending[c] == 0:
                    ready.append(c)
        return [
            executor.fetch_result(values[slot], may_alias)
            for slot, may_alias in zip(plan.fetch_slots, plan.fetch_may_alias)
        ]



def _compile_segment(unit_nodes: list[Any], constants: dict[int, Any], read_elsewhere: set[int]) -> Segment:
    """One group of synchronous nodes as a function of (step, the step's slot values, its device
    copies): it reads the slots other units wrote, runs each node's kernel on local variables,
    writes the slots that other units or the fetches read, and raises an error as ``Plan.run``
    does (the op annotated, the step marked cancelled)."""
    bound: dict[str, Any] = {"_outputs": call_program.outputs_of, "_gather": executor.Plan.gather_inputs,
                             "annotate": executor.annotate}
    produced: set[int] = set()
    loads: list[str] = []
    lines: list[str] = []
    ops: list[Any] = []
    for at, node in enumerate(unit_nodes):
        ops.append(node.ctx.op)
        outputs = range(node.output_slot, node.output_slot + node.num_outputs)
        for slot in node.input_slots:
            if slot in produced or f"v{slot}" in bound:
                continue
            if slot in constants:
                bound[f"v{slot}"] = constants[slot]
            else:
                loads.append(f"    v{slot} = values[{slot}]")
                produced.add(slot)
        produced.update(outputs)
        if node.output_slot in constants:
            bound[f"v{node.output_slot}"] = constants[node.output_slot]
            continue
        lines.append(f"        at = {at}")
        node_lines, _ = call_program.node_call_lines(node, at, bound)
        lines.extend(node_lines)
    stores = [f"    values[{slot}] = v{slot}"
              for node in unit_nodes for slot in range(node.output_slot, node.output_slot + node.num_outputs)
              if slot in read_elsewhere]
    bound["_ops"] = ops
    source = "\n".join([
        f"def segment(step, values, copies, {', '.join(f'{name}={name}' for name in bound)}):",
        *loads,
        *call_program.annotated(lines),
        *stores,
    ])
    namespace: dict[str, Any] = dict(bound)
    exec(compile(source, f"<segment of {len(ops)} ops>", "exec"), namespace)
    segment: Segment = namespace["segment"]
    return segment
