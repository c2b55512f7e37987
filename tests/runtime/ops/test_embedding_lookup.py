"""Embedding lookups over sharded tables, compared with TF1's ``tf.nn.embedding_lookup``.

Ten rows split into three uneven shards (4, 3, 3 rows): with ``partition_strategy="mod"``
id ``i`` is row ``i // 3`` of shard ``i % 3``; with ``"div"`` the shards hold ids 0-3,
4-6 and 7-9. The rows looked up and the gradient each shard receives (an IndexedSlices
of its own rows) must be TensorFlow's, for shards given as constants, as variables,
as a PartitionedVariable, and with shapes known only at run time.
``embedding_lookup_sparse`` must combine like TF for "sum", "mean" and "sqrtn".
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf

TABLE = np.arange(20, dtype=np.float64).reshape(10, 2) / 4.0 - 1.0
SHARD_ROWS = {"mod": [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]], "div": [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]}
IDS = np.array([[9, 0, 4], [4, 7, 2], [6, 6, 1]], np.int64)


def run(lib: Any, build: Callable[[Any], Any], feed: Callable[[Any], dict[Any, Any]] = lambda g: {}) -> Any:
    graph = lib.Graph()
    with graph.as_default():
        fetches, feeds = build(lib)
        with lib.Session() as sess:
            sess.run(lib.global_variables_initializer())
            return sess.run(fetches, feeds)


def dense(value: Any) -> np.ndarray:
    if hasattr(value, "dense_shape"):
        result = np.zeros(value.dense_shape, dtype=value.values.dtype)
        np.add.at(result, value.indices, value.values)
        return result
    return np.asarray(value)


def lookup_case(kind: str, strategy: str) -> Callable[[Any], Any]:
    def build(lib: Any) -> Any:
        feeds = {}
        if kind == "partitioned":
            params: Any = lib.get_variable("emb", initializer=lib.constant(TABLE),
                                           partitioner=lib.fixed_size_partitioner(3))
            shards = list(params)
        else:
            values = [TABLE[rows] for rows in SHARD_ROWS[strategy]]
            if kind == "constants":
                shards = [lib.constant(v) for v in values]
            elif kind == "variables":
                shards = [lib.Variable(v, name=f"shard{i}") for i, v in enumerate(values)]
            else:  # shapes known at run time only
                shards = [lib.placeholder(lib.float64, [None, None], name=f"shard{i}") for i in range(3)]
                feeds = dict(zip(shards, values))
            params = shards
        ids = lib.constant(IDS)
        rows = lib.nn.embedding_lookup(params, ids, partition_strategy=strategy)
        weights = lib.constant(np.linspace(-2, 2, IDS.size * 2).reshape(IDS.shape + (2,)))
        grads = lib.gradients(lib.reduce_sum(rows * weights), shards)
        return (rows, grads), feeds

    return build


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("kind", ["constants", "variables", "partitioned", "unknown_shapes"])
def test_lookup_and_gradients_over_three_uneven_shards(tf1: Any, kind: str, strategy: str) -> None:
    rows, grads = run(tf, lookup_case(kind, strategy))
    their_rows, their_grads = run(tf1, lookup_case(kind, strategy))
    np.testing.assert_array_equal(rows, their_rows)
    if kind != "partitioned" or strategy == "div":  # a PartitionedVariable's parts hold contiguous rows
        np.testing.assert_array_equal(rows, TABLE[IDS])
    assert len(grads) == 3
    for ours, theirs in zip(grads, their_grads):
        assert type(ours).__name__ == type(theirs).__name__ == "IndexedSlicesValue"
        np.testing.assert_array_equal(ours.indices, theirs.indices)
        np.testing.assert_allclose(ours.values, theirs.values, rtol=1e-12)
        np.testing.assert_array_equal(ours.dense_shape, theirs.dense_shape)


def test_lookups_run_next_to_the_shards_as_in_tensorflow(tf1: Any) -> None:
    def devices(lib: Any, shards: int) -> dict[str, str]:
        with lib.Graph().as_default() as graph:
            with lib.device(lib.train.replica_device_setter(ps_tasks=2)):
                table = lib.get_variable("emb", initializer=lib.constant(TABLE),
                                         partitioner=lib.fixed_size_partitioner(shards))
                lib.gradients(lib.reduce_sum(lib.nn.embedding_lookup(table, IDS, partition_strategy="div")), list(table))
            return {op.name: op.device for op in graph.get_operations()}

    for shards in (1, 3):
        ours, theirs = devices(tf, shards), devices(tf1, shards)
        common = sorted(set(ours) & set(theirs))
        assert len(common) >= (10 if shards == 1 else 40)
        assert {n: ours[n] for n in common} == {n: theirs[n] for n in common}
        gathers = [n for n in common if n.startswith("embedding_lookup/GatherV2") or n == "embedding_lookup"]
        assert gathers and all(ours[n].startswith("/job:ps") for n in gathers if shards == 1 or "GatherV2" in n)


def test_max_norm_clips_each_row(tf1: Any) -> None:
    def build(lib: Any) -> Any:
        shards = [lib.constant(TABLE[:5]), lib.constant(TABLE[5:])]
        return (lib.nn.embedding_lookup(shards, IDS, partition_strategy="div", max_norm=1.5),
                lib.nn.embedding_lookup(lib.constant(TABLE), IDS, max_norm=1.5)), {}

    ours, theirs = run(tf, build), run(tf1, build)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert np.linalg.norm(ours[0], axis=-1).max() <= 1.5 + 1e-12


def test_bad_strategy_and_empty_params_are_errors() -> None:
    shards = [tf.constant(TABLE[:5]), tf.constant(TABLE[5:])]
    with pytest.raises(ValueError, match="Unrecognized partition strategy: modulo"):
        tf.nn.embedding_lookup(shards, [1], partition_strategy="modulo")
    with pytest.raises(ValueError, match="Need at least one param"):
        tf.nn.embedding_lookup([], [1])


def test_dynamic_partition_and_stitch_match_tensorflow(tf1: Any) -> None:
    data = np.arange(12, dtype=np.float32).reshape(6, 2)
    parts = np.array([2, 0, 2, 1, 0, 2], np.int32)

    def build(lib: Any) -> Any:
        pieces = lib.dynamic_partition(lib.constant(data), lib.constant(parts), 3)
        positions = lib.dynamic_partition(lib.range(6), lib.constant(parts), 3)
        stitched = lib.dynamic_stitch(positions, pieces)
        overlapping = lib.dynamic_stitch([lib.constant([0, 2]), lib.constant([2, 3])],
                                         [lib.constant([[1.0], [2.0]]), lib.constant([[3.0], [4.0]])])
        return (pieces, stitched, overlapping), {}

    ours = run(tf, build)
    theirs = run(tf1, build)
    for a, b in zip(ours[0], theirs[0]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ours[1], data)
    np.testing.assert_array_equal(ours[2], theirs[2])


def test_dynamic_partition_rejects_an_out_of_range_partition(session: tf.Session) -> None:
    pieces = tf.dynamic_partition(tf.constant([1.0, 2.0]), tf.constant([0, 3]), 2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="partitions has the value 3, which is not in \\[0, 2\\)"):
        session.run(pieces)


# ---------------------------------------------------------------- embedding_lookup_sparse

SP_INDICES = np.array([[0, 0], [0, 1], [0, 2], [2, 0], [2, 1], [3, 0]], np.int64)
SP_IDS = np.array([9, 4, 9, 0, 7, 2], np.int64)
SP_WEIGHTS = np.array([1.0, 2.0, 0.5, -1.0, 3.0, 1.5])


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("sharded", [False, True], ids=["one_table", "three_shards"])
def test_embedding_lookup_sparse_matches_tensorflow(tf1: Any, combiner: str, weighted: bool, sharded: bool) -> None:
    def build(lib: Any) -> Any:
        if sharded:
            params: Any = lib.get_variable("emb", initializer=lib.constant(TABLE),
                                           partitioner=lib.fixed_size_partitioner(3))
            shards = list(params)
        else:
            params = lib.Variable(TABLE, name="emb")
            shards = [params]
        sp_ids = lib.SparseTensor(SP_INDICES, SP_IDS, [4, 3])
        sp_weights = lib.SparseTensor(SP_INDICES, SP_WEIGHTS, [4, 3]) if weighted else None
        combined = lib.nn.embedding_lookup_sparse(params, sp_ids, sp_weights, partition_strategy="div",
                                                  combiner=combiner)
        grads = lib.gradients(lib.reduce_sum(combined * lib.constant(np.array([[1.0, -2.0]]))), shards)
        return (combined, grads), {}

    (combined, grads), (their_combined, their_grads) = run(tf, build), run(tf1, build)
    assert combined.shape == their_combined.shape == (4, 2)
    np.testing.assert_allclose(combined, their_combined, rtol=1e-12, atol=1e-12)
    for ours, theirs in zip(grads, their_grads):
        np.testing.assert_allclose(dense(ours), dense(theirs), rtol=1e-12, atol=1e-12)


def test_embedding_lookup_sparse_checks_its_arguments() -> None:
    table = tf.constant(TABLE)
    sp_ids = tf.SparseTensor(SP_INDICES, SP_IDS, [4, 3])
    with pytest.raises(ValueError, match="combiner must be one of"):
        tf.nn.embedding_lookup_sparse(table, sp_ids, None, combiner="max")
    with pytest.raises(TypeError, match="sp_ids must be SparseTensor"):
        tf.nn.embedding_lookup_sparse(table, SP_IDS, None)
    with pytest.raises(TypeError, match="cannot be used where a dense Tensor is expected"):
        tf.reduce_sum(sp_ids)


def test_sharded_lookup_runs_through_the_gpu_backend_interface(strict_gpu: Any) -> None:
    with tf.device("/device:GPU:0"):
        shards = [tf.Variable(TABLE[rows], name=f"shard{i}") for i, rows in enumerate(SHARD_ROWS["div"])]
        rows = tf.nn.embedding_lookup(shards, IDS, partition_strategy="div")
        unique_ids, _ = tf.unique(tf.reshape(tf.constant(IDS), [-1]))
        step = tf.train.AdagradOptimizer(0.1).minimize(tf.reduce_sum(rows))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(rows), TABLE[IDS])
        np.testing.assert_array_equal(sess.run(unique_ids), [9, 0, 4, 7, 2, 6, 1])
        sess.run(step)
        table = np.concatenate(sess.run(shards))
    untouched = [3, 5, 8]
    np.testing.assert_array_equal(table[untouched], TABLE[untouched])
    assert np.all(table[[0, 1, 2, 4, 6, 7, 9]] < TABLE[[0, 1, 2, 4, 6, 7, 9]])
