"""``tf.summary.tensor_summary`` against TensorFlow's ``tf.compat.v1``: the Summary bytes must be
TensorFlow's for every dtype (numbers, booleans, strings) and shape (scalars, empty tensors),
with and without metadata, and TensorBoard's own event reader must give the tensors back.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid

VALUES = {
    "float32_matrix": np.arange(6, dtype=np.float32).reshape(2, 3) / 4,
    "float64_scalar": np.float64(-2.5),
    "int32_vector": np.array([1, -2, 3], dtype=np.int32),
    "int64_cube": np.arange(8, dtype=np.int64).reshape(2, 2, 2) - 3,
    "uint8_vector": np.array([0, 7, 255], dtype=np.uint8),
    "bool_vector": np.array([True, False, True]),
    "float16_vector": np.array([0.5, -1.25], dtype=np.float16),
    "empty": np.zeros((0, 3), dtype=np.float32),
    "strings": np.array([[b"ab", b""], [b"c\x00d", b"xyz"]], dtype=object),
}


def tensor_summaries(tf: Any, value: Any) -> list[bytes]:
    with tf.Graph().as_default():
        dtype = tf.string if value.dtype == object else tf.as_dtype(value.dtype)
        fed = tf.placeholder(dtype, value.shape)
        with tf.name_scope("outer"):
            plain = tf.summary.tensor_summary("plain", fed)
        described = tf.summary.tensor_summary("described", tf.constant(value), summary_description="what it is",
                                              display_name="Shown", family="fam")
        with tf.Session() as sess:
            return sess.run([plain, described], {fed: value})  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", sorted(VALUES))
def test_tensor_summary_gives_tensorflows_bytes(tf1: Any, name: str) -> None:
    assert tensor_summaries(tensorgrid, VALUES[name]) == tensor_summaries(tf1, VALUES[name])


def test_given_metadata_is_kept_under_the_names_set_over_it(tf1: Any) -> None:
    from tensorboard.compat.proto import summary_pb2

    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
        plugin_name="custom", content=b"\x01\x02"))

    def run(tf: Any, given: Any) -> bytes:
        with tf.Graph().as_default():
            summary = tf.summary.tensor_summary("t", tf.constant([1.0, 2.0]), summary_metadata=given,
                                                display_name="Named")
            with tf.Session() as sess:
                return sess.run(summary)  # type: ignore[no-any-return]

    tf_metadata = tf1.SummaryMetadata.FromString(metadata.SerializeToString())
    expected = run(tf1, tf_metadata)
    assert run(tensorgrid, metadata) == expected
    assert run(tensorgrid, metadata.SerializeToString()) == expected


@pytest.mark.oracle
def test_tensorboard_reads_the_tensors_back(tmp_path: Any) -> None:
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.util import tensor_util

    tf = tensorgrid
    with tf.Graph().as_default():
        step = tf.placeholder(tf.int64, [])
        tf.summary.tensor_summary("weights", tf.reshape(tf.cast(step, tf.float32) * VALUES["float32_matrix"], [2, 3]))
        tf.summary.tensor_summary("words", tf.constant(VALUES["strings"]))
        merged = tf.summary.merge_all()
        with tf.Session() as sess, tf.summary.FileWriter(str(tmp_path)) as writer:
            for i in (1, 2):
                writer.add_summary(sess.run(merged, {step: i}), global_step=i)
    reader = event_accumulator.EventAccumulator(str(tmp_path), size_guidance={event_accumulator.TENSORS: 0})
    reader.Reload()
    assert sorted(reader.Tags()["tensors"]) == ["weights", "words"]
    weights = reader.Tensors("weights")
    assert [e.step for e in weights] == [1, 2]
    for event in weights:
        np.testing.assert_array_equal(tensor_util.make_ndarray(event.tensor_proto),
                                      event.step * VALUES["float32_matrix"])
    words = tensor_util.make_ndarray(reader.Tensors("words")[0].tensor_proto)
    assert words.tolist() == VALUES["strings"].tolist()


def test_bad_arguments_are_named() -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="summary_metadata must be a SummaryMetadata message or its serialized "
                                            "bytes, got 'x'"):
            tf.summary.tensor_summary("t", tf.constant(1.0), summary_metadata="x")
        with pytest.raises(TypeError, match="display_name must be a string, got 3"):
            tf.summary.tensor_summary("t", tf.constant(1.0), display_name=3)
        with pytest.raises(ValueError, match="A summary needs a non-empty name"):
            tf.summary.tensor_summary("", tf.constant(1.0))
