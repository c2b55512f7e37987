"""A session's step plans run as generated programs (``call_program.StepProgram``) once they
have run ``PLAN_RUNS_BEFORE_GENERATION`` times: the values, fetch copies and errors are those
of ``Plan.run`` and of TensorFlow 2.21's ``tf.compat.v1`` (the oracle) for feeds, a variable fetched and updated in the same and
the next run, multi-output ops, a fed tensor whose op also runs, a failing op, a cancelled step,
and a plan with an asynchronous kernel (a queue's dequeue), which runs as an
``async_program.AsyncStepProgram``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import pytest

import tensorgrid
from tensorgrid.execution import async_program
from tensorgrid.execution import call_program
from tensorgrid.execution import executor
from tensorgrid.execution import resources

RUNS = call_program.PLAN_RUNS_BEFORE_GENERATION + 2
"""Runs of each signature: the first ones through the plan, the last two through the program."""


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The library a test runs on, with a fresh default graph: tensorgrid, or TF1 (the oracle)."""
    library = tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")
    with library.Graph().as_default():
        yield library


def raised(fn: Callable[[], Any]) -> BaseException:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the error is the result
        return e
    raise AssertionError("no error was raised")


def step_runners(session: Any) -> list[Any]:
    """What the in-process session runs each signature with (a program, or a plan)."""
    return list(session._engine._plans.values())


def runs_a_generated_function(runner: Any) -> bool:
    return isinstance(runner, call_program.StepProgram) and runner.run.__name__ == "call"


def test_feeds_and_a_variable_fetched_then_updated_in_the_same_and_the_next_run(lib: Any) -> None:
    x = lib.placeholder(lib.float32, [2])
    weights = lib.Variable([1.0, 2.0])
    update = lib.assign_add(weights, x)
    with lib.control_dependencies([update]):
        after = weights * 1.0 + x
    with lib.Session() as session:
        session.run(lib.global_variables_initializer())
        fetched = [session.run([update, after, weights], {x: [1.0, 0.5]}) for _ in range(RUNS)]
        read = [session.run(weights) for _ in range(RUNS)]
        session.run(update, {x: [10.0, 10.0]})
        if lib is tensorgrid:
            assert sum(map(runs_a_generated_function, step_runners(session))) == 2  # not the update's
    for i, (updated, computed, variable) in enumerate(fetched):
        expected = np.array([1.0, 2.0]) + (i + 1) * np.array([1.0, 0.5])
        np.testing.assert_allclose(updated, expected)
        np.testing.assert_allclose(computed, expected + [1.0, 0.5])
        np.testing.assert_allclose(variable, expected)
    for value in read:  # copies: the later update changed none of them
        np.testing.assert_allclose(value, [1.0 + RUNS, 2.0 + 0.5 * RUNS])


def test_multi_output_ops_and_a_fed_tensor_whose_op_also_runs(lib: Any) -> None:
    x = lib.placeholder(lib.float32, [4])
    first, second = lib.split(x * 2.0, 2)
    unique, index = lib.unique(lib.constant([3, 1, 3, 2]))
    with lib.Session() as session:
        results = [session.run([first * 10.0, second * 10.0, unique, index],
                               {x: [1.0, 2.0, 3.0, 4.0], first: [7.0, 8.0]}) for _ in range(RUNS)]
    for scaled_first, scaled_second, unique_values, indices in results:
        np.testing.assert_allclose(scaled_first, [70.0, 80.0])
        np.testing.assert_allclose(scaled_second, [60.0, 80.0])
        np.testing.assert_array_equal(unique_values, [3, 1, 2])
        np.testing.assert_array_equal(indices, [0, 1, 0, 2])


def test_an_op_that_fails_in_a_later_run(lib: Any) -> None:
    shape = lib.placeholder(lib.int32, [2])
    reshaped = lib.reshape(lib.constant([1.0, 2.0, 3.0, 4.0]), shape, name="the_reshape")
    with lib.Session() as session:
        for _ in range(RUNS):
            np.testing.assert_allclose(session.run(reshaped, {shape: [2, 2]}), [[1.0, 2.0], [3.0, 4.0]])
        if lib is tensorgrid:
            assert all(map(runs_a_generated_function, step_runners(session)))
        error = raised(lambda: session.run(reshaped, {shape: [3, 3]}))
        np.testing.assert_allclose(session.run(reshaped, {shape: [4, 1]}), [[1.0], [2.0], [3.0], [4.0]])
    assert isinstance(error, lib.errors.InvalidArgumentError)
    assert error.op is not None and error.op.name == "the_reshape"


def test_a_plan_with_a_queue_dequeue_runs_as_an_async_program(lib: Any) -> None:
    queue = lib.FIFOQueue(RUNS, [lib.float32], shapes=[[]])
    value = lib.placeholder(lib.float32, [])
    enqueue = queue.enqueue([value])
    taken = queue.dequeue() * 2.0
    with lib.Session() as session:
        for i in range(RUNS):
            session.run(enqueue, {value: float(i)})
        assert [session.run(taken) for _ in range(RUNS)] == [2.0 * i for i in range(RUNS)]
        if lib is tensorgrid:
            runners = step_runners(session)  # the enqueue's and the dequeue's: both asynchronous kernels
            assert len(runners) == 2
            assert all(isinstance(r, async_program.AsyncStepProgram) and r.generated for r in runners)


def plan_and_program(fetches: list[Any], feeds: list[Any] = (), targets: list[Any] = ()
                     ) -> tuple[executor.Plan, call_program.StepProgram]:
    """A plan and a program of it, over separate kernel state."""
    graph = tensorgrid.get_default_graph()
    placement = executor.default_placement()
    plan = executor.Plan(graph, list(feeds), fetches, list(targets), {}, placement)
    return plan, call_program.StepProgram(executor.Plan(graph, list(feeds), fetches, list(targets), {}, placement))


def run_both(plan: executor.Plan, program: call_program.StepProgram, feed_values: list[Any]) -> tuple[Any, Any]:
    """Plan.run's and the program's outcome (the values, or the error) of one step each."""
    outcomes = []
    for run in (plan.run, program.run):
        step = executor.StepContext(step_id=1, resources=resources.ResourceManager())
        try:
            outcomes.append(run(step, feed_values))
        except Exception as e:  # noqa: BLE001 - the error is the outcome
            outcomes.append(e)
    return outcomes[0], outcomes[1]


def test_the_program_raises_what_the_plan_raises() -> None:
    with tensorgrid.Graph().as_default():
        indices = tensorgrid.placeholder(tensorgrid.int32, [None])
        gathered = tensorgrid.gather(tensorgrid.constant([1.0, 2.0, 3.0]), indices, name="the_gather") + 1.0
        missing = tensorgrid.placeholder(tensorgrid.float32, [], name="not_fed") * 2.0
        plan, program = plan_and_program([gathered], [indices])
        for _ in range(RUNS):
            by_plan, by_program = run_both(plan, program, [np.array([2, 0], np.int32)])
            np.testing.assert_allclose(by_program[0], by_plan[0])
        for fetch, feeds, values in ([gathered], [indices], [np.array([5], np.int32)]), ([missing], [], []):
            plan, program = plan_and_program(fetch, feeds)
            for _ in range(RUNS):
                by_plan, by_program = run_both(plan, program, values)
                assert type(by_program) is type(by_plan) and isinstance(by_plan, tensorgrid.errors.OpError)
                assert str(by_program) == str(by_plan) and by_program.op is by_plan.op


def test_a_cancelled_step_is_not_started() -> None:
    with tensorgrid.Graph().as_default():
        counter = tensorgrid.Variable(0)
        increment = tensorgrid.assign_add(counter, 1)
        with tensorgrid.Session() as session:
            session.run(counter.initializer)
            program = step_runners(session)[0]
            for _ in range(RUNS):
                session.run(increment.op)
            (program,) = [r for r in step_runners(session) if r is not program]
            assert runs_a_generated_function(program)
            step = executor.StepContext(step_id=99, resources=session._engine._resources)
            step.cancelled.set()
            error = raised(lambda: program.run(step, []))
            assert isinstance(error, tensorgrid.errors.CancelledError)
            assert session.run(counter) == RUNS
