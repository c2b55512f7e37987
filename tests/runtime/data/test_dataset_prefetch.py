"""``Dataset.prefetch(n)``: a real background thread fills a buffer of at most ``n`` elements.

The elements (and the error that ends a pipeline) arrive in the order the pipeline made them,
as without prefetch and as TensorFlow gives them; the thread runs ahead while no step asks,
never more than the buffer allows, and ends when its iterator is initialized again or its
session is closed.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import tensorgrid

WAIT = 60.0
"""How long a test waits for the prefetch thread to do what it must (a hang guard, not a speed bound)."""


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("prefetch-")]


def drain(tf: Any, dataset: Any) -> list[Any]:
    """Every outcome of a one-shot iterator: its elements, then the name of the error that ended it."""
    with tf.Graph().as_default():
        element = tf.data.make_one_shot_iterator(dataset(tf)).get_next()
        outcomes: list[Any] = []
        with tf.Session() as sess:
            while True:
                try:
                    outcomes.append(sess.run(element))
                except tf.errors.OpError as e:
                    outcomes.append(type(e).__name__)
                    if isinstance(e, tf.errors.OutOfRangeError):
                        return outcomes


@pytest.mark.parametrize("buffer_size", [1, 3, "autotune"])
def test_prefetched_elements_agree_with_tensorflow(tf1: Any, buffer_size: Any) -> None:
    def dataset(tf: Any) -> Any:
        size = tf.data.experimental.AUTOTUNE if buffer_size == "autotune" else buffer_size
        return (tf.data.Dataset.range(10).map(lambda x: (x * 3, tf.cast(x, tf.float32) / 2.0))
                .prefetch(size).batch(3).prefetch(size))

    expected, actual = drain(tf1, dataset), drain(tensorgrid, dataset)
    assert expected[-1] == actual[-1] == "OutOfRangeError"
    assert len(expected) == len(actual) == 5
    for want, got in zip(expected[:-1], actual[:-1]):
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g, w)


def test_an_error_arrives_after_the_elements_made_before_it() -> None:
    def dataset(prefetch: bool) -> Callable[[Any], Any]:
        def build(tf: Any) -> Any:
            ds = tf.data.Dataset.from_generator(lambda: iter([1.0, 2.0, [1.0, 2.0], 4.0]), tf.float32,
                                                tf.TensorShape([]))
            return ds.prefetch(3) if prefetch else ds
        return build

    with_prefetch = drain(tensorgrid, dataset(True))
    assert with_prefetch == drain(tensorgrid, dataset(False))
    assert with_prefetch == [1.0, 2.0, "InvalidArgumentError", "OutOfRangeError"]


class CountingSource:
    """A generator that records, for each element it makes, how many the test had taken."""

    def __init__(self, count: int, full_at: int) -> None:
        self.count = count
        self.taken = 0
        self.ahead: list[int] = []
        self.made_enough = threading.Event()
        self.full_at = full_at

    def __call__(self) -> Iterator[float]:
        for i in range(self.count):
            self.ahead.append(i - self.taken)
            if i + 1 == self.full_at:
                self.made_enough.set()
            yield float(i)


def test_the_thread_runs_ahead_within_its_buffer() -> None:
    tf = tensorgrid
    buffer_size = 3
    # after one element is taken: buffer_size in the buffer and one more in the thread's hand
    source = CountingSource(count=20, full_at=1 + buffer_size + 1)
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_generator(source, tf.float32, tf.TensorShape([])).prefetch(buffer_size)
        element = tf.data.make_one_shot_iterator(ds).get_next()
        with tf.Session() as sess:
            assert sess.run(element) == 0.0
            source.taken = 1
            # no step runs now: only a background thread can make the next elements
            assert source.made_enough.wait(WAIT), f"the prefetch thread made only {len(source.ahead)} elements"
            got = [sess.run(element)]
            for _ in range(18):
                source.taken += 1
                got.append(sess.run(element))
    assert got == [float(i) for i in range(1, 20)]
    # an element is made only when the buffer has room: at most buffer_size + 2 ahead of the taker
    assert max(source.ahead) <= buffer_size + 2


def test_initializing_again_and_closing_end_the_threads() -> None:
    tf = tensorgrid
    before = set(prefetch_threads())
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(1000).map(lambda x: x * 2).prefetch(2).map(lambda x: x + 1).prefetch(4)
        iterator = tf.data.make_initializable_iterator(ds, shared_name="prefetch_lifecycle")
        element = iterator.get_next()
        sess = tf.Session()
        sess.run(iterator.initializer)
        assert sess.run(element) == 1
        first = [t for t in prefetch_threads() if t not in before]
        assert len(first) == 2 and all("prefetch_lifecycle" in t.name for t in first)
        sess.run(iterator.initializer)  # a new pass: the old threads end, two new ones start
        for thread in first:
            thread.join(WAIT)
            assert not thread.is_alive()
        assert [sess.run(element) for _ in range(3)] == [1, 3, 5]
        second = [t for t in prefetch_threads() if t not in before]
        assert len(second) == 2 and not set(second) & set(first)
        sess.close()
        for thread in second:
            thread.join(WAIT)
            assert not thread.is_alive()


def test_a_pass_ended_early_stops_its_thread() -> None:
    tf = tensorgrid
    before = set(prefetch_threads())
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(1000).prefetch(2).take(3).repeat(2)
        element = tf.data.make_one_shot_iterator(ds).get_next()
        with tf.Session() as sess:
            assert [sess.run(element) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
            with pytest.raises(tf.errors.OutOfRangeError):
                sess.run(element)
        for thread in [t for t in prefetch_threads() if t not in before]:
            thread.join(WAIT)
            assert not thread.is_alive()


@pytest.mark.parametrize("size, message", [(0, "buffer_size must be a positive integer, got 0"),
                                           (-2, "buffer_size must be a positive integer, got -2")])
def test_a_bad_buffer_size_is_named(size: int, message: str) -> None:
    with tensorgrid.Graph().as_default(), pytest.raises(ValueError, match=message):
        tensorgrid.data.Dataset.range(3).prefetch(size)
