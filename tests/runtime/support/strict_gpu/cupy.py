"""``import cupy`` in a task process started with ``TENSORGRID_FAKE_GPU=strict``: the
strict stand-in of ``tests/runtime/support/strict_cupy.py`` (not a GPU; its docstring says what it is).

``cluster_processes.task_environment`` puts this folder first on such a process's
``PYTHONPATH``; nothing else does, and the tensorgrid package never imports it.
"""

import importlib.util
import os
import sys

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "strict_cupy.py")
_spec = importlib.util.spec_from_file_location(__name__, _PATH)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
sys.modules[__name__] = _module
_spec.loader.exec_module(_module)
