"""Fixtures shared by the runtime's tests: mutual TLS for every cluster, a private state directory,
a fresh default graph per test, a session, a strict stand-in GPU, TensorFlow as the oracle; and the
``oracle`` and ``gpu_node`` markers applied (registered in pyproject.toml).

The tests sit in one folder per layer of the runtime (ops, execution, distributed, client,
train, data, summary, layers; platform for tf.flags, tf.logging and tf.gfile; oracle for TensorFlow parity
across layers); the modules they share are in
support/, which pytest puts on ``sys.path`` (pyproject.toml's ``pythonpath``). The folders are not
packages, so two test modules must not share a file name.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import pytest

import cluster_processes
import strict_cupy
import tensorgrid as tf
from tensorgrid.distributed.rpc import certificates
from tensorgrid.distributed.rpc.transport import tls
from tensorgrid.kernels import backend as backend_lib
from tensorgrid.kernels import cupy_backend


@pytest.fixture(scope="session", autouse=True)
def test_run_certificates() -> Iterator[str]:
    """Every cluster of the run speaks mutual TLS, as users' clusters do: one CA made for
    this run, and one certificate for ``localhost`` that every task process and this
    process use through ``TENSORGRID_TLS_DIR`` (set here, inherited by the processes that
    tests start). Yields the directory; removed at the end of the run. A run with
    ``TENSORGRID_INSECURE=1`` and no ``TENSORGRID_TLS_DIR`` tests the opt-out instead."""
    with certificates.loopback_tls_for_this_process("tensorgrid test run") as directory:
        yield directory or os.environ.get(tls.TLS_DIR_ENV, "")


@pytest.fixture(scope="session", autouse=True)
def user_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``XDG_STATE_HOME`` of this run, inherited by the processes tests start: a task started
    without ``TENSORGRID_TLS_DIR`` on loopback makes its user's CA there
    (``user_authority``), never in the real ``~/.local/state``. Yields the directory."""
    directory = str(tmp_path_factory.mktemp("xdg-state"))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("XDG_STATE_HOME", directory)
        yield directory


@pytest.fixture(autouse=True)
def fresh_default_graph() -> Iterator[None]:
    """Each test starts with an empty default graph, so op names and collections never leak between tests."""
    tf.reset_default_graph()
    yield


@pytest.fixture
def session() -> Iterator[Any]:
    """A ``tf.Session`` on the default graph, closed after the test."""
    with tf.Session() as sess:
        yield sess


@pytest.fixture
def strict_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """One GPU in this process, as the runtime sees it on a GPU node: the strict cupy
    stand-in (``strict_cupy``) is what ``import cupy`` gives the cupy backend, so ops
    default to ``/device:GPU:0``, and any implicit conversion of a device array to
    numpy fails as it does with cupy. Yields the stand-in module; its ``COUNTERS``
    start at zero. Not a GPU: no claim about real GPUs rests on it.
    """
    backend_lib.unregister_backend("GPU:0")
    monkeypatch.setattr(cupy_backend, "_import_cupy", lambda: strict_cupy)
    strict_cupy.COUNTERS.reset()
    try:
        yield strict_cupy
    finally:
        backend_lib.unregister_backend("GPU:0")


NODE_KINDS = ("cpu", "strict-gpu")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for the ``tf1`` fixture compares with TensorFlow: it is marked ``oracle``."""
    for item in items:
        if "tf1" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.oracle)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("gpu_node") and not cluster_processes.strict_gpu_requested():
        metafunc.parametrize("node", NODE_KINDS, indirect=True, scope="module")


@pytest.fixture(scope="module", autouse=True)
def node(request: pytest.FixtureRequest) -> Iterator[str]:
    """The kind of machine a test runs on: "cpu", or "strict-gpu" for tests marked
    ``gpu_node`` in their second run, where ``TENSORGRID_FAKE_GPU=strict`` is set so
    that task processes see the strict GPU (``cluster_processes``). Module-scoped and
    autouse, so it is set before a module's clusters start."""
    kind = getattr(request, "param", "strict-gpu" if cluster_processes.strict_gpu_requested() else "cpu")
    with pytest.MonkeyPatch.context() as patch:
        if kind == "strict-gpu":
            patch.setenv(cluster_processes.FAKE_GPU_VARIABLE, "strict")
        yield kind


@pytest.fixture(autouse=True)
def gpu_node_when_asked(request: pytest.FixtureRequest, node: str) -> Iterator[None]:
    """With ``TENSORGRID_FAKE_GPU=strict`` (set for the whole run, or by ``node``), the
    test runs as on a GPU node: task processes see the strict GPU
    (``cluster_processes``), and so does this process (``strict_gpu``), where
    in-process servers and sessions run."""
    if cluster_processes.strict_gpu_requested():
        request.getfixturevalue("strict_gpu")
    yield


@pytest.fixture(scope="session")
def tf1() -> Any:
    """TensorFlow 2.21's ``tf.compat.v1`` with TF1 behaviour (graph mode, reference variables),
    the oracle of several tests. Imported once (it takes seconds); skipped without TensorFlow,
    except in CI (``CI=true``), where a missing oracle fails the test."""
    try:
        import tensorflow.compat.v1 as tf1
    except ImportError as exc:
        message = f"TensorFlow is the oracle of this test: pip install 'tensorgrid[oracle]' ({exc})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the oracle tests. {message}")
        pytest.skip(message)
    tf1.disable_v2_behavior()
    return tf1


@pytest.fixture(scope="session")
def tf1_layers(tf1: Any) -> Any:
    """TensorFlow's ``tf.compat.v1.layers`` (from tf-keras, where TF 2.21 keeps them), the oracle of
    tests/runtime/layers; skipped without tf-keras, except in CI, where it fails the test."""
    try:
        from tf_keras.api._v1.keras.__internal__.legacy import layers
    except ImportError as exc:
        message = f"tf.compat.v1.layers of TensorFlow 2.21 need tf-keras: make venv installs it ({exc})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return layers
