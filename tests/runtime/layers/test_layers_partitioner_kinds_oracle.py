"""``tf.layers`` under the partitioners the canned estimators use, against TensorFlow 2.21's
``tf.compat.v1.layers``: ``min_max_variable_partitioner`` (as many parts as the slice size allows,
at most ``max_partitions``), ``fixed_size_partitioner`` over a dense layer stacked on another, and
batch normalization, whose ``gamma`` and ``beta`` are partitioned while its moving statistics stay
whole (TF's layer turns the partitioner off for them) and are updated through UPDATE_OPS. The
same program runs on both libraries: variable names and shapes, outputs, and the loss after a few
steps of gradient descent (with the moving statistics' updates) are compared."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid

RNG = np.random.default_rng(5)
FEATURES = RNG.normal(size=(6, 8)).astype(np.float32)


def run_layers(tf: Any, layers: Any, partitioner: Callable[[Any], Any],
               build: Callable[[Any, Any, Any], Any]) -> dict[str, Any]:
    """``build(tf, layers, inputs)`` -> output under ``variable_scope("model", partitioner=...)``;
    what a program sees of it, before and after three training steps."""
    with tf.Graph().as_default():
        inputs = tf.constant(FEATURES)
        with tf.variable_scope("model", partitioner=partitioner(tf)):
            output = build(tf, layers, inputs)
        weights = tf.constant(np.linspace(-1.0, 1.0, int(np.prod(output.shape.as_list()))).reshape(
            output.shape.as_list()).astype(np.float32))
        loss = tf.reduce_sum(tf.square(output * weights))
        minimize = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
        train = tf.group(minimize, *tf.get_collection(tf.GraphKeys.UPDATE_OPS))
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            first_output, first_loss = session.run([output, loss])
            for _ in range(3):
                session.run(train)
            last_loss = session.run(loss)
            values = {v.op.name: session.run(v) for v in tf.global_variables()}
        return {
            "variables": [(v.op.name, v.shape.as_list()) for v in tf.global_variables()],
            "trainable": [v.op.name for v in tf.trainable_variables()],
            "update_ops": len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)),
            "output": first_output, "first_loss": first_loss, "last_loss": last_loss, "values": values,
        }


def two_dense(tf: Any, layers: Any, inputs: Any) -> Any:
    hidden = layers.dense(inputs, 6, activation=tf.nn.tanh, kernel_initializer=tf.constant_initializer(0.1),
                          bias_initializer=tf.constant_initializer(0.05))
    return layers.dense(hidden, 2, kernel_initializer=tf.constant_initializer(-0.2), name="out")


def dense_then_batch_norm(tf: Any, layers: Any, inputs: Any) -> Any:
    hidden = layers.dense(inputs, 4, kernel_initializer=tf.constant_initializer(0.1))
    normalized = layers.batch_normalization(hidden, momentum=0.9, training=True,
                                            gamma_initializer=tf.constant_initializer(1.5),
                                            beta_initializer=tf.constant_initializer(0.25))
    return layers.dense(normalized, 1, kernel_initializer=tf.constant_initializer(0.3), name="out")


PARTITIONERS = {
    # two_dense's first kernel, 8 x 6 float32 (192 bytes), in slices of at least 64 bytes: 3 parts.
    "min_max": lambda tf: tf.min_max_variable_partitioner(max_partitions=3, min_slice_size=64),
    "min_max_one_part": lambda tf: tf.min_max_variable_partitioner(max_partitions=4),
    "fixed_size": lambda tf: tf.fixed_size_partitioner(2),
}
CASES = {"two_dense": two_dense, "dense_then_batch_norm": dense_then_batch_norm}


@pytest.mark.parametrize("partitioner", sorted(PARTITIONERS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_partitioned_layers_match_tensorflow(case: str, partitioner: str, tf1: Any, tf1_layers: Any) -> None:
    ours = run_layers(tensorgrid, tensorgrid.layers, PARTITIONERS[partitioner], CASES[case])
    theirs = run_layers(tf1, tf1_layers, PARTITIONERS[partitioner], CASES[case])
    for key in ("variables", "trainable", "update_ops"):
        assert ours[key] == theirs[key], key
    for key in ("output", "first_loss", "last_loss"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-4, atol=1e-5, err_msg=key)
    for name, value in theirs["values"].items():
        np.testing.assert_allclose(ours["values"][name], value, rtol=1e-4, atol=1e-5, err_msg=name)


def test_batch_norm_under_a_partitioner_keeps_its_moving_statistics_whole() -> None:
    result = run_layers(tensorgrid, tensorgrid.layers, PARTITIONERS["fixed_size"], dense_then_batch_norm)
    names = dict((name, shape) for name, shape in result["variables"])
    assert names["model/batch_normalization/gamma/part_0"] == [2]
    assert names["model/batch_normalization/moving_mean"] == [4]
    assert names["model/batch_normalization/moving_variance"] == [4]
    assert not np.allclose(result["values"]["model/batch_normalization/moving_mean"], 0.0)
    assert result["last_loss"] < result["first_loss"]
