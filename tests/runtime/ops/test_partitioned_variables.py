"""Partitioned variables: ``tf.get_variable(..., partitioner=...)`` as TF1 makes them.

Partitioners cut the same shapes into the same number of parts; the parts are named
``<name>/part_<i>``, shaped (the first ``dim % n`` parts one row longer), initialized
(a value initializer sliced, an initializer called with the part's shape and a
``partition_info``) and placed on parameter servers exactly as TensorFlow does; the
PartitionedVariable reads as the concatenation of its parts; training the parts
matches TensorFlow. ``tf.compat.v1`` is the oracle throughout.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid as tf

VALUES = np.arange(30, dtype=np.float32).reshape(10, 3) / 10.0


def partitioner_cases(lib: Any) -> list[tuple[Callable[..., Any], list[int], Any]]:
    return [
        (lib.fixed_size_partitioner(3), [7, 3], lib.float32),
        (lib.fixed_size_partitioner(10), [4, 2], lib.float32),
        (lib.fixed_size_partitioner(2, axis=1), [4, 5], lib.float64),
        (lib.min_max_variable_partitioner(max_partitions=4, min_slice_size=64), [100, 8], lib.float32),
        (lib.min_max_variable_partitioner(max_partitions=8, min_slice_size=1 << 20), [100, 8], lib.float32),
        (lib.min_max_variable_partitioner(max_partitions=3, axis=1, min_slice_size=16), [2, 30], lib.int64),
        (lib.variable_axis_size_partitioner(max_shard_bytes=100), [20, 3], lib.float64),
        (lib.variable_axis_size_partitioner(max_shard_bytes=100, max_shards=2), [20, 3], lib.float64),
        (lib.variable_axis_size_partitioner(max_shard_bytes=1), [5, 4], lib.float32),
    ]


def test_partitioners_cut_like_tensorflow(tf1: Any) -> None:
    ours = [p(shape=tf.TensorShape(s), dtype=d) for p, s, d in partitioner_cases(tf)]
    theirs = [p(shape=tf1.TensorShape(s), dtype=d) for p, s, d in partitioner_cases(tf1)]
    assert ours == theirs
    with pytest.raises(ValueError, match="must be positive"):
        tf.variable_axis_size_partitioner(max_shard_bytes=0)


# ---------------------------------------------------------------- names, shapes, placement


def build_sharded_model(lib: Any) -> Any:
    """Partitioned and plain variables under replica_device_setter, trained by Adam (slots too)."""
    graph = lib.Graph()
    with graph.as_default():
        with lib.device(lib.train.replica_device_setter(ps_tasks=2)):
            dense = lib.get_variable("dense", [3, 1], initializer=lib.zeros_initializer())
            emb = lib.get_variable("emb", [10, 3], initializer=lib.constant_initializer(0.5),
                                   partitioner=lib.fixed_size_partitioner(3))
            with lib.variable_scope("wide", partitioner=lib.variable_axis_size_partitioner(max_shard_bytes=40)):
                wide = lib.get_variable("w", [7, 2], initializer=lib.ones_initializer())
            ids = lib.constant([[1, 9], [4, 4]])
            rows = lib.nn.embedding_lookup(emb, ids, partition_strategy="div")
            logits = lib.matmul(lib.reduce_sum(rows, 1), dense) + lib.reduce_sum(lib.nn.embedding_lookup(wide, [6]))
            lib.train.AdamOptimizer(0.1).minimize(lib.reduce_mean(logits))
    return graph, emb, wide


def describe(graph: Any) -> dict[str, tuple[str, list[int]]]:
    return {op.name: (op.device, op.outputs[0].get_shape().as_list()) for op in graph.get_operations()
            if op.type == "VariableV2"}


def test_part_names_shapes_and_placements_match_tensorflow(tf1: Any) -> None:
    ours, emb, wide = build_sharded_model(tf)
    theirs, emb1, wide1 = build_sharded_model(tf1)
    assert describe(ours) == describe(theirs)
    assert [v.name for v in emb] == [v.name for v in emb1] == ["emb/part_0:0", "emb/part_1:0", "emb/part_2:0"]
    assert [v.get_shape().as_list() for v in emb] == [[4, 3], [3, 3], [3, 3]]
    assert [v.name for v in wide] == [v.name for v in wide1]
    assert emb._get_partitions() == emb1._get_partitions() == [3, 1]
    assert emb.get_shape().as_list() == [10, 3] and emb.name == emb1.name == "emb"
    # Every op both graphs have (lookups, their gradients, Adam's updates) is on the same device.
    our_devices = {op.name: op.device for op in ours.get_operations()}
    their_devices = {op.name: op.device for op in theirs.get_operations()}
    common = sorted(set(our_devices) & set(their_devices))
    assert len(common) >= 60
    assert {n: our_devices[n] for n in common} == {n: their_devices[n] for n in common}


def test_parts_are_in_the_collections_and_slots_are_parts_too() -> None:
    graph, emb, _ = build_sharded_model(tf)
    with graph.as_default():
        trainable = [v.op.name for v in tf.trainable_variables()]
        assert [v.op.name for v in emb] == [n for n in trainable if n.startswith("emb/")]
        slots = {v.op.name: v._get_save_slice_info() for v in tf.global_variables() if "Adam" in v.op.name}
    info = slots["emb/part_1/Adam_1"]
    assert (info.full_name, info.full_shape, info.var_offset, info.var_shape) == ("emb/Adam_1", [10, 3], [4, 0], [3, 3])


# ---------------------------------------------------------------- initial values


def run_initialized(lib: Any, build: Callable[[Any], Any]) -> Any:
    with lib.Graph().as_default():
        fetches = build(lib)
        with lib.Session() as sess:
            sess.run(lib.global_variables_initializer())
            return sess.run(fetches)


@pytest.mark.parametrize("partitioner", ["fixed3", "fixed4", "axis1"])
def test_a_value_initializer_is_sliced_into_the_parts(tf1: Any, partitioner: str) -> None:
    def build(lib: Any) -> Any:
        cut = {"fixed3": lib.fixed_size_partitioner(3), "fixed4": lib.fixed_size_partitioner(4),
               "axis1": lib.fixed_size_partitioner(3, axis=1)}[partitioner]
        var = lib.get_variable("v", initializer=lib.constant(VALUES), partitioner=cut)
        return [list(var), lib.convert_to_tensor(var)]

    (ours_parts, ours_whole), (their_parts, their_whole) = (run_initialized(tf, build), run_initialized(tf1, build))
    assert [p.shape for p in ours_parts] == [p.shape for p in their_parts]
    for a, b in zip(ours_parts, their_parts):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ours_whole, their_whole)
    np.testing.assert_array_equal(ours_whole, VALUES)


def test_initializers_get_the_part_shape_and_partition_info(tf1: Any) -> None:
    def build(lib: Any) -> list[tuple[list[int], list[int], list[int]]]:
        calls = []

        def recording(shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
            calls.append((list(shape), list(partition_info.full_shape), list(partition_info.var_offset)))
            return lib.zeros(shape, dtype=dtype)

        with lib.Graph().as_default():
            lib.get_variable("v", [11, 2], initializer=recording, partitioner=lib.fixed_size_partitioner(3))
        return calls

    assert build(tf) == build(tf1) == [([4, 2], [11, 2], [0, 0]), ([4, 2], [11, 2], [4, 0]), ([3, 2], [11, 2], [8, 0])]


def test_glorot_uses_the_fans_of_the_whole_variable() -> None:
    # The limit sqrt(6 / (fan_in + fan_out)) of the full [1000, 2] shape is 0.077; a [250, 2] part
    # initialized on its own would draw up to 0.154.
    with tf.Graph().as_default():
        var = tf.get_variable("v", [1000, 2], partitioner=tf.fixed_size_partitioner(4))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            values = sess.run(tf.convert_to_tensor(var))
    assert np.abs(values).max() <= np.sqrt(6 / 1002) and np.abs(values).max() > 0.07


# ---------------------------------------------------------------- reuse and errors


def test_reuse_returns_the_same_partitioned_variable() -> None:
    cut = tf.fixed_size_partitioner(2)
    with tf.variable_scope("s"):
        first = tf.get_variable("v", [4, 2], partitioner=cut)
    with tf.variable_scope("s", reuse=True):
        assert tf.get_variable("v") is first
        assert tf.get_variable("v", [4, 2], partitioner=cut) is first
        with pytest.raises(ValueError, match="specified partitions \\[4, 1\\] and found partitions \\[2, 1\\]"):
            tf.get_variable("v", [4, 2], partitioner=tf.fixed_size_partitioner(4))
    with tf.variable_scope("s"), pytest.raises(ValueError, match="Partitioned variable with name s/v already exists"):
        tf.get_variable("v", [4, 2], partitioner=cut)
    with tf.variable_scope("s", reuse=tf.AUTO_REUSE):
        assert tf.get_variable("v", [4, 2], partitioner=cut) is first
    with pytest.raises(ValueError, match="a partitioned version of the variable was found: s/v/part_0"):
        tf.get_variable("s/v", [4, 2])


def test_partitioning_errors_name_the_problem() -> None:
    tf.get_variable("plain", [4, 2])
    with pytest.raises(ValueError, match="unpartitioned version of the variable was found: plain"):
        tf.get_variable("plain", [4, 2], partitioner=tf.fixed_size_partitioner(2))
    with pytest.raises(ValueError, match="Can only slice a variable along one dimension"):
        tf.get_variable("two_axes", [4, 4], partitioner=lambda shape, dtype: [2, 2])
    with pytest.raises(ValueError, match="must be fully defined"):
        tf.get_variable("unknown", initializer=np.zeros((4, 2), np.float32), partitioner=tf.fixed_size_partitioner(2))
    with pytest.raises(ValueError, match="Partitioner must be callable"):
        tf.get_variable("bad", [4, 2], partitioner=3)
    # A scalar is never partitioned, as in TF.
    assert isinstance(tf.get_variable("scalar", [], partitioner=tf.fixed_size_partitioner(2)), tf.Variable)


def test_partitioned_variable_reads_and_assigns_as_one_tensor(tf1: Any) -> None:
    def run(lib: Any) -> tuple[str, Any, Any]:
        with lib.Graph().as_default():
            var = lib.get_variable("emb", initializer=lib.constant(VALUES), partitioner=lib.fixed_size_partitioner(3))
            whole = lib.convert_to_tensor(var)
            assert len(var) == 3 and [v.op.name for v in var._get_variable_list()] == [v.op.name for v in var]
            assign = var.assign(VALUES * 2)
            with lib.Session() as sess:
                sess.run(lib.global_variables_initializer())
                before = sess.run(whole)
                return whole.name, before, sess.run(assign)

    name, whole, assigned = run(tf)
    their_name, their_whole, their_assigned = run(tf1)
    assert name == their_name == "emb:0"
    np.testing.assert_array_equal(whole, their_whole)
    for a, b in zip(assigned, their_assigned):
        np.testing.assert_array_equal(a, b)
    with tf.Graph().as_default():
        var = tf.get_variable("emb", [4, 2], partitioner=tf.fixed_size_partitioner(2))
        with pytest.raises(NotImplementedError, match="used as a reference"):
            tf.convert_to_tensor(var, as_ref=True)


# ---------------------------------------------------------------- training the parts


def train_partitioned(lib: Any, strategy: str, optimizer: Callable[[Any], Any]) -> Any:
    with lib.Graph().as_default():
        emb = lib.get_variable("emb", initializer=lib.constant(VALUES), partitioner=lib.fixed_size_partitioner(3))
        ids = lib.placeholder(lib.int64, [None], name="ids")
        rows = lib.nn.embedding_lookup(emb, ids, partition_strategy=strategy)
        gathered = lib.gather(emb, lib.constant([0, 9, 9]))  # a read of the whole table
        loss = lib.reduce_sum(lib.square(rows - 1.0)) + lib.reduce_sum(gathered)
        grads = lib.gradients(loss, list(emb))
        step = optimizer(lib).minimize(loss)
        with lib.Session() as sess:
            sess.run(lib.global_variables_initializer())
            grad_values = sess.run(grads, {ids: [0, 9, 4, 4, 7]})
            for batch in ([0, 9, 4, 4, 7], [3, 3, 5], [9, 1, 0]):
                sess.run(step, {ids: batch})
            return grad_values, sess.run(list(emb))


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_training_partitioned_embeddings_matches_tensorflow(tf1: Any, strategy: str, optimizer: str) -> None:
    make = {"sgd": lambda lib: lib.train.GradientDescentOptimizer(0.1),
            "momentum": lambda lib: lib.train.MomentumOptimizer(0.1, 0.9),
            "adam": lambda lib: lib.train.AdamOptimizer(0.1)}[optimizer]
    ours_grads, ours = train_partitioned(tf, strategy, make)
    their_grads, theirs = train_partitioned(tf1, strategy, make)
    for a, b in zip(ours_grads, their_grads):
        assert type(a).__name__ == type(b).__name__ == "IndexedSlicesValue"
        np.testing.assert_allclose(_dense(a), _dense(b), rtol=1e-6)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


def _dense(value: Any) -> np.ndarray:
    result = np.zeros(value.dense_shape, dtype=value.values.dtype)
    np.add.at(result, value.indices, value.values)
    return result
