"""Text output a person reads holds no Python values: every leaf command, piped and at a terminal.

Each command runs on a copy of the demo's data root (``cli_walk.walked_corpus``:
the session with tool calls, a retried request, a subagent and a compaction,
the ledger synced) with the arguments :func:`cli_walk.fill` gives it, without
``--json``.  Its stdout and stderr must show no ``None``, ``True`` or
``False``, no dict or list repr, no ``datetime.``/``Decimal(``/``PosixPath(``
and no ``<... object at 0x...>`` (issue #31).  The terminal run makes
``sys.stdout.isatty()`` true, so rich draws the tables as a person sees them.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from tests.integration.cli_walk import LEAVES, fill, name, run, walked_corpus

# Python's spellings of values, where a person should read "-", "yes"/"no" or words.
PYTHON_VALUES: Final = re.compile(
    r"(?<![\w\"'])(None|True|False)(?![\w\"'])"  # a bare None/True/False
    r"|\{'|\['"  # a dict or list repr of strings (a tuple's "('" is in code people type)
    r"|datetime\.|Decimal\(|PosixPath\(|WindowsPath\(|dict_(?:keys|values|items)\("
    r"|<[\w.]+ object at 0x|<class '"
)
# Commands that serve or follow forever; the rest all run.
NOT_RUN: Final = {"serve", "projections run"}
# Still printing Python values when this was written, in an area another change owns:
# "command (demo|odd)" -> the issue that fixes it.  Remove an entry when it passes.
KNOWN: Final[dict[str, str]] = {}
# What each command needs besides fill(): a terminal never takes a trace (export -o).
EXTRA: Final = {
    "replay": ["--no-pager", "--include-uncommitted"],
    "export": ["-o", "{out}"],
    "demo": [],
}
_ANSI: Final = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with walked_corpus(tmp_path_factory.mktemp("text-output")) as walked:
        yield walked


def python_values(text: str) -> list[str]:
    """The Python spellings in ``text``, each with a little of its line for the report."""
    return [
        text[max(0, m.start() - 30) : m.end() + 30].replace("\n", "|")
        for m in PYTHON_VALUES.finditer(_ANSI.sub("", text))
    ]


def _takes_a_session(command: Any) -> bool:
    arguments = [p.name for p in command.params if p.param_type_name == "argument"]
    return bool({"session", "sessions", "session_or_path"} & set(arguments))


def _chosen() -> list[Any]:
    """Every leaf command on the demo's session, and those taking one on the odd one too."""
    chosen = []
    for path, command in LEAVES:
        if name(path) in NOT_RUN:
            continue
        for which in ("demo", "odd") if _takes_a_session(command) else ("demo",):
            key = f"{name(path)} ({which})"
            marks = [pytest.mark.xfail(reason=KNOWN[key], strict=True)] if key in KNOWN else []
            chosen.append(pytest.param(path, command, which, id=key, marks=marks))
    return chosen


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
@pytest.mark.parametrize(("path", "command", "which"), _chosen())
def test_text_output_shows_no_python_values(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    corpus: dict[str, Any],
    tmp_path: Path,
    path: list[str],
    command: Any,
    which: str,
    terminal: bool,
) -> None:
    root = tmp_path / "data"
    shutil.copytree(corpus["root"], root)  # some of these write (fork, import, delete)
    out = tmp_path / "out.html"
    args = fill(path, command, corpus, out)
    if which == "odd":
        args = [corpus["odd"] if arg == corpus["session"] else arg for arg in args]
    if name(path) == "ledger forget":  # it forgets only sessions whose traces are gone
        for shard in root.rglob(f"{corpus['child']}_*.jsonl"):
            shard.unlink()
        args = [corpus["child"], "--yes"]
    args += [arg.format(out=tmp_path / "out.jsonl") for arg in EXTRA.get(name(path), [])]
    if terminal:
        monkeypatch.setenv("COLUMNS", "200")  # rich would fold words at 80
        monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    code, stdout, stderr = run(capsys, "--data-root", str(root), *path[1:], *args)

    assert code in (0, 1, 2) if name(path) == "audit" else code in (0, 1), stderr
    # (1: audit's warnings, scan's findings; 2: audit's errors, the odd session has one)
    assert stdout or stderr, f"`{name(path)}` printed nothing"
    assert python_values(stdout) == []
    assert python_values(stderr) == []


@pytest.mark.parametrize(
    "text",
    [
        "needs_rebuild False",
        "None/aborted (max context None)",
        "dangling {'reason': 'context'}",
        "at datetime.datetime(2026, 1, 1)",
        "cost Decimal('0.1')",
        "<pentrace.x.Thing object at 0x7f00>",
        "shards ['a.jsonl']",
    ],
)
def test_the_check_finds_the_python_values_issue_31_named(text: str) -> None:
    assert python_values(text) != []


@pytest.mark.parametrize(
    "text",
    [
        "no session id or 8-hex token starts with 'nosuch'",
        'tool call write_file {"path":"hello.py","text":"print(\'hello\')"}',
        "goal finished: complete after 4 rounds",
        "NoneSuch Trueish",
    ],
)
def test_the_check_leaves_ordinary_text_alone(text: str) -> None:
    assert python_values(text) == []
