"""``tf.feature_column.linear_model`` and ``make_parse_example_spec``, with TensorFlow 2.21's
``tf.compat.v1.feature_column`` as the oracle: the same weights give the same predictions and the
same gradients, the variables are named ``linear_model/<column>/weights`` and
``linear_model/bias_weights``, and the parse spec read by ``tf.parse_example`` feeds the same model.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tensorgrid

pytestmark = pytest.mark.oracle


def library(name: str, request: pytest.FixtureRequest) -> Any:
    return tensorgrid if name == "tensorgrid" else request.getfixturevalue("tf1")


def features(tf: Any) -> dict[str, Any]:
    return {
        "age": tf.constant([[1.0], [30.0], [50.0], [41.0]]),
        "size": tf.constant([[1.0, 20.0], [3.0, 4.0], [50.0, 6.0], [7.0, 80.0]]),
        "city": tf.constant([["a", "b"], ["c", ""], ["", ""], ["zz", "a"]]),
        "tag": tf.SparseTensor([[0, 0], [1, 0], [1, 1], [3, 2]], tf.constant(["x", "y", "x", "w"]), [4, 3]),
        "id": tf.SparseTensor([[0, 0], [1, 0], [1, 1], [3, 0]], tf.constant([1, 3, 2, 4], tf.int64), [4, 2]),
        "id_weight": tf.SparseTensor([[0, 0], [1, 0], [1, 1], [3, 0]], tf.constant([2.0, 0.5, 1.5, 3.0]), [4, 2]),
    }


def wide_columns(tf: Any) -> list[Any]:
    fc = tf.feature_column
    age_buckets = fc.bucketized_column(fc.numeric_column("age"), [10.0, 40.0])
    return [
        fc.numeric_column("size", shape=2),
        age_buckets,
        fc.bucketized_column(fc.numeric_column("size", shape=2), [5.0]),
        fc.categorical_column_with_vocabulary_list("city", ["a", "b", "c"], num_oov_buckets=2),
        fc.categorical_column_with_hash_bucket("tag", 9),
        fc.weighted_categorical_column(fc.categorical_column_with_identity("id", 5), "id_weight"),
        fc.crossed_column(["city", age_buckets], 13),
        fc.crossed_column(["tag", "city"], 17, hash_key=7),
        fc.indicator_column(fc.categorical_column_with_identity("id", 5)),
        fc.embedding_column(fc.categorical_column_with_vocabulary_list("tag", ["w", "x", "y"]), 2, combiner="sqrtn"),
    ]


def linear(tf: Any, units: int, sparse_combiner: str, build_features: Callable[[Any], Any] = features) -> dict[str, Any]:
    """Predictions with every weight set to a distinct value, and each variable's gradient as dense."""
    with tf.Graph().as_default():
        predictions = tf.feature_column.linear_model(build_features(tf), wide_columns(tf), units=units,
                                                     sparse_combiner=sparse_combiner)
        variables = tf.global_variables()
        loss = tf.reduce_sum(tf.square(predictions - 1.0))
        gradients = tf.gradients(loss, variables)
        with tf.Session() as session:
            session.run([tf.global_variables_initializer(), tf.tables_initializer()])
            for number, variable in enumerate(variables):
                shape = variable.shape.as_list()
                values = np.sin(np.arange(np.prod(shape)) + number).reshape(shape).astype(np.float32)
                session.run(variable.assign(values))
            prediction_values, gradient_values = session.run([predictions, gradients])
        dense = {}
        for variable, value in zip(variables, gradient_values):
            if hasattr(value, "indices"):
                total = np.zeros(variable.shape.as_list(), np.float32)
                np.add.at(total, value.indices, value.values)
                value = total
            dense[variable.name] = np.asarray(value)
        return {"predictions": prediction_values, "variables": [(v.name, v.shape.as_list()) for v in variables],
                "gradients": dense, "shape": predictions.shape.as_list()}


@pytest.mark.parametrize("units,sparse_combiner", [(1, "sum"), (3, "mean"), (2, "sqrtn")])
def test_linear_model_predicts_and_differentiates_as_tf1(units: int, sparse_combiner: str,
                                                         request: pytest.FixtureRequest) -> None:
    ours = linear(tensorgrid, units, sparse_combiner)
    theirs = linear(library("tensorflow", request), units, sparse_combiner)
    assert ours["variables"] == theirs["variables"]
    assert ("linear_model/bias_weights:0", [units]) in ours["variables"]
    assert ("linear_model/city_X_tag/weights:0", [17, units]) in ours["variables"]
    assert ours["shape"] == theirs["shape"]
    np.testing.assert_allclose(ours["predictions"], theirs["predictions"], rtol=1e-5, atol=1e-5)
    for name, gradient in theirs["gradients"].items():
        np.testing.assert_allclose(ours["gradients"][name], gradient, rtol=1e-5, atol=1e-5, err_msg=name)


def test_linear_model_starts_at_zero_and_fills_collections_as_tf1(request: pytest.FixtureRequest) -> None:
    results = []
    for name in ("tensorgrid", "tensorflow"):
        tf = library(name, request)
        with tf.Graph().as_default():
            columns = [tf.feature_column.numeric_column("age"),
                       tf.feature_column.categorical_column_with_identity("id", 5)]
            cols_to_vars: dict[Any, Any] = {}
            predictions = tf.feature_column.linear_model(features(tf), columns, weight_collections=["wide"],
                                                         trainable=False, cols_to_vars=cols_to_vars)
            with tf.Session() as session:
                session.run(tf.global_variables_initializer())
                results.append((session.run(predictions), [v.name for v in tf.trainable_variables()],
                                [v.name for v in tf.get_collection("wide")],
                                [v.name for v in tf.get_collection(tf.GraphKeys.MODEL_VARIABLES)],
                                sorted((getattr(c, "name", c), [v.name for v in vs]) for c, vs in cols_to_vars.items())))
    assert results[0][1:] == results[1][1:]
    np.testing.assert_array_equal(results[0][0], results[1][0])


SPEC_COLUMNS: dict[str, Callable[[Any], list[Any]]] = {
    "numeric, bucketized and categorical": lambda tf: [
        tf.feature_column.numeric_column("size", shape=2, default_value=3.0),
        tf.feature_column.bucketized_column(tf.feature_column.numeric_column("age", dtype=tf.int64), [3]),
        tf.feature_column.categorical_column_with_vocabulary_list("city", ["a"]),
        tf.feature_column.embedding_column(tf.feature_column.categorical_column_with_identity("id", 5), 2),
        tf.feature_column.weighted_categorical_column(
            tf.feature_column.categorical_column_with_hash_bucket("tag", 5, dtype=tf.int32), "tag_weight"),
        tf.feature_column.crossed_column(["word", tf.feature_column.categorical_column_with_identity("n", 3)], 9)],
}


def spec_as_plain(spec: dict[str, Any]) -> dict[str, Any]:
    plain = {}
    for key, feature in spec.items():
        fields = {field: getattr(feature, field) for field in feature._fields}
        fields["dtype"] = fields["dtype"].name
        if "shape" in fields:
            fields["shape"] = list(fields["shape"])
        plain[key] = (type(feature).__name__, fields)
    return plain


def test_make_parse_example_spec_as_tf1(request: pytest.FixtureRequest) -> None:
    specs = []
    for name in ("tensorgrid", "tensorflow"):
        tf = library(name, request)
        specs.append(spec_as_plain(tf.feature_column.make_parse_example_spec(SPEC_COLUMNS[
            "numeric, bucketized and categorical"](tf))))
    assert specs[0] == specs[1]


def test_conflicting_parse_specs_fail_as_in_tf1(request: pytest.FixtureRequest) -> None:
    for name in ("tensorgrid", "tensorflow"):
        tf = library(name, request)
        with pytest.raises(ValueError):
            tf.feature_column.make_parse_example_spec([
                tf.feature_column.numeric_column("a"),
                tf.feature_column.categorical_column_with_hash_bucket("a", 3)])


def serialized_examples(tf1: Any) -> list[bytes]:
    rows = [({"age": [5.0], "size": [1.0, 2.0]}, {"city": [b"a", b"b"], "tag": [b"x"]}, {"id": [1, 3]}),
            ({"age": [45.0], "size": [3.0, 7.0]}, {"city": [], "tag": [b"y", b"w"]}, {"id": []}),
            ({"age": [30.0], "size": [8.0, 9.0]}, {"city": [b"c"], "tag": []}, {"id": [4]})]
    examples = []
    for floats, strings, ints in rows:
        feature = {key: tf1.train.Feature(float_list=tf1.train.FloatList(value=v)) for key, v in floats.items()}
        feature.update({key: tf1.train.Feature(bytes_list=tf1.train.BytesList(value=v)) for key, v in strings.items()})
        feature.update({key: tf1.train.Feature(int64_list=tf1.train.Int64List(value=v)) for key, v in ints.items()})
        examples.append(tf1.train.Example(features=tf1.train.Features(feature=feature)).SerializeToString())
    return examples


def test_parse_spec_feeds_parse_example_into_both_models_as_tf1(request: pytest.FixtureRequest) -> None:
    tf1 = request.getfixturevalue("tf1")
    records = serialized_examples(tf1)

    def parsed_columns(tf: Any) -> list[Any]:
        fc = tf.feature_column
        return [fc.numeric_column("size", shape=2), fc.bucketized_column(fc.numeric_column("age"), [10.0, 40.0]),
                fc.embedding_column(fc.categorical_column_with_vocabulary_list("city", ["a", "b", "c"]), 2,
                                    initializer=tf.constant_initializer(np.arange(6.0).reshape(3, 2))),
                fc.indicator_column(fc.categorical_column_with_hash_bucket("tag", 4)),
                fc.embedding_column(fc.categorical_column_with_identity("id", 5), 3, combiner="sqrtn",
                                    initializer=tf.constant_initializer(np.arange(15.0).reshape(5, 3)))]

    outputs = []
    for name in ("tensorgrid", "tensorflow"):
        tf = library(name, request)
        with tf.Graph().as_default():
            columns = parsed_columns(tf)
            parsed = tf.parse_example(tf.constant(records), tf.feature_column.make_parse_example_spec(columns))
            deep = tf.feature_column.input_layer(parsed, columns)
            wide = tf.feature_column.linear_model(parsed, [c for c in columns if "embedding" not in c.name])
            with tf.Session() as session:
                session.run([tf.global_variables_initializer(), tf.tables_initializer()])
                outputs.append(session.run([deep, wide]))
    for ours, theirs in zip(*outputs):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_cols_to_vars_lists_each_columns_variables_and_shards_as_tf1(request: pytest.FixtureRequest) -> None:
    listed = []
    for name in ("tensorgrid", "tensorflow"):
        tf = library(name, request)
        with tf.Graph().as_default():
            fc = tf.feature_column
            wide_vars: dict[Any, Any] = {}
            deep_vars: dict[Any, Any] = {}
            columns = [fc.embedding_column(fc.categorical_column_with_identity("id", 4), 2), fc.numeric_column("age")]
            with tf.variable_scope("scope", partitioner=tf.fixed_size_partitioner(2)):
                fc.linear_model(features(tf), columns, cols_to_vars=wide_vars)
            fc.input_layer(features(tf), columns, cols_to_vars=deep_vars)
            listed.append([sorted((getattr(c, "name", c), [v.name for v in vs]) for c, vs in found.items())
                           for found in (wide_vars, deep_vars)])
    assert listed[0] == listed[1]
