"""``tf.summary.FileWriter(logdir, graph)`` writes the graph for TensorBoard's graph view.

The event file is read back with TensorBoard's own ``EventAccumulator`` and the graph
parsed as TensorFlow's ``GraphDef``: every node of tensorgrid's graph, with its op type,
inputs, device, dtype attributes and output shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf


def tensorboard_graph(logdir: str) -> Any:
    from tensorboard.backend.event_processing import event_accumulator as accumulator
    events = accumulator.EventAccumulator(logdir)
    events.Reload()
    return events.Graph()


def build_model() -> Any:
    graph = tf.Graph()
    with graph.as_default(), tf.device("/job:worker/task:0"):
        x = tf.placeholder(tf.float32, [None, 4], name="x")
        with tf.variable_scope("layer"):
            w = tf.get_variable("w", [4, 2], initializer=tf.constant_initializer(np.arange(8.0).reshape(4, 2)))
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w)), name="loss")
        tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_or_create_global_step())
        tf.constant(np.zeros((200, 200), np.float32), name="big")
        tf.constant(["a", "b"], name="words")
    return graph


@pytest.mark.oracle
def test_tensorboard_reads_every_node_of_the_graph(tmp_path: Any) -> None:
    graph = build_model()
    with tf.summary.FileWriter(str(tmp_path), graph=graph):
        pass
    read = tensorboard_graph(str(tmp_path))
    ours = graph.as_graph_def().nodes
    assert [(n.name, n.op, list(n.input), n.device) for n in read.node] == [
        (n.name, n.op, n.inputs, n.device) for n in ours]
    nodes = {n.name: n for n in read.node}
    assert nodes["x"].attr["dtype"].type == 1  # DT_FLOAT
    assert [d.size for d in nodes["x"].attr["_output_shapes"].list.shape[0].dim] == [-1, 4]
    assert [d.size for d in nodes["loss"].attr["_output_shapes"].list.shape[0].dim] == []
    words = nodes["words"].attr["value"].tensor
    assert (words.dtype, list(words.string_val)) == (7, [b"a", b"b"])
    assert "value" not in nodes["big"].attr  # 160 KB: over MAX_TENSOR_BYTES, left out
    assert [d.size for d in nodes["big"].attr["_output_shapes"].list.shape[0].dim] == [200, 200]


def test_small_constants_keep_their_values(tf1: Any, tmp_path: Any) -> None:
    graph = tf.Graph()
    with graph.as_default():
        tf.constant(np.arange(6, dtype=np.int64).reshape(2, 3), name="ints")
        tf.constant(np.float32(2.5), name="scalar")
    with tf.summary.FileWriter(str(tmp_path)) as writer:
        writer.add_graph(graph, global_step=7)
    nodes = {n.name: n for n in tensorboard_graph(str(tmp_path)).node}
    np.testing.assert_array_equal(tf1.make_ndarray(nodes["ints"].attr["value"].tensor),
                                  np.arange(6, dtype=np.int64).reshape(2, 3))
    assert tf1.make_ndarray(nodes["scalar"].attr["value"].tensor) == np.float32(2.5)


def test_add_graph_refuses_what_is_not_a_graph(tmp_path: Any) -> None:
    with tf.summary.FileWriter(str(tmp_path)) as writer:
        with pytest.raises(TypeError, match="takes a tf.Graph or its GraphDef, got str"):
            writer.add_graph("graph")
        with pytest.raises(ValueError, match="needs a graph or a graph_def"):
            writer.add_graph(None)


def test_monitored_training_session_writes_the_graph_with_the_summaries(tf1: Any, tmp_path: Any) -> None:
    """As TensorFlow's checkpoint hook does: the graph goes into the checkpoint directory's
    event file, the one the summary hook writes its values into."""
    graph = tf.Graph()
    with graph.as_default():
        w = tf.Variable(2.0, name="w")
        loss = tf.square(w - 1.0, name="loss")
        tf.summary.scalar("loss", loss)
        step = tf.train.GradientDescentOptimizer(0.25).minimize(loss, tf.train.get_or_create_global_step())
        with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_summaries_steps=1,
                                               log_step_count_steps=None) as sess:
            sess.run(step)
    tf.summary.FileWriterCache.clear()
    names = {n.name for n in tensorboard_graph(str(tmp_path)).node}
    assert {"w", "loss", "global_step"} <= names
    files = list(tmp_path.glob("events.out.tfevents.*"))
    assert len(files) == 1
    kinds = [e.WhichOneof("what") for e in tf1.train.summary_iterator(str(files[0]))]
    assert kinds[:2] == ["file_version", "graph_def"] and "summary" in kinds
