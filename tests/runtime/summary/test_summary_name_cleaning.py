"""Summary names that are not valid scope names (``var.name`` such as ``"W1:0"``, spaces, a
leading ``/``) are cleaned as TF1 cleans them, not refused: aymericdamien's
``tensorboard_advanced.py`` writes ``tf.summary.histogram(var.name, var)``. TensorFlow 2.21's
``tf.compat.v1`` is the oracle for the op names and the tags written.
"""

from __future__ import annotations

from typing import Any

import pytest

import tensorgrid

NAMES = [("W1:0", None), ("/leading/slash", None), ("a b", "fam ily"), ("x:0", "f:1"), ("fine-name.2", None)]


def summaries_of(tf: Any, summary_proto: Any) -> tuple[list[str], list[str]]:
    """The summary ops' names and the tags their values carry (read with TensorFlow's
    ``Summary`` message: the values are serialized ``Summary`` protos on both libraries)."""
    with tf.Graph().as_default():
        weights = tf.Variable([1.0, 2.0], name="W1")
        ops = [tf.summary.histogram(name, weights, family=family) for name, family in NAMES]
        ops.append(tf.summary.scalar(weights.name, tf.reduce_sum(weights)))
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            values = session.run(ops)
        tags = [summary_proto.FromString(value).value[0].tag for value in values]
        return [op.op.name for op in ops], tags


@pytest.mark.oracle
def test_summary_names_are_cleaned_as_tensorflow_cleans_them(request: pytest.FixtureRequest) -> None:
    tf1 = request.getfixturevalue("tf1")
    ours = summaries_of(tensorgrid, tf1.Summary)
    theirs = summaries_of(tf1, tf1.Summary)
    assert ours == theirs
    assert ours[1][0] == "W1_0"
