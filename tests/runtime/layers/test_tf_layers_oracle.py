"""``tf.layers`` against TensorFlow 2.21's ``tf.compat.v1.layers`` (the oracle): the same program,
with the same numpy weights (``tf.constant_initializer``), run on both libraries gives the same
outputs, the same gradients (``tf.gradients``), the same variables (names, shapes, trainable or
not), the same UPDATE_OPS and REGULARIZATION_LOSSES, and the same moving statistics after a
training step of batch normalization.

TensorFlow 2.21 keeps ``tf.compat.v1.layers`` in the tf-keras package (Keras 3 dropped them);
the oracle extra installs it (Makefile), and the ``tf1_layers`` fixture takes them from there.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid

RNG = np.random.default_rng(7)
IMAGES = RNG.normal(size=(3, 7, 7, 2)).astype(np.float32)
FEATURES = RNG.normal(size=(4, 5)).astype(np.float32)
SEQUENCES = RNG.normal(size=(2, 3, 5)).astype(np.float32)


def on_both(request: pytest.FixtureRequest, build: Callable[[Any, Any], dict[str, Any]],
            feed: Callable[[Any], dict[Any, Any]] = lambda tf: {}, steps: int = 0) -> list[dict[str, Any]]:
    """Builds ``build(tf, layers)`` (a dict of fetches) on tensorgrid and on TensorFlow, runs ``steps``
    runs of the UPDATE_OPS first, and returns per library: the fetched values, the variables
    (name, shape), the trainable ones and the sizes of UPDATE_OPS and REGULARIZATION_LOSSES."""
    results = []
    for name in ("tensorgrid", "tensorflow"):
        tf = tensorgrid if name == "tensorgrid" else request.getfixturevalue("tf1")
        layers = tensorgrid.layers if name == "tensorgrid" else request.getfixturevalue("tf1_layers")
        with tf.Graph().as_default():
            fetches = build(tf, layers)
            updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
            with tf.Session() as session:
                session.run(tf.global_variables_initializer())
                for _ in range(steps):
                    session.run(updates, feed(tf))
                values = session.run(fetches, feed(tf))
            results.append({
                "values": values,
                "variables": [(v.name, tuple(v.shape.as_list())) for v in tf.global_variables()],
                "trainable": [v.name for v in tf.trainable_variables()],
                "update_ops": len(updates),
                "regularization_losses": len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)),
            })
    return results


def assert_same(ours: dict[str, Any], theirs: dict[str, Any], tolerance: float = 1e-5) -> None:
    for key in ("variables", "trainable", "update_ops", "regularization_losses"):
        assert ours[key] == theirs[key], key
    assert ours["values"].keys() == theirs["values"].keys()
    for key, value in theirs["values"].items():
        np.testing.assert_allclose(ours["values"][key], value, rtol=tolerance, atol=tolerance, err_msg=key)


def with_gradients(tf: Any, inputs: Any, output: Any, **fetches: Any) -> dict[str, Any]:
    """The output, and the gradients of a weighted sum of it with respect to the inputs and every
    trainable variable (a weight per element, so each gradient element is checked)."""
    weights = tf.constant(np.linspace(-1.0, 1.0, int(np.prod(output.shape.as_list()))).reshape(
        output.shape.as_list()).astype(np.float32))
    variables = tf.trainable_variables()
    grads = tf.gradients(tf.reduce_sum(output * weights), [inputs, *variables])
    result = {"output": output, "d_inputs": grads[0], **fetches}
    result.update({"d_" + v.op.name: g for v, g in zip(variables, grads[1:])})
    return result


def constant(tf: Any, shape: tuple[int, ...], seed: int) -> Any:
    values = np.random.default_rng(seed).normal(scale=0.5, size=shape).astype(np.float32)
    return tf.constant_initializer(values)


@pytest.mark.oracle
@pytest.mark.parametrize("activation", [None, "relu"])
@pytest.mark.parametrize("data", [FEATURES, SEQUENCES], ids=["rank2", "rank3"])
def test_dense(request: pytest.FixtureRequest, activation: Any, data: np.ndarray) -> None:
    def build(tf: Any, layers: Any) -> dict[str, Any]:
        x = tf.constant(data)
        hidden = layers.dense(x, 4, activation=getattr(tf.nn, activation) if activation else None,
                              kernel_initializer=constant(tf, (5, 4), 1), bias_initializer=constant(tf, (4,), 2))
        output = layers.dense(hidden, 3, kernel_initializer=constant(tf, (4, 3), 3), use_bias=False)
        return with_gradients(tf, x, output)

    ours, theirs = on_both(request, build)
    assert theirs["variables"] == [("dense/kernel:0", (5, 4)), ("dense/bias:0", (4,)), ("dense_1/kernel:0", (4, 3))]
    assert_same(ours, theirs)


@pytest.mark.oracle
def test_layer_names_reuse_and_scopes(request: pytest.FixtureRequest) -> None:
    def build(tf: Any, layers: Any) -> dict[str, Any]:
        x = tf.constant(FEATURES)
        first = layers.dense(x, 2, name="fc", kernel_initializer=constant(tf, (5, 2), 4))
        shared = layers.dense(x * 2.0, 2, name="fc", reuse=True)
        unnamed = layers.dense(x, 3)
        reused = layers.dense(x, 3, reuse=True)
        with tf.variable_scope("tower", initializer=tf.ones_initializer()):
            in_scope = layers.dense(x, 2)
            layers.dense(x, 2)
        with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
            auto_first = layers.dense(x, 2, name="head")
            auto_again = layers.dense(x, 2, name="head")
        frozen = layers.dense(x, 2, trainable=False, name="frozen")
        return {"first": first, "shared": shared, "unnamed_equals_reused": tf.reduce_max(tf.abs(unnamed - reused)),
                "in_scope": in_scope, "auto_equal": tf.reduce_max(tf.abs(auto_first - auto_again)),
                "frozen_shape": tf.shape(frozen)}

    ours, theirs = on_both(request, build)
    assert ("tower/dense_1/kernel:0", (5, 2)) in theirs["variables"]
    assert "frozen/kernel:0" not in theirs["trainable"]
    assert_same(ours, theirs)


@pytest.mark.oracle
def test_a_second_layer_of_the_same_name_without_reuse_is_refused(request: pytest.FixtureRequest) -> None:
    for name in ("tensorgrid", "tensorflow"):
        tf = tensorgrid if name == "tensorgrid" else request.getfixturevalue("tf1")
        layers = tensorgrid.layers if name == "tensorgrid" else request.getfixturevalue("tf1_layers")
        with tf.Graph().as_default():
            x = tf.constant(FEATURES)
            layers.dense(x, 2, name="fc")
            with pytest.raises(ValueError, match="fc/kernel already exists"):
                layers.dense(x, 2, name="fc")


@pytest.mark.oracle
@pytest.mark.parametrize("padding", ["valid", "same", "SAME"])
@pytest.mark.parametrize("strides,dilation", [(1, 1), (2, 1), ((1, 2), 1), (1, 2)])
def test_conv2d(request: pytest.FixtureRequest, padding: str, strides: Any, dilation: Any) -> None:
    def build(tf: Any, layers: Any) -> dict[str, Any]:
        x = tf.constant(IMAGES)
        output = layers.conv2d(x, 3, (3, 2), strides=strides, padding=padding, dilation_rate=dilation,
                               activation=tf.nn.relu, kernel_initializer=constant(tf, (3, 2, 2, 3), 5),
                               bias_initializer=constant(tf, (3,), 6))
        return with_gradients(tf, x, output)

    ours, theirs = on_both(request, build)
    assert theirs["variables"] == [("conv2d/kernel:0", (3, 2, 2, 3)), ("conv2d/bias:0", (3,))]
    assert_same(ours, theirs)


@pytest.mark.oracle
@pytest.mark.parametrize("layer", ["max_pooling2d", "average_pooling2d"])
@pytest.mark.parametrize("pool,strides,padding", [(2, 2, "valid"), (3, 2, "same"), ((2, 3), 1, "Valid")])
def test_pooling(request: pytest.FixtureRequest, layer: str, pool: Any, strides: Any, padding: str) -> None:
    def build(tf: Any, layers: Any) -> dict[str, Any]:
        x = tf.constant(IMAGES)
        return with_gradients(tf, x, getattr(layers, layer)(x, pool, strides, padding=padding))

    assert_same(*on_both(request, build))


@pytest.mark.oracle
def test_channels_first_computes_what_channels_last_computes_on_transposed_images(
        request: pytest.FixtureRequest) -> None:
    """TensorFlow's CPU kernels refuse NCHW; tensorgrid's layers transpose, so they are compared with
    TensorFlow's channels_last layers on the transposed images."""
    tf1, tf1_layers = request.getfixturevalue("tf1"), request.getfixturevalue("tf1_layers")
    results = []
    for tf, layers, data_format in ((tensorgrid, tensorgrid.layers, "channels_first"),
                                    (tf1, tf1_layers, "channels_last")):
        with tf.Graph().as_default():
            x = tf.constant(IMAGES.transpose(0, 3, 1, 2) if data_format == "channels_first" else IMAGES)
            y = layers.conv2d(x, 3, 3, padding="same", data_format=data_format,
                              kernel_initializer=constant(tf, (3, 3, 2, 3), 8))
            y = layers.max_pooling2d(y, 2, 2, data_format=data_format)
            y = layers.flatten(y, data_format=data_format)
            with tf.Session() as session:
                session.run(tf.global_variables_initializer())
                results.append(session.run(y))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-5)


@pytest.mark.oracle
def test_flatten(request: pytest.FixtureRequest) -> None:
    def build(tf: Any, layers: Any) -> dict[str, Any]:
        known = tf.constant(IMAGES)
        unknown_batch = tf.placeholder_with_default(IMAGES, [None, 7, 7, 2])
        unknown_rest = tf.placeholder_with_default(IMAGES, [3, None, None, 2])
        return {"known": layers.flatten(known), "unknown_batch": layers.flatten(unknown_batch),
                "unknown_rest": layers.flatten(unknown_rest), "rank1": layers.flatten(tf.constant([1.0, 2.0])),
                "static": tf.constant(layers.flatten(unknown_batch).shape.as_list()[1])}

    assert_same(*on_both(request, build))


@pytest.mark.oracle
def test_dropout_is_the_identity_unless_training(request: pytest.FixtureRequest) -> None:
    def build(tf: Any, layers: Any) -> dict[str, Any]:
        x = tf.constant(FEATURES)
        training = tf.placeholder_with_default(False, [])
        return {"default": layers.dropout(x, 0.5), "false": layers.dropout(x, 0.9, training=False),
                "tensor_false": layers.dropout(x, 0.5, training=training),
                "rate_zero": layers.dropout(x, 0.0, training=True)}

    assert_same(*on_both(request, build))


def test_dropout_when_training_zeroes_a_fraction_and_scales_the_rest() -> None:
    x = tensorgrid.ones([200, 50])
    training = tensorgrid.placeholder(tensorgrid.bool, [])
    dropped = tensorgrid.layers.dropout(x, rate=0.25, training=training)
    static = tensorgrid.layers.dropout(x, rate=0.25, training=True)
    with tensorgrid.Session() as session:
        fed, always = session.run([dropped, static], {training: True})
        not_training = session.run(dropped, {training: False})
    for values in (fed, always):
        assert set(np.unique(values)) <= {0.0, np.float32(1 / 0.75)}
        assert abs((values == 0).mean() - 0.25) < 0.02
    np.testing.assert_array_equal(not_training, np.ones([200, 50]))


@pytest.mark.oracle
@pytest.mark.parametrize("case", [
    {"data": FEATURES, "axis": -1},
    {"data": FEATURES, "axis": -1, "center": False, "momentum": 0.5, "epsilon": 0.1},
    {"data": FEATURES, "axis": 0, "scale": False},
    {"data": IMAGES, "axis": -1},
    {"data": IMAGES, "axis": 1, "epsilon": 1e-7},
    {"data": IMAGES, "axis": 3, "fused": False, "epsilon": 1e-7},
    {"data": IMAGES, "axis": [1, 3]},
    {"data": SEQUENCES, "axis": 1, "momentum": 0.9},
], ids=["dense", "options", "axis0", "images", "axis1-fused-epsilon", "unfused", "two-axes", "sequences-axis1"])
@pytest.mark.parametrize("training", [True, False, "fed-true", "fed-false"])
def test_batch_normalization(request: pytest.FixtureRequest, case: dict[str, Any], training: Any) -> None:
    options = {key: value for key, value in case.items() if key != "data"}
    data = case["data"]

    def build(tf: Any, layers: Any) -> dict[str, Any]:
        x = tf.constant(data)
        flag = training if isinstance(training, bool) else tf.placeholder_with_default(training == "fed-true", [])
        # Moving statistics away from their 0 and 1, so inference has something to use.
        output = layers.batch_normalization(
            x, training=flag, moving_mean_initializer=tf.constant_initializer(0.3),
            moving_variance_initializer=tf.constant_initializer(1.7), **options)
        fetches = with_gradients(tf, x, output)
        fetches.update({v.op.name: v for v in tf.global_variables()})
        return fetches

    ours, theirs = on_both(request, build, steps=1)
    assert theirs["update_ops"] == (0 if training is False else 2)
    assert_same(ours, theirs, tolerance=2e-5)


@pytest.mark.oracle
def test_batch_normalization_trains_its_moving_statistics_with_the_train_op(request: pytest.FixtureRequest) -> None:
    """The TF1 idiom: the train op depends on UPDATE_OPS, so each step moves the statistics."""
    def build(tf: Any, layers: Any) -> dict[str, Any]:
        x = tf.constant(FEATURES * 3.0 + 1.0)
        hidden = layers.batch_normalization(layers.dense(x, 4, kernel_initializer=constant(tf, (5, 4), 9)),
                                            training=True)
        loss = tf.reduce_mean(tf.square(hidden - 0.5))
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        return {"loss": loss, "train": train}

    results = []
    for name in ("tensorgrid", "tensorflow"):
        tf = tensorgrid if name == "tensorgrid" else request.getfixturevalue("tf1")
        layers = tensorgrid.layers if name == "tensorgrid" else request.getfixturevalue("tf1_layers")
        with tf.Graph().as_default():
            fetches = build(tf, layers)
            with tf.Session() as session:
                session.run(tf.global_variables_initializer())
                for _ in range(3):
                    session.run(fetches["train"])
                results.append(session.run({v.op.name: v for v in tf.global_variables()}))
    assert results[0].keys() == results[1].keys()
    for key in results[1]:
        np.testing.assert_allclose(results[0][key], results[1][key], rtol=1e-5, atol=1e-5, err_msg=key)


@pytest.mark.oracle
def test_regularizers_go_into_regularization_losses(request: pytest.FixtureRequest) -> None:
    def build(tf: Any, layers: Any) -> dict[str, Any]:
        x = tf.constant(IMAGES)
        y = layers.conv2d(x, 2, 3, kernel_initializer=constant(tf, (3, 3, 2, 2), 10),
                          kernel_regularizer=lambda w: 0.01 * tf.nn.l2_loss(w))
        y = layers.batch_normalization(y, gamma_regularizer=lambda g: tf.reduce_sum(g), training=True)
        y = layers.dense(layers.flatten(y), 3, kernel_initializer=constant(tf, (50, 3), 11),
                         bias_regularizer=lambda b: tf.reduce_sum(tf.abs(b)) + 1.0,
                         activity_regularizer=lambda a: tf.reduce_sum(tf.square(a)))
        return {"output": y, "losses": tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES),
                "total": tf.losses.get_regularization_loss()}

    ours, theirs = on_both(request, build)
    assert theirs["regularization_losses"] == 4
    assert_same(ours, theirs, tolerance=1e-4)


@pytest.mark.oracle
@pytest.mark.parametrize("make", [
    lambda tf, layers: layers.conv2d(tf.constant(IMAGES), 2, 3, padding="full"),
    lambda tf, layers: layers.conv2d(tf.constant(IMAGES), 2, (3, 3, 3)),
    lambda tf, layers: layers.max_pooling2d(tf.constant(IMAGES), 2, 2, data_format="NHWC"),
    lambda tf, layers: layers.dense(tf.placeholder(tf.float32, [None, None]), 2),
    lambda tf, layers: layers.dropout(tf.constant(FEATURES), rate=1.5, training=True),
], ids=["padding", "kernel_size", "data_format", "unknown-last-dimension", "rate"])
def test_bad_arguments_fail_as_tensorflow_fails(request: pytest.FixtureRequest, make: Any) -> None:
    errors = []
    for name in ("tensorgrid", "tensorflow"):
        tf = tensorgrid if name == "tensorgrid" else request.getfixturevalue("tf1")
        layers = tensorgrid.layers if name == "tensorgrid" else request.getfixturevalue("tf1_layers")
        with tf.Graph().as_default():
            with pytest.raises(Exception) as caught:
                make(tf, layers)
            errors.append(type(caught.value))
    assert errors[0] is errors[1]


def test_the_default_kernel_initializer_is_glorot_uniform() -> None:
    kernel_in, kernel_out = 30, 20
    tensorgrid.layers.dense(tensorgrid.zeros([1, kernel_in]), kernel_out)
    with tensorgrid.Session() as session:
        session.run(tensorgrid.global_variables_initializer())
        kernel, bias = session.run(tensorgrid.trainable_variables())
    limit = np.sqrt(6.0 / (kernel_in + kernel_out))
    assert np.abs(kernel).max() <= limit and np.abs(kernel).max() > 0.8 * limit
    assert abs(kernel.std() - limit / np.sqrt(3)) < 0.1 * limit
    np.testing.assert_array_equal(bias, np.zeros(kernel_out))


def test_a_layer_object_called_twice_shares_its_variables() -> None:
    layer = tensorgrid.layers.Dense(3, name="shared")
    a = layer(tensorgrid.ones([2, 4]))
    b = layer(tensorgrid.ones([2, 4]) * 2.0)
    assert [v.name for v in tensorgrid.global_variables()] == ["shared/kernel:0", "shared/bias:0"]
    assert layer.trainable_variables == tensorgrid.trainable_variables()
    assert a.op.name.startswith("shared/") and b.op.name.startswith("shared/")
    norm = tensorgrid.layers.BatchNormalization()
    norm(tensorgrid.ones([2, 4]), training=True)
    assert len(norm.updates) == 2 and [v.name for v in norm.non_trainable_variables] == [
        "batch_normalization/moving_mean:0", "batch_normalization/moving_variance:0"]


def test_unsupported_batch_normalization_options_say_so() -> None:
    with pytest.raises(NotImplementedError, match="renorm=True is not supported.*docs/differences.md"):
        tensorgrid.layers.batch_normalization(tensorgrid.ones([2, 4]), renorm=True)
