"""Behaviours that differed from TensorFlow 2.21's ``tf.compat.v1`` (the oracle) until issue 24:
the same code runs on both libraries and gets the same values, error classes and messages' key words.
"""

from __future__ import annotations

import ctypes
import os
import re
from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid
from tensorgrid.kernels import backend as backend_lib

CODES = {"OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5,
         "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "UNAUTHENTICATED": 16, "RESOURCE_EXHAUSTED": 8,
         "FAILED_PRECONDITION": 9, "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13,
         "UNAVAILABLE": 14, "DATA_LOSS": 15}
ERROR_CLASSES = {"CancelledError": "CANCELLED", "UnknownError": "UNKNOWN", "InvalidArgumentError": "INVALID_ARGUMENT",
                 "DeadlineExceededError": "DEADLINE_EXCEEDED", "NotFoundError": "NOT_FOUND",
                 "AlreadyExistsError": "ALREADY_EXISTS", "PermissionDeniedError": "PERMISSION_DENIED",
                 "UnauthenticatedError": "UNAUTHENTICATED", "ResourceExhaustedError": "RESOURCE_EXHAUSTED",
                 "FailedPreconditionError": "FAILED_PRECONDITION", "AbortedError": "ABORTED",
                 "OutOfRangeError": "OUT_OF_RANGE", "UnimplementedError": "UNIMPLEMENTED",
                 "InternalError": "INTERNAL", "UnavailableError": "UNAVAILABLE", "DataLossError": "DATA_LOSS"}


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Any:
    """The library a test runs on: tensorgrid, or TensorFlow's TF1 API (the oracle)."""
    return tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


def raised(fn: Callable[[], Any]) -> BaseException:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the error is the result
        return e
    raise AssertionError("no error was raised")


def stop(lib: Any, server: Any) -> None:
    if lib is tensorgrid:
        server.stop()


def test_error_codes_and_each_error_class_code(lib: Any) -> None:
    assert {name: getattr(lib.errors, name) for name in CODES} == CODES
    for class_name, code_name in ERROR_CLASSES.items():
        error_class = getattr(lib.errors, class_name)
        assert error_class(None, None, "m").error_code == CODES[code_name]
        assert lib.errors.exception_type_from_error_code(CODES[code_name]) is error_class
        assert lib.errors.error_code_from_exception_type(error_class) == CODES[code_name]


@pytest.mark.parametrize("address, words", [
    ("localhost", 'Could not parse port for local server from "localhost"'),
    ("localhost:abc", 'Could not parse port for local server from "localhost:abc"'),
])
def test_a_server_whose_own_address_has_no_port(lib: Any, address: str, words: str) -> None:
    cluster = lib.train.ClusterSpec({"worker": [address]})  # the spec takes it, the server does not
    error = raised(lambda: lib.train.Server(cluster, job_name="worker", task_index=0, start=False))
    assert type(error) is lib.errors.InvalidArgumentError and words in str(error)


def test_a_server_whose_cluster_has_an_address_without_port(lib: Any) -> None:
    cluster = {"worker": ["localhost:0"], "ps": ["nohost"]}
    error = raised(lambda: lib.train.Server(cluster, job_name="worker", task_index=0, start=False))
    assert type(error) is lib.errors.InvalidArgumentError
    assert 'Could not interpret "nohost" as a host-port pair' in str(error)


@pytest.mark.parametrize("job, index, words", [
    ("nope", 0, 'Job "nope" was not defined in cluster'),
    ("worker", 3, 'Task 3 was not defined in job "worker"'),
    ("worker", -1, 'Task -1 was not defined in job "worker"'),
])
def test_a_server_for_an_unknown_job_or_task(lib: Any, job: str, index: int, words: str) -> None:
    cluster = lib.train.ClusterSpec({"worker": ["localhost:0"]})
    error = raised(lambda: lib.train.Server(cluster, job_name=job, task_index=index, start=False))
    assert type(error) is lib.errors.InternalError and words in str(error)


def test_a_graph_def_walked_by_tensorflows_field_names(lib: Any) -> None:
    with lib.Graph().as_default() as graph:
        x = lib.placeholder(lib.float32, [None], name="x")
        with lib.device("/device:CPU:0"):
            unique_values, unique_indices = lib.unique(x, name="ids")
        first = lib.no_op(name="first")
        with lib.control_dependencies([first, unique_values]):
            out = lib.identity(unique_indices, name="out")
        graph_def = graph.as_graph_def()
    assert len(graph_def.node) == 4
    assert [n.name for n in graph_def.node] == ["x", "ids", "first", "out"]
    nodes = {n.name: n for n in graph_def.node}
    assert (nodes["x"].op, nodes["ids"].op, nodes["out"].op) == ("Placeholder", "Unique", "Identity")
    assert list(nodes["ids"].input) == ["x"]
    assert list(nodes["out"].input) == ["ids:1", "^first"]
    assert "CPU:0" in nodes["ids"].device and nodes["x"].device == ""
    assert "dtype" in nodes["x"].attr
    with lib.Graph().as_default():
        feed = lib.constant([3.0, 1.0, 3.0], name="feed")
        (imported,) = lib.import_graph_def(graph_def, input_map={"x:0": feed}, return_elements=[out.name])
        with lib.Session() as sess:
            np.testing.assert_array_equal(sess.run(imported), [0, 1, 0])


def test_sparse_softmax_cross_entropy_with_an_out_of_range_label(lib: Any) -> None:
    with lib.Graph().as_default():
        logits = lib.constant([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
        loss = lib.nn.sparse_softmax_cross_entropy_with_logits(labels=lib.constant([0, 5]), logits=logits)
        labels = lib.placeholder(lib.int32, [None])
        fed_loss = lib.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        with lib.Session() as sess:
            for fetch, feed, bad in [(loss, None, 5), (fed_loss, {labels: [0, -1]}, -1)]:
                error = raised(lambda: sess.run(fetch, feed))
                assert type(error) is lib.errors.InvalidArgumentError
                assert f"Received a label value of {bad} which is outside the valid range of [0, 3)" in str(error)
            np.testing.assert_allclose(sess.run(fed_loss, {labels: [0, 2]}), [2.407606, 0.407606], rtol=1e-5)


def test_a_saver_given_a_variable_twice(lib: Any) -> None:
    with lib.Graph().as_default():
        v = lib.Variable(1.0, name="v")
        w = lib.Variable(2.0, name="w")
        error = raised(lambda: lib.train.Saver([v, v]))
        assert type(error) is ValueError and str(error) == "At least two variables have the same name: v"
        error = raised(lambda: lib.train.Saver({"a": v, "b": v}))
        assert type(error) is ValueError and str(error) == "The same saveable will be restored with two names: b"
        lib.train.Saver({"a": v, "b": w})


def test_saving_into_a_missing_directory(lib: Any, tmp_path: Any) -> None:
    """TensorFlow makes the prefix's directory when its parent exists, and refuses a deeper path."""
    with lib.Graph().as_default():
        lib.Variable(1.0, name="v")
        saver = lib.train.Saver()
        with lib.Session() as sess:
            sess.run(lib.global_variables_initializer())
            too_deep = str(tmp_path / "missing" / "sub" / "model")
            error = raised(lambda: saver.save(sess, too_deep))
            assert type(error) is ValueError
            assert str(error) == f"Parent directory of {too_deep} doesn't exist, can't save."
            assert os.listdir(tmp_path) == []
            one_level = str(tmp_path / "missing" / "model")
            assert saver.save(sess, one_level) == one_level
            assert lib.train.latest_checkpoint(str(tmp_path / "missing")) == one_level


@pytest.mark.parametrize("device", ["/device:GPU:0", "/device:CPU:5", "/job:localhost/replica:0/task:0/device:CPU:5"])
def test_an_op_on_a_device_this_process_does_not_have(lib: Any, device: str) -> None:
    if lib is tensorgrid and "GPU" in device and backend_lib.gpu_available():
        pytest.skip("this machine has a GPU")
    with lib.Graph().as_default():
        a = lib.constant(1.0, name="a")
        with lib.device(device):
            b = lib.add(a, a, name="b")
        with lib.Session(config=lib.ConfigProto(allow_soft_placement=False)) as sess:
            error = raised(lambda: sess.run(b))
        assert type(error) is lib.errors.InvalidArgumentError
        assert re.search(r"Cannot assign a device for operation \w+: .* was explicitly assigned to " + re.escape(device)
                         + r" but available devices are \[ /job:localhost/replica:0/task:0/device:CPU:0", str(error))
        with lib.Session(config=lib.ConfigProto(allow_soft_placement=True)) as sess:
            assert sess.run(b) == 2.0


def test_log_device_placement_prints_each_ops_device_on_standard_output(lib: Any, capfd: pytest.CaptureFixture[str]) -> None:
    with lib.Graph().as_default():
        a = lib.constant(1.0, name="a")
        v = lib.Variable(3.0, name="v")
        b = lib.add(a, v, name="b")
        capfd.readouterr()
        with lib.Session(config=lib.ConfigProto(log_device_placement=True)) as sess:
            sess.run(v.initializer)
            assert sess.run(b) == 4.0
    ctypes.CDLL(None).fflush(None)  # TensorFlow prints the lines with C's printf
    lines = set(re.findall(r"^([\w/]+): \((\w+)\): (\S+)$", capfd.readouterr().out, re.MULTILINE))
    # Where the test runs on a GPU machine, tensorgrid places them on the GPU, as TensorFlow would.
    on_gpu = lib is tensorgrid and backend_lib.gpu_available()
    cpu = f"/job:localhost/replica:0/task:0/device:{'GPU' if on_gpu else 'CPU'}:0"
    assert {(name, device) for name, _, device in lines} == {
        (name, cpu) for name in ("a", "v", "v/initial_value", "v/Assign", "v/read", "b")}
    assert ("v", "VariableV2", cpu) in lines and ("a", "Const", cpu) in lines
