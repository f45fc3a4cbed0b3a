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
from pathlib import Path
from typing import Any

import pytest

from pentrace.cli.lazy import LazyGroup
from tests.integration.cli_walk import (
    COMMANDS,
    IDS,
    LEAVES,
    assert_one_line_error,
    fill,
    name,
    run,
    walked_corpus,
)

# Commands that write a root of their own, or exist to print the version.
NO_ROOT_NEEDED = {"import", "demo", "version", "ledger import-penguin"}
NEVER_RUN = {"demo", "serve", "projections run"}  # with --json; a missing root stops them all
LEAVES_BY_NAME = [(name(path), command) for path, command in LEAVES]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with walked_corpus(tmp_path_factory.mktemp("conventions")) as walked:
        yield walked


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


ALIASES = list(LazyGroup.aliases.items())


@pytest.mark.parametrize(("old", "new"), ALIASES, ids=[old for old, _ in ALIASES])
def test_an_old_spelling_prints_what_the_command_it_names_prints(
    capsys: pytest.CaptureFixture[str], corpus: dict[str, Any], tmp_path: Path, old: str, new: str
) -> None:
    root = tmp_path / "data"
    shutil.copytree(corpus["root"], root)
    command = dict(LEAVES_BY_NAME)[new]
    args = fill(["pentrace", *new.split()], command, corpus, tmp_path / "out")
    for extra in ([], ["--json"], ["--no-such-option"]):
        now = run(capsys, "--data-root", str(root), *new.split(), *args, *extra)
        before = run(capsys, "--data-root", str(root), *old.split(), *args, *extra)
        assert before[:2] == now[:2], (old, extra)  # exit code and stdout
        # stderr names the command as typed (a usage error's `pentrace sessions list: ...`).
        assert before[2] == now[2].replace(f"pentrace {new}", f"pentrace {old}")
    code, out, _ = run(capsys, *old.split(), "-h")
    assert code == 0
    assert out.startswith(f"Usage: pentrace {old} ")


def test_old_spellings_are_hidden_from_the_help_and_listed_in_the_docs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown = {name for name, _ in LEAVES_BY_NAME}
    docs = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    for old, new in ALIASES:
        assert old not in shown
        assert new in shown
        assert f"| `pentrace {old}` | [`pentrace {new}`]" in docs
    _, top, _ = run(capsys, "-h")
    assert "\n  sessions " not in top


def test_the_help_lists_every_command_under_one_task_heading(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    top = {path[1] for path, _ in COMMANDS if len(path) == 2}
    placed = [name for _, names in LazyGroup.panels for name in names]
    assert sorted(placed) == sorted(top)  # each command once; a new one needs a heading
    assert "Other commands:" not in out
    headings = [line[:-1] for line in out.splitlines() if line.endswith(":") and line[0] != " "]
    assert headings == ["Options", *(title for title, _ in LazyGroup.panels)]
    # Each heading's commands follow it, in the order the panel gives.
    for title, names in LazyGroup.panels:
        block = out.split(f"\n{title}:\n", 1)[1].split("\n\n", 1)[0]
        assert [line.split()[0] for line in block.splitlines()] == list(names)
