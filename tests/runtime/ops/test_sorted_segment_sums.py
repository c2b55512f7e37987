"""Segment sums by sorting (the numpy backend's scatter_add and the deduplication of sparse
gradients) add up as np.add.at did, up to rounding order, and as TensorFlow does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid
from tensorgrid.kernels import numpy_backend

RNG_SEED = 7


def heavy_head_ids(rng: np.random.Generator, count: int, vocabulary: int) -> np.ndarray:
    """Ids with many repeats at the head and many singletons in the tail, as real traffic."""
    return (rng.random(count) ** 6 * vocabulary).astype(np.int64)


@pytest.mark.parametrize("row_shape", [(), (1,), (16,), (4, 3)])
@pytest.mark.parametrize("count, vocabulary", [(0, 10), (1, 10), (300, 50), (300, 10**6), (64, 1)])
def test_sums_match_add_at(row_shape: tuple[int, ...], count: int, vocabulary: int) -> None:
    rng = np.random.default_rng(RNG_SEED)
    ids = heavy_head_ids(rng, count, vocabulary)
    rows = rng.normal(size=(count,) + row_shape).astype(np.float32)
    expected = np.zeros((vocabulary,) + row_shape, np.float32)
    np.add.at(expected, ids, rows)

    unique, sums = numpy_backend.sorted_segment_sums(ids, rows)
    assert unique.tolist() == sorted(set(ids.tolist()))
    np.testing.assert_allclose(sums, expected[unique], rtol=1e-5, atol=1e-5)

    target = np.ones((vocabulary,) + row_shape, np.float32)
    numpy_backend.NumpyBackend().scatter_add(target, ids, rows)
    np.testing.assert_allclose(target, expected + 1, rtol=1e-5, atol=1e-5)


def test_integer_sums_are_exact() -> None:
    ids = np.array([3, 0, 3, 3, 1, 0], np.int64)
    rows = np.arange(6 * 8, dtype=np.int32).reshape(6, 8)
    unique, sums = numpy_backend.sorted_segment_sums(ids, rows)
    assert unique.tolist() == [0, 1, 3]
    assert sums.tolist() == [(rows[1] + rows[5]).tolist(), rows[4].tolist(), (rows[0] + rows[2] + rows[3]).tolist()]


def test_negative_indices_count_from_the_end_as_before() -> None:
    target = np.zeros((3, 8), np.float32)
    numpy_backend.NumpyBackend().scatter_add(target, np.array([-1, 2, 0]), np.ones((3, 8), np.float32))
    assert target[:, 0].tolist() == [1.0, 0.0, 2.0]


def sparse_step_results(tf: Any) -> list[np.ndarray]:
    """unsorted_segment_sum of repeated ids, and one Adagrad step and one SGD step on tables
    looked up with repeated ids (their gradients are deduplicated before the update)."""
    rng = np.random.default_rng(RNG_SEED)
    ids_value = heavy_head_ids(rng, 256, 40)
    data_value = rng.normal(size=(256, 16)).astype(np.float32)
    with tf.Graph().as_default():
        ids = tf.constant(ids_value)
        summed = tf.unsorted_segment_sum(tf.constant(data_value), ids, 40)
        init = tf.constant_initializer(rng.normal(size=(40, 16)).astype(np.float32))
        adagrad_table = tf.get_variable("adagrad_table", [40, 16], initializer=init)
        sgd_table = tf.get_variable("sgd_table", [40, 16], initializer=init)
        weights = tf.constant(data_value)
        losses = [tf.reduce_sum(tf.nn.embedding_lookup(t, ids) * weights) for t in (adagrad_table, sgd_table)]
        train = tf.group(tf.train.AdagradOptimizer(0.1).minimize(losses[0]),
                         tf.train.GradientDescentOptimizer(0.1).minimize(losses[1]))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train)
            return [np.asarray(v) for v in sess.run([summed, adagrad_table, sgd_table])]


def test_sparse_sums_and_updates_match_tensorflow(tf1: Any) -> None:
    ours = sparse_step_results(tensorgrid)
    theirs = sparse_step_results(tf1)
    for got, expected in zip(ours, theirs):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
