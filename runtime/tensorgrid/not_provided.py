"""The TF1 names tensorgrid leaves out on purpose, and the error that says so.

A TF1 program that reaches ``tf.contrib`` or ``tf.keras`` should learn that tensorgrid does
not provide it (or not yet), and where the list of what it provides is, rather than read
Python's bare ``module 'tensorgrid' has no attribute 'contrib'``. tensorgrid's module
``__getattr__`` (PEP 562, ``module_getattr``) raises ``NotProvidedError`` for the names below; it is an AttributeError, so
``hasattr(tf, "contrib")`` stays False and ``getattr(tf, "contrib", None)`` gives None, as a
program probing for optional namespaces expects.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NoReturn

API_DOC = "docs/api.md"
"""The page listing, by namespace, what tensorgrid provides."""


@dataclasses.dataclass(frozen=True)
class Absence:
    """Why a TF1 name is missing and what to use instead."""

    reason: str
    """What the name is in TensorFlow and why tensorgrid lacks it (plus any replacement)."""
    planned: bool = False
    """True when the name is being built ("not yet"), False when it is left out."""


ABSENT_NAMESPACES: dict[str, Absence] = {
    "contrib": Absence("TF1's contributed modules, removed in TensorFlow 2; tf.contrib.layers is tf.layers, "
                       "tf.contrib.lookup is tf.lookup"),
    "keras": Absence("tensorgrid implements TF1's graph API, not Keras; tf.layers gives TF1's layers"),
    "image": Absence("TF1's image ops (decoding, resizing, augmentation) are not implemented; "
                     "decode images in Python and feed them, or use tf.py_func"),
    "graph_util": Absence("freezing graphs into TensorFlow's GraphDef files is not implemented; "
                          "Graph.as_graph_def() and tf.import_graph_def are here"),
    "math": Absence("the tf.math namespace of later TF1 releases is not provided; "
                    "its common functions are at the top level (tf.log, tf.reduce_sum, tf.sigmoid, ...)"),
    "GraphDef": Absence("TensorFlow's GraphDef protocol buffer (tf.GraphDef() then ParseFromString of a .pb file) "
                        "is not read: tensorgrid's GraphDef is its own; Graph.as_graph_def() gives one that "
                        "tf.import_graph_def takes"),
}
"""Top-level names of TensorFlow 2.21's ``tf.compat.v1`` (or TF 1.15) that TF1 programs commonly
reach and tensorgrid does not have, by name."""


class NotProvidedError(AttributeError):
    """A TF1 name tensorgrid deliberately does not provide (yet): the message names it, says
    why and points to the list of what is provided."""


def not_provided_error(module_name: str, name: str) -> AttributeError:
    """The error for ``<module>.<name>``: NotProvidedError for a name in ABSENT_NAMESPACES,
    Python's plain AttributeError for any other."""
    absence = ABSENT_NAMESPACES.get(name)
    if absence is None:
        return AttributeError(f"module {module_name!r} has no attribute {name!r}")
    status = "does not provide tf.{name} yet" if absence.planned else "does not provide tf.{name}"
    return NotProvidedError(f"tensorgrid {status.format(name=name)}: {absence.reason}. "
                            f"What tensorgrid provides, by namespace, is in {API_DOC}.")


def module_getattr(module_name: str) -> Callable[[str], NoReturn]:
    """A module's PEP 562 ``__getattr__``, called only for names the module lacks."""

    def missing_attribute(name: str) -> NoReturn:
        raise not_provided_error(module_name, name)

    return missing_attribute
