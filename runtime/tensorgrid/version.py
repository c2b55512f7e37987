"""``tf.version`` and ``tf.__version__``: which TensorFlow API tensorgrid implements.

TF1 programs print ``tf.__version__`` and compare it to choose a code path (``if
tf.__version__.startswith("1.")``, ``if int(tf.__version__.split(".")[0]) >= 2``). The
version they find is the API tensorgrid implements, TF1's last release, so they take
their TF1 path; tensorgrid's own release is ``TENSORGRID_VERSION`` (the installed
package's version, as ``pip`` knows it).
"""

from __future__ import annotations

import platform
from importlib import metadata

VERSION = "1.15.0"
"""The TensorFlow API version tensorgrid implements: TF 1.15's graph API (``tf.__version__``)."""

try:
    TENSORGRID_VERSION = metadata.version("tensorgrid")
except metadata.PackageNotFoundError:  # imported from a checkout that was never installed
    TENSORGRID_VERSION = "0+unknown"
"""tensorgrid's own version."""

GIT_VERSION = f"tensorgrid-{TENSORGRID_VERSION}"
"""TF1's ``tf.GIT_VERSION`` (``tf.__git_version__``), which TensorFlow fills with ``git describe`` of
its build and programs log beside ``__version__``: here tensorgrid's own release, so a log says
which library ran."""

COMPILER_VERSION = platform.python_compiler()
"""TF1's ``tf.COMPILER_VERSION`` (``tf.__compiler_version__``): the compiler of the Python that runs
tensorgrid's kernels (numpy's), as TensorFlow names the compiler of its own kernels."""
