"""``FileWriter.add_run_metadata`` against TensorFlow 2.21: TF1 programs (Kubeflow's
``mnist_with_summaries.py``, TensorFlow's summaries tutorial) trace a step with ``tf.RunOptions``
and ``tf.RunMetadata`` and write it for TensorBoard. The event file written by each library,
read back with TensorFlow's ``summary_iterator``, holds the same events (step, tag, metadata),
and a tag used twice is refused with TensorFlow's error."""

from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np
import pytest

import tensorgrid


def traced_run_events(tf: Any, logdir: str) -> list[tuple[int, str, bytes]]:
    """Runs a step traced as the tutorials trace it, writes its metadata twice under two tags, and
    returns the (step, tag, run metadata) of every tagged-run-metadata event in the file."""
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 2])
        y = tf.reduce_sum(x * 2.0)
        with tf.Session() as session:
            writer = tf.summary.FileWriter(logdir, session.graph)
            options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
            metadata = tf.RunMetadata()
            value = session.run(y, {x: np.ones((3, 2), np.float32)}, options=options, run_metadata=metadata)
            assert value == 12.0
            writer.add_run_metadata(tf.RunMetadata(), "step000")
            writer.add_run_metadata(tf.RunMetadata(), "step099", global_step=99)
            with pytest.raises(ValueError, match="The provided tag was already used for this event type"):
                writer.add_run_metadata(tf.RunMetadata(), "step099", global_step=100)
            writer.close()
    from tensorflow.compat.v1 import train
    events = []
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        for e in train.summary_iterator(path):
            if e.HasField("tagged_run_metadata"):
                events.append((e.step, e.tagged_run_metadata.tag, e.tagged_run_metadata.run_metadata))
    return events


def test_add_run_metadata_writes_tensorflows_events(tf1: Any, tmp_path: Any) -> None:
    ours = traced_run_events(tensorgrid, str(tmp_path / "tensorgrid"))
    theirs = traced_run_events(tf1, str(tmp_path / "tensorflow"))
    assert ours == theirs == [(0, "step000", b""), (99, "step099", b"")]


def test_add_run_metadata_refuses_what_is_not_run_metadata(tmp_path: Any) -> None:
    writer = tensorgrid.summary.FileWriter(str(tmp_path))
    with pytest.raises(TypeError, match="add_run_metadata takes a tf.RunMetadata, got dict"):
        writer.add_run_metadata({}, "step000")
    writer.close()
