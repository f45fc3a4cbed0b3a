"""Quick commands start fast: the heavy libraries load only with the commands that use them."""

from __future__ import annotations

import subprocess
import sys

import typer

from pentrace.cli.app import app
from pentrace.cli.lazy import LazyGroup

HEAVY = (
    "sqlalchemy",
    "psycopg",
    "eventsourcing",
    "starlette",
    "uvicorn",
    "jinja2",
    "cairosvg",
    "opentelemetry",
)


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.split()


def test_importing_the_cli_loads_no_heavy_library() -> None:
    assert _loaded_after("import pentrace.cli.app") == []


def test_running_a_lazy_command_loads_what_it_needs() -> None:
    loaded = _loaded_after(
        "from typer.testing import CliRunner\n"
        "from pentrace.cli.app import app\n"
        "CliRunner().invoke(app, ['ledger', '--help'])"
    )
    assert "sqlalchemy" in loaded


def test_the_opentelemetry_sdk_loads_only_when_spans_are_exported() -> None:
    listed = _loaded_after(
        "from typer.testing import CliRunner\n"
        "from pentrace.cli.app import app\n"
        "CliRunner().invoke(app, ['otel', 'export', '--help'])"
    )
    assert "opentelemetry" not in listed
    exported = _loaded_after(
        "import tempfile\n"
        "from typer.testing import CliRunner\n"
        "from pentrace.cli.app import app\n"
        "root = tempfile.mkdtemp()\n"
        "CliRunner().invoke(app, ['--data-root', root, 'otel', 'export', '--endpoint', 'ftp://x'])"
    )
    assert "opentelemetry" in exported


def test_every_lazy_command_resolves_to_a_command_with_its_name() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, LazyGroup)
    ctx = group.make_context("pentrace", [], resilient_parsing=True)
    names = group.list_commands(ctx)
    for name in LazyGroup.lazy_commands:
        assert name in names
        command = group.get_command(ctx, name)
        assert command is not None
        assert command.name == name
