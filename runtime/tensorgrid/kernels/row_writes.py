"""Which kernels report the rows they write to the variables they receive by reference.

A variable knows which of its rows were written since a moment (``execution/written_rows.py``),
so an incremental checkpoint saves only those. The executor counts every variable a kernel
receives by reference as written whole, except at the positions this module lists for the
kernel's op type: a kernel listed here must call ``wrote_rows`` for each of those variables
after writing them. A new kernel that writes a variable therefore needs no declaration to be
safe; it only makes the variable count as written whole until it reports its rows.
"""

from __future__ import annotations

from typing import Any

from tensorgrid.kernels import context

_REPORTED_POSITIONS: dict[str, frozenset[int]] = {}
_NOT_WRITTEN: set[str] = set()


def reports_rows(op_types: tuple[str, ...], positions: tuple[int, ...]) -> None:
    """Declares that the kernels of ``op_types`` report the rows they write to the variables
    at input ``positions``."""
    for op_type in op_types:
        _REPORTED_POSITIONS[op_type] = frozenset(positions)


def writes_no_variable(*op_types: str) -> None:
    """Declares that the kernels of ``op_types`` receive variables by reference without writing
    them (they read them, or hand them to the kernels of a function, which report their own writes)."""
    _NOT_WRITTEN.update(op_types)


def unreported_positions(op_type: str, positions: list[int]) -> list[int]:
    """Of the input ``positions`` where the kernel of ``op_type`` receives a variable, those
    whose writes it does not report: the executor records a whole write there."""
    if op_type in _NOT_WRITTEN:
        return []
    reported = _REPORTED_POSITIONS.get(op_type, frozenset())
    return [p for p in positions if p not in reported]


def wrote_rows(k: context.KernelContext, rows: Any, *variables: Any) -> None:
    """Reports that ``rows`` (indices into the first dimension, on the kernel's device) of each
    of ``variables`` were written; called by a kernel after its writes."""
    host_rows = k.backend.to_numpy(rows).reshape(-1)
    for variable in variables:
        variable.written.wrote_rows(host_rows)
