"""The op registry: one entry per op type, and the gradient rule of each type.

An op type is registered once (by its constructor module in ``ops/``) with the facts
the executor and the placer need: whether it has state (never pruned, never
constant-folded) and which inputs take a variable reference instead of a value.
Gradient rules are registered beside the constructors with ``RegisterGradient``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional


@dataclasses.dataclass(frozen=True)
class OpDef:
    """What every layer may ask about an op type."""

    type: str
    """The op type name, e.g. ``MatMul``."""
    is_stateful: bool = False
    """Reads or writes state outside its inputs (variables, queues, random generators)."""
    ref_inputs: frozenset[int] = frozenset()
    """Input positions that receive the variable itself (to update it) rather than its value."""
    ref_outputs: frozenset[int] = frozenset()
    """Output positions that are a variable reference (VariableV2, Assign...)."""


class _EveryPosition(frozenset[int]):
    """``ref_inputs`` of an op that receives every variable input as the variable itself."""

    def __contains__(self, position: object) -> bool:
        return True

    def __bool__(self) -> bool:
        return True


EVERY_POSITION: frozenset[int] = _EveryPosition()
"""For functional ops (If, While): a variable captured by reference reaches the function as
the variable, so an assign inside a branch updates it; the op runs on the variable's device."""

_OP_DEFS: dict[str, OpDef] = {}
_GRADIENTS: dict[str, Optional[Callable[..., Any]]] = {}


def register_op(
    op_type: str,
    *,
    stateful: bool = False,
    ref_inputs: tuple[int, ...] | frozenset[int] = (),
    ref_outputs: tuple[int, ...] = (),
) -> OpDef:
    inputs = ref_inputs if isinstance(ref_inputs, frozenset) else frozenset(ref_inputs)
    op_def = OpDef(op_type, stateful, inputs, frozenset(ref_outputs))
    existing = _OP_DEFS.get(op_type)
    if existing is not None and existing != op_def:
        raise KeyError(f"Op type {op_type!r} is already registered with a different definition")
    _OP_DEFS[op_type] = op_def
    return op_def


def get_op_def(op_type: str) -> OpDef:
    try:
        return _OP_DEFS[op_type]
    except KeyError:
        raise KeyError(
            f"Unknown op type {op_type!r}; registered op types are: {', '.join(sorted(_OP_DEFS))}"
        ) from None


def registered_op_types() -> list[str]:
    return sorted(_OP_DEFS)


class RegisterGradient:
    """Decorator registering the gradient rule of an op type (TF's ``tf.RegisterGradient``).

    A rule is called as ``fn(op, *output_grads)`` and returns one gradient (or None)
    per input of ``op``.
    """

    def __init__(self, op_type: str) -> None:
        if not isinstance(op_type, str):
            raise TypeError(f"op_type must be a string, got {op_type!r}")
        self._op_type = op_type

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if self._op_type in _GRADIENTS:
            raise KeyError(f"Gradient for op type {self._op_type!r} is already registered")
        _GRADIENTS[self._op_type] = fn
        return fn


def NotDifferentiable(op_type: str) -> None:  # noqa: N802 - TensorFlow's public name
    """Declares that ops of this type pass no gradient to their inputs."""
    _GRADIENTS[op_type] = None


no_gradient = NotDifferentiable


def gradient_function(op_type: str) -> Optional[Callable[..., Any]]:
    """The rule for ``op_type``; raises LookupError when none was declared."""
    try:
        return _GRADIENTS[op_type]
    except KeyError:
        raise LookupError(f"No gradient defined for operation type {op_type!r}") from None
