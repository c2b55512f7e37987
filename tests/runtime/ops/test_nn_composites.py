"""``tf.nn.elu``, ``softplus``, ``l2_normalize``, ``batch_normalization`` (with ``moments``) and
``sigmoid_cross_entropy_with_logits``: values and ``tf.gradients`` against TensorFlow's
``tf.compat.v1`` on the same inputs, large and small values included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid

X = np.array([[-30.0, -2.5, -0.3, 0.2, 1.7, 40.0], [3.0, -1.0, 0.5, -0.7, 2.2, -5.0]])
LABELS = np.array([[0.0, 1.0, 0.5, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0, 1.0, 0.2]])


def program(tf: Any, dtype: Any) -> list[Any]:
    with tf.Graph().as_default():
        x = tf.Variable(X.astype(dtype))
        mean, variance = tf.nn.moments(x, axes=[0])
        outputs = [
            tf.nn.elu(x),
            tf.nn.softplus(x),
            tf.nn.l2_normalize(x, axis=1),
            tf.nn.l2_normalize(x * 0.0, axis=0),  # the epsilon keeps an all-zero row finite
            tf.nn.batch_normalization(x, mean, variance, offset=tf.constant(0.5, dtype), scale=tf.constant(2.0, dtype),
                                      variance_epsilon=1e-3),
            tf.nn.batch_normalization(x, mean, variance, None, None, 1e-5),
            tf.nn.sigmoid_cross_entropy_with_logits(labels=LABELS.astype(dtype), logits=x),
        ]
        grads = [tf.gradients(tf.reduce_sum(o * o), x)[0] for o in outputs]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            return sess.run(outputs + grads)


@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_agrees_with_tensorflow(tf1: Any, dtype: Any, tolerance: float) -> None:
    for got, want in zip(program(tensorgrid, dtype), program(tf1, dtype)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


def test_integer_inputs_are_refused_with_the_valid_dtypes() -> None:
    with tensorgrid.Graph().as_default(), pytest.raises(TypeError, match="Elu does not support dtype int32"):
        tensorgrid.nn.elu(tensorgrid.constant([1, 2]))
