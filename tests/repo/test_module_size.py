"""A line budget per hand-written module: none over 700 lines.

This project's own rule, so that any module can be read in one sitting and one that grows
past the budget is split along a real seam (see how ``array_ops`` and ``indexing_ops``, or
``graph`` and ``tensor_conversion``, divide their work). (tinygrad, often cited here for its
size, budgets the lines of its whole library, ``sz.py``, not of each module.) The generated
protobuf code under ``runtime/tensorgrid/v1/`` is not counted.
"""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_LINES = 700
GENERATED = ROOT / "runtime" / "tensorgrid" / "v1"


def _hand_written_modules() -> list[pathlib.Path]:
    modules: list[pathlib.Path] = []
    for package in (ROOT / "runtime", ROOT / "operator"):
        modules.extend(p for p in package.rglob("*.py") if GENERATED not in p.parents)
    return sorted(modules)


def test_the_budget_sees_both_packages() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _hand_written_modules()}
    assert "runtime/tensorgrid/framework/graph.py" in names
    assert "operator/tensorgrid_operator/reconcile/reconcile.py" in names
    assert not any(name.startswith("runtime/tensorgrid/v1/") for name in names)


def test_no_hand_written_module_exceeds_the_line_budget() -> None:
    too_long = []
    for path in _hand_written_modules():
        with path.open(encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        if lines > MAX_LINES:
            too_long.append(f"{path.relative_to(ROOT).as_posix()}: {lines} lines")
    assert not too_long, f"modules over the {MAX_LINES}-line budget (split them along a seam): " + ", ".join(too_long)
