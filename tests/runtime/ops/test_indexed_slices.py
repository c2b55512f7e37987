"""Sparse gradients: ``tf.IndexedSlices`` where TensorFlow has them, compared with TF1 itself.

A gather's gradient for its params is an IndexedSlices (the rows looked up and
their gradients); two of them for one variable are concatenated, a dense partial
makes the sum dense; ``convert_to_tensor`` scatter-adds it; ``Session.run`` returns
an ``IndexedSlicesValue``. Each case is built once with tensorgrid and once with
``tf.compat.v1`` from the same numpy values, and both results must agree.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf

TABLE = np.arange(15, dtype=np.float64).reshape(5, 3) / 7.0


def run_both(tf1: Any, build: Callable[[Any], Any]) -> tuple[Any, Any]:
    """``build(lib)`` in a fresh graph of each library, run after initializing the variables."""
    results = []
    for lib in (tf, tf1):
        with lib.Graph().as_default():
            fetches = build(lib)
            with lib.Session() as sess:
                sess.run(lib.global_variables_initializer())
                results.append(sess.run(fetches))
    return results[0], results[1]


def dense(value: Any) -> np.ndarray:
    """A fetched gradient as a dense array (an IndexedSlicesValue is scatter-added)."""
    if hasattr(value, "indices") and hasattr(value, "dense_shape"):
        result = np.zeros(value.dense_shape, dtype=value.values.dtype)
        np.add.at(result, value.indices, value.values)
        return result
    return np.asarray(value)


def assert_same_kind_and_value(ours: Any, theirs: Any) -> None:
    """Both IndexedSlicesValues (same rows, same dtypes) or both dense, and equal when densified."""
    assert type(ours).__name__ == type(theirs).__name__, f"tensorgrid gives {type(ours)}, TensorFlow {type(theirs)}"
    if type(theirs).__name__ == "IndexedSlicesValue":
        assert ours.indices.dtype == theirs.indices.dtype
        assert sorted(ours.indices.tolist()) == sorted(theirs.indices.tolist())
        np.testing.assert_array_equal(ours.dense_shape, theirs.dense_shape)
    np.testing.assert_allclose(dense(ours), dense(theirs), rtol=1e-12, atol=1e-12)


def test_gather_gradient_is_the_gathered_rows(tf1: Any) -> None:
    def build(lib: Any) -> Any:
        table = lib.Variable(TABLE, name="table")
        rows = lib.gather(table, [[0, 4], [4, 4]])
        weights = lib.constant(np.linspace(-1, 1, 12).reshape(2, 2, 3))
        (grad,) = lib.gradients(lib.reduce_sum(rows * weights), [table])
        assert isinstance(grad, lib.IndexedSlices)
        assert grad.dense_shape is not None and grad.shape.as_list() == [5, 3]
        return grad

    ours, theirs = run_both(tf1, build)
    assert_same_kind_and_value(ours, theirs)
    # One use: the rows come in the order of the ids, exactly as in TensorFlow.
    np.testing.assert_array_equal(ours.indices, theirs.indices)
    np.testing.assert_array_equal(ours.values, theirs.values)


def test_two_gathers_of_one_variable_concatenate(tf1: Any) -> None:
    def build(lib: Any) -> Any:
        table = lib.Variable(TABLE, name="table")
        first = lib.reduce_sum(lib.gather(table, [1, 3]) * 2.0)
        second = lib.reduce_sum(lib.square(lib.gather(table, [3, 0, 3])))
        return lib.gradients(first + second, [table])[0]

    ours, theirs = run_both(tf1, build)
    assert_same_kind_and_value(ours, theirs)
    assert len(ours.indices) == 5


def test_a_dense_use_makes_the_sum_dense(tf1: Any) -> None:
    def build(lib: Any) -> Any:
        table = lib.Variable(TABLE, name="table")
        sparse_use = lib.reduce_sum(lib.gather(table, [2, 2]))
        dense_use = lib.reduce_sum(lib.matmul(table, lib.ones([3, 1], dtype=lib.float64)))
        (grad,) = lib.gradients(sparse_use + dense_use, [table])
        assert isinstance(grad, lib.Tensor)
        return grad

    ours, theirs = run_both(tf1, build)
    assert_same_kind_and_value(ours, theirs)


def test_gather_along_another_axis_has_a_dense_gradient(tf1: Any) -> None:
    def build(lib: Any) -> Any:
        table = lib.Variable(TABLE, name="table")
        return lib.gradients(lib.reduce_sum(lib.gather(table, [2, 0, 2], axis=1)), [table])[0]

    ours, theirs = run_both(tf1, build)
    assert_same_kind_and_value(ours, theirs)


def test_indices_of_mixed_dtypes_become_int64(tf1: Any) -> None:
    def build(lib: Any) -> Any:
        table = lib.Variable(TABLE, name="table")
        a = lib.gather(table, lib.constant([0, 1], dtype=lib.int32))
        b = lib.gather(table, lib.constant([1, 4], dtype=lib.int64))
        return lib.gradients(lib.reduce_sum(a) + lib.reduce_sum(b), [table])[0]

    ours, theirs = run_both(tf1, build)
    assert ours.indices.dtype == np.int64
    assert_same_kind_and_value(ours, theirs)


def test_convert_to_tensor_scatter_adds_repeated_rows(tf1: Any) -> None:
    def build(lib: Any) -> Any:
        values = lib.constant(np.arange(12, dtype=np.float32).reshape(4, 3))
        slices = lib.IndexedSlices(values, lib.constant([3, 0, 3, 1]), lib.constant([5, 3]))
        densified = lib.convert_to_tensor(slices)
        assert densified.shape.as_list() == [5, 3]
        return densified, lib.convert_to_tensor_or_indexed_slices(slices)

    (ours, ours_slices), (theirs, theirs_slices) = run_both(tf1, build)
    np.testing.assert_array_equal(ours, theirs)
    assert_same_kind_and_value(ours_slices, theirs_slices)


def test_gradient_through_identity_and_add_n_stays_sparse(tf1: Any) -> None:
    def build(lib: Any) -> Any:
        table = lib.Variable(TABLE, name="table")
        snapshot = lib.identity(table)
        loss = lib.add_n([lib.reduce_sum(lib.gather(snapshot, [0, 2])), lib.reduce_sum(lib.gather(snapshot, [2]))])
        (grad,) = lib.gradients(loss, [table])
        assert isinstance(grad, lib.IndexedSlices)
        return grad

    ours, theirs = run_both(tf1, build)
    assert_same_kind_and_value(ours, theirs)


def test_converting_without_a_dense_shape_is_an_error() -> None:
    slices = tf.IndexedSlices(tf.constant([[1.0]]), tf.constant([0]))
    with pytest.raises(ValueError, match="without dense_shape"):
        tf.convert_to_tensor(slices)
    with pytest.raises(ValueError, match="requested dtype float64"):
        tf.convert_to_tensor_or_indexed_slices(slices, dtype=tf.float64)


# ---------------------------------------------------------------- unique and scatter ops


def test_unique_lists_values_in_order_of_first_appearance(tf1: Any) -> None:
    x = np.array([7, 1, 7, 4, 1, 9], np.int64)

    def build(lib: Any) -> Any:
        y, idx = lib.unique(lib.constant(x), out_idx=lib.int64)
        return y, idx

    ours, theirs = run_both(tf1, build)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype


@pytest.mark.parametrize("op", ["scatter_add", "scatter_sub", "scatter_update"])
def test_scatter_ops_update_only_the_named_rows(tf1: Any, op: str) -> None:
    indices = [[3, 0], [3, 4]] if op != "scatter_update" else [[3, 0], [1, 4]]
    updates = np.arange(12, dtype=np.float64).reshape(2, 2, 3)

    def build(lib: Any) -> Any:
        table = lib.Variable(TABLE, name="table")
        return getattr(lib, op)(table, lib.constant(indices), lib.constant(updates))

    ours, theirs = run_both(tf1, build)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    np.testing.assert_array_equal(ours[2], TABLE[2])


def test_scatter_checks_its_indices(session: tf.Session) -> None:
    table = tf.Variable(TABLE, name="table")
    with pytest.raises(ValueError, match="updates .* must have shape"):
        tf.scatter_add(table, [1, 2], np.zeros((3, 3)))
    update = tf.scatter_add(table, [1, 5], np.zeros((2, 3)))
    session.run(table.initializer)
    with pytest.raises(tf.errors.InvalidArgumentError, match="5 is not in \\[0, 5\\)"):
        session.run(update)


def test_variable_scatter_methods_take_indexed_slices(session: tf.Session) -> None:
    table = tf.Variable(TABLE, name="table")
    delta = tf.IndexedSlices(tf.constant(np.ones((2, 3))), tf.constant([4, 4]), tf.constant([5, 3]))
    update = table.scatter_sub(delta)
    with pytest.raises(TypeError, match="takes a tf.IndexedSlices"):
        table.scatter_add(np.ones((2, 3)))
    session.run(table.initializer)
    result = session.run(update)
    np.testing.assert_allclose(result[4], TABLE[4] - 2)
    np.testing.assert_array_equal(result[:4], TABLE[:4])


# ---------------------------------------------------------------- fetching and feeding sparse values


def test_sparse_values_are_fetched_and_fed_as_namedtuples(session: tf.Session) -> None:
    ids = tf.sparse_placeholder(tf.int64, shape=[2, 4], name="ids")
    doubled = tf.SparseTensor(ids.indices, ids.values * 2, ids.dense_shape)
    fed = tf.SparseTensorValue(indices=np.array([[0, 0], [1, 2]]), values=np.array([5, 7]), dense_shape=[2, 4])
    value = session.run(doubled, {ids: fed})
    assert isinstance(value, tf.SparseTensorValue)
    np.testing.assert_array_equal(value.values, [10, 14])
    np.testing.assert_array_equal(value.dense_shape, [2, 4])
    slices = tf.IndexedSlices(tf.constant([[1.0, 2.0]]), tf.constant([1]))
    fetched = session.run({"g": slices})["g"]
    assert isinstance(fetched, tf.IndexedSlicesValue) and fetched.dense_shape is None
    with pytest.raises(TypeError, match="must be a SparseTensorValue"):
        session.run(doubled, {ids: np.zeros(3)})


def test_clip_by_global_norm_keeps_sparse_gradients_sparse(tf1: Any) -> None:
    def build(lib: Any) -> Any:
        table = lib.Variable(TABLE, name="table")
        dense_w = lib.Variable(np.ones((3, 1)), name="w")
        loss = lib.reduce_sum(lib.matmul(lib.gather(table, [4, 1, 4]), dense_w))
        grads = lib.gradients(loss, [table, dense_w])
        clipped, norm = lib.clip_by_global_norm(grads, 1.5)
        assert isinstance(clipped[0], lib.IndexedSlices)
        return clipped, norm

    (ours, ours_norm), (theirs, their_norm) = run_both(tf1, build)
    np.testing.assert_allclose(ours_norm, their_norm, rtol=1e-12)
    for a, b in zip(ours, theirs):
        assert_same_kind_and_value(a, b)


@pytest.mark.parametrize("reduction", ["sparse_segment_sum", "sparse_segment_mean", "sparse_segment_sqrt_n"])
def test_sparse_segment_reductions_and_their_gradients(tf1: Any, reduction: str) -> None:
    def build(lib: Any) -> Any:
        data = lib.Variable(TABLE, name="data")
        reduced = getattr(lib, reduction)(data, lib.constant([4, 0, 4, 2, 1]), lib.constant([0, 0, 1, 3, 3]))
        return reduced, lib.gradients(lib.reduce_sum(reduced * lib.constant(np.arange(1.0, 9.0).reshape(4, 2)[:, :1])),
                                      [data])[0]

    (ours, ours_grad), (theirs, their_grad) = run_both(tf1, build)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)  # segment 2 is empty: zeros
    np.testing.assert_allclose(dense(ours_grad), dense(their_grad), rtol=1e-12)
