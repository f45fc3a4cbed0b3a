"""A name that matches nothing, and a window that ends before it starts, fail one way everywhere.

Every leaf command that takes a session (an argument, or ``--session``) is run
with a reference no session has, and every command with ``--since`` and
``--until`` with the two reversed: each must print one ``error:`` line (and
hints) on stderr, nothing on stdout, and exit with code 2 (ADR 0092).  Before
issue #31 ``ledger tail --session nosuch`` printed an empty table with exit
code 0, ``show nosuch`` exited 1 and ``scan nosuch`` 2, and a reversed window
was an empty table.  The commands come from the walk (``cli_walk``), so a new
command that takes a session or a window is checked without touching this file.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from tests.integration.cli_walk import LEAVES, assert_one_line_error, fill, name, run, walked_corpus

NOBODY: Final = "0bad0bad"
SESSION_ARGUMENTS: Final = {"session", "sessions", "session_or_path"}
NOT_RUN: Final = {"serve", "projections run", "demo"}


def _arguments(command: Any) -> set[str]:
    return {p.name for p in command.params if p.param_type_name == "argument"}


def _options(command: Any) -> set[str]:
    return {opt for p in command.params if p.param_type_name == "option" for opt in p.opts}


SESSION_TAKERS: Final = [
    (p, c)
    for p, c in LEAVES
    if name(p) not in NOT_RUN and (SESSION_ARGUMENTS & _arguments(c) or "--session" in _options(c))
]
WINDOWED: Final = [
    (p, c) for p, c in LEAVES if {"--since", "--until"} <= _options(c) and name(p) not in NOT_RUN
]
FILE_TAKERS: Final = [
    (p, c)
    for p, c in LEAVES
    if any("path of a trace file" in (getattr(a, "help", "") or "") for a in c.params)
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with walked_corpus(tmp_path_factory.mktemp("not-found")) as walked:
        yield walked


@pytest.fixture
def root(corpus: dict[str, Any], tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(corpus["root"], copy)  # delete, fork and forget would write
    return copy


@dataclass(frozen=True)
class Walk:
    """One run of the walk: the corpus, a copy of its root, and a folder for outputs."""

    capsys: pytest.CaptureFixture[str]
    corpus: dict[str, Any]
    root: Path
    folder: Path

    def args(self, path: list[str], command: Any, reference: str | None = None) -> list[str]:
        """The command's arguments (:func:`fill`), the session replaced by ``reference``."""
        args = fill(path, command, self.corpus, self.folder / "out.html")
        if reference is None:
            return args
        return [reference if arg == self.corpus["session"] else arg for arg in args]

    def run(self, *argv: str) -> tuple[int, str, str]:
        """``pentrace --data-root ROOT ARGV``: exit code, stdout, stderr."""
        return run(self.capsys, "--data-root", str(self.root), *argv)


@pytest.fixture
def walk(
    capsys: pytest.CaptureFixture[str], corpus: dict[str, Any], root: Path, tmp_path: Path
) -> Walk:
    return Walk(capsys, corpus, root, tmp_path)


def assert_usage_failure(code: int, out: str, err: str) -> None:
    assert code == 2, err
    assert out == ""
    assert_one_line_error(err)


def test_the_walk_reaches_every_command_that_names_a_session_or_a_window() -> None:
    takers = {name(p) for p, _ in SESSION_TAKERS}
    assert {"show", "replay", "export", "fork", "delete", "report", "resume-check"} <= takers
    assert {"audit", "scan", "search", "ledger tail", "ledger events", "ledger forget"} <= takers
    assert {"list", "search", "stats tokens", "stats cost"} <= {name(p) for p, _ in WINDOWED}
    assert {name(p) for p, _ in FILE_TAKERS} == {"show", "audit", "resume-check"}


@pytest.mark.parametrize(
    ("path", "command"), SESSION_TAKERS, ids=[name(p) for p, _ in SESSION_TAKERS]
)
def test_a_session_that_does_not_exist_is_one_error_and_exit_code_2(
    walk: Walk, path: list[str], command: Any
) -> None:
    args = walk.args(path, command, NOBODY)
    if "--session" in _options(command):
        args += ["--session", NOBODY]
    assert NOBODY in args

    code, out, err = walk.run(*path[1:], *args)

    assert_usage_failure(code, out, err)
    assert f"'{NOBODY}'" in err.splitlines()[0]


@pytest.mark.parametrize(("path", "command"), FILE_TAKERS, ids=[name(p) for p, _ in FILE_TAKERS])
def test_a_trace_file_that_does_not_exist_is_the_same_error(
    walk: Walk, path: list[str], command: Any
) -> None:
    missing = walk.folder / "gone.jsonl"

    code, out, err = walk.run(*path[1:], *walk.args(path, command, str(missing)))

    assert_usage_failure(code, out, err)
    assert err.splitlines()[0] == f"error: trace file {missing} does not exist"


@pytest.mark.parametrize(("path", "command"), WINDOWED, ids=[name(p) for p, _ in WINDOWED])
def test_a_window_that_ends_before_it_starts_is_one_error_and_exit_code_2(
    walk: Walk, path: list[str], command: Any
) -> None:
    args = walk.args(path, command)
    window = ["--since", "2026-12-10", "--until", "2026-12-01"]

    code, out, err = walk.run(*path[1:], *args, *window)

    assert_usage_failure(code, out, err)
    assert err.splitlines()[0] == (
        "error: --since '2026-12-10' is after --until '2026-12-01': expected the start of "
        "the window before its end"
    )
    # One day is a window: the same bounds in order are fine.
    same_day = ["--since", "2026-12-01", "--until", "2026-12-01"]
    assert walk.run(*path[1:], *args, *same_day)[0] == 0


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["export", "{session}", "--shard", "9", "-o", "{out}"],
            "has no shard 009 (it has 001, 002)",
        ),
        (["fork", "{session}", "--at-turn", "99"], "expected a turn between 1 and 3"),
        (["fork", "{session}", "--at-event", "9999"], "expected an event position between 1 and"),
        (["export", "{session}", "--shard", "0", "-o", "{out}"], "expected a shard index"),
    ],
)
def test_a_position_past_the_session_is_one_error_and_exit_code_2(
    walk: Walk, argv: list[str], said: str
) -> None:
    out_file = walk.folder / "x.jsonl"
    args = [a.format(session=walk.corpus["session"], out=out_file) for a in argv]

    code, out, err = walk.run(*args)

    assert_usage_failure(code, out, err)
    assert said in err.splitlines()[0]
    assert not out_file.exists()
