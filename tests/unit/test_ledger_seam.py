"""The backend seam holds: no product module outside the ledger's backend package asks which
database it runs on, and inside it only the modules a backend owns do (ADR 0034, 0078).

What counts as asking: a dialect's name as a string (``"sqlite"``, ``"postgresql"``),
a dialect-specific SQLAlchemy option (``postgresql_where=``, ``sqlite_autoincrement``),
or reading a connection's or URL's backend (``dialect.name``, ``get_backend_name()``,
``drivername``).  The modules that may: each dialect's own module, the registry of
dialects, the URL schemes and the driver errors (the "Adding a ledger backend"
checklist of docs/architecture.md), and the reader of SQLite and Penguin files.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pentrace.infrastructure.ledger.backend.dialect import DIALECTS

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("pentrace", "domain", "infrastructure", "projections", "cli", "service")
BACKEND = ROOT / "infrastructure" / "ledger" / "backend"
# The backend modules that may name a database besides each dialect's own module, and why.
SHARED_OWNERS = {
    "dialect.py": "the registry of dialects (DIALECTS)",
    "connections.py": "the URL schemes each backend accepts",
    "errors.py": "each driver's errors",
    "formats.py": "SQLite and Penguin ledger files",
}
# Each registered dialect's module (a new backend is one more, and this test is unchanged).
DIALECT_MODULES = {f"{type(make()).__module__.rsplit('.', 1)[-1]}.py" for make in DIALECTS.values()}
OWNERS = {*SHARED_OWNERS, *DIALECT_MODULES}
NAMES = frozenset({"sqlite", "postgresql"})
READS = frozenset({"get_backend_name", "drivername"})


def _product_files() -> list[Path]:
    files = [path for folder in PRODUCT for path in (ROOT / folder).rglob("*.py")]
    return sorted(path for path in files if ".venv" not in path.parts)


def _askings(path: Path) -> list[str]:
    """Where ``path`` asks which database it runs on (line: what)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.lower() in NAMES:
                found.append(f"{line}: the name {node.value!r}")
        elif isinstance(node, ast.keyword) and node.arg is not None:
            if node.arg.startswith(("sqlite_", "postgresql_")):
                found.append(f"{line}: the option {node.arg}=")
        elif isinstance(node, ast.Attribute):
            if node.attr in READS:
                found.append(f"{line}: .{node.attr}")
            elif (
                node.attr == "name"
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "dialect"
            ):
                found.append(f"{line}: .dialect.name")
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
            if isinstance(key, str) and key.startswith(("sqlite_", "postgresql_")):
                found.append(f"{line}: the option [{key!r}]")
    return found


def test_the_scan_finds_each_way_of_asking() -> None:
    probe = ROOT / "build" / "seam_probe.py"
    probe.parent.mkdir(exist_ok=True)
    probe.write_text(
        "if conn.dialect.name == 'postgresql': pass\n"
        "url.get_backend_name()\n"
        "Index('i', c, sqlite_where=x)\n"
        "index.dialect_kwargs['postgresql_using'] = 'brin'\n",
        "utf-8",
    )
    try:
        assert sorted(_askings(probe)) == [
            "1: .dialect.name",
            "1: the name 'postgresql'",
            "2: .get_backend_name",
            "3: the option sqlite_where=",
            "4: the option ['postgresql_using']",
        ]
    finally:
        probe.unlink()


@pytest.mark.parametrize("path", _product_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_module_but_a_backends_own_asks_which_database_it_runs_on(path: Path) -> None:
    if path.parent == BACKEND and path.name in OWNERS:
        return
    assert _askings(path) == [], f"{path.relative_to(ROOT)} asks which database it runs on"


def test_the_owners_are_the_backend_modules_that_exist() -> None:
    assert {"sqlite.py", "postgres.py"} <= DIALECT_MODULES
    assert set(OWNERS) <= {path.name for path in BACKEND.glob("*.py")}
