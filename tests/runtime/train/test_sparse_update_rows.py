"""The sparse optimizer updates gather and write rows through the backend (``take_rows``,
``put_rows``: whole-row writes for wide rows on numpy) and compute in place: the results are
the same bits as the plain fancy-indexing formulas, on wide, narrow and multi-dimensional
rows with the heavy-head ids of real traffic, and match TensorFlow through the optimizers."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.kernels import index_ranges
from tensorgrid.kernels import numpy_backend
from tensorgrid.ops import training_ops

ROW_SHAPES = [(), (1,), (16,), (64,), (4, 40)]
VOCABULARY, IDS = 300, 200
LR, MOMENTUM = 0.05, 0.9


def heavy_head_ids(rng: np.random.Generator, count: int = IDS) -> np.ndarray:
    return (rng.random(count) ** 6 * VOCABULARY).astype(np.int64)


@pytest.mark.parametrize("row_shape", ROW_SHAPES)
def test_row_helpers_equal_fancy_indexing(row_shape: tuple[int, ...]) -> None:
    backend = numpy_backend.NumpyBackend()
    rng = np.random.default_rng(3)
    table = rng.normal(size=(VOCABULARY,) + row_shape).astype(np.float32)
    rows = np.unique(heavy_head_ids(rng))
    np.testing.assert_array_equal(backend.take_rows(table, rows), table[rows])
    values = rng.normal(size=(rows.size,) + row_shape).astype(np.float32)
    expected = table.copy()
    expected[rows] = values
    backend.put_rows(table, rows, values)
    np.testing.assert_array_equal(table, expected)


def test_put_rows_writes_non_contiguous_tables_and_other_dtypes() -> None:
    backend = numpy_backend.NumpyBackend()
    wide = np.zeros((10, 128), np.float32)
    strided = wide[:, ::2]  # 64 floats a row, not contiguous: written element by element
    backend.put_rows(strided, np.array([1, 4]), np.ones((2, 64), np.float32))
    assert wide[1, ::2].tolist() == [1.0] * 64 and wide[1, 1::2].tolist() == [0.0] * 64
    doubles = np.zeros((3, 64), np.float64)
    backend.put_rows(doubles, np.array([2]), np.full((1, 64), 2, np.float32))  # cast, not reinterpreted
    assert doubles[2].tolist() == [2.0] * 64


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_first_bad_index(dtype: type) -> None:
    assert index_ranges.first_bad_index(np.array([0, 4, 2], dtype), 5) is None
    assert index_ranges.first_bad_index(np.array([], dtype), 0) is None
    assert index_ranges.first_bad_index(np.array([0, 5, 2], dtype), 5) == 5
    assert index_ranges.first_bad_index(np.array([9, -3, -1], dtype), 5) == -3
    assert index_ranges.first_bad_index(np.array([0], dtype), 0) == 0
    assert index_ranges.first_bad_index(np.array([np.iinfo(dtype).min, 1], dtype), 5) == np.iinfo(dtype).min


def reference_adagrad(w: np.ndarray, a: np.ndarray, grad: np.ndarray, ids: np.ndarray) -> None:
    rows, g = numpy_backend.sorted_segment_sums(ids, grad)
    a_rows = a[rows]
    a_rows += g * g
    a[rows] = a_rows
    w[rows] -= g * np.float32(LR) / np.sqrt(a_rows)


def reference_momentum(w: np.ndarray, a: np.ndarray, grad: np.ndarray, ids: np.ndarray, nesterov: bool) -> None:
    rows, g = numpy_backend.sorted_segment_sums(ids, grad)
    lr, momentum = np.float32(LR), np.float32(MOMENTUM)
    a_rows = a[rows] * momentum + g
    a[rows] = a_rows
    if nesterov:
        w[rows] -= g * lr + a_rows * momentum * lr
    else:
        w[rows] -= a_rows * lr


UPDATES: dict[str, tuple[Callable[..., Any], Callable[..., None]]] = {
    "adagrad": (lambda w, a, g, i: training_ops.sparse_apply_adagrad(w, a, np.float32(LR), g, i), reference_adagrad),
    "momentum": (lambda w, a, g, i: training_ops.sparse_apply_momentum(w, a, np.float32(LR), g, i, np.float32(MOMENTUM)),
                 lambda w, a, g, i: reference_momentum(w, a, g, i, nesterov=False)),
    "nesterov": (lambda w, a, g, i: training_ops.sparse_apply_momentum(w, a, np.float32(LR), g, i, np.float32(MOMENTUM),
                                                                       use_nesterov=True),
                 lambda w, a, g, i: reference_momentum(w, a, g, i, nesterov=True)),
}


def run_updates(update: str, row_shape: tuple[int, ...], device: str) -> tuple[np.ndarray, ...]:
    """(table, accum) after two sparse updates on ``device``, and the same by the plain formulas."""
    rng = np.random.default_rng(11)
    table0 = rng.normal(size=(VOCABULARY,) + row_shape).astype(np.float32)
    accum0 = np.full_like(table0, 0.1)
    batches = [(rng.normal(size=(IDS,) + row_shape).astype(np.float32), heavy_head_ids(rng)) for _ in range(2)]
    build, reference = UPDATES[update]
    graph = tf.Graph()
    with graph.as_default(), tf.device(device):
        table, accum = tf.Variable(table0, name="table"), tf.Variable(accum0, name="accum")
        grad, ids = tf.placeholder(tf.float32), tf.placeholder(tf.int64)
        step = build(table, accum, grad, ids)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for g, i in batches:
                sess.run(step, {grad: g, ids: i})
            ours, our_accum = sess.run([table, accum])
    expected, expected_accum = table0.copy(), accum0.copy()
    for g, i in batches:
        reference(expected, expected_accum, g, i)
    return ours, our_accum, expected, expected_accum


@pytest.mark.parametrize("update", sorted(UPDATES))
@pytest.mark.parametrize("row_shape", ROW_SHAPES)
def test_sparse_updates_equal_the_plain_formulas_bit_for_bit(update: str, row_shape: tuple[int, ...]) -> None:
    ours, our_accum, expected, expected_accum = run_updates(update, row_shape, "/device:CPU:0")
    np.testing.assert_array_equal(ours, expected)
    np.testing.assert_array_equal(our_accum, expected_accum)


@pytest.mark.parametrize("update", sorted(UPDATES))
def test_sparse_updates_run_on_the_gpu_backend_path(update: str, strict_gpu: Any) -> None:
    # The GPU backend deduplicates by unique + scatter-add: the same sums up to rounding order.
    ours, our_accum, expected, expected_accum = run_updates(update, (64,), "/device:GPU:0")
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(our_accum, expected_accum, rtol=1e-5, atol=1e-6)
    assert strict_gpu.COUNTERS.host_to_device >= 1


OPTIMIZERS: dict[str, Callable[[Any], Any]] = {
    "adagrad": lambda lib: lib.train.AdagradOptimizer(0.3, initial_accumulator_value=0.2),
    "momentum": lambda lib: lib.train.MomentumOptimizer(0.05, 0.9),
    "ftrl": lambda lib: lib.train.FtrlOptimizer(0.2, l1_regularization_strength=0.01,
                                                l2_regularization_strength=0.02),
}


def train_wide_table(lib: Any, optimizer: str) -> np.ndarray:
    rng = np.random.default_rng(5)
    table0 = rng.normal(size=(VOCABULARY, 64)).astype(np.float32)
    batches = [heavy_head_ids(rng, 64).reshape(16, 4) for _ in range(2)]
    graph = lib.Graph()
    with graph.as_default():
        table = lib.Variable(table0, name="emb")
        ids = lib.placeholder(lib.int64, [None, 4])
        pooled = lib.reduce_sum(lib.nn.embedding_lookup(table, ids), 1)
        step = OPTIMIZERS[optimizer](lib).minimize(lib.reduce_mean(lib.square(pooled - 1.0)))
        with lib.Session() as sess:
            sess.run(lib.global_variables_initializer())
            for batch in batches:
                sess.run(step, {ids: batch})
            result: np.ndarray = sess.run(table)
    return result


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_wide_rows_match_tensorflow(tf1: Any, optimizer: str) -> None:
    np.testing.assert_allclose(train_wide_table(tf, optimizer), train_wide_table(tf1, optimizer), rtol=2e-5, atol=2e-6)
