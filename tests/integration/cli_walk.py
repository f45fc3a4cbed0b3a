"""Walking every ``pentrace`` command: the tree, a small data root, and arguments by name.

``tests/integration/test_cli_conventions.py`` (help, errors, JSON),
``test_cli_text_output.py`` (no Python values in text) and
``test_cli_not_found.py`` (unknown names and reversed windows) walk the same
commands, from :func:`pentrace.cli.docgen.iter_commands`, so a command added
later is checked without touching them.  Arguments are filled in by their names
(a SESSION gets a short id ...), see :func:`fill`.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import pytest
from typer.testing import CliRunner

from pentrace import testing as pt
from pentrace.cli import docgen
from pentrace.cli.app import app, main
from pentrace.cli.demo import record_demo_session
from pentrace.infrastructure.storage.layout import DataRoot
from tests.otel_support import Receiver

COMMANDS: Final = list(docgen.iter_commands())
IDS: Final = [" ".join(path) for path, _ in COMMANDS]
LEAVES: Final = [(p, c) for p, c in COMMANDS if not hasattr(c, "list_commands")]

PENGUIN_LEDGER: Final = Path(__file__).parents[1] / "fixtures" / "penguin" / "penguin_ledger.db"


def name(path: list[str]) -> str:
    """A command's name without ``pentrace``: ``ledger sync``."""
    return " ".join(path[1:])


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
    """stderr is one ``error:`` line, maybe with ``hint:`` lines: no box, no traceback."""
    lines = err.splitlines()
    assert lines, "nothing on stderr"
    assert lines[0].startswith("error: "), err
    assert all(line.startswith(("error: ", "hint: ")) for line in lines), err
    assert "╭" not in err
    assert "Traceback" not in err


ODD_ID: Final = "session-2026-11-02-08-00-00-0dd0dd00"


def _odd_lines() -> list[bytes]:
    """A session whose records leave fields out where the numbers read them: a compaction
    without mode or context that was aborted, then one that never ended."""
    rendered = pt.render_shards(
        [pt.StartSession(), pt.UserInput("hi"), pt.BeginRequest(), pt.EndRequest()],
        session_id=ODD_ID,
        start=datetime(2026, 11, 2, 8, tzinfo=UTC),
    )[0]
    stamp = b'{"timestamp":"2026-11-02T08:00:09.000Z","type":"event_msg","payload":'
    return [
        *rendered,
        stamp + b'{"type":"compaction_begin","reason":"manual"}}',
        stamp + b'{"type":"compaction_end","status":"aborted"}}',
        stamp + b'{"type":"compaction_begin","reason":"context","mode":"summarize"}}',
        stamp + b'{"type":"token_usage","session":{"total":9},"request":{}}}',
    ]


def build_corpus(base: Path) -> dict[str, Any]:
    """The demo's sessions (main, subagent child) in ``base/data`` beside an odd one
    (:func:`_odd_lines`), the ledger synced, and a trace of another root's demo for the
    commands that take a file."""
    root = base / "data"
    main_id, child_id = record_demo_session(DataRoot(root), datetime(2026, 11, 3, 9, tzinfo=UTC))
    pt.write_shards(DataRoot(root), "odd_project", "odd_agent", ODD_ID, [_odd_lines()])
    other = base / "other"
    record_demo_session(DataRoot(other), datetime(2026, 10, 1, 8, tzinfo=UTC))
    trace = next(other.rglob("*_001.jsonl"))
    synced = CliRunner().invoke(app, ["--data-root", str(root), "ledger", "sync"])
    assert synced.exit_code == 0, synced.output
    return {
        "root": root,
        "session": main_id[-8:],
        "child": child_id,
        "odd": ODD_ID[-8:],
        "trace": trace,
    }


@contextlib.contextmanager
def walked_corpus(base: Path) -> Iterator[dict[str, Any]]:
    """:func:`build_corpus` with a real OTLP/HTTP receiver on loopback beside it, where
    ``otel export`` sends its spans; stopped on the way out."""
    receiver = Receiver().start()
    try:
        yield {**build_corpus(base), "receiver": receiver.url}
    finally:
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
