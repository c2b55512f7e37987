"""String tensors (constants, feeds, fetches, also from another task), TF1's integer ``tf.div``
and integer ``random_uniform``, against TensorFlow's ``tf.compat.v1`` where it has a value to
compare."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid
from cluster_processes import LocalCluster


def values(tf: Any) -> list[Any]:
    with tf.Graph().as_default():
        a, b = tf.constant([7, -7, 6]), tf.constant([-2, 2, 4])
        text = tf.placeholder(tf.string, [None])
        fetches = [tf.div(a, b), a // b, a / b, tf.div(tf.constant(7.0), -2.0), tf.floordiv(a, b),
                   tf.constant("hello"), tf.constant(["a", b"bc", "\u00e9"]), tf.identity(text)]
        with tf.Session() as sess:
            return sess.run(fetches, {text: ["x", "yz"]})


def test_integer_division_and_strings_agree_with_tensorflow(tf1: Any) -> None:
    ours, theirs = values(tensorgrid), values(tf1)
    for got, want in zip(ours, theirs):
        assert np.asarray(got).dtype == np.asarray(want).dtype
        assert np.asarray(got).tolist() == np.asarray(want).tolist()
    assert ours[0].tolist() == [-4, -4, 1]  # floors, as TF1's Python 2 division


def test_integer_random_uniform_is_seeded_and_in_range() -> None:
    tf = tensorgrid
    draws = []
    for _ in range(2):
        with tf.Graph().as_default():
            sample = tf.random_uniform([1000], -3, 5, dtype=tf.int64, seed=4)
            with tf.Session() as sess:
                draws.append(sess.run(sample))
    assert draws[0].dtype == np.int64
    np.testing.assert_array_equal(draws[0], draws[1])
    assert set(draws[0].tolist()) == set(range(-3, 5))
    with tf.Graph().as_default():
        empty_range = tf.random_uniform([2], 3, 3, dtype=tf.int32)
        with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match="Need minval < maxval: 3 >= 3"):
            sess.run(empty_range)
        with pytest.raises(ValueError, match="maxval must be given"):
            tf.random_uniform([2], dtype=tf.int32)


def test_a_string_fed_with_a_number_or_a_number_with_a_string_is_refused() -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        text, number = tf.placeholder(tf.string), tf.placeholder(tf.float32)
        with tf.Session() as sess:
            with pytest.raises(TypeError, match="dtype string: feed str or bytes"):
                sess.run(text, {text: 3.0})
            # ValueError, TensorFlow's class for text fed into a number; TensorFlow parses "3"
            # (numpy does), tensorgrid refuses all text on purpose (docs/differences.md).
            with pytest.raises(ValueError, match="could not convert string to float32"):
                sess.run(number, {number: "3"})


def test_strings_cross_tasks(tmp_path: Any) -> None:
    tf = tensorgrid
    with LocalCluster(tmp_path, {"ps": 1, "worker": 1}) as cluster, tf.Graph().as_default():
        fed = tf.placeholder(tf.string, [None])
        with tf.device("/job:ps/task:0"):
            on_ps = tf.identity(fed)
        with tf.device("/job:worker/task:0"):
            both = tf.concat([tf.expand_dims(tf.constant("from worker"), 0), on_ps], 0)
        with tf.Session(cluster.target("worker")) as sess:
            assert sess.run(both, {fed: ["a", "\u00e9t\u00e9"]}).tolist() == [b"from worker", b"a", "\u00e9t\u00e9".encode()]
