"""Fixtures shared by the test suite: a fresh default graph per test, a session, a stand-in GPU."""

from __future__ import annotations

import os
from typing import Any, Iterator

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.kernels import backend as backend_lib
from tensorgrid.kernels import cupy_backend


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
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[cupy_backend.CupyBackend]:
    """The cupy backend class driven by numpy, installed as ``/device:GPU:0``.

    Exercises the GPU code path (backend choice, host-to-device conversion of feeds and
    constants, every kernel through the backend's ``xp``) on machines without CUDA.
    """
    gpu = cupy_backend.CupyBackend(0, array_module=np)
    backend_lib.register_backend("GPU:0", gpu)
    monkeypatch.setattr(backend_lib, "gpu_available", lambda: True)
    try:
        yield gpu
    finally:
        backend_lib.unregister_backend("GPU:0")


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
