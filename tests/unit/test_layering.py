"""Dependencies point inward: each layer imports only the layers beneath it (docs/architecture.md).

Read from the source with ``ast``, so an import inside a function counts as
much as one at the top; only ``if TYPE_CHECKING:`` blocks are left out.

The outer layers, ``cli/`` and ``service/``, reach ``infrastructure/`` only through
its application layer, ``infrastructure/operations/`` (ADR 0103); that rule counts
``if TYPE_CHECKING:`` imports too, since a type is reached through operations as well.
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
# The one infrastructure package the outer layers (cli/, service/) may import (ADR 0103).
APPLICATION = "pentrace.infrastructure.operations"
OUTER = ("cli", "service")
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


def targets(path: Path, package: str) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of everything ``path`` imports, ``if TYPE_CHECKING:`` included:
    ``from a.b import c`` is ``a.b.c``, and relative imports are resolved in ``package``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def bypasses(folder: Path, package: str) -> list[str]:
    """``file:line imports name`` for each import of ``infrastructure`` beside operations."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        inner = path.relative_to(folder).with_suffix("").parts
        here = ".".join([package, *inner[:-1]])  # the package the module sits in
        for line, name in sorted(targets(path, here)):
            if name.startswith("pentrace.infrastructure") and not (
                name == APPLICATION or name.startswith(APPLICATION + ".")
            ):
                found.append(f"{path.relative_to(folder.parent)}:{line} imports {name}")
    return found


@pytest.mark.parametrize("layer", OUTER)
def test_the_outer_layers_reach_infrastructure_only_through_operations(layer: str) -> None:
    offending = bypasses(REPO / layer, f"pentrace.{layer}")
    assert not offending, "go through pentrace.infrastructure.operations:\n" + "\n".join(offending)


def test_the_check_sees_a_bypass_of_operations(tmp_path: Path) -> None:
    (tmp_path / "cli" / "group").mkdir(parents=True)
    (tmp_path / "cli" / "group" / "m.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from pentrace.infrastructure.operations import documents\n"
        "from pentrace.infrastructure.operations.sessions import DataRoot\n"
        "import pentrace.infrastructure.ledger\n"
        "if TYPE_CHECKING:\n"
        "    from pentrace.infrastructure.otel.live import LiveExporter\n"
        "def f():\n"
        "    from pentrace import infrastructure\n"
        "    from ...infrastructure.search import index\n"
        "    from ...infrastructure import operations\n"
    )
    assert bypasses(tmp_path / "cli", "pentrace.cli") == [
        "cli/group/m.py:4 imports pentrace.infrastructure.ledger",
        "cli/group/m.py:6 imports pentrace.infrastructure.otel.live.LiveExporter",
        "cli/group/m.py:8 imports pentrace.infrastructure",
        "cli/group/m.py:9 imports pentrace.infrastructure.search.index",
    ]
