"""Dependencies point inward: each layer imports only the layers beneath it (docs/architecture.md).

Read from the source with ``ast``, so an import inside a function counts as
much as one at the top; only ``if TYPE_CHECKING:`` blocks are left out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Which pentrace packages each layer may import (besides its own).
ALLOWED: dict[str, frozenset[str]] = {
    "domain": frozenset({"pentrace.errors", "pentrace.values"}),
    "projections": frozenset({"pentrace.domain", "pentrace.errors", "pentrace.values"}),
    "infrastructure": frozenset(
        {"pentrace.domain", "pentrace.projections", "pentrace.errors", "pentrace.values"}
    ),
}
# Libraries that do I/O or belong to an outer layer, which the pure layers never import.
IMPURE = ("sqlalchemy", "psycopg", "typer", "starlette", "uvicorn", "watchfiles", "httpx", "rich")


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every import of ``path`` outside ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def violations(layer: str) -> list[str]:
    own = f"pentrace.{layer}"
    allowed = ALLOWED[layer] | {own}
    found = []
    for path in sorted((REPO / layer).rglob("*.py")):
        for line, module in imports(path):
            where = f"{path.relative_to(REPO)}:{line} imports {module}"
            if (
                module.startswith("pentrace")
                and not any(module == ok or module.startswith(ok + ".") for ok in allowed)
            ) or (layer != "infrastructure" and module.split(".")[0] in IMPURE):
                found.append(where)
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_beneath_it(layer: str) -> None:
    assert violations(layer) == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "import pentrace.cli.app\n"
        "if TYPE_CHECKING:\n"
        "    from pentrace.service import app\n"
        "def f():\n"
        "    from pentrace.infrastructure.trace import reader\n"
    )
    assert list(imports(module)) == [
        (1, "typing"),
        (2, "pentrace.cli.app"),
        (6, "pentrace.infrastructure.trace"),
    ]
