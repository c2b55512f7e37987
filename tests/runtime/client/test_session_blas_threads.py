"""An in-process tf.Session sizes numpy's BLAS pool: ConfigProto(intra_op_parallelism_threads=N)
is honoured, and unset it never oversubscribes (docs/differences.md)."""

from __future__ import annotations

import os
from typing import Any, Iterator

import pytest
import threadpoolctl

import tensorgrid as tf
from tensorgrid.client import session as session_lib
from tensorgrid.kernels import numpy_backend


def blas_thread_counts() -> set[int]:
    return {info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"}


@pytest.fixture(autouse=True)
def fresh_blas_pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with a pool nothing in the process has sized; the limit is restored after."""
    if not blas_thread_counts():
        message = "numpy has no BLAS library threadpoolctl can see"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI's numpy must have one: {message}")
        pytest.skip(message)
    monkeypatch.delenv("TENSORGRID_INTRA_OP_THREADS", raising=False)
    with threadpoolctl.threadpool_limits(limits=None, user_api="blas"):
        monkeypatch.setattr(numpy_backend, "_blas_threads", None)
        yield


def run_matmul(config: Any = None) -> None:
    with tf.Graph().as_default():
        product = tf.matmul(tf.ones([4, 3]), tf.ones([3, 2]))
        with tf.Session(config=config) as sess:
            assert sess.run(product).tolist() == [[3.0, 3.0]] * 4


def test_configured_intra_op_threads_size_the_pool() -> None:
    run_matmul(tf.ConfigProto(intra_op_parallelism_threads=2))
    assert blas_thread_counts() == {2}
    run_matmul(tf.ConfigProto(intra_op_parallelism_threads=1))
    assert blas_thread_counts() == {1}


def test_unset_the_pool_has_the_in_process_default() -> None:
    run_matmul()
    assert blas_thread_counts() == {session_lib.IN_PROCESS_DEFAULT_THREADS}


def test_unset_the_environment_sizes_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENSORGRID_INTRA_OP_THREADS", "2")
    run_matmul(tf.ConfigProto())
    assert blas_thread_counts() == {2}


def test_unset_a_pool_already_sized_in_the_process_is_kept() -> None:
    numpy_backend.limit_threads(2)  # what a tf.train.Server of this process does
    run_matmul()
    assert blas_thread_counts() == {2}


def test_a_negative_thread_count_is_refused() -> None:
    with pytest.raises(ValueError, match="intra_op_parallelism_threads must be >= 0.*-1"):
        tf.Session(config=tf.ConfigProto(intra_op_parallelism_threads=-1))
