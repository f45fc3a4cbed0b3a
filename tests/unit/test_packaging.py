"""What a wheel needs from pyproject.toml: every sub-package listed, every import declared.

Editable installs see the whole working tree, so a sub-package missing from
``packages`` or a module-level import of an undeclared (optional) dependency
only shows up when a wheel is installed into a fresh virtualenv.  These checks
read the source tree and the installed metadata, so they run offline.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _package_folders() -> dict[str, Path]:
    """Every folder under a mapped layer folder that holds an ``__init__.py``, by dotted name."""
    found: dict[str, Path] = {}
    for package, folder in SETUPTOOLS["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            relative = init.parent.relative_to(base)
            dotted = ".".join((package, *relative.parts))
            found[dotted] = init.parent
    return found


def _top_level_imports(path: Path) -> Iterator[str]:
    """Root module names imported when ``path`` is imported (not under TYPE_CHECKING or try)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.partition(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.partition(".")[0]


def _requirement_closure(requirements: list[str]) -> set[str]:
    """The distributions installed by ``requirements`` and, transitively, by theirs."""
    seen: set[str] = set()
    todo = [_normal(m.group()) for r in requirements if (m := _REQUIREMENT_NAME.match(r))]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for requirement in importlib.metadata.requires(name) or []:
            # Only unconditional requirements: an extra or a platform marker may be absent.
            match = _REQUIREMENT_NAME.match(requirement)
            if match and ";" not in requirement:
                todo.append(_normal(match.group()))
    return seen


def test_every_sub_package_of_the_layer_folders_is_listed_for_the_wheel() -> None:
    listed = set(SETUPTOOLS["packages"])
    missing = sorted(set(_package_folders()) - listed)
    assert missing == [], f"add these to [tool.setuptools] packages in pyproject.toml: {missing}"


def test_every_module_level_import_is_installed_by_the_core_dependencies() -> None:
    installed = _requirement_closure(PYPROJECT["project"]["dependencies"])
    distributions = importlib.metadata.packages_distributions()
    undeclared: set[str] = set()
    for dotted, folder in _package_folders().items():
        if dotted == "pentrace" or dotted.startswith("pentrace."):
            for module in folder.glob("*.py"):
                for name in _top_level_imports(module):
                    if name in sys.stdlib_module_names or name in ("pentrace", "__future__"):
                        continue
                    owners = {_normal(d) for d in distributions.get(name, [name])}
                    if not owners & installed:
                        undeclared.add(f"{module.relative_to(ROOT)} imports {name}")
    assert sorted(undeclared) == [], "declare these in [project] dependencies"


def test_the_console_script_and_python_dash_m_run_the_same_cli() -> None:
    assert PYPROJECT["project"]["scripts"]["pentrace"] == "pentrace.cli.app:main"
    main_source = (ROOT / "pentrace" / "__main__.py").read_text(encoding="utf-8")
    assert "from pentrace.cli.app import main" in main_source
