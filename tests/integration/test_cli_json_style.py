"""One JSON style: indented at a terminal, compact when piped, --jsonl rows, --fields picks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pentrace.cli.app import main
from tests.integration.cli_sessions_corpus import SID_A, SID_B, SID_C, build_corpus
from tests.integration.test_cli_terminal_width import _screen
from tests.support import cli


@pytest.fixture
def root(tmp_path: Path) -> Path:
    build_corpus(tmp_path)
    return tmp_path


def test_piped_json_is_one_compact_line_and_indented_at_a_terminal(root: Path) -> None:
    piped = cli(root, "sessions", "list", "--json").stdout
    assert piped.count("\n") == 1
    assert json.loads(piped)["sessions"]

    screen = _screen(root, 100, "sessions", "list", "--json")
    assert '\n  "sessions": [' in screen.replace("\r\n", "\n")


def test_replay_json_follows_the_same_style(root: Path) -> None:
    piped = cli(root, "replay", "3f8a", "--json").stdout
    assert piped.count("\n") == 1
    screen = _screen(root, 100, "replay", "3f8a", "--json").replace("\r\n", "\n")
    assert '\n  "items": [' in screen


def test_jsonl_prints_one_row_per_line(root: Path) -> None:
    lines = cli(root, "sessions", "list", "--jsonl", "--sort", "id").stdout.splitlines()
    assert [json.loads(line)["session_id"] for line in lines] == sorted([SID_A, SID_B, SID_C])
    items = cli(root, "replay", "3f8a", "--jsonl").stdout.splitlines()
    document = json.loads(cli(root, "replay", "3f8a", "--json").stdout)
    assert [json.loads(line) for line in items] == document["items"]


def test_fields_picks_fields_in_sessions_list_and_search(root: Path) -> None:
    rows = json.loads(
        cli(root, "sessions", "list", "--json", "--fields", "short_id,tokens").stdout
    )["sessions"]
    assert rows
    assert all(set(row) == {"short_id", "tokens"} for row in rows)
    hits = cli(root, "search", "files", "--jsonl", "--fields", "session_id,highlights").stdout
    assert hits
    assert all(set(json.loads(h)) == {"session_id", "highlights"} for h in hits.splitlines())


@pytest.mark.parametrize(
    ("args", "listed"),
    [
        (["sessions", "list", "--json", "--fields", "id,model"], "ref, short_id, project"),
        (["search", "x", "--json", "--fields", "text"], "snippet, highlights"),
        (["stats", "tokens", "--json", "--fields", "tokens"], "key, requests, usage_records"),
    ],
)
def test_an_unknown_field_is_a_usage_error_listing_the_fields(
    root: Path, capsys: pytest.CaptureFixture[str], args: list[str], listed: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-root", str(root), *args])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.startswith("error: --fields: unknown field(s) ")
    assert listed in err


def test_fields_without_json_is_refused_rather_than_ignored(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-root", str(root), "sessions", "list", "--fields", "short_id"])
    assert exit_info.value.code == 2
    assert "--fields picks the fields of --json or --jsonl output" in capsys.readouterr().err
