"""docs/cli.md "Conventions", enforced on every command the typer app has.

The walk uses :func:`pentrace.cli.docgen.iter_commands`, so a command added
later is checked without touching this file: ``-h`` works, a bad option is one
``error:`` line on stderr with exit code 2 (no click box, no traceback), a
missing data root is refused, and ``--json`` prints valid JSON on a small data
root.  Arguments are filled in by their names (a SESSION gets a short id ...).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pentrace.cli import docgen
from pentrace.cli.app import app, main
from pentrace.cli.demo import record_demo_session
from pentrace.infrastructure.storage.layout import DataRoot
from tests.otel_support import Receiver

COMMANDS = list(docgen.iter_commands())
IDS = [" ".join(path) for path, _ in COMMANDS]
LEAVES = [(path, command) for path, command in COMMANDS if not hasattr(command, "list_commands")]

PENGUIN_LEDGER = Path(__file__).parents[1] / "fixtures" / "penguin" / "penguin_ledger.db"
# Commands that write a root of their own, or exist to print the version.
NO_ROOT_NEEDED = {"import", "demo", "version", "ledger import-penguin"}
NEVER_RUN = {"demo", "serve", "projections run"}  # with --json; a missing root stops them all


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The console entry point in process: exit code, stdout, stderr."""
    code: Any = 0
    try:
        main(list(argv))
    except SystemExit as done:
        code = done.code if done.code is not None else 0
    captured = capsys.readouterr()
    assert isinstance(code, int), code
    return code, captured.out, captured.err


def assert_one_line_error(err: str) -> None:
    lines = err.splitlines()
    assert lines, "nothing on stderr"
    assert lines[0].startswith("error: "), err
    assert all(line.startswith(("error: ", "hint: ")) for line in lines), err
    assert "╭" not in err
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("conventions")
    root = base / "data"
    main_id, child_id = record_demo_session(DataRoot(root), datetime(2026, 11, 3, 9, tzinfo=UTC))
    other = base / "other"
    record_demo_session(DataRoot(other), datetime(2026, 10, 1, 8, tzinfo=UTC))
    trace = next(other.rglob("*_001.jsonl"))
    synced = CliRunner().invoke(app, ["--data-root", str(root), "ledger", "sync"])
    assert synced.exit_code == 0, synced.output
    receiver = Receiver().start()  # `otel export` sends its spans somewhere real
    yield {"root": root, "session": main_id[-8:], "child": child_id, "trace": trace,
           "receiver": receiver.url}  # fmt: skip
    receiver.stop()


def fill(path: list[str], command: Any, corpus: dict[str, Any], out: Path) -> list[str]:
    """Arguments and required options for ``command``, chosen by their names."""
    by_name = {
        "session": corpus["session"],
        "sessions": corpus["session"],
        "session_or_path": corpus["session"],
        "file": str(corpus["trace"]),
        "path": str(corpus["trace"]),
        "paths": str(corpus["trace"]),
        "name": "tokens",
        "query": "hello",
    }
    args: list[str] = []
    for param in command.params:
        if param.param_type_name == "argument" and (param.required or param.name in by_name):
            args.append(by_name.get(param.name, "x"))
        elif param.param_type_name == "option" and param.required:
            args += [param.opts[0], str(out) if param.name == "output" else "0"]
        elif "--yes" in getattr(param, "opts", ()):
            args.append("--yes")
    if path[1:] == ["prune"]:
        args += ["--older-than", "3650d", "--dry-run"]
    if path[1:] == ["import"]:
        args += ["--project", "imported", "--agent", "agent"]
    if path[1:] == ["otel", "export"]:
        args += ["--endpoint", corpus["receiver"], "--settle", "0"]
    if path[1:] == ["ledger", "import-penguin"]:  # a ledger Penguin wrote, not a trace
        shutil.copy(PENGUIN_LEDGER, out.with_name("penguin.db"))
        args = [str(out.with_name("penguin.db"))]
    return args


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_minus_h_prints_plain_help(
    capsys: pytest.CaptureFixture[str], path: list[str], command: Any
) -> None:
    code, out, err = run(capsys, *path[1:], "-h")
    assert code == 0, err
    assert out.startswith(f"Usage: {' '.join(path)} ")
    assert "-h, --help" in out
    assert "<bool>" not in out
    assert "╭" not in out


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_a_bad_option_is_one_error_line_and_exit_code_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, path: list[str], command: Any
) -> None:
    code, out, err = run(capsys, "--data-root", str(tmp_path), *path[1:], "--no-such-option")
    assert code == 2
    assert out == ""
    assert_one_line_error(err)
    first = err.splitlines()[0]
    assert first.startswith(f"error: {' '.join(path)}: no such option: --no-such-option")
    assert err.splitlines()[1] == f"hint: `{' '.join(path)} -h` shows the usage"


def test_version_and_no_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.startswith("pentrace ")
    assert run(capsys, "-V")[1] == out


@dataclass(frozen=True)
class Leaf:
    """One leaf command under test, and how to call it on a data root."""

    path: list[str]
    command: Any
    corpus: dict[str, Any]
    capsys: pytest.CaptureFixture[str]

    def args(self, out: Path) -> list[str]:
        """Its arguments and required options on the corpus (see :func:`fill`)."""
        return fill(self.path, self.command, self.corpus, out)

    def run(self, root: Path, *argv: str) -> tuple[int, str, str]:
        """The command on ``root`` with ``argv``: exit code, stdout, stderr."""
        return run(self.capsys, "--data-root", str(root), *self.path[1:], *argv)


@pytest.fixture
def leaf(
    request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str], corpus: dict[str, Any]
) -> Leaf:
    path, command = request.param
    return Leaf(path, command, corpus, capsys)


def over_leaves(keep: Callable[[list[str], Any], bool]) -> pytest.MarkDecorator:
    """Parametrize a test's ``leaf`` over the leaf commands ``keep(path, command)`` selects."""
    chosen = [(p, c) for p, c in LEAVES if keep(p, c)]
    return pytest.mark.parametrize(
        "leaf", chosen, ids=[" ".join(p) for p, _ in chosen], indirect=True
    )


@over_leaves(lambda p, _c: " ".join(p[1:]) not in NO_ROOT_NEEDED)
def test_a_missing_data_root_is_refused(leaf: Leaf, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-root"
    code, _, err = leaf.run(missing, *leaf.args(tmp_path / "out.html"))
    assert code == 2, err
    assert_one_line_error(err)
    assert err.startswith(f"error: data root {missing} does not exist (from --data-root)")
    assert not missing.exists()


@over_leaves(
    lambda p, c: (
        any("--json" in getattr(param, "opts", ()) for param in c.params)
        and " ".join(p[1:]) not in NEVER_RUN
    )
)
def test_json_output_is_valid_json(leaf: Leaf, tmp_path: Path) -> None:
    root = tmp_path / "data"
    shutil.copytree(leaf.corpus["root"], root)  # some of these write (fork, import, forget)
    args = leaf.args(tmp_path / "out")
    if leaf.path[1:] == ["ledger", "forget"]:  # it forgets only sessions whose traces are gone
        for shard in root.rglob(f"{leaf.corpus['child']}_*.jsonl"):
            shard.unlink()
        args = [leaf.corpus["child"], "--yes"]
    code, out, err = leaf.run(root, *args, "--json")
    assert code in (0, 1), err  # 1: audit's warnings, still reported as JSON
    assert "Traceback" not in err
    try:
        json.loads(out)
    except json.JSONDecodeError:
        # A stream (ledger tail): one document per line.
        lines = [line for line in out.splitlines() if line]
        assert lines, f"`{' '.join(leaf.path)} --json` printed nothing"
        for line in lines:
            json.loads(line)
