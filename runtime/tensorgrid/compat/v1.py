"""``tensorgrid.compat.v1`` is the ``tensorgrid`` module itself, under a second name.

TensorFlow 2's ``tf.compat.v1`` holds the TF1 API; tensorgrid's whole API is TF1's, so
``import tensorgrid.compat.v1 as tf`` gives the same namespace as ``import tensorgrid as
tf``, with the same objects (``tensorgrid.compat.v1.Session is tensorgrid.Session``). The
module replaces itself in ``sys.modules`` with ``tensorgrid`` once imported, which the import
system supports: the importer and ``tensorgrid.compat.v1`` both get ``tensorgrid``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import tensorgrid

if TYPE_CHECKING:
    # What type checkers see in this module: everything tensorgrid has.
    from tensorgrid import *  # noqa: F403

sys.modules[__name__] = tensorgrid
