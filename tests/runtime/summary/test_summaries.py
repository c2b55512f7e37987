"""``tf.summary`` and event files, against TensorFlow's ``tf.compat.v1`` as the oracle.

The serialized Summary of scalar, histogram and merged summary ops must be the bytes
TensorFlow's ops produce; event files written by ``tf.summary.FileWriter`` and by
``MonitoredTrainingSession(save_summaries_steps=...)`` must read back with TensorFlow's
own ``summary_iterator``, holding the same steps, tags and values as TensorFlow writes.
"""

from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np
import pytest

import tensorgrid

VALUES = [np.array([1.0, -2.5, 3.0, 0.0, 1e-13, 7e5], dtype=np.float32), np.zeros(3, np.float32),
          np.linspace(-4, 4, 50).astype(np.float32)]


def summary_bytes(tf: Any) -> list[bytes]:
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None])
        with tf.name_scope("stats"):
            tf.summary.scalar("mean", tf.reduce_mean(x))
            tf.summary.scalar("count", tf.size(x), family="sizes")
        tf.summary.histogram("values", x)
        merged = tf.summary.merge_all()
        with tf.Session() as sess:
            return [sess.run(merged, {x: v}) for v in VALUES]


def test_summary_ops_give_tensorflows_bytes(tf1: Any) -> None:
    assert summary_bytes(tensorgrid) == summary_bytes(tf1)


def read_events(tf1: Any, path: str) -> list[tuple[int, list[tuple[str, Any]]]]:
    events = []
    for event in tf1.train.summary_iterator(path):
        if event.HasField("file_version"):
            assert event.file_version == "brain.Event:2"
            continue
        values = [(v.tag, v.simple_value if v.WhichOneof("value") == "simple_value" else
                   (v.histo.num, v.histo.sum, list(v.histo.bucket))) for v in event.summary.value]
        events.append((event.step, values))
    return events


def test_file_writer_events_read_back_with_tensorflow(tf1: Any, tmp_path: Any) -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None])
        merged = tf.summary.merge([tf.summary.scalar("loss", tf.reduce_sum(x)), tf.summary.histogram("x", x)])
        with tf.Session() as sess, tf.summary.FileWriter(str(tmp_path / "logs")) as writer:
            for step, value in enumerate(VALUES):
                writer.add_summary(sess.run(merged, {x: value}), global_step=step * 10)
    files = glob.glob(str(tmp_path / "logs" / "events.out.tfevents.*"))
    assert len(files) == 1
    events = read_events(tf1, files[0])
    assert [step for step, _ in events] == [0, 10, 20]
    for (_, values), value in zip(events, VALUES):
        assert values[0] == ("loss", pytest.approx(float(value.sum()), rel=1e-6))
        assert values[1][0] == "x" and values[1][1][0] == value.size


def train_with_summaries(tf: Any, directory: str) -> None:
    with tf.Graph().as_default():
        w = tf.Variable(2.0)
        loss = tf.square(w - 1.0)
        tf.summary.scalar("loss", loss)
        step = tf.train.GradientDescentOptimizer(0.25).minimize(loss, tf.train.get_or_create_global_step())
        with tf.train.MonitoredTrainingSession(checkpoint_dir=directory, save_summaries_steps=2,
                                               save_checkpoint_secs=None, log_step_count_steps=None) as sess:
            for _ in range(5):
                sess.run(step)


def test_monitored_training_session_saves_summaries_every_n_steps(tf1: Any, tmp_path: Any) -> None:
    results = []
    for name, tf in (("ours", tensorgrid), ("tensorflow", tf1)):
        directory = str(tmp_path / name)
        train_with_summaries(tf, directory)
        files = sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*")))
        events = [e for path in files for e in read_events(tf1, path) if e[1]]
        results.append([(step, [(tag, round(value, 6)) for tag, value in values]) for step, values in events])
    assert results[0] == results[1]
    assert [step for step, _ in results[0]] == [1, 3, 5]  # the global step after each summarized step


def test_bad_summaries_are_refused_clearly(tmp_path: Any) -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="needs a scalar"):
            tf.summary.scalar("v", tf.constant([1.0, 2.0]))
        x = tf.placeholder(tf.float32, [None])
        total = tf.summary.scalar("a", tf.reduce_sum(x))
        twice = tf.summary.merge([total, total])
        histogram = tf.summary.histogram("h", x)
        with tf.Session() as sess:
            with pytest.raises(tf.errors.InvalidArgumentError, match="Duplicate tag a found in summary inputs"):
                sess.run(twice, {x: [1.0]})
            with pytest.raises(tf.errors.InvalidArgumentError, match="Nan in summary histogram"):
                sess.run(histogram, {x: [1.0, np.nan]})
    writer = tf.summary.FileWriter(str(tmp_path))
    writer.close()
    with pytest.raises(ValueError, match="is closed"):
        writer.add_summary(b"")
    with pytest.raises(TypeError, match="serialized Summary"):
        tf.summary.FileWriter(str(tmp_path)).add_summary(3.0)
