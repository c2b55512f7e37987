"""DeepRec's ``tf.feature_column.categorical_column_with_embedding``: ids kept in an embedding variable,
read by ``embedding_column``/``input_layer``, ``linear_model`` and the canned estimators.

TensorFlow has no such column, so the oracle is TF 2.21's identity column over a fixed table holding
the same rows: for ids that index it, the outputs before and after training steps are the same.
String features are keyed by their 64-bit fingerprints; negative keys are keys, not "absent" ids."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid
from tensorgrid.ops import embedding_variable_ops

DIMENSION = 3
IDS = ([[0, 0], [1, 0], [1, 1], [3, 0], [3, 1]], [1, 3, 2, 4, 1], [4, 2])  # row 2 has no id


def rows_of(shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
    """Row ``i`` is the same for any row count: an embedding variable's row of key ``i`` (``i < 4096``)
    equals the fixed table's row ``i``."""
    rows, width = shape
    return (np.arange(rows * width, dtype=np.float32).reshape(rows, width) / 7.0 + 0.1).astype(np.float32)


def _library(name: str, request: pytest.FixtureRequest) -> Any:
    return tensorgrid if name == "tensorgrid" else request.getfixturevalue("tf1")


def _id_column(tf: Any) -> Any:
    if tf is tensorgrid:
        return tf.feature_column.categorical_column_with_embedding("id", dtype=tf.int64)
    return tf.feature_column.categorical_column_with_identity("id", 5)


def _train_and_read(tf: Any, model: Any, optimizer: Any) -> list[np.ndarray]:
    with tf.Graph().as_default():
        features = {"id": tf.SparseTensor(IDS[0], tf.constant(IDS[1], tf.int64), IDS[2])}
        output = model(tf, features)
        train = optimizer(tf).minimize(tf.reduce_sum(tf.square(output - 1.0)))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            seen = [sess.run(output)]
            for _ in range(2):
                sess.run(train)
            seen.append(sess.run(output))
    return seen


def _input_layer(combiner: str) -> Any:
    def model(tf: Any, features: dict[str, Any]) -> Any:
        column = tf.feature_column.embedding_column(_id_column(tf), DIMENSION, combiner=combiner,
                                                    initializer=rows_of)
        return tf.feature_column.input_layer(features, [column])
    return model


def _linear_model(tf: Any, features: dict[str, Any]) -> Any:
    return tf.feature_column.linear_model(features, [_id_column(tf)], units=2)


@pytest.mark.parametrize("combiner", ["mean", "sqrtn", "sum"])
@pytest.mark.oracle
def test_input_layer_over_an_embedding_variable_matches_tf_identity_column(combiner, request):
    ours = _train_and_read(tensorgrid, _input_layer(combiner), lambda tf: tf.train.AdagradOptimizer(0.3))
    theirs = _train_and_read(request.getfixturevalue("tf1"), _input_layer(combiner),
                             lambda tf: tf.train.AdagradOptimizer(0.3))
    for got, expected in zip(ours, theirs):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ours[0][2], np.zeros(DIMENSION))  # an example without ids: zeros


@pytest.mark.oracle
def test_linear_model_over_an_embedding_variable_matches_tf_identity_column_with_ftrl(request):
    ours = _train_and_read(tensorgrid, _linear_model, lambda tf: tf.train.FtrlOptimizer(0.5))
    theirs = _train_and_read(request.getfixturevalue("tf1"), _linear_model, lambda tf: tf.train.FtrlOptimizer(0.5))
    for got, expected in zip(ours, theirs):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_variables_are_partitioned_embedding_variables_named_as_the_columns_name_their_tables():
    tf = tensorgrid
    option = tf.EmbeddingVariableOption(filter_option=tf.CounterFilter(filter_freq=2))
    with tf.Graph().as_default():
        column = tf.feature_column.categorical_column_with_embedding("city", partition_num=2, ev_option=option)
        features = {"city": tf.constant([["paris", "oslo"], ["paris", ""]])}
        deep = tf.feature_column.input_layer(features, [tf.feature_column.embedding_column(column, 2)])
        tf.feature_column.linear_model(features, [column])
        names = [variable.op.name for variable in tf.global_variables()]
        assert names == ["input_layer/city_embedding/embedding_weights/part_0",
                         "input_layer/city_embedding/embedding_weights/part_1",
                         "linear_model/city/weights/part_0", "linear_model/city/weights/part_1",
                         "linear_model/bias_weights"]
        tables = tf.global_variables()[:2]
        assert all(isinstance(table, embedding_variable_ops.EmbeddingVariable) for table in tables)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(deep), np.zeros((2, 2)))  # not admitted yet: zeros
            sess.run(deep)
            # "paris" was looked up 4 times, "oslo" twice: both admitted, "" (absent) never a key.
            assert sess.run(tables[0].total_count() + tables[1].total_count()) == 2


def test_string_keys_are_fingerprints_and_negative_keys_are_not_dropped():
    tf = tensorgrid
    words = ["paris", "oslo", "kyiv", "lima", "rome", "nice"]
    with tf.Graph().as_default():
        keys = tf.Session().run(embedding_variable_ops.string_keys(tf.constant(words)))
    assert (keys < 0).any() and (keys >= 0).any()
    outputs = []
    for dtype, feature in ((tf.string, words), (tf.int64, keys)):
        with tf.Graph().as_default():
            column = tf.feature_column.categorical_column_with_embedding("w", dtype=dtype)
            embedded = tf.feature_column.embedding_column(column, 2, combiner="sum",
                                                          initializer=tf.constant_initializer(1.0))
            values = tf.constant(feature)
            sparse = tf.SparseTensor([[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]], values, [2, 3])
            output = tf.feature_column.input_layer({"w": sparse}, [embedded])
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                outputs.append(sess.run(output))
    np.testing.assert_array_equal(outputs[0], np.full((2, 2), 3.0))  # every key counted, negative or not
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_canned_wide_and_deep_estimator_trains_evaluates_and_predicts_on_embedding_columns(tmp_path):
    tf = tensorgrid
    fc = tf.feature_column
    users = np.array([["u1"], ["u2"], ["u3"], ["u1"], ["u2"], ["u3"], ["u4"], ["u1"]])
    items = np.array([[10], [2**40], [-5], [10], [2**40], [7], [10], [-5]], np.int64)
    labels = np.array([[1], [0], [1], [1], [0], [1], [0], [1]], np.int64)
    features = {"user": users, "item": items}
    user = fc.categorical_column_with_embedding("user", dtype=tf.string)
    item = fc.categorical_column_with_embedding("item", dtype=tf.int64, partition_num=2)
    estimator = tf.estimator.DNNLinearCombinedClassifier(
        model_dir=str(tmp_path), linear_feature_columns=[user, item],
        dnn_feature_columns=[fc.embedding_column(user, 4), fc.embedding_column(item, 4)], dnn_hidden_units=[4])
    estimator.train(lambda: tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(4), steps=30)
    metrics = estimator.evaluate(lambda: tf.data.Dataset.from_tensor_slices((features, labels)).batch(4))
    predictions = list(estimator.predict(lambda: tf.data.Dataset.from_tensor_slices(features).batch(4)))
    assert metrics["global_step"] == 30 and np.isfinite(metrics["loss"])
    assert [len(p["probabilities"]) for p in predictions] == [2] * 8
    saved = dict(tf.train.list_variables(str(tmp_path)))
    reader = tf.train.load_checkpoint(str(tmp_path))
    stored_items = np.concatenate([reader.get_tensor(f"linear/linear_model/item/weights/part_{i}-keys")
                                   for i in range(2)])
    assert sorted(stored_items.tolist()) == [-5, 7, 10, 2**40]  # raw ids, no modulo
    assert saved["linear/linear_model/item/weights/part_1-values"][1] == 1
    assert saved["dnn/input_from_feature_columns/input_layer/item_embedding/embedding_weights/part_0-values"][1] == 4
    assert "linear/linear_model/user/weights/part_0/Ftrl-values" in saved


@pytest.mark.parametrize("call, message", [
    (lambda fc: fc.categorical_column_with_embedding("x", dtype=tensorgrid.float32), "dtype must be tf.string, "
     "tf.int64 or tf.int32, got float32"),
    (lambda fc: fc.categorical_column_with_embedding("x", partition_num=0), "partition_num must be None or an int "
     ">= 1, got 0"),
    (lambda fc: fc.categorical_column_with_embedding("x", ev_option=3), "ev_option must be a "
     "tf.EmbeddingVariableOption"),
    (lambda fc: fc.indicator_column(fc.categorical_column_with_embedding("x")).variable_shape,
     "has no bucket count"),
])
def test_bad_columns_are_refused_naming_what_is_valid(call, message):
    with pytest.raises(ValueError, match=message):
        call(tensorgrid.feature_column)
