"""``tf.layers`` under a variable scope's partitioner, against TensorFlow 2.21's
``tf.compat.v1.layers``: the kernel and bias become ``PartitionedVariable``s (``part_0``,
``part_1``), the layer computes with their parts concatenated, gradients reach each part, a
regularizer adds one loss per part, and the layer files the parts as TensorFlow's legacy layers
do. The canned DNN estimators build their hidden layers this way. (A constant initializer takes
a scalar here: the parts are initialized one by one, so a full-size value fits neither, in both.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid

RNG = np.random.default_rng(11)
FEATURES = RNG.normal(size=(4, 5)).astype(np.float32)
SEQUENCES = RNG.normal(size=(2, 3, 5)).astype(np.float32)
IMAGES = RNG.normal(size=(2, 5, 5, 2)).astype(np.float32)


def run_partitioned(tf: Any, layers: Any, build: Any) -> dict[str, Any]:
    """Builds ``build(tf, layers)`` -> (layer, output) under ``fixed_size_partitioner(2)``, and
    returns what a program sees: values, gradients per variable, the variables, the layer's lists,
    the regularization losses, and the loss after three steps of gradient descent."""
    with tf.Graph().as_default():
        with tf.variable_scope("model", partitioner=tf.fixed_size_partitioner(2)):
            layer, output = build(tf, layers)
        weights = tf.constant(np.linspace(-1.0, 1.0, int(np.prod(output.shape.as_list()))).reshape(
            output.shape.as_list()).astype(np.float32))
        reg_losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
        loss = tf.reduce_sum(output * weights) + (tf.add_n(reg_losses) if reg_losses else 0.0)
        trainable = tf.trainable_variables()
        gradients = tf.gradients(loss, trainable)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            values = session.run({"output": output, "gradients": gradients, "reg_losses": reg_losses})
            for _ in range(3):
                session.run(train)
            values["loss_after"] = session.run(loss)
        return {
            "kernel_type": type(layer.kernel).__name__,
            "variables": [(v.name, tuple(v.shape.as_list())) for v in tf.global_variables()],
            "trainable": [v.name for v in trainable],
            "layer_trainable": [v.name for v in layer.trainable_weights],
            "layer_non_trainable": [v.name for v in layer.non_trainable_weights],
            "layer_losses": len(layer.losses),
            **values,
        }


def dense_layer(tf: Any, layers: Any, inputs: np.ndarray) -> Any:
    layer = layers.Dense(3, activation=tf.nn.relu, kernel_initializer=tf.constant_initializer(0.3),
                         bias_initializer=tf.constant_initializer(-0.1),
                         kernel_regularizer=lambda w: 0.01 * tf.reduce_sum(tf.square(w)))
    return layer, layer(tf.constant(inputs))


def conv_layer(tf: Any, layers: Any) -> Any:
    layer = layers.Conv2D(4, 3, padding="same", kernel_initializer=tf.constant_initializer(0.2))
    return layer, layer(tf.constant(IMAGES))


CASES = {
    "dense": lambda tf, layers: dense_layer(tf, layers, FEATURES),
    "dense_rank3": lambda tf, layers: dense_layer(tf, layers, SEQUENCES),
    "conv2d": conv_layer,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_partitioned_layer_computes_with_its_parts_as_tensorflow(case: str, tf1: Any, tf1_layers: Any) -> None:
    ours = run_partitioned(tensorgrid, tensorgrid.layers, CASES[case])
    theirs = run_partitioned(tf1, tf1_layers, CASES[case])
    for key in ("kernel_type", "variables", "trainable", "layer_trainable", "layer_non_trainable", "layer_losses"):
        assert ours[key] == theirs[key], key
    np.testing.assert_allclose(ours["output"], theirs["output"], rtol=1e-5, atol=1e-5)
    assert len(ours["gradients"]) == len(theirs["gradients"])
    for mine, reference in zip(ours["gradients"], theirs["gradients"]):
        np.testing.assert_allclose(mine, reference, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours["reg_losses"], theirs["reg_losses"], rtol=1e-5)
    np.testing.assert_allclose(ours["loss_after"], theirs["loss_after"], rtol=1e-4, atol=1e-5)


def test_a_dense_layer_under_a_partitioner_trains_on_its_parts() -> None:
    result = run_partitioned(tensorgrid, tensorgrid.layers, CASES["dense"])
    assert result["kernel_type"] == "PartitionedVariable"
    assert result["variables"][:2] == [("model/dense/kernel/part_0:0", (3, 3)), ("model/dense/kernel/part_1:0", (2, 3))]
    assert len(result["reg_losses"]) == 2
    first_loss = float(np.sum(result["output"] * np.linspace(-1.0, 1.0, 12).reshape(4, 3)) + sum(result["reg_losses"]))
    assert result["loss_after"] < first_loss
