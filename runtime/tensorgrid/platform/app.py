"""``tf.app``: ``tf.app.run`` starts a TF1 program, and ``tf.app.flags`` is ``tf.flags``.

``run`` does what TensorFlow's does (absl's ``app.run`` with TensorFlow's tolerant parser):
it parses the command line into ``FLAGS``, keeping flags no one defined, calls ``main`` with
the program name, those flags and the positional words, and exits the process with what
``main`` returns. ``--help`` (also ``-?``, ``--helpshort``, ``--helpfull``) prints the main
module's docstring and the flags to standard output and exits with status 1, as absl does.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, NoReturn, Optional, Sequence

from tensorgrid.platform import flags

_HELP_FLAGS = frozenset(["-?", "-help", "--help", "-helpshort", "--helpshort", "-helpfull", "--helpfull"])


def run(main: Optional[Callable[[list[str]], Any]] = None, argv: Optional[Sequence[str]] = None) -> NoReturn:
    """Parses ``argv`` (``sys.argv`` if None) into ``tf.flags.FLAGS`` and exits with
    ``main(remaining_argv)``; ``main`` defaults to the ``main`` of the ``__main__`` module."""
    main = main or sys.modules["__main__"].main
    argv = sys.argv if argv is None else argv
    if _HELP_FLAGS.intersection(argv[1:list(argv).index("--") if "--" in argv else len(argv)]):
        _print_usage()
        sys.exit(1)
    remaining = flags.FLAGS(argv, known_only=True)
    sys.exit(main(remaining))


def _print_usage() -> None:
    doc = sys.modules["__main__"].__doc__
    if doc:
        print(doc)
    print("flags:\n")
    print(flags.FLAGS.help_text())
    print()
