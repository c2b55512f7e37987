"""The switches a TF2 program flips to get TF1's behaviour, which tensorgrid always has.

``tf.disable_v2_behavior()`` and ``tf.disable_eager_execution()`` open most TF1 programs
written against ``tensorflow.compat.v1``. tensorgrid has no eager mode and no TF2
behaviour: ops build a graph and run in a ``tf.Session``, so both calls do nothing, and
``executing_eagerly()`` is False, as TensorFlow's is once they have been called.
"""

from __future__ import annotations


def disable_v2_behavior() -> None:
    """Does nothing: tensorgrid behaves as TF1 (graph mode, sessions) from the start."""


def disable_eager_execution() -> None:
    """Does nothing: tensorgrid never executes eagerly."""


def executing_eagerly() -> bool:
    """False: ops build graphs, and a ``tf.Session`` runs them."""
    return False
