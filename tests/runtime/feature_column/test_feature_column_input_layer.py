"""``tf.feature_column`` columns read by ``input_layer``, with TensorFlow 2.21's
``tf.compat.v1.feature_column`` as the oracle: the same features and the same table values give
the same output, the same variables (names, shapes, collections) and the same sparse gradients
to the embedding tables; bad columns and inputs fail as TF1 fails them.
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
    """Dense, sparse and string features as TF1 programs feed them: absent entries are '' or -1."""
    return {
        "age": tf.constant([[1.0], [30.0], [50.0], [41.0]]),
        "size": tf.constant([[1, 20], [3, 4], [50, 6], [7, 80]], dtype=tf.int64),
        "city": tf.constant([["a", "b"], ["c", ""], ["", ""], ["zz", "a"]]),
        "tag": tf.SparseTensor([[0, 0], [1, 0], [1, 1], [3, 2]], tf.constant(["x", "y", "x", "w"]), [4, 3]),
        "id": tf.SparseTensor([[0, 0], [1, 0], [1, 1], [3, 0]], tf.constant([1, 3, 2, 4], tf.int64), [4, 2]),
        "code": tf.constant([[5], [-1], [12], [7]], dtype=tf.int64),
        "id_weight": tf.SparseTensor([[0, 0], [1, 0], [1, 1], [3, 0]], tf.constant([2.0, 0.5, 1.5, -1.0]), [4, 2]),
    }


def table(rows: int, dimension: int, offset: float = 0.0) -> np.ndarray:
    return (np.arange(rows * dimension, dtype=np.float32).reshape(rows, dimension) / 7.0 + offset).astype(np.float32)


COLUMNS: dict[str, Callable[[Any], list[Any]]] = {
    "numeric with shape, int dtype and normalizer": lambda tf: [
        tf.feature_column.numeric_column("size", shape=(2,), dtype=tf.int64,
                                         normalizer_fn=lambda x: tf.cast(x, tf.float32) / 10.0),
        tf.feature_column.numeric_column("age")],
    "bucketized, one-hot per value": lambda tf: [
        tf.feature_column.bucketized_column(tf.feature_column.numeric_column("size", shape=2, dtype=tf.int64),
                                            [2, 5, 30]),
        tf.feature_column.bucketized_column(tf.feature_column.numeric_column("age"), [10.0, 41.0])],
    "indicators of vocabulary, oov, identity and hash columns": lambda tf: [
        tf.feature_column.indicator_column(
            tf.feature_column.categorical_column_with_vocabulary_list("city", ["a", "b", "c"])),
        tf.feature_column.indicator_column(
            tf.feature_column.categorical_column_with_vocabulary_list("tag", ["x", "y"], num_oov_buckets=3)),
        tf.feature_column.indicator_column(tf.feature_column.categorical_column_with_identity("id", 5)),
        tf.feature_column.indicator_column(
            tf.feature_column.categorical_column_with_hash_bucket("code", 6, dtype=tf.int64))],
    "indicator of a weighted column and of a cross": lambda tf: [
        tf.feature_column.indicator_column(tf.feature_column.weighted_categorical_column(
            tf.feature_column.categorical_column_with_identity("id", 5), "id_weight")),
        tf.feature_column.indicator_column(tf.feature_column.crossed_column(
            ["city", tf.feature_column.bucketized_column(tf.feature_column.numeric_column("age"), [10.0])], 13))],
    "vocabulary with a default value, integer vocabulary": lambda tf: [
        tf.feature_column.indicator_column(tf.feature_column.categorical_column_with_vocabulary_list(
            "city", ["a", "c"], default_value=2)),
        tf.feature_column.indicator_column(tf.feature_column.categorical_column_with_vocabulary_list(
            "code", [12, 5, 99]))],
}


def run_input_layer(tf: Any, build: Callable[[Any], list[Any]], static_shapes: Any = None) -> np.ndarray:
    with tf.Graph().as_default():
        output = tf.feature_column.input_layer(features(tf), build(tf))
        if static_shapes is not None:
            static_shapes.append(output.shape.as_list())
        with tf.Session() as session:
            session.run([tf.global_variables_initializer(), tf.tables_initializer()])
            return np.asarray(session.run(output))


@pytest.mark.parametrize("build", COLUMNS.values(), ids=COLUMNS.keys())
def test_input_layer_reads_columns_as_tf1(build: Callable[[Any], list[Any]], request: pytest.FixtureRequest) -> None:
    static_shapes: list[Any] = []
    ours = run_input_layer(tensorgrid, build, static_shapes)
    theirs = run_input_layer(library("tensorflow", request), build, static_shapes)
    assert static_shapes[0] == static_shapes[1]
    assert ours.dtype == theirs.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def embedding_columns(tf: Any, combiner: str, max_norm: Any = None) -> list[Any]:
    fc = tf.feature_column
    return [
        fc.embedding_column(fc.categorical_column_with_identity("id", 5), 3, combiner=combiner, max_norm=max_norm,
                            initializer=tf.constant_initializer(table(5, 3))),
        fc.embedding_column(fc.weighted_categorical_column(fc.categorical_column_with_identity("id", 5), "id_weight"),
                            2, combiner=combiner, initializer=tf.constant_initializer(table(5, 2, 1.0))),
        fc.embedding_column(fc.categorical_column_with_vocabulary_list("city", ["a", "b", "c"]), 2,
                            combiner=combiner, initializer=tf.constant_initializer(table(3, 2, -0.5))),
        fc.embedding_column(fc.categorical_column_with_hash_bucket("tag", 7), 4, combiner=combiner,
                            initializer=tf.constant_initializer(table(7, 4, 0.25))),
        fc.numeric_column("age"),
    ]


def embedding_model(tf: Any, combiner: str, max_norm: Any = None) -> dict[str, Any]:
    """The output, every variable (name, shape, trainable, model variable) and each table's gradient."""
    with tf.Graph().as_default():
        output = tf.feature_column.input_layer(features(tf), embedding_columns(tf, combiner, max_norm),
                                               weight_collections=["my_weights"])
        loss = tf.reduce_sum(output * tf.constant(np.linspace(-1.0, 2.0, output.shape[1].value), tf.float32))
        variables = tf.global_variables()
        gradients = tf.gradients(loss, variables)
        with tf.Session() as session:
            session.run([tf.global_variables_initializer(), tf.tables_initializer()])
            output_value, gradient_values = session.run([output, gradients])
        dense_gradients = {}
        for variable, gradient, value in zip(variables, gradients, gradient_values):
            assert isinstance(gradient, tf.IndexedSlices), variable.name
            dense = np.zeros(variable.shape.as_list(), np.float32)
            np.add.at(dense, value.indices, value.values)
            dense_gradients[variable.name] = dense
        return {
            "output": output_value,
            "static_shape": output.shape.as_list(),
            "variables": [(v.name, v.shape.as_list()) for v in variables],
            "trainable": [v.name for v in tf.trainable_variables()],
            "model": [v.name for v in tf.get_collection(tf.GraphKeys.MODEL_VARIABLES)],
            "mine": [v.name for v in tf.get_collection("my_weights")],
            "gradients": dense_gradients,
        }


@pytest.mark.parametrize("combiner", ["mean", "sum", "sqrtn"])
def test_embedding_columns_and_their_sparse_gradients_match_tf1(combiner: str, request: pytest.FixtureRequest) -> None:
    ours = embedding_model(tensorgrid, combiner)
    theirs = embedding_model(library("tensorflow", request), combiner)
    assert ours["variables"] == theirs["variables"]
    assert ours["variables"][0][0] == "input_layer/city_embedding/embedding_weights:0"
    assert ours["static_shape"] == theirs["static_shape"]
    for key in ("trainable", "model", "mine"):
        assert ours[key] == theirs[key], key
    np.testing.assert_allclose(ours["output"], theirs["output"], rtol=1e-5, atol=1e-6)
    assert ours["gradients"].keys() == theirs["gradients"].keys()
    for name, gradient in theirs["gradients"].items():
        np.testing.assert_allclose(ours["gradients"][name], gradient, rtol=1e-5, atol=1e-6, err_msg=name)


def test_embedding_max_norm_clips_rows_as_tf1(request: pytest.FixtureRequest) -> None:
    ours = embedding_model(tensorgrid, "mean", max_norm=1.5)
    theirs = embedding_model(library("tensorflow", request), "mean", max_norm=1.5)
    np.testing.assert_allclose(ours["output"], theirs["output"], rtol=1e-5, atol=1e-6)


def test_default_embedding_initializer_is_truncated_normal_of_tf1_scale() -> None:
    with tensorgrid.Graph().as_default():
        column = tensorgrid.feature_column.embedding_column(
            tensorgrid.feature_column.categorical_column_with_identity("id", 400), 16)
        tensorgrid.feature_column.input_layer(features(tensorgrid), [column])
        (weights,) = tensorgrid.global_variables()
        with tensorgrid.Session() as session:
            session.run(tensorgrid.global_variables_initializer())
            values = session.run(weights)
    stddev = 1 / np.sqrt(16)
    assert np.abs(values).max() <= 2 * stddev
    assert 0.7 * stddev < values.std() < 1.0 * stddev


def test_shared_embedding_columns_share_one_table_named_as_tf1(request: pytest.FixtureRequest) -> None:
    results = []
    for name in ("tensorgrid", "tensorflow"):
        tf = library(name, request)
        with tf.Graph().as_default():
            fc = tf.feature_column
            shared = fc.shared_embedding_columns(
                [fc.categorical_column_with_vocabulary_list("tag", ["w", "x", "y", "z"]),
                 fc.categorical_column_with_vocabulary_list("city", ["a", "b", "c", "d"])], 3,
                initializer=tf.constant_initializer(table(4, 3)))
            output = fc.input_layer(features(tf), shared)
            with tf.Session() as session:
                session.run([tf.global_variables_initializer(), tf.tables_initializer()])
                results.append(([(v.name, v.shape.as_list()) for v in tf.global_variables()],
                                [c.name for c in shared], session.run(output)))
    (our_vars, our_names, ours), (their_vars, their_names, theirs) = results
    assert our_vars == their_vars
    assert our_names == their_names
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


ERRORS: dict[str, Callable[[Any], Any]] = {
    "a categorical column in input_layer": lambda tf: tf.feature_column.input_layer(
        features(tf), [tf.feature_column.categorical_column_with_identity("id", 5)]),
    "two columns of one name": lambda tf: tf.feature_column.input_layer(
        features(tf), [tf.feature_column.numeric_column("age"), tf.feature_column.numeric_column("age", shape=2)]),
    "no columns": lambda tf: tf.feature_column.input_layer(features(tf), []),
    "a dict of columns": lambda tf: tf.feature_column.input_layer(
        features(tf), {"a": tf.feature_column.numeric_column("age")}),
    "a missing feature": lambda tf: tf.feature_column.input_layer(
        features(tf), [tf.feature_column.numeric_column("height")]),
    "a sparse numeric feature": lambda tf: tf.feature_column.input_layer(
        features(tf), [tf.feature_column.numeric_column("id")]),
    "unsorted boundaries": lambda tf: tf.feature_column.bucketized_column(
        tf.feature_column.numeric_column("age"), [3.0, 1.0]),
    "a bucketized string column": lambda tf: tf.feature_column.bucketized_column("age", [1.0]),
    "an embedding of dimension 0": lambda tf: tf.feature_column.embedding_column(
        tf.feature_column.categorical_column_with_identity("id", 5), 0),
    "an unknown combiner": lambda tf: tf.feature_column.input_layer(features(tf), [
        tf.feature_column.embedding_column(tf.feature_column.categorical_column_with_identity("id", 5), 2,
                                           combiner="max")]),
    "duplicate vocabulary": lambda tf: tf.feature_column.categorical_column_with_vocabulary_list("c", ["a", "a"]),
    "default value and oov buckets": lambda tf: tf.feature_column.categorical_column_with_vocabulary_list(
        "c", ["a"], default_value=0, num_oov_buckets=2),
    "hash buckets of 0": lambda tf: tf.feature_column.categorical_column_with_hash_bucket("c", 0),
    "a float hash column": lambda tf: tf.feature_column.categorical_column_with_hash_bucket("c", 3, dtype=tf.float32),
    "a cross of one key": lambda tf: tf.feature_column.crossed_column(["city"], 10),
    "a cross of a hashed column": lambda tf: tf.feature_column.crossed_column(
        ["city", tf.feature_column.categorical_column_with_hash_bucket("tag", 3)], 10),
    "a string vocabulary for integer ids": lambda tf: tf.feature_column.input_layer(features(tf), [
        tf.feature_column.indicator_column(tf.feature_column.categorical_column_with_vocabulary_list(
            "id", ["a", "b"]))]),
    "shared embeddings of different sizes": lambda tf: tf.feature_column.shared_embedding_columns(
        [tf.feature_column.categorical_column_with_identity("id", 5),
         tf.feature_column.categorical_column_with_identity("code", 6)], 2),
}


@pytest.mark.parametrize("build", ERRORS.values(), ids=ERRORS.keys())
def test_bad_columns_fail_as_in_tf1(build: Callable[[Any], Any], request: pytest.FixtureRequest) -> None:
    classes = []
    for name in ("tensorgrid", "tensorflow"):
        tf = library(name, request)
        with tf.Graph().as_default():
            with pytest.raises(Exception) as raised:
                build(tf)
            classes.append(type(raised.value).__name__)
    assert classes[0] == classes[1]


def test_identity_ids_out_of_range_are_no_indicator_but_fail_an_embedding_as_in_tf1(
        request: pytest.FixtureRequest) -> None:
    def build(tf: Any) -> list[Any]:
        return [tf.feature_column.indicator_column(tf.feature_column.categorical_column_with_identity("id", 3))]

    np.testing.assert_array_equal(run_input_layer(tensorgrid, build),
                                  run_input_layer(library("tensorflow", request), build))
    classes = []
    for name in ("tensorgrid", "tensorflow"):
        tf = library(name, request)
        with tf.Graph().as_default():
            column = tf.feature_column.embedding_column(tf.feature_column.categorical_column_with_identity("id", 3), 2)
            output = tf.feature_column.input_layer(features(tf), [column])
            with tf.Session() as session:
                with pytest.raises(tf.errors.OpError) as raised:
                    session.run(tf.global_variables_initializer())
                    session.run(output)
                classes.append(type(raised.value).__name__)
    assert classes == ["InvalidArgumentError", "InvalidArgumentError"]


def test_identity_default_value_replaces_ids_out_of_range(request: pytest.FixtureRequest) -> None:
    def build(tf: Any) -> list[Any]:
        return [tf.feature_column.indicator_column(
            tf.feature_column.categorical_column_with_identity("id", 3, default_value=0))]

    np.testing.assert_array_equal(run_input_layer(tensorgrid, build),
                                  run_input_layer(library("tensorflow", request), build))


def test_vocabulary_file_column_reads_line_numbers_as_tf1(tmp_path: Any, request: pytest.FixtureRequest) -> None:
    vocabulary = tmp_path / "cities.txt"
    vocabulary.write_text("c\na\nzz\n")

    def build(tf: Any) -> list[Any]:
        fc = tf.feature_column
        return [fc.indicator_column(fc.categorical_column_with_vocabulary_file("city", str(vocabulary))),
                fc.indicator_column(fc.categorical_column_with_vocabulary_file("tag", str(vocabulary),
                                                                               vocabulary_size=2, num_oov_buckets=2))]

    np.testing.assert_array_equal(run_input_layer(tensorgrid, build),
                                  run_input_layer(library("tensorflow", request), build))


def test_string_equality_ops_as_tf1(request: pytest.FixtureRequest) -> None:
    values = []
    for name in ("tensorgrid", "tensorflow"):
        tf = library(name, request)
        with tf.Graph().as_default():
            words = tf.constant(["a", "", "b"])
            with tf.Session() as session:
                values.append(session.run([tf.equal(words, ""), tf.not_equal(words, tf.constant(["a", "x", "b"]))]))
    for ours, theirs in zip(*values):
        assert ours.dtype == theirs.dtype == np.bool_
        np.testing.assert_array_equal(ours, theirs)


def partitioned_model(tf: Any) -> dict[str, Any]:
    """An embedding and a linear model over tables sharded by the scope's partitioner."""
    with tf.Graph().as_default():
        fc = tf.feature_column
        ids = fc.categorical_column_with_identity("id", 5)
        with tf.variable_scope("dnn", partitioner=tf.fixed_size_partitioner(3)):
            deep = fc.input_layer(features(tf), [fc.embedding_column(ids, 4, combiner="sqrtn")])
        with tf.variable_scope("wide", partitioner=tf.fixed_size_partitioner(2)):
            wide = fc.linear_model(features(tf), [ids, fc.numeric_column("age")], units=2)
        loss = tf.reduce_sum(deep * tf.constant(np.linspace(-1.0, 1.0, 4), tf.float32)) + tf.reduce_sum(wide * wide)
        variables = tf.global_variables()
        gradients = tf.gradients(loss, variables)
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            for number, variable in enumerate(variables):
                shape = variable.shape.as_list()
                session.run(variable.assign(np.cos(np.arange(np.prod(shape)) + number).reshape(shape)))
            values = session.run([deep, wide] + gradients)
        kinds = [type(g).__name__ for g in gradients]
        dense = []
        for variable, value in zip(variables, values[2:]):
            if hasattr(value, "indices"):
                total = np.zeros(variable.shape.as_list(), np.float32)
                np.add.at(total, value.indices, value.values)
                value = total
            dense.append(np.asarray(value))
        return {"variables": [(v.name, v.shape.as_list()) for v in variables], "deep": values[0], "wide": values[1],
                "gradients": dense, "kinds": kinds}


def test_partitioned_tables_are_sharded_named_and_updated_sparsely_as_tf1(request: pytest.FixtureRequest) -> None:
    ours = partitioned_model(tensorgrid)
    theirs = partitioned_model(library("tensorflow", request))
    assert ours["variables"] == theirs["variables"]
    assert ("dnn/input_layer/id_embedding/embedding_weights/part_2:0", [1, 4]) in ours["variables"]
    assert ours["kinds"][:3] == ["IndexedSlices"] * 3
    np.testing.assert_allclose(ours["deep"], theirs["deep"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours["wide"], theirs["wide"], rtol=1e-5, atol=1e-6)
    for name, mine, reference in zip([v[0] for v in theirs["variables"]], ours["gradients"], theirs["gradients"]):
        np.testing.assert_allclose(mine, reference, rtol=1e-5, atol=1e-5, err_msg=name)


def test_fed_sparse_ids_of_rank_one_and_unknown_rank_read_as_tf1(request: pytest.FixtureRequest) -> None:
    outputs = []
    for name in ("tensorgrid", "tensorflow"):
        tf = library(name, request)
        with tf.Graph().as_default():
            fc = tf.feature_column
            fed = {"id": tf.sparse_placeholder(tf.int64), "code": tf.sparse_placeholder(tf.int64, shape=[3])}
            output = fc.input_layer(fed, [
                fc.embedding_column(fc.categorical_column_with_identity("id", 5), 2,
                                    initializer=tf.constant_initializer(table(5, 2))),
                fc.indicator_column(fc.categorical_column_with_identity("code", 4))])
            with tf.Session() as session:
                session.run(tf.global_variables_initializer())
                outputs.append(session.run(output, {
                    fed["id"]: tf.SparseTensorValue([[0, 0], [0, 1], [2, 0]], [1, 4, 2], [3, 2]),
                    fed["code"]: tf.SparseTensorValue([[0], [2]], [3, 1], [3])}))
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-6)


def test_fed_ids_of_rank_three_fail_the_step_with_the_column_named() -> None:
    fc = tensorgrid.feature_column
    fed = {"id": tensorgrid.sparse_placeholder(tensorgrid.int64)}
    output = fc.input_layer(fed, [fc.embedding_column(fc.categorical_column_with_identity("id", 5), 2)])
    with tensorgrid.Session() as session:
        session.run(tensorgrid.global_variables_initializer())
        with pytest.raises(tensorgrid.errors.InvalidArgumentError, match="feature column 'id_embedding'.*rank 2"):
            session.run(output, {fed["id"]: tensorgrid.SparseTensorValue([[0, 0, 0]], [1], [1, 1, 1])})


def test_two_input_layers_make_two_scopes_and_repeated_weighted_ids_add_up_as_tf1(
        request: pytest.FixtureRequest) -> None:
    results = []
    for name in ("tensorgrid", "tensorflow"):
        tf = library(name, request)
        with tf.Graph().as_default():
            fc = tf.feature_column
            fed = {"id": tf.SparseTensor([[0, 0], [0, 1], [1, 0]], tf.constant([2, 2, 1], tf.int64), [2, 2]),
                   "w": tf.SparseTensor([[0, 0], [0, 1], [1, 0]], tf.constant([0.5, 2.0, 1.0]), [2, 2])}
            ids = fc.categorical_column_with_identity("id", 3)
            first = fc.input_layer(fed, [fc.indicator_column(fc.weighted_categorical_column(ids, "w"))])
            second = fc.input_layer(fed, [fc.embedding_column(ids, 2)])
            with tf.Session() as session:
                session.run(tf.global_variables_initializer())
                results.append((session.run(first), second.shape.as_list(), [v.name for v in tf.global_variables()]))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    assert results[0][1:] == results[1][1:]


def test_rank_one_dense_features_read_as_one_per_example_as_tf1(request: pytest.FixtureRequest) -> None:
    outputs = []
    for name in ("tensorgrid", "tensorflow"):
        tf = library(name, request)
        with tf.Graph().as_default():
            fc = tf.feature_column
            fed = {"age": tf.placeholder(tf.float32, [None]), "city": tf.placeholder(tf.string, [None])}
            output = fc.input_layer(fed, [
                fc.numeric_column("age"), fc.bucketized_column(fc.numeric_column("age"), [0.5]),
                fc.indicator_column(fc.categorical_column_with_vocabulary_list("city", ["a", "b"]))])
            with tf.Session() as session:
                session.run(tf.tables_initializer())
                outputs.append((output.shape.as_list(), session.run(
                    output, {fed["age"]: [0.25, 3.0, 1.0], fed["city"]: ["b", "", "a"]})))
    assert outputs[0][0] == outputs[1][0]
    np.testing.assert_array_equal(outputs[0][1], outputs[1][1])
