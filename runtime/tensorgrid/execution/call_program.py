"""A plan as one generated Python function, for function calls and session steps run many times.

A ``tf.while_loop`` calls its cond and its body once per iteration, and their plans hold
a handful of nodes: run through ``Plan.run``, each call paid for a step context, a slot
list, a kernel call per ``_Arg`` and ``Const``, and the loop over prepared nodes, several
times what the kernels themselves cost (bench/README.md, "Control flow and input
pipelines"). A ``CallProgram`` writes the plan's straight order out as the body of one
Python function instead: the call's arguments are its parameters, the constants are
computed on the first call and bound to the function, every other node is one line that
calls its kernel (or, for an element-wise kernel that is exactly ``xp.<ufunc>``, the ufunc)
on local variables. What it computes, the errors it raises and how they name the failing
op are those of ``Plan.run``; a plan with asynchronous kernels (a Recv) is not made into a
program: the dataflow loop runs it.

A session's step plan is made into a ``StepProgram`` the same way: a queue runner's
``sess.run`` of a 15-node enqueue graph, once per record, or a sparse model's training step
paid the same per-node overhead (docs/limits.md). Its feeds are the program's arguments
(``v<slot> = args[i]`` for each feed slot). Writing and compiling the program costs about
what it then saves in 10-40 runs (compiling is ~70 us a node on a busy 2-core machine; the
program saves ~5-10 us a node per run), so a signature runs through ``Plan.run`` for its first
``PLAN_RUNS_BEFORE_GENERATION`` runs: one run a few times (an initializer, a test's
``sess.run``, a 20,000-node graph evaluated twice) never pays for a program.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tensorgrid.execution import executor
from tensorgrid.framework import errors
from tensorgrid.framework import func_graph
from tensorgrid.kernels import registry as kernel_registry

_ARRAY_TYPES = (np.ndarray, np.generic)

PLAN_RUNS_BEFORE_GENERATION = 16
"""Runs of a session step signature through ``Plan.run`` before its program is written."""


def _cancelled_before_start(step: executor.StepContext) -> errors.CancelledError:
    return errors.CancelledError(None, None, f"Step {step.step_id} was cancelled before it started")


def outputs_of(result: Any, count: int) -> list[Any]:
    """A multi-output kernel's ``count`` results, as ``Plan.store_outputs`` takes them (missing ones None)."""
    values: list[Any] = [None] * count
    for i, value in enumerate(result):
        values[i] = value
    return values


def constant_values(order: Sequence[Any], step: executor.StepContext) -> Optional[dict[int, Any]]:
    """Each Const node's value by its output slot, for a program to bind once; None when one
    fails (the plan then runs the step and reports it, annotated)."""
    const_kernel = kernel_registry.get_kernel("Const")
    values: dict[int, Any] = {}
    for node in order:
        if node.kernel is const_kernel:
            try:
                values[node.output_slot] = node.kernel(node.ctx, step)
            except Exception:  # noqa: BLE001 - the plan runs this call and raises it, annotated
                return None
    return values


def node_call_lines(node: Any, at: int, bound: dict[str, Any], indent: str = "        ") -> tuple[list[str], bool]:
    """The line that runs ``node`` (number ``at`` of its program) on local variables ``v<slot>``
    and binds its outputs to theirs; the names it calls go into ``bound``. Also whether it
    gathers its inputs through ``_gather`` (a dereference or a device copy: ``copies`` is used)."""
    if node.plain_inputs:
        inputs = ", ".join(f"v{s}" for s in node.input_slots)
    else:
        bound[f"n{at}"] = node
        slots = ", ".join(f"{s}: v{s}" for s in sorted(set(node.input_slots)))
        inputs = f"*_gather(n{at}, {{{slots}}}, copies)"
    ufunc_name = getattr(node.kernel, "xp_function", None)
    if ufunc_name is not None and node.plain_inputs:
        bound[f"u{at}"] = getattr(node.ctx.xp, ufunc_name)
        call = f"u{at}({inputs})"
    else:
        bound[f"k{at}"], bound[f"c{at}"] = node.kernel, node.ctx
        call = f"k{at}(c{at}, step{', ' if inputs else ''}{inputs})"
    if node.num_outputs == 1:
        return [f"{indent}v{node.output_slot} = {call}"], not node.plain_inputs
    if node.num_outputs == 0:
        return [f"{indent}{call}"], not node.plain_inputs
    names = ", ".join(f"v{node.output_slot + i}" for i in range(node.num_outputs))
    return [f"{indent}{names}, = _outputs({call}, {node.num_outputs})"], not node.plain_inputs


class CallProgram:
    """Runs one function plan (``Plan.straight_order`` not None) for a call's arguments."""

    def __init__(self, plan: executor.Plan) -> None:
        if plan.straight_order is None:
            raise ValueError("a CallProgram runs plans without asynchronous kernels; this one has some")
        self._plan = plan
        self._order: list[Any] = plan.straight_order  # the plan's nodes
        self._function: Optional[Callable[[executor.StepContext, Sequence[Any]], list[Any]]] = None
        self._lock = threading.Lock()
        self.run: Callable[[executor.StepContext, Sequence[Any]], list[Any]] = self._first_run
        """What ``Plan.run`` returns for a call whose step context carries ``args``: the
        generated function itself once the first call made it (no call in between)."""

    def _first_run(self, step: executor.StepContext, args: Sequence[Any]) -> list[Any]:
        function = self._generate(step)
        if function != self._plan_run:  # bound methods: equal, never the same object
            self.run = function
        return function(step, args)

    def _generate(self, step: executor.StepContext) -> Callable[[executor.StepContext, Sequence[Any]], list[Any]]:
        with self._lock:
            if self._function is None:
                constants = self._constants(step)
                if constants is None:
                    return self._plan_run  # the constants failed: this call raises through the plan
                self._function = self._compile(constants)
            return self._function

    def _plan_run(self, step: executor.StepContext, args: Sequence[Any]) -> list[Any]:
        call = executor.StepContext(step_id=step.step_id, resources=step.resources, rendezvous=step.rendezvous,
                                    cancelled=step.cancelled, args=args, recompute=step.recompute)
        return self._plan.run(call, [])

    def _constants(self, step: executor.StepContext) -> Optional[dict[int, Any]]:
        return constant_values(self._order, step)

    def _compile(self, constants: dict[int, Any]) -> Callable[[executor.StepContext, Sequence[Any]], list[Any]]:
        arg_kernel = kernel_registry.get_kernel(func_graph.ARG_OP_TYPE)
        bound: dict[str, Any] = {"_outputs": outputs_of, "_ARRAY_TYPES": _ARRAY_TYPES,
                                 "fetch_result": executor.fetch_result, "_gather": executor.Plan.gather_inputs,
                                 "annotate": executor.annotate,
                                 "_cancelled_before_start": _cancelled_before_start}
        lines = ["    if step.cancelled.is_set():", "        raise _cancelled_before_start(step)"]
        # A step's feeds, in Plan.run's order (a tensor fed twice keeps its last value).
        feeds = [f"    v{slot} = args[{i}]" for i, slot in enumerate(self._plan.feed_slots)]
        ops: list[Any] = []
        needs_copies = False
        for node in self._order:
            at = len(ops)
            ops.append(node.ctx.op)
            out = f"v{node.output_slot}"
            if node.output_slot in constants:
                bound[out] = constants[node.output_slot]
                continue
            lines.append(f"        at = {at}")
            if node.kernel is arg_kernel:
                lines.append(f"        {out} = args[{int(node.ctx.attrs['index'])}]")
                continue
            node_lines, copied = node_call_lines(node, at, bound)
            lines.extend(node_lines)
            needs_copies = needs_copies or copied
        bound["_ops"] = ops
        fetched = ", ".join(
            f"fetch_result(v{slot}, True)" if may_alias
            else f"(v{slot} if isinstance(v{slot}, _ARRAY_TYPES) else fetch_result(v{slot}, False))"
            for slot, may_alias in zip(self._plan.fetch_slots, self._plan.fetch_may_alias))
        source = "\n".join([
            f"def call(step, args, {', '.join(f'{name}={name}' for name in bound)}):",
            *lines[:2],
            *feeds,
            "    copies = {}" if needs_copies else "    pass",
            *annotated(lines[2:]),
            f"    return [{fetched}]",
        ])
        namespace: dict[str, Any] = dict(bound)
        exec(compile(source, f"<call program of {len(ops)} ops>", "exec"), namespace)
        function: Callable[[executor.StepContext, Sequence[Any]], list[Any]] = namespace["call"]
        return function


def annotated(lines: list[str]) -> list[str]:
    """Generated node lines (indented twice, each node's after ``at = <its index in _ops>``) inside
    the try that marks the step cancelled and annotates an error with the failing op, as Plan.run does."""
    return ["    at = 0", "    try:", *lines, "        pass",
            "    except BaseException as exc:  # annotated and re-raised, as Plan.run does",
            "        step.cancelled.set()",
            "        raise annotate(exc, _ops[at]) from exc"]


class StepProgram(CallProgram):
    """Runs a session's step plan (``Plan.straight_order`` not None) for its feed values: what
    ``Plan.run(step, feed_values)`` returns and raises, through the plan for the first
    ``PLAN_RUNS_BEFORE_GENERATION`` runs and through the generated function after them."""

    def __init__(self, plan: executor.Plan) -> None:
        super().__init__(plan)
        self._plan_runs = 0
        self.run = self._run_plan_then_generate

    def _run_plan_then_generate(self, step: executor.StepContext, feed_values: Sequence[Any]) -> list[Any]:
        self._plan_runs += 1  # two threads counting one run once: the program comes a run later
        if self._plan_runs >= PLAN_RUNS_BEFORE_GENERATION:
            self.run = self._first_run
        return self._plan.run(step, feed_values)

    def _plan_run(self, step: executor.StepContext, feed_values: Sequence[Any]) -> list[Any]:
        return self._plan.run(step, feed_values)
