"""A wide-and-deep model of feature columns on two parameter servers, against the same in one process.

Two ``tensorgrid server`` processes are the PS tasks. ``replica_device_setter`` and the scopes'
partitioners shard the deep part's embedding tables (``input_layer``) and the wide part's weights
(``linear_model``) over them; FTRL trains the wide part and Adagrad the deep part, as TF1's
``DNNLinearCombinedClassifier`` does. After a few steps the variables read back from the PS tasks
must equal tensorgrid in one process and ``tf.compat.v1`` in one process, and rows of the tables
no example used must not have moved (the updates are sparse).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster

pytestmark = pytest.mark.timeout(240)

BATCHES = [
    {"age": [[23.0], [61.0], [35.0]], "city": [["paris", "oslo"], ["lima", ""], ["", ""]],
     "user": ([[0, 0], [1, 0], [1, 1], [2, 0]], [3, 17, 3, 9], [3, 2])},
    {"age": [[44.0], [19.0], [70.0]], "city": [["oslo", ""], ["rome", "paris"], ["paris", ""]],
     "user": ([[0, 0], [2, 0], [2, 1]], [17, 0, 11], [3, 2])},
    {"age": [[52.0], [28.0], [33.0]], "city": [["", ""], ["lima", "oslo"], ["kyiv", ""]],
     "user": ([[0, 0], [1, 0], [2, 0]], [9, 3, 5], [3, 2])},
]
LABELS = [[[1.0], [0.0], [1.0]], [[0.0], [1.0], [1.0]], [[1.0], [1.0], [0.0]]]
USERS = 20


def columns(lib: Any) -> tuple[list[Any], list[Any]]:
    fc = lib.feature_column
    age = fc.bucketized_column(fc.numeric_column("age"), [25.0, 40.0, 60.0])
    city = fc.categorical_column_with_vocabulary_list("city", ["paris", "oslo", "lima", "rome"], num_oov_buckets=2)
    user = fc.categorical_column_with_identity("user", USERS)
    wide = [age, city, user, fc.crossed_column(["city", age], 31)]
    deep = [fc.numeric_column("age", normalizer_fn=lambda x: x / 100.0), fc.embedding_column(user, 4),
            fc.embedding_column(fc.categorical_column_with_hash_bucket("city", 13), 3, combiner="sqrtn")]
    return wide, deep


def initial_value(name: str, shape: list[int]) -> np.ndarray:
    seed = sum(ord(c) for c in name)
    return (np.sin(np.arange(int(np.prod(shape))) * 0.7 + seed) * 0.3).reshape(shape).astype(np.float32)


def train(lib: Any, target: str, cluster: Any) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Every model variable after one step per batch, and the device of each table shard."""
    graph = lib.Graph()
    with graph.as_default():
        setter = lib.train.replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0")
        with lib.device(setter):
            features = {"age": lib.placeholder(lib.float32, [None, 1], name="age"),
                        "city": lib.placeholder(lib.string, [None, 2], name="city"),
                        "user": lib.sparse_placeholder(lib.int64, name="user")}
            labels = lib.placeholder(lib.float32, [None, 1], name="labels")
            wide_columns, deep_columns = columns(lib)
            with lib.variable_scope("linear", partitioner=lib.fixed_size_partitioner(2)):
                wide = lib.feature_column.linear_model(features, wide_columns)
            with lib.variable_scope("dnn", partitioner=lib.min_max_variable_partitioner(2, min_slice_size=16)):
                deep_input = lib.feature_column.input_layer(features, deep_columns)
            with lib.variable_scope("dnn"):
                kernel = lib.get_variable("logits/kernel", [deep_input.shape[1].value, 1])
                hidden = lib.matmul(deep_input, kernel)
            logits = wide + hidden
            loss = lib.reduce_mean(lib.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
            linear_vars = [v for v in lib.trainable_variables() if v.name.startswith("linear/")]
            dnn_vars = [v for v in lib.trainable_variables() if v.name.startswith("dnn/")]
            step = lib.group(lib.train.FtrlOptimizer(0.2, l1_regularization_strength=0.01).minimize(
                loss, var_list=linear_vars), lib.train.AdagradOptimizer(0.1).minimize(loss, var_list=dnn_vars))
            assigns = [v.assign(initial_value(v.op.name, v.shape.as_list())) for v in lib.trainable_variables()]
        devices = {v.op.name: v.device for v in lib.global_variables()
                   if v.op.name.startswith("dnn/input_layer/user_embedding/embedding_weights/part_")}
        with lib.Session(target, graph=graph) as session:
            session.run([lib.global_variables_initializer(), lib.tables_initializer()])
            session.run(assigns)
            for batch, batch_labels in zip(BATCHES, LABELS):
                indices, values, dense_shape = batch["user"]
                session.run(step, {features["age"]: batch["age"], features["city"]: batch["city"],
                                   features["user"]: lib.SparseTensorValue(indices, values, dense_shape),
                                   labels: batch_labels})
            return {v.op.name: session.run(v) for v in lib.trainable_variables()}, devices


def test_wide_and_deep_columns_train_on_two_ps_tasks_as_in_one_process(tmp_path: Any, tf1: Any) -> None:
    with LocalCluster(tmp_path, {"ps": 2, "worker": 1}) as cluster:
        remote, devices = train(tf, cluster.target("worker"), cluster.cluster)
    # The table's two shards (and their Adagrad slots) are on the two PS tasks, one each.
    assert len(devices) == 4
    assert sorted({devices[f"dnn/input_layer/user_embedding/embedding_weights/part_{i}"] for i in range(2)}) == [
        "/job:ps/task:0", "/job:ps/task:1"]
    local, _ = train(tf, "", None)
    theirs, _ = train(tf1, "", None)
    assert sorted(remote) == sorted(local) == sorted(theirs)
    assert "linear/linear_model/user/weights/part_1" in remote
    for name, value in theirs.items():
        np.testing.assert_allclose(remote[name], local[name], rtol=1e-6, atol=1e-7, err_msg=name)
        np.testing.assert_allclose(remote[name], value, rtol=2e-5, atol=2e-6, err_msg=name)
    table = np.concatenate([remote["dnn/input_layer/user_embedding/embedding_weights/part_0"],
                            remote["dnn/input_layer/user_embedding/embedding_weights/part_1"]])
    start = np.concatenate([initial_value(f"dnn/input_layer/user_embedding/embedding_weights/part_{i}", [USERS // 2, 4])
                            for i in range(2)])
    used = sorted({user for batch in BATCHES for user in batch["user"][1]})
    unused = np.setdiff1d(np.arange(USERS), used)
    np.testing.assert_array_equal(table[unused], start[unused])
    assert not np.allclose(table[used], start[used])
