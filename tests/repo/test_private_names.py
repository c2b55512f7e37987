"""A module's underscore names are its own: no other module imports or calls them.

A helper that other modules need is public (``op_util.index_tensor``,
``executor.prune``); an underscore says "only this module relies on it", so it can
change without a search across the packages. Methods and attributes of objects
(``graph._add_op``) are not module-level names and are not checked here.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = {"tensorgrid": ROOT / "runtime", "tensorgrid_operator": ROOT / "operator"}


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for package_root in PACKAGES.values():
        for path in package_root.rglob("*.py"):
            parts = path.relative_to(package_root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if not name.startswith("tensorgrid.v1"):
                modules[name] = path
    return modules


def _top_level_names(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_uses_another_modules_private_names() -> None:
    modules = _modules()
    top_level = {name: _top_level_names(path) for name, path in modules.items()}
    uses = []
    for path in modules.values():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
                for alias in node.names:
                    imported = f"{node.module}.{alias.name}"
                    if imported in modules:
                        aliases[alias.asname or alias.name] = imported
                    elif _is_private(alias.name):
                        uses.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}.{alias.name}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and _is_private(node.attr) and node.attr in top_level[aliases[node.value.id]]):
                uses.append(f"{path.relative_to(ROOT)}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    assert not uses, "make these names public, or keep them in their module: " + "; ".join(sorted(set(uses)))
