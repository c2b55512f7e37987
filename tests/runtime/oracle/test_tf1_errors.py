"""Errors as TensorFlow 2.21's ``tf.compat.v1`` (the oracle) raises them: the same mistake on
both libraries raises the same class (an OpError subclass with its ``error_code`` where
TensorFlow's is one).
"""

from __future__ import annotations

import socket
from typing import Any, Callable, Iterator

import pytest

import tensorgrid
from tensorgrid.distributed.rpc import ports


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Any:
    """The library a test runs on: tensorgrid, or TensorFlow's TF1 API (the oracle)."""
    return tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


@pytest.fixture
def local_server(lib: Any) -> Iterator[Any]:
    server = lib.train.Server.create_local_server()
    yield server
    if lib is tensorgrid:
        server.stop()


def raised(fn: Callable[[], Any]) -> BaseException:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the error is the result
        return e
    raise AssertionError("no error was raised")


@pytest.mark.timeout(60)
def test_an_invalid_host_name_times_out(lib: Any) -> None:
    with lib.Graph().as_default():
        constant = lib.constant(1.0)
        sess = lib.Session("grpc://no-such-host.invalid:2222", config=lib.ConfigProto(operation_timeout_in_ms=1000))
        error = raised(lambda: sess.run(constant))
        assert isinstance(error, lib.errors.DeadlineExceededError) and error.error_code == 4


@pytest.mark.parametrize("device", ["/job:nosuch/task:0", "/job:local/task:7"])
def test_an_op_on_an_unknown_job_or_task(lib: Any, local_server: Any, device: str) -> None:
    with lib.Graph().as_default():
        with lib.device(device):
            constant = lib.constant(2.0)
        error = raised(lambda: lib.Session(local_server.target).run(constant))
        assert isinstance(error, lib.errors.InvalidArgumentError) and error.error_code == 3


def test_a_target_of_an_unknown_kind(lib: Any) -> None:
    error = raised(lambda: lib.Session.reset("foo://x:1"))
    assert isinstance(error, lib.errors.NotFoundError) and error.error_code == 5
    with lib.Graph().as_default():
        constant = lib.constant(1.0)
        error = raised(lambda: lib.Session("foo://x:1").run(constant))
        assert isinstance(error, lib.errors.NotFoundError)


@pytest.mark.parametrize("value", ["abc", b"abc"])
def test_text_fed_into_a_float_placeholder(lib: Any, value: Any) -> None:
    """TensorFlow converts the feed with numpy: a ValueError, not an OpError."""
    with lib.Graph().as_default():
        placeholder = lib.placeholder(lib.float32, [])
        with lib.Session() as sess:
            error = raised(lambda: sess.run(placeholder, {placeholder: value}))
            assert type(error) is ValueError and "could not convert string to float" in str(error)


def test_a_saver_with_no_variables(lib: Any) -> None:
    with lib.Graph().as_default():
        error = raised(lambda: lib.train.Saver())
        assert type(error) is ValueError and "No variables to save" in str(error)


def default_op_names(lib: Any) -> dict[str, str]:
    """The names ops get with no ``name=``: TensorFlow names a function's op by its type
    (``tf.add``: 'Add') and an operator's in lower case (``a + b``: 'add')."""
    with lib.Graph().as_default():
        a, b = lib.constant(1), lib.constant(2)
        m, t = lib.constant([[1.0]]), lib.constant(True)
        built = {
            "tf.add": lib.add(a, b), "+": a + b, "radd": 1 + a, "tf.subtract": lib.subtract(a, b), "-": a - b,
            "rsub": 1 - a, "tf.multiply": lib.multiply(a, b), "*": a * b, "tf.div": lib.div(a, b), "/": a / b,
            "tf.truediv": lib.truediv(a, b), "tf.divide": lib.divide(a, b), "//": a // b,
            "tf.floordiv": lib.floordiv(a, b), "tf.pow": lib.pow(a, b), "**": a ** b,
            "tf.floormod": lib.floormod(a, b), "%": a % b, "@": m @ m, "tf.matmul": lib.matmul(m, m),
            "tf.negative": lib.negative(a), "neg": -a, "abs": abs(a), "<": a < b, "&": t & t, "|": t | t,
            "~": ~t, "tf.maximum": lib.maximum(a, b), "tf.square": lib.square(a), "tf.add_n": lib.add_n([a, b]),
        }
        # The op's own name: the graph's uniquifying suffix depends on creation order alone.
        return {what: tensor.op.name.rsplit("_", 1)[0] if tensor.op.name[-1].isdigit() else tensor.op.name
                for what, tensor in built.items()}


def test_default_op_names_are_tensorflows(tf1: Any) -> None:
    assert default_op_names(tensorgrid) == default_op_names(tf1)


def test_reset_of_a_master_nobody_serves_fails_naming_its_address() -> None:
    """TensorFlow waits for the master (its reset hung past 120 s here); tensorgrid fails at
    once with UnavailableError naming the address (docs/differences.md)."""
    port = ports.free_ports(1)[0]
    error = raised(lambda: tensorgrid.Session.reset(f"grpc://127.0.0.1:{port}"))
    assert isinstance(error, tensorgrid.errors.UnavailableError) and f"127.0.0.1:{port}" in str(error)


@pytest.mark.timeout(60)
def test_reset_of_a_master_that_never_answers_ends_at_the_operation_timeout() -> None:
    with socket.socket() as silent:  # accepts connections, never speaks
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        target = f"grpc://127.0.0.1:{silent.getsockname()[1]}"
        error = raised(lambda: tensorgrid.Session.reset(target, config=tensorgrid.ConfigProto(
            operation_timeout_in_ms=1000)))
    assert isinstance(error, tensorgrid.errors.DeadlineExceededError), error
