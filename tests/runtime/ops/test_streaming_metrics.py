"""``tf.metrics`` (TF1's streaming metrics) against TensorFlow 2.21's ``tf.compat.v1.metrics``.

The same seeded batches of labels, predictions and weights go through each metric's
``update_op`` on both libraries; after every batch the update's result and the metric's
value must agree (AUC: TensorFlow's thresholded approximation, not the exact area). The
metrics' local variables, their names and collections, the tensors' names, the reset by
``tf.local_variables_initializer()`` and the errors of bad input are TensorFlow's too.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import pytest

import tensorgrid

BATCHES, BATCH_SIZE = 4, 64

# Each builds one metric from (lib, labels int64 [None], probabilities float32 [None], weights float32 [None] or None).
Build = Callable[[Any, Any, Any, Any], Any]
METRICS: dict[str, Build] = {
    "accuracy": lambda tf, y, p, w: tf.metrics.accuracy(y, tf.cast(tf.greater(p, 0.5), tf.int64), weights=w),
    "auc ROC": lambda tf, y, p, w: tf.metrics.auc(y, p, weights=w),
    "auc PR trapezoidal": lambda tf, y, p, w: tf.metrics.auc(y, p, weights=w, curve="PR"),
    "auc PR careful_interpolation": lambda tf, y, p, w: tf.metrics.auc(
        y, p, weights=w, curve="PR", summation_method="careful_interpolation"),
    "auc ROC minoring, 50 thresholds": lambda tf, y, p, w: tf.metrics.auc(
        y, p, weights=w, num_thresholds=50, summation_method="minoring"),
    "auc ROC majoring, given thresholds": lambda tf, y, p, w: tf.metrics.auc(
        y, p, weights=w, thresholds=[0.7, 0.1, 0.4], summation_method="majoring"),
    "mean": lambda tf, y, p, w: tf.metrics.mean(p, weights=w),
    "precision": lambda tf, y, p, w: tf.metrics.precision(y, tf.greater(p, 0.5), weights=w),
    "recall": lambda tf, y, p, w: tf.metrics.recall(y, tf.greater(p, 0.5), weights=w),
    "true_positives": lambda tf, y, p, w: tf.metrics.true_positives(y, tf.greater(p, 0.5), weights=w),
    "false_positives": lambda tf, y, p, w: tf.metrics.false_positives(y, tf.greater(p, 0.5), weights=w),
    "true_negatives": lambda tf, y, p, w: tf.metrics.true_negatives(y, tf.greater(p, 0.5), weights=w),
    "false_negatives": lambda tf, y, p, w: tf.metrics.false_negatives(y, tf.greater(p, 0.5), weights=w),
    "mean_squared_error": lambda tf, y, p, w: tf.metrics.mean_squared_error(tf.cast(y, tf.float32), p, weights=w),
    "root_mean_squared_error": lambda tf, y, p, w: tf.metrics.root_mean_squared_error(
        tf.cast(y, tf.float32), p, weights=w),
    "mean_absolute_error": lambda tf, y, p, w: tf.metrics.mean_absolute_error(tf.cast(y, tf.float32), p, weights=w),
    "precision_at_thresholds": lambda tf, y, p, w: tf.metrics.precision_at_thresholds(y, p, [0.2, 0.5, 0.9], weights=w),
    "recall_at_thresholds": lambda tf, y, p, w: tf.metrics.recall_at_thresholds(y, p, [0.2, 0.5, 0.9], weights=w),
    "false_negatives_at_thresholds": lambda tf, y, p, w: tf.metrics.false_negatives_at_thresholds(
        y, p, [0.3, 0.6], weights=w),
    "accuracy of [batch, 1] predictions and [batch] labels": lambda tf, y, p, w: tf.metrics.accuracy(
        y, tf.expand_dims(tf.cast(tf.greater(p, 0.5), tf.int64), -1), weights=w),
    "auc of [batch, 1] probabilities": lambda tf, y, p, w: tf.metrics.auc(
        tf.expand_dims(y, -1), tf.expand_dims(p, -1), weights=w),
}


def batches(weighted: bool) -> list[tuple[np.ndarray, np.ndarray, Any]]:
    rng = np.random.RandomState(25)
    out = []
    for _ in range(BATCHES):
        labels = rng.randint(0, 2, BATCH_SIZE).astype(np.int64)
        # Predictions lean towards the label, so the curves are not flat; exact 0 and 1 included.
        probabilities = np.clip(0.35 * labels + 0.65 * rng.rand(BATCH_SIZE), 0.0, 1.0).astype(np.float32)
        probabilities[:2] = [0.0, 1.0]
        weights = rng.rand(BATCH_SIZE).astype(np.float32) * 2.0 if weighted else None
        out.append((labels, probabilities, weights))
    return out


def stream(lib: Any, build: Build, weighted: bool) -> dict[str, Any]:
    """Every batch's update result and value, and the value after a reset and one more batch."""
    graph = lib.Graph()
    with graph.as_default():
        labels = lib.placeholder(lib.int64, [None], name="labels")
        probabilities = lib.placeholder(lib.float32, [None], name="probabilities")
        weights = lib.placeholder(lib.float32, [None], name="weights") if weighted else None
        value, update_op = build(lib, labels, probabilities, weights)
        updates, values = [], []
        with lib.Session(graph=graph) as session:
            session.run(lib.local_variables_initializer())
            initial = session.run(value)
            for y, p, w in batches(weighted):
                feed = {labels: y, probabilities: p, **({weights: w} if weighted else {})}
                updates.append(session.run(update_op, feed))
                values.append(session.run(value))
            session.run(lib.local_variables_initializer())
            after_reset = session.run(value)
            session.run(update_op, feed_first_batch(labels, probabilities, weights, weighted))
            first_again = session.run(value)
    return {"initial": initial, "updates": updates, "values": values, "after_reset": after_reset,
            "first_again": first_again}


def feed_first_batch(labels: Any, probabilities: Any, weights: Any, weighted: bool) -> dict[Any, Any]:
    y, p, w = batches(weighted)[0]
    return {labels: y, probabilities: p, **({weights: w} if weighted else {})}


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("metric", METRICS.values(), ids=METRICS.keys())
def test_every_batch_gives_tensorflows_value(metric: Build, weighted: bool, tf1: Any) -> None:
    ours, theirs = stream(tensorgrid, metric, weighted), stream(tf1, metric, weighted)
    for key in ("initial", "after_reset"):
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)
        assert not np.any(ours[key]), "a reset metric reads 0"
    for key in ("updates", "values"):
        np.testing.assert_allclose(np.array(ours[key]), np.array(theirs[key]), rtol=2e-5, atol=1e-6, err_msg=key)
    np.testing.assert_allclose(ours["values"], ours["updates"], rtol=1e-6, err_msg="value reads what update returned")
    np.testing.assert_allclose(ours["first_again"], ours["values"][0], rtol=1e-6, err_msg="the reset starts over")


def describe(lib: Any) -> dict[str, Any]:
    """Names, shapes, dtypes and collections of the variables of several metrics, and their tensors."""
    graph = lib.Graph()
    with graph.as_default():
        labels = lib.placeholder(lib.int64, [None])
        probabilities = lib.placeholder(lib.float32, [None])
        built = {
            "accuracy": lib.metrics.accuracy(labels, labels, metrics_collections=["m"], updates_collections=["u"]),
            "accuracy again": lib.metrics.accuracy(labels, labels),
            "auc": lib.metrics.auc(labels, probabilities, metrics_collections=["m"], updates_collections=["u"]),
            "precision": lib.metrics.precision(labels, lib.greater(probabilities, 0.5), name="my_precision"),
            "true_positives": lib.metrics.true_positives(labels, labels),
            "root_mean_squared_error": lib.metrics.root_mean_squared_error(probabilities, probabilities),
            "recall_at_thresholds": lib.metrics.recall_at_thresholds(labels, probabilities, [0.5]),
        }
        with lib.variable_scope("eval"):
            built["scoped mean"] = lib.metrics.mean(probabilities)
        keys = lib.GraphKeys
        return {
            "local": [(v.name, v.shape.as_list(), v.dtype.base_dtype.name) for v in lib.local_variables()],
            "metric": [v.name for v in graph.get_collection(keys.METRIC_VARIABLES)],
            "global": [v.name for v in lib.global_variables()],
            "trainable": [v.name for v in lib.trainable_variables()],
            "tensors": {k: (value.name, update.name) for k, (value, update) in built.items()},
            "metrics_collection": [t.name for t in graph.get_collection("m")],
            "updates_collection": [t.name for t in graph.get_collection("u")],
            "collection key": keys.METRIC_VARIABLES,
        }


def test_variables_tensors_and_collections_are_named_as_tensorflow_names_them(tf1: Any) -> None:
    ours, theirs = describe(tensorgrid), describe(tf1)
    assert ours == theirs
    assert ours["local"][:2] == [("accuracy/total:0", [], "float32"), ("accuracy/count:0", [], "float32")]
    assert ours["metric"] == [name for name, _, _ in ours["local"]] and not ours["global"]


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The library a test runs on, with a fresh default graph: tensorgrid, or TF1 (the oracle)."""
    library = tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")
    with library.Graph().as_default():
        yield library


def build_and_run(lib: Any, build: Callable[[Any], Any], feed: Callable[[Any], dict[Any, Any]]) -> Any:
    value, update_op = build(lib)
    with lib.Session() as session:
        session.run(lib.local_variables_initializer())
        return session.run(update_op, feed(lib.get_default_graph()))


def no_feed(graph: Any) -> dict[Any, Any]:
    return {}


def feed_weights(size: int) -> Callable[[Any], dict[Any, Any]]:
    return lambda graph: {graph.get_tensor_by_name("w:0"): np.ones(size, np.float32)}


BAD_INPUT: dict[str, tuple[Callable[[Any], Any], Callable[[Any], dict[Any, Any]], str]] = {
    "labels and predictions of other shapes": (
        lambda tf: tf.metrics.accuracy(tf.constant([1, 2, 3, 4]), tf.constant([1, 2, 3, 4, 5])), no_feed, "ValueError"),
    "weights that cannot broadcast, known now": (
        lambda tf: tf.metrics.accuracy(tf.constant([1, 2, 3, 4]), tf.constant([1, 2, 3, 3]),
                                       weights=tf.constant([1.0, 2.0, 3.0])), no_feed, "ValueError"),
    "weights of another rank": (
        lambda tf: tf.metrics.mean(tf.constant([[1.0, 2.0], [3.0, 4.0]]), weights=tf.constant([[[[1.0]]]])),
        no_feed, "ValueError"),
    "weights that cannot broadcast, fed": (
        lambda tf: tf.metrics.mean(tf.constant([1.0, 2.0, 3.0, 4.0]), weights=tf.placeholder(tf.float32, [None], "w")),
        feed_weights(3), "InvalidArgumentError"),
    "weights with a trailing dimension that is not 1": (
        lambda tf: tf.metrics.precision(tf.constant([True, False]), tf.constant([True, False]),
                                        weights=tf.constant([[1.0, 2.0], [3.0, 4.0]])), no_feed, "ValueError"),
    "a weight per value of another batch size": (
        lambda tf: tf.metrics.recall(tf.constant([True, False]), tf.constant([True, False]),
                                     weights=tf.constant([1.0, 2.0, 3.0])), no_feed, "ValueError"),
    "auc of a prediction above 1": (
        lambda tf: tf.metrics.auc(tf.constant([1, 0]), tf.constant([1.5, 0.2])), no_feed, "InvalidArgumentError"),
    "auc of a prediction below 0, fed": (
        lambda tf: tf.metrics.auc(tf.constant([1, 0, 1]), tf.placeholder(tf.float32, [None], "w")),
        lambda graph: {graph.get_tensor_by_name("w:0"): np.array([0.5, -0.1, 0.3], np.float32)},
        "InvalidArgumentError"),
    "auc of an unknown curve": (
        lambda tf: tf.metrics.auc(tf.constant([1, 0]), tf.constant([0.5, 0.2]), curve="ROC2"), no_feed, "ValueError"),
    "auc of an unknown summation method": (
        lambda tf: tf.metrics.auc(tf.constant([1, 0]), tf.constant([0.5, 0.2]), summation_method="simpson"),
        no_feed, "ValueError"),
    "squared error of int labels and float predictions": (
        lambda tf: tf.metrics.mean_squared_error(tf.constant([1, 0]), tf.constant([1.0, 0.5])), no_feed, "TypeError"),
}


@pytest.mark.parametrize("case", BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_fails_with_tensorflows_error_class(lib: Any, case: Any) -> None:
    build, feed, error = case
    with pytest.raises(Exception) as raised:
        build_and_run(lib, build, feed)
    assert type(raised.value).__name__ == error, raised.value


def test_a_failed_check_names_what_is_wrong() -> None:
    with tensorgrid.Graph().as_default():
        _, update_op = tensorgrid.metrics.auc(tensorgrid.constant([1, 0]), tensorgrid.constant([1.5, 0.2]))
        with tensorgrid.Session() as session:
            session.run(tensorgrid.local_variables_initializer())
            with pytest.raises(tensorgrid.errors.InvalidArgumentError, match=r"predictions must be in \[0, 1\]"):
                session.run(update_op)
    with tensorgrid.Graph().as_default():
        weights = tensorgrid.placeholder(tensorgrid.float32, [None])
        _, update_op = tensorgrid.metrics.mean(tensorgrid.constant([1.0, 2.0]), weights=weights)
        with tensorgrid.Session() as session:
            session.run(tensorgrid.local_variables_initializer())
            with pytest.raises(tensorgrid.errors.InvalidArgumentError,
                               match=r"weights can not be broadcast to values.*\[3\].*\[2\]"):
                session.run(update_op, {weights: np.ones(3, np.float32)})


def test_a_tensor_of_unknown_rank_is_refused_with_a_clear_error() -> None:
    with tensorgrid.Graph().as_default():
        labels = tensorgrid.placeholder(tensorgrid.int64)
        with pytest.raises(ValueError, match="rank of labels"):
            tensorgrid.metrics.accuracy(labels, tensorgrid.constant([1, 0], tensorgrid.int64))
