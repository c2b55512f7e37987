"""TensorFlow 2.21's own TF1 API (``tf.compat.v1``, graph mode) as the oracle for whole models.

The same model function builds a small MLP or CNN once with ``import tensorgrid as tf``
and once with TensorFlow, from the same numpy weights and the same batch of real
digits; the losses, the gradients of every variable (``tf.gradients``) and the
variables after a few optimizer steps must agree. In float64 the only differences are
summation order, so the tolerance is tight; float32 runs are checked too, since that is
what users train in.

TensorFlow is an optional extra (``pip install 'tensorgrid[oracle]'``): without it these
tests skip, except in CI (``CI=true``) where they fail.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid
from tensorgrid import data

# Relative to the largest magnitude in each compared array (so tiny entries of a gradient
# are not held to a relative tolerance that only summation order would break).
TOLERANCE = {np.float64: 1e-12, np.float32: 1e-5}
BATCH_SIZE = 16
OPTIMIZER_STEPS = 3


@pytest.fixture(scope="module")
def digits() -> data.TrainTestSplit:
    return data.load_digits(seed=0)


# ---------------------------------------------------------------- models (one source, two libraries)

def mlp(tf: Any, v: dict[str, Any], images: Any, labels: Any) -> Any:
    hidden = tf.nn.relu(tf.matmul(images, v["w1"]) + v["b1"])
    logits = tf.matmul(hidden, v["w2"]) + v["b2"]
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def mlp_dense_labels(tf: Any, v: dict[str, Any], images: Any, labels: Any) -> Any:
    """tanh, sigmoid, bias_add and the one-hot (dense) cross-entropy."""
    hidden = tf.tanh(tf.nn.bias_add(tf.matmul(images, v["w1"]), v["b1"]))
    gated = hidden * tf.sigmoid(hidden)
    logits = tf.nn.bias_add(tf.matmul(gated, v["w2"]), v["b2"])
    one_hot = tf.one_hot(labels, 10, dtype=logits.dtype)
    return tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=one_hot, logits=logits))


def cnn(tf: Any, v: dict[str, Any], images: Any, labels: Any) -> Any:
    """conv SAME stride 1 -> pool 2x2 SAME -> conv VALID -> pool 2x2 stride 1 VALID -> dense."""
    net = tf.reshape(images, [-1, 8, 8, 1])
    net = tf.nn.relu(tf.nn.conv2d(net, v["k1"], strides=[1, 1, 1, 1], padding="SAME") + v["c1"])
    net = tf.nn.max_pool(net, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")  # 4x4
    net = tf.nn.relu(tf.nn.conv2d(net, v["k2"], strides=[1, 1, 1, 1], padding="VALID") + v["c2"])  # 2x2
    net = tf.nn.max_pool(net, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID")  # 1x1
    logits = tf.matmul(tf.reshape(net, [-1, 6]), v["w"]) + v["b"]
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def cnn_strided(tf: Any, v: dict[str, Any], images: Any, labels: Any) -> Any:
    """Stride-2 SAME convolution (TF pads the extra row and column at the bottom and right),
    then an overlapping 3x3 stride-2 SAME max pool over values of both signs (padding must
    never win a max): the paddings most often got wrong."""
    net = tf.reshape(images, [-1, 8, 8, 1])
    net = tf.nn.conv2d(net, v["k1"], strides=[1, 2, 2, 1], padding="SAME") + v["c1"]  # 4x4
    net = tf.nn.relu(tf.nn.max_pool(net, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME"))  # 2x2
    net = tf.nn.conv2d(net, v["k2"], strides=[1, 1, 1, 1], padding="SAME") + v["c2"]  # 2x2x6
    logits = tf.matmul(tf.reshape(net, [-1, 24]), v["w"]) + v["b"]
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


MODELS: dict[str, tuple[Callable[..., Any], dict[str, tuple[int, ...]]]] = {
    "mlp": (mlp, {"w1": (64, 32), "b1": (32,), "w2": (32, 10), "b2": (10,)}),
    "mlp_dense_labels": (mlp_dense_labels, {"w1": (64, 32), "b1": (32,), "w2": (32, 10), "b2": (10,)}),
    "cnn": (cnn, {"k1": (3, 3, 1, 4), "c1": (4,), "k2": (3, 3, 4, 6), "c2": (6,), "w": (6, 10), "b": (10,)}),
    "cnn_strided": (cnn_strided,
                    {"k1": (3, 3, 1, 4), "c1": (4,), "k2": (2, 2, 4, 6), "c2": (6,), "w": (24, 10), "b": (10,)}),
}

OPTIMIZERS: dict[str, Callable[[Any], Any]] = {
    "sgd": lambda tf: tf.train.GradientDescentOptimizer(0.1),
    "momentum": lambda tf: tf.train.MomentumOptimizer(0.1, momentum=0.9),
    "nesterov": lambda tf: tf.train.MomentumOptimizer(0.1, momentum=0.9, use_nesterov=True),
    "adagrad": lambda tf: tf.train.AdagradOptimizer(0.1),
    "adam": lambda tf: tf.train.AdamOptimizer(0.01),
}


def initial_weights(model: str, dtype: type) -> dict[str, np.ndarray]:
    """He-scaled weights and small non-zero biases (so no relu input sits exactly on its kink)."""
    rng = np.random.default_rng(sorted(MODELS).index(model))
    weights = {}
    for name, shape in MODELS[model][1].items():
        fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 10
        weights[name] = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(dtype)
    return weights


def batch(digits: data.TrainTestSplit, index: int, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    part = slice(index * BATCH_SIZE, (index + 1) * BATCH_SIZE)
    return digits.train.images[part].astype(dtype), digits.train.labels[part]


def build(tf: Any, model: str, weights: dict[str, np.ndarray]) -> tuple[Any, Any, Any, dict[str, Any]]:
    """Placeholders, loss and variables (initialised from the numpy weights) in the default graph."""
    dtype = next(iter(weights.values())).dtype
    images = tf.placeholder(tf.as_dtype(dtype), [None, 64], name="images")
    labels = tf.placeholder(tf.int64, [None], name="labels")
    variables = {name: tf.Variable(value, name=name) for name, value in weights.items()}
    return images, labels, MODELS[model][0](tf, variables, images, labels), variables


def loss_and_gradients(tf: Any, model: str, weights: dict[str, np.ndarray],
                       feed: tuple[np.ndarray, np.ndarray]) -> tuple[float, dict[str, np.ndarray]]:
    with tf.Graph().as_default():
        images, labels, loss, variables = build(tf, model, weights)
        gradients = tf.gradients(loss, list(variables.values()))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            loss_value, gradient_values = sess.run([loss, gradients], {images: feed[0], labels: feed[1]})
    return float(loss_value), dict(zip(variables, gradient_values))


def train(tf: Any, model: str, optimizer: str, weights: dict[str, np.ndarray],
          feeds: list[tuple[np.ndarray, np.ndarray]]) -> tuple[int, dict[str, np.ndarray]]:
    with tf.Graph().as_default():
        images, labels, loss, variables = build(tf, model, weights)
        global_step = tf.train.get_or_create_global_step()
        train_op = OPTIMIZERS[optimizer](tf).minimize(loss, global_step=global_step)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for feed in feeds:
                sess.run(train_op, {images: feed[0], labels: feed[1]})
            return int(sess.run(global_step)), sess.run(variables)


def assert_close(actual: Any, expected: Any, dtype: type, what: str) -> None:
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, TensorFlow's is {expected.shape}"
    rtol = TOLERANCE[dtype]
    atol = rtol * float(np.max(np.abs(expected), initial=0.0))
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


# ---------------------------------------------------------------- the comparisons

@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_loss_and_gradients_match_tensorflow(tf1: Any, digits: data.TrainTestSplit, model: str, dtype: type) -> None:
    weights, feed = initial_weights(model, dtype), batch(digits, 0, dtype)
    expected_loss, expected_gradients = loss_and_gradients(tf1, model, weights, feed)
    loss, gradients = loss_and_gradients(tensorgrid, model, weights, feed)
    assert_close(loss, expected_loss, dtype, f"{model} loss")
    assert set(gradients) == set(expected_gradients)
    for name, expected in expected_gradients.items():
        assert np.asarray(gradients[name]).dtype == dtype, f"gradient of {name} has dtype {gradients[name].dtype}"
        assert_close(gradients[name], expected, dtype, f"{model} gradient of {name}")


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_optimizer_steps_match_tensorflow(tf1: Any, digits: data.TrainTestSplit, model: str, optimizer: str) -> None:
    weights = initial_weights(model, np.float64)
    feeds = [batch(digits, step, np.float64) for step in range(OPTIMIZER_STEPS)]
    expected_step, expected = train(tf1, model, optimizer, weights, feeds)
    step, trained = train(tensorgrid, model, optimizer, weights, feeds)
    assert step == expected_step == OPTIMIZER_STEPS
    for name in weights:
        assert not np.allclose(expected[name], weights[name]), f"{optimizer} left {name} unchanged in TensorFlow"
        assert_close(trained[name], expected[name], np.float64, f"{model} {name} after {optimizer}")
