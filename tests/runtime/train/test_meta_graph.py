"""``tf.train.export_meta_graph`` / ``import_meta_graph``: a model trained two steps, saved and
exported, is rebuilt from the file in a fresh graph, restored, and trained two more steps
through the ``train_op`` collection; the variables must equal those of the same program on
TensorFlow's ``tf.compat.v1`` (which writes and reads its own ``.meta`` format)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import tensorgrid

X = np.array([[0.5, -1.0], [2.0, 0.25], [-0.5, 1.5]])
Y = np.array([1.0, -1.0, 0.5])


def build_and_save(tf: Any, directory: str) -> tuple[str, str]:
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [None, 2], name="x")
        y = tf.placeholder(tf.float64, [None], name="y")
        w = tf.get_variable("w", initializer=tf.constant(np.array([[0.3], [-0.2]])))
        _, h = tf.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, tf.tanh(tf.matmul(h * 0.0 + x, w) + h)),
                             [0, tf.zeros([3, 1], tf.float64)])
        loss = tf.reduce_mean(tf.square(tf.squeeze(h, 1) - y), name="loss")
        train = tf.train.GradientDescentOptimizer(0.3).minimize(loss, tf.train.get_or_create_global_step())
        tf.add_to_collection("train_op", train)
        tf.add_to_collection("learning_rate", 0.3)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(2):
                sess.run(train, {x: X, y: Y})
            prefix = saver.save(sess, os.path.join(directory, "model"))
        meta = os.path.join(directory, "exported.meta")
        tf.train.export_meta_graph(meta)
    return prefix, meta


def restore_and_continue(tf: Any, prefix: str, meta: str, import_scope: Any = None) -> list[Any]:
    with tf.Graph().as_default() as graph:
        saver = tf.train.import_meta_graph(meta, import_scope=import_scope)
        scope = f"{import_scope}/" if import_scope else ""
        train = tf.get_collection("train_op")[0]
        feeds = {graph.get_tensor_by_name(scope + "x:0"): X, graph.get_tensor_by_name(scope + "y:0"): Y}
        with tf.Session() as sess:
            saver.restore(sess, prefix)
            for _ in range(2):
                sess.run(train, feeds)
            return sess.run([graph.get_tensor_by_name(scope + "w:0"), graph.get_tensor_by_name(scope + "loss:0"),
                             tf.train.get_global_step() if not import_scope else
                             graph.get_tensor_by_name(scope + "global_step:0")], feeds) + \
                [tf.get_collection("learning_rate"), len(tf.trainable_variables())]


def test_a_model_continues_from_its_meta_graph_as_in_tensorflow(tf1: Any, tmp_path: Any) -> None:
    results = []
    for name, tf in (("ours", tensorgrid), ("theirs", tf1)):
        os.makedirs(tmp_path / name)
        prefix, meta = build_and_save(tf, str(tmp_path / name))
        results.append(restore_and_continue(tf, prefix, meta))
    ours, theirs = results
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)
    assert ours[2] == theirs[2] == 4
    assert ours[3] == pytest.approx(theirs[3]) == [0.3]  # TensorFlow keeps the float as float32
    assert ours[4] == theirs[4] == 1


def test_import_scope_and_a_bad_file(tmp_path: Any) -> None:
    tf = tensorgrid
    prefix, meta = build_and_save(tf, str(tmp_path))
    scoped = restore_and_continue(tf, prefix, meta, import_scope="restored")
    plain = restore_and_continue(tf, prefix, meta)
    np.testing.assert_array_equal(scoped[0], plain[0])
    (tmp_path / "bad.meta").write_text("{}")
    with tf.Graph().as_default(), pytest.raises(ValueError, match="bad.meta is not a tensorgrid meta graph"):
        tf.train.import_meta_graph(str(tmp_path / "bad.meta"))


def test_a_partitioned_variable_restores_through_the_meta_graph(tmp_path: Any) -> None:
    tf = tensorgrid
    table = np.arange(12.0).reshape(6, 2)
    with tf.Graph().as_default():
        emb = tf.get_variable("emb", initializer=tf.constant(table), partitioner=tf.fixed_size_partitioner(3))
        tf.add_to_collection("lookup", tf.nn.embedding_lookup(emb, [5, 0], name="lookup"))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            prefix = tf.train.Saver().save(sess, str(tmp_path / "model"))
        tf.train.export_meta_graph(str(tmp_path / "model.meta"))
    for scope in (None, "copy"):
        with tf.Graph().as_default():
            saver = tf.train.import_meta_graph(str(tmp_path / "model.meta"), import_scope=scope)
            with tf.Session() as sess:
                saver.restore(sess, prefix)
                np.testing.assert_array_equal(sess.run(tf.get_collection("lookup")[0]), table[[5, 0]])


@pytest.mark.parametrize("as_text", [False, True], ids=["binary", "text"])
def test_a_meta_graph_written_by_tensorflow_is_refused_by_name(tf1: Any, tmp_path: Any, as_text: bool) -> None:
    meta = str(tmp_path / "tensorflow.meta")
    with tf1.Graph().as_default():
        tf1.get_variable("w", initializer=tf1.constant([[1.0, 2.0]]))
        tf1.train.export_meta_graph(meta, as_text=as_text)
    kind = "protobuf text format" if as_text else "binary"
    with tensorgrid.Graph().as_default(), pytest.raises(ValueError, match=f"tensorflow.meta is not a tensorgrid meta "
                                                                           f"graph: it is (a TensorFlow MetaGraphDef in )?{kind}"):
        tensorgrid.train.import_meta_graph(meta)
