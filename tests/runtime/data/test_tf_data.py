"""``tf.data.Dataset`` pipelines: each one runs on TensorFlow's ``tf.compat.v1`` (the oracle)
and on tensorgrid, reading every element until OutOfRangeError; the elements, their dtypes
and the static types and shapes must agree. Shuffles use different generators, so they are
compared as multisets, and checked for seeded determinism on their own.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid

FEATURES = np.arange(20, dtype=np.float32).reshape(10, 2) / 4.0
LABELS = np.arange(10, dtype=np.int64) % 3


def slices_map_batch(tf: Any) -> Any:
    ds = tf.data.Dataset.from_tensor_slices((FEATURES, LABELS))
    return ds.map(lambda x, y: (x * 2.0 + 1.0, y + 1)).batch(4), {}


def drop_remainder_repeat_take_skip(tf: Any) -> Any:
    ds = tf.data.Dataset.from_tensor_slices({"x": FEATURES, "y": LABELS}).skip(1).repeat(3)
    return ds.batch(4, drop_remainder=True).take(5).prefetch(2), {}


def range_and_from_tensors(tf: Any) -> Any:
    ds = tf.data.Dataset.range(3, 20, 4).map(lambda i: tf.cast(i, tf.float64) * 0.5).repeat(2).batch(3)
    return ds, {}


def map_capturing_a_placeholder(tf: Any) -> Any:
    scale = tf.placeholder(tf.float32, [])
    ds = tf.data.Dataset.from_tensors(FEATURES).map(lambda x: tf.reduce_sum(x * scale, 1))
    return ds.repeat(2), {scale: 3.0}


def generator_pipeline(tf: Any) -> Any:
    def rows() -> Any:
        for i in range(5):
            yield i, [float(i)] * (i % 3)

    ds = tf.data.Dataset.from_generator(rows, (tf.int64, tf.float32), (tf.TensorShape([]), tf.TensorShape([None])))
    return ds.map(lambda i, v: (i * 10, tf.reduce_sum(v))).batch(2), {}


def zip_and_filter(tf: Any) -> Any:
    features = tf.data.Dataset.from_tensor_slices(FEATURES).map(lambda x: x * 2.0)
    labels = tf.data.Dataset.range(100, 107)
    ds = tf.data.Dataset.zip({"x": features, "y": labels}).filter(lambda e: tf.equal(e["y"] % 2, 0))
    return tf.data.Dataset.zip((ds, tf.data.Dataset.range(3).repeat())).batch(2), {}


def shuffle_with_buffer_one(tf: Any) -> Any:
    return tf.data.Dataset.from_tensor_slices(LABELS).shuffle(1, seed=3).batch(3), {}


PIPELINES: dict[str, Callable[[Any], Any]] = {f.__name__: f for f in (
    slices_map_batch, drop_remainder_repeat_take_skip, range_and_from_tensors, map_capturing_a_placeholder,
    generator_pipeline, shuffle_with_buffer_one, zip_and_filter)}


def read_all(tf: Any, pipeline: Callable[[Any], Any], initializable: bool = False) -> tuple[list[Any], Any]:
    with tf.Graph().as_default():
        ds, feeds = pipeline(tf)
        iterator = tf.data.make_initializable_iterator(ds) if initializable else tf.data.make_one_shot_iterator(ds)
        element = iterator.get_next()
        description = ([tf.as_dtype(t).name for t in flat(ds.output_types)],
                       [tf.TensorShape(s).as_list() for s in flat_shapes(ds.output_shapes)])
        values = []
        with tf.Session() as sess:
            if initializable:
                sess.run(iterator.initializer, feeds)
            while True:
                try:
                    values.append(sess.run(element, feeds))
                except tf.errors.OutOfRangeError:
                    break
            with pytest.raises(tf.errors.OutOfRangeError):
                sess.run(element, feeds)  # the end stays the end
        return values, description


def flat_shapes(shapes: Any) -> list[Any]:
    if isinstance(shapes, dict):
        return [s for key in sorted(shapes) for s in flat_shapes(shapes[key])]
    if isinstance(shapes, tuple):
        return [s for item in shapes for s in flat_shapes(item)]
    return [shapes]


def flat(values: Any) -> list[Any]:
    if isinstance(values, dict):
        return [v for key in sorted(values) for v in flat(values[key])]
    if isinstance(values, (list, tuple)):
        return [v for item in values for v in flat(item)]
    return [values]


# TensorFlow refuses a one-shot iterator over a placeholder: that pipeline compares initializable only.
CASES = [(name, initializable) for name in sorted(PIPELINES) for initializable in (False, True)
         if initializable or name != "map_capturing_a_placeholder"]


@pytest.mark.parametrize("name, initializable", CASES)
def test_pipeline_agrees_with_tensorflow(tf1: Any, name: str, initializable: bool) -> None:
    want, want_description = read_all(tf1, PIPELINES[name], initializable)
    got, got_description = read_all(tensorgrid, PIPELINES[name], initializable)
    assert got_description == want_description
    assert len(got) == len(want) > 0
    for g, w in zip(got, want):
        for a, b in zip(flat(g), flat(w)):
            assert np.asarray(a).dtype == np.asarray(b).dtype
            np.testing.assert_array_equal(a, b)


def shuffled(tf: Any, seed: Any, epochs: int = 2) -> list[list[int]]:
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(50).shuffle(10, seed=seed).repeat(epochs).batch(50)
        element = tf.data.make_one_shot_iterator(ds).get_next()
        with tf.Session() as sess:
            return [sess.run(element).tolist() for _ in range(epochs)]


def test_a_seeded_shuffle_is_deterministic_and_reshuffles_each_epoch(tf1: Any) -> None:
    first, second = shuffled(tensorgrid, 7), shuffled(tensorgrid, 7)
    assert first == second
    assert first[0] != first[1]  # each epoch in another order
    assert first[0] != list(range(50))
    oracle = shuffled(tf1, 7)
    for ours, theirs in zip(first, oracle):
        assert sorted(ours) == sorted(theirs) == list(range(50))
    assert shuffled(tensorgrid, 8) != first
    # A buffer of 10 moves an element at most 9 places earlier, as TensorFlow's buffer does.
    assert all(value <= position + 9 for position, value in enumerate(first[0]))


def train_until_the_data_ends(tf: Any) -> tuple[int, Any]:
    """MonitoredTrainingSession ends the ``with`` block on OutOfRangeError (TF1 behaviour)."""
    with tf.Graph().as_default():
        x, y = tf.data.make_one_shot_iterator(
            tf.data.Dataset.from_tensor_slices((FEATURES, LABELS.astype(np.float32))).repeat(2).batch(3)).get_next()
        w = tf.get_variable("w", [2, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.squeeze(tf.matmul(x, w), 1) - y))
        global_step = tf.train.get_or_create_global_step()
        train = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=global_step)
        steps = 0
        weights = None
        with tf.train.MonitoredTrainingSession() as sess:
            while not sess.should_stop():
                weights = sess.run([train, w])[1]
                steps += 1
        return steps, weights


def test_monitored_training_session_stops_at_the_end_of_the_data(tf1: Any) -> None:
    steps, weights = train_until_the_data_ends(tensorgrid)
    oracle_steps, oracle_weights = train_until_the_data_ends(tf1)
    assert steps == oracle_steps == 7  # 20 examples in batches of 3, the last one short; the 8th run ends it
    np.testing.assert_allclose(weights, oracle_weights, rtol=1e-5)


@pytest.mark.parametrize("build, error, message", [
    (lambda tf: tf.data.Dataset.range(5).batch(0), ValueError, "batch_size must be a positive integer"),
    (lambda tf: tf.data.Dataset.range(5).shuffle(-2), ValueError, "buffer_size must be a positive integer"),
    (lambda tf: tf.data.Dataset.range(5).map(None), TypeError, "map_func must be callable"),
    (lambda tf: tf.data.Dataset.range(5).filter(lambda i: i * 2), ValueError, "must return a boolean scalar"),
    (lambda tf: tf.data.Dataset.zip([tf.data.Dataset.range(2)]), TypeError, "a tuple or dict of datasets"),
    (lambda tf: tf.data.Dataset.from_tensor_slices(3.0), ValueError, "rank >= 1"),
    (lambda tf: tf.data.Dataset.range("5"), TypeError, "1 to 3 integers"),
    (lambda tf: tf.data.Dataset.range(5).make_one_shot_iterator().initializer, ValueError, "has no initializer"),
])
def test_bad_arguments_are_named(build: Any, error: type, message: str) -> None:
    with tensorgrid.Graph().as_default(), pytest.raises(error, match=message):
        build(tensorgrid)


@pytest.mark.parametrize("pipeline, message", [
    (lambda tf: tf.data.Dataset.from_generator(lambda: iter([[1.0], [1.0, 2.0]]), tf.float32).batch(2),
     r"Cannot batch tensors with different shapes in component 0. First element had shape \[1\] and element 1 "
     r"had shape \[2\]"),
    (lambda tf: tf.data.Dataset.from_generator(lambda: iter([[1.0, 2.0]]), tf.float32, tf.TensorShape([3])),
     r"shape \[2\] where output_shapes says \(3,\)"),
])
def test_bad_elements_fail_the_step_with_a_clear_error(pipeline: Any, message: str) -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        element = tf.data.make_one_shot_iterator(pipeline(tf)).get_next()
        with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match=message):
            sess.run(element)


def test_an_uninitialized_iterator_says_to_run_its_initializer() -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        iterator = tf.data.make_initializable_iterator(tf.data.Dataset.range(3))
        element = iterator.get_next()
        with tf.Session() as sess:
            with pytest.raises(tf.errors.FailedPreconditionError, match="run the initializer"):
                sess.run(element)
            sess.run(iterator.initializer)
            assert sess.run(element) == 0


def test_a_reinitializable_iterator_switches_datasets() -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        train, test = tf.data.Dataset.range(0, 10, 2), tf.data.Dataset.range(100, 103)
        iterator = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
        element = iterator.get_next()
        with tf.Session() as sess:
            sess.run(iterator.make_initializer(train))
            assert [sess.run(element) for _ in range(2)] == [0, 2]
            sess.run(iterator.make_initializer(test))
            assert [sess.run(element) for _ in range(3)] == [100, 101, 102]
        with pytest.raises(TypeError, match="Expected output types"):
            iterator.make_initializer(tf.data.Dataset.from_tensors(1.0))
