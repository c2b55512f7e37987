"""``tf.import_graph_def`` with TF1's arguments: the nodes land under ``import/`` (or ``name``),
``input_map`` swaps a graph's input for a tensor of the importing graph, ``return_elements``
hands back tensors and operations; the results match TensorFlow's ``tf.compat.v1``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid


def run(tf: Any) -> tuple[list[Any], set[str]]:
    with tf.Graph().as_default() as source:
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        w = tf.constant([[1.0], [-2.0]], name="w")
        tf.add(tf.matmul(x, w), 0.5, name="y")
        tf.identity(tf.cond(tf.reduce_sum(x) > 0, lambda: tf.reduce_sum(x) * 2.0, lambda: tf.constant(-1.0)),
                    name="sign")
    graph_def = source.as_graph_def()
    with tf.Graph().as_default() as target:
        fed = tf.constant([[1.0, 1.0], [3.0, 0.5]], name="fed")
        y, op = tf.import_graph_def(graph_def, input_map={"x:0": fed}, return_elements=["y:0", "y"])
        sign, = tf.import_graph_def(graph_def, input_map={"x": fed * -1.0}, return_elements=["sign:0"],
                                    name="again")
        with tf.Session() as sess:
            values = sess.run([y, sign])
        return values + [op.name, y.name, sign.name], {o.name.split("/")[0] for o in target.get_operations()
                                                             if o.name.split("/")[-1] in ("x", "w", "sign")}


def test_import_graph_def_agrees_with_tensorflow(tf1: Any) -> None:
    ours, ours_names = run(tensorgrid)
    theirs, theirs_names = run(tf1)
    np.testing.assert_allclose(ours[0], theirs[0])
    assert ours[1] == theirs[1] == -1.0
    assert ours[2:] == theirs[2:] == ["import/y", "import/y:0", "again/sign:0"]
    assert ours_names == theirs_names == {"import", "again"}  # every imported node under its prefix


def test_bad_imports_name_what_is_wrong() -> None:
    tf = tensorgrid
    with tf.Graph().as_default() as source:
        tf.placeholder(tf.float32, [2], name="x")
    graph_def = source.as_graph_def()
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"not found in graph_def: \[nope:0\]"):
            tf.import_graph_def(graph_def, input_map={"nope:0": tf.constant([1.0, 2.0])})
        with pytest.raises(ValueError, match="was of type float32 in graph_def"):
            tf.import_graph_def(graph_def, input_map={"x:0": tf.constant([1, 2])})
        with pytest.raises(ValueError, match="Requested return_element 'z:0' not found"):
            tf.import_graph_def(graph_def, return_elements=["z:0"])
