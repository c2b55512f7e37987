"""``Dataset.repeat``, ``take`` and ``skip`` with a tensor count (a placeholder fed when the iterator
is initialized), with TensorFlow's ``tf.compat.v1`` as the oracle: the same elements for each
fed count, re-initialized with another count; a bad count is a clear error."""

from __future__ import annotations

from typing import Any

import pytest

import tensorgrid as tf


def _elements_for_counts(lib: Any, counts: list[int]) -> list[list[Any]]:
    with lib.Graph().as_default():
        repeat, take, skip = (lib.placeholder(lib.int64, [], name=n) for n in ("repeat", "take", "skip"))
        dataset = lib.data.Dataset.range(5).skip(skip).repeat(repeat).take(take)
        iterator = dataset.make_initializable_iterator()
        element = iterator.get_next()
        runs = []
        with lib.Session() as sess:
            for count in counts:
                sess.run(iterator.initializer, {repeat: count, take: 2 * count + 1, skip: count - 1})
                out = []
                while True:
                    try:
                        out.append(int(sess.run(element)))
                    except lib.errors.OutOfRangeError:
                        break
                runs.append(out)
        return runs


def test_counts_fed_at_initialization_give_tensorflows_elements(tf1: Any) -> None:
    counts = [1, 2, 3]
    ours = _elements_for_counts(tf, counts)
    assert ours == _elements_for_counts(tf1, counts)
    assert ours[1] == [1, 2, 3, 4, 1]


def test_a_constant_tensor_count_is_read_when_the_graph_is_built() -> None:
    with tf.Graph().as_default():
        dataset = tf.data.Dataset.range(3).repeat(tf.constant(2, tf.int64))
        element = tf.data.make_one_shot_iterator(dataset).get_next()
        with tf.Session() as sess:
            assert [int(sess.run(element)) for _ in range(6)] == [0, 1, 2, 0, 1, 2]


def test_a_count_that_is_not_an_integer_scalar_is_an_error() -> None:
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="count must be an int64 scalar"):
            tf.data.Dataset.range(3).take(tf.placeholder(tf.float32, []))
        with pytest.raises(TypeError, match="count must be an int64 scalar"):
            tf.data.Dataset.range(3).repeat(tf.placeholder(tf.int64, [2]))
        count = tf.placeholder(tf.int64)
        iterator = tf.data.Dataset.range(3).take(count).make_initializable_iterator()
        with tf.Session() as sess:
            with pytest.raises(tf.errors.InvalidArgumentError, match="integer scalar"):
                sess.run(iterator.initializer, {count: [1, 2]})
