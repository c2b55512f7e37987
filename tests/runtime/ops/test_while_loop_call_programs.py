"""Loop bodies and conds run as generated call programs (``execution/call_program.py``), and
the general plan path that a body with an asynchronous kernel (a queue's dequeue) keeps,
with TensorFlow 2.21's ``tf.compat.v1`` as the oracle: the values, gradients and error
classes are TensorFlow's for bodies with constants, captured tensors and variables (read
through a reference: inputs the program converts), multi-output ops, a ``tf.cond``, a
nested loop, a stateful op, and a body that fails in its third iteration.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

import tensorgrid
from tensorgrid.execution import call_program
from tensorgrid.execution import executor


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The library a test runs on, with a fresh default graph: tensorgrid, or TF1 (the oracle)."""
    library = tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")
    with library.Graph().as_default():
        yield library


def run(lib: Any, fetches: Any, feed: Any = None) -> Any:
    with lib.Session() as session:
        session.run(lib.global_variables_initializer())
        return session.run(fetches, feed)


def test_a_loop_and_its_gradient_with_constants_and_a_captured_tensor(lib: Any) -> None:
    x0 = lib.placeholder(lib.float32, [4])
    scale = lib.constant(0.5) * 2.0  # captured from outside the loop
    _, x = lib.while_loop(lambda i, x: i < 7, lambda i, x: (i + 1, x * 0.9 * scale + 0.1), [0, x0])
    grad = lib.gradients(lib.reduce_sum(x * x), x0)[0]
    got = run(lib, [x, grad], {x0: np.arange(4, dtype=np.float32)})
    expected = np.arange(4, dtype=np.float32)
    for _ in range(7):
        expected = expected * 0.9 + 0.1
    np.testing.assert_allclose(got[0], expected, rtol=1e-6)
    np.testing.assert_allclose(got[1], 2 * expected * 0.9 ** 7, rtol=1e-5)


def test_a_variable_read_in_the_body_and_a_multi_output_op(lib: Any) -> None:
    weights = lib.Variable([[1.0, 2.0], [3.0, 4.0]])

    def body(i: Any, x: Any) -> Any:
        first, second = lib.split(lib.matmul(lib.reshape(x, [1, 2]), weights), 2, axis=1)
        return i + 1, lib.reshape(lib.concat([second, first], axis=1), [2]) / 10.0

    _, x = lib.while_loop(lambda i, x: i < 4, body, [lib.constant(0), lib.constant([1.0, 1.0])])
    expected = np.array([1.0, 1.0])
    for _ in range(4):
        product = expected @ np.array([[1.0, 2.0], [3.0, 4.0]])
        expected = product[::-1] / 10.0
    np.testing.assert_allclose(run(lib, x), expected, rtol=1e-6)


def test_a_cond_and_a_nested_loop_in_the_body_with_gradients(lib: Any) -> None:
    x0 = lib.placeholder(lib.float32, [])

    def body(i: Any, x: Any) -> Any:
        x = lib.cond(i % 2 < 1, lambda: x * 2.0, lambda: x + 1.0)
        _, inner = lib.while_loop(lambda j, y: j < 2, lambda j, y: (j + 1, y * 1.5), [0, x])
        return i + 1, inner

    _, x = lib.while_loop(lambda i, x: i < 3, body, [0, x0])
    grad = lib.gradients(x, x0)[0]
    value, gradient = run(lib, [x, grad], {x0: 1.0})
    assert value == pytest.approx(((1.0 * 2 * 2.25 + 1) * 2.25 * 2) * 2.25)
    assert gradient == pytest.approx(2 * 2.25 * 2.25 * 2 * 2.25)


def test_an_assign_add_in_the_body_runs_once_per_iteration(lib: Any) -> None:
    counter = lib.Variable(0, dtype=lib.int32)

    def body(i: Any) -> Any:
        with lib.control_dependencies([lib.assign_add(counter, 3)]):
            return i + 1

    loop = lib.while_loop(lambda i: i < 5, body, [0])
    with lib.Session() as session:
        session.run(lib.global_variables_initializer())
        assert session.run(loop) == 5
        assert session.run(loop) == 5
        assert session.run(counter) == 30


def test_a_body_failing_in_its_third_iteration_is_the_same_error(lib: Any) -> None:
    table = lib.constant([10.0, 20.0])
    _, total = lib.while_loop(lambda i, t: i < 5, lambda i, t: (i + 1, t + lib.gather(table, i)), [0, 0.0])
    with pytest.raises(lib.errors.InvalidArgumentError):
        run(lib, total)


def test_a_body_dequeuing_from_a_queue_runs_through_the_plan(lib: Any) -> None:
    queue = lib.FIFOQueue(10, lib.float32, shapes=[[]])
    fill = queue.enqueue_many([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]])
    _, total = lib.while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t + queue.dequeue()), [0, 0.0])
    with lib.Session() as session:
        session.run(fill)
        assert session.run(total) == 6.0
        assert session.run(total) == 15.0


def test_which_functions_become_call_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two paths the tests above run through: a body with a dequeue (asynchronous) keeps
    the plan; the others are call programs."""
    made: list[executor.CompiledFunction] = []
    prepare = executor.CompiledFunction.__init__

    def recording(self: executor.CompiledFunction, *args: Any, **kwargs: Any) -> None:
        prepare(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(executor.CompiledFunction, "__init__", recording)
    with tensorgrid.Graph().as_default():
        queue = tensorgrid.FIFOQueue(10, tensorgrid.float32, shapes=[[]])
        fill = queue.enqueue_many([[1.0, 2.0]])
        _, total = tensorgrid.while_loop(lambda i, t: i < 2, lambda i, t: (i + 1, t + queue.dequeue()), [0, 0.0])
        with tensorgrid.Session() as session:
            session.run(fill)
            session.run(total)
    programs = {type(f.program).__name__ if f.program is not None else None for f in made}
    assert programs == {call_program.CallProgram.__name__, None}
    assert [f.program is None for f in made] == [False, True]  # the cond, then the body
