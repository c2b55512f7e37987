"""``tf.losses``, the learning-rate schedules of ``tf.train`` and ``tf.Print``, each run on
TensorFlow's ``tf.compat.v1`` (the oracle) and on tensorgrid with the same inputs: values,
gradients, the losses collection and the printed line must agree.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid

RNG = np.random.RandomState(0)
LOGITS = RNG.randn(6, 4).astype(np.float32)
ONE_HOT = np.eye(4, dtype=np.float32)[[0, 3, 1, 1, 2, 0]]
SPARSE = np.array([0, 3, 1, 1, 2, 0])
TARGETS = RNG.randn(6, 4).astype(np.float32)
WEIGHTS = np.array([[1.0], [0.0], [2.0], [0.5], [0.0], [1.0]], dtype=np.float32)


def losses_program(tf: Any) -> list[Any]:
    with tf.Graph().as_default():
        logits = tf.Variable(LOGITS)
        probabilities = tf.sigmoid(logits)
        values = [
            tf.losses.mean_squared_error(TARGETS, logits),
            tf.losses.mean_squared_error(TARGETS, logits, weights=WEIGHTS),
            tf.losses.absolute_difference(TARGETS, logits, weights=WEIGHTS, reduction=tf.losses.Reduction.MEAN),
            tf.losses.huber_loss(TARGETS, logits, delta=0.5, reduction=tf.losses.Reduction.SUM),
            tf.losses.log_loss(ONE_HOT, probabilities, reduction=tf.losses.Reduction.SUM_OVER_BATCH_SIZE),
            tf.losses.sigmoid_cross_entropy(ONE_HOT, logits, label_smoothing=0.1),
            tf.losses.softmax_cross_entropy(ONE_HOT, logits, weights=WEIGHTS[:, 0], label_smoothing=0.2),
            tf.losses.sparse_softmax_cross_entropy(SPARSE, logits),
            tf.losses.mean_squared_error(TARGETS, logits, reduction=tf.losses.Reduction.NONE, loss_collection=None),
            tf.nn.sigmoid_cross_entropy_with_logits(labels=ONE_HOT, logits=logits),
            tf.losses.hinge_loss(ONE_HOT, logits, weights=WEIGHTS),
            tf.losses.cosine_distance(tf.nn.l2_normalize(TARGETS, 1), tf.nn.l2_normalize(logits, 1), axis=1),
            tf.losses.cosine_distance(TARGETS, logits, dim=0, reduction=tf.losses.Reduction.SUM),
            tf.losses.mean_pairwise_squared_error(TARGETS, logits),
            tf.losses.mean_pairwise_squared_error(TARGETS, logits, weights=WEIGHTS),
            tf.losses.mean_pairwise_squared_error(TARGETS[:, :1], logits[:, :1]),
        ]
        total = tf.losses.get_total_loss()
        collected = len(tf.losses.get_losses())
        grads = tf.gradients(total, logits)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            return [*sess.run(values + [total] + grads), collected]


def test_losses_agree_with_tensorflow(tf1: Any) -> None:
    ours, theirs = losses_program(tensorgrid), losses_program(tf1)
    assert ours[-1] == theirs[-1] == 14  # every tf.losses.* given a collection added itself to LOSSES
    for got, want in zip(ours[:-1], theirs[:-1]):
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def schedules(tf: Any) -> list[list[float]]:
    with tf.Graph().as_default():
        step = tf.placeholder(tf.int64, [])
        rates = [
            tf.train.exponential_decay(0.1, step, 10, 0.5),
            tf.train.exponential_decay(0.1, step, 10, 0.5, staircase=True),
            tf.train.natural_exp_decay(0.2, step, 5, 0.3, staircase=True),
            tf.train.inverse_time_decay(0.2, step, 5, 0.3),
            tf.train.polynomial_decay(0.1, step, 20, end_learning_rate=0.01, power=2.0),
            tf.train.polynomial_decay(0.1, step, 20, end_learning_rate=0.01, cycle=True),
            tf.train.piecewise_constant(step, [5, 15], [1.0, 0.5, 0.1]),
        ]
        with tf.Session() as sess:
            return [[float(v) for v in sess.run(rates, {step: s})] for s in (0, 1, 5, 6, 14, 15, 16, 20, 33, 50)]


def test_learning_rate_schedules_agree_with_tensorflow(tf1: Any) -> None:
    np.testing.assert_allclose(schedules(tensorgrid), schedules(tf1), rtol=1e-6)


def test_bad_schedules_and_losses_are_refused() -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="1 less than the length of values"):
            tf.train.piecewise_constant(tf.constant(1), [5, 15], [1.0, 0.5])
        with pytest.raises(ValueError, match="global_step is required"):
            tf.train.exponential_decay(0.1, None, 10, 0.5)
        with pytest.raises(ValueError, match="Invalid Reduction Key 'average'"):
            tf.losses.mean_squared_error([1.0], [2.0], reduction="average")
        with pytest.raises(ValueError, match="labels and predictions must match"):
            tf.losses.mean_squared_error([1.0, 2.0], [2.0, 3.0, 4.0])
        with pytest.raises(ValueError, match="You must specify 'axis'"):
            tf.losses.cosine_distance([[1.0]], [[1.0]])
        with pytest.raises(ValueError, match="labels and logits must match"):
            tf.losses.hinge_loss([1.0, 0.0], [[0.5]])
        with pytest.raises(ValueError, match="No losses found"):
            tf.losses.get_total_loss()


def print_lines(tf: Any, capfd: Any) -> list[str]:
    with tf.Graph().as_default():
        x = tf.constant(np.arange(5, dtype=np.float32) / 3)
        y = tf.Print(x, [x, tf.constant([[1, 2], [3, 4]]), tf.constant(2.5, tf.float64), tf.constant(True)],
                     message="values: ", first_n=2, summarize=4)
        doubled = y * 2.0
        capfd.readouterr()
        with tf.Session() as sess:
            outputs = [sess.run(doubled) for _ in range(3)]
        np.testing.assert_allclose(outputs[0], np.arange(5) / 3 * 2, rtol=1e-6)
    err = capfd.readouterr().err
    return [line[line.index("values: "):] for line in err.splitlines() if "values: " in line]


def test_print_prints_what_tensorflow_prints(tf1: Any, capfd: Any) -> None:
    ours = print_lines(tensorgrid, capfd)
    assert ours == print_lines(tf1, capfd)
    assert ours == ["values: [0 0.333333343 0.666666687 1...][[1 2][3 4]][2.5][1]"] * 2  # first_n=2
