"""tf.data.experimental.dynamic_shards' definition: what it adds to the graph, and bad arguments refused by name."""

from __future__ import annotations

import pytest

import tensorgrid as tf
from tensorgrid.data import dynamic_sharding


def test_a_data_set_adds_its_state_variable_and_elements_describe_shards() -> None:
    with tf.Graph().as_default():
        shards = tf.data.experimental.dynamic_shards(files=["a.tfrecord", "b.tfrecord"], num_epochs=None)
        assert shards.output_types == {"file": tf.string, "start": tf.int64, "end": tf.int64, "epoch": tf.int64,
                                       "index": tf.int64}
        (state,) = tf.global_variables()
        assert state.op.name == "dynamic_shards/state" and state.shape.as_list() == [5]
        assert state not in tf.trainable_variables()
        (defined,) = tf.get_collection(dynamic_sharding.COLLECTION)
        assert defined.spec.files == ("a.tfrecord", "b.tfrecord") and defined.spec.num_epochs == 0


@pytest.mark.parametrize("kwargs, error, message", [
    ({"num_records": 10, "shard_size": 3, "name": "a/b"}, ValueError, "without '/' or spaces, got 'a/b'"),
    ({"files": "data.tfrecord"}, TypeError, "a list of file names, got the string 'data.tfrecord'"),
    ({"num_records": 10, "shard_size": 3, "num_epochs": 0}, ValueError, "num_epochs must be at least 1"),
    ({"num_records": 10}, ValueError, "shard_size must be a positive number of records, got 0"),
    ({"files": ["a"], "num_records": 10}, ValueError, "not both nor neither"),
])
def test_bad_arguments_are_refused_by_name(kwargs: dict[str, object], error: type, message: str) -> None:
    with tf.Graph().as_default(), pytest.raises(error, match=message):
        tf.data.experimental.dynamic_shards(**kwargs)  # type: ignore[arg-type]


def test_two_data_sets_of_one_name_are_refused() -> None:
    with tf.Graph().as_default():
        tf.data.experimental.dynamic_shard_records(num_records=8, shard_size=4)
        with pytest.raises(ValueError, match="already reads dynamic shards named 'dynamic_shards'"):
            tf.data.experimental.dynamic_shard_records(num_records=8, shard_size=4)


def test_reading_without_a_cluster_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with tf.Graph().as_default():
        ids = tf.data.experimental.dynamic_shard_records(num_records=8, shard_size=4).make_one_shot_iterator()
        with tf.Session() as sess, pytest.raises(tf.errors.FailedPreconditionError,
                                                 match="start this task's tf.train.Server"):
            sess.run(ids.get_next())
