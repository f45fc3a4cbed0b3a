"""Every --since/--until reads the same forms, against the CLI's clock (fixed here)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pentrace.cli import options
from pentrace.cli.app import app, main
from pentrace.cli.demo import record_demo_session
from pentrace.infrastructure.storage.layout import DataRoot
from tests.support import cli_json

START = datetime(2026, 11, 28, 22, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("times") / "data"
    record_demo_session(DataRoot(data), START)
    assert CliRunner().invoke(app, ["--data-root", str(data), "ledger", "sync"]).exit_code == 0
    return data


def at(monkeypatch: pytest.MonkeyPatch, moment: datetime) -> None:
    monkeypatch.setattr(options, "now", lambda: moment)


def rows(root: Path, *args: str) -> list[object]:
    value = cli_json(root, *args)
    found: list[object] = value["rows"] if "rows" in value else value["sessions"]
    return found


@pytest.mark.parametrize("command", [["stats", "tokens"], ["sessions", "list"]])
def test_an_age_counts_back_from_the_clock(
    root: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    at(monkeypatch, datetime(2026, 12, 1, 12, tzinfo=UTC))
    assert rows(root, *command, "--since", "7d")
    assert not rows(root, *command, "--since", "2d")
    at(monkeypatch, datetime(2026, 12, 20, tzinfo=UTC))
    assert not rows(root, *command, "--since", "7d")
    assert rows(root, *command, "--since", "4w")


def test_stats_reads_today_and_yesterday_as_utc_days(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at(monkeypatch, datetime(2026, 11, 29, 8, tzinfo=UTC))
    assert rows(root, "stats", "tokens", "--since", "yesterday", "--until", "yesterday")
    assert not rows(root, "stats", "tokens", "--since", "today")
    assert rows(root, "stats", "tokens", "--until", "2026-11-28T23:00:00+02:00")


@pytest.mark.parametrize(
    "command",
    [
        ["stats", "tokens"], ["stats", "cost"], ["stats", "tools"], ["stats", "requests"],
        ["stats", "sessions"], ["stats", "tree"], ["sessions", "list"], ["search", "hello"],
    ],
)  # fmt: skip
@pytest.mark.parametrize("value", ["banana", "2026-13-45", "7 days"])
def test_anything_else_is_a_usage_error_naming_option_and_value(
    root: Path, capsys: pytest.CaptureFixture[str], command: list[str], value: str
) -> None:
    for option in ("--since", "--until"):
        with pytest.raises(SystemExit) as exit_info:
            main(["--data-root", str(root), *command, option, value])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2
        assert err.startswith(f"error: {option} {value!r}: expected a date (2026-11-01), an ISO")
        assert f"hint: for example {option} 7d or {option} 2026-11-01" in err


def test_prune_ages_and_sizes_go_through_the_same_parser(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args, start in (
        (["--older-than", "soon"], "error: --older-than 'soon': expected a whole number"),
        (["--max-size", "big"], "error: --max-size 'big': expected bytes (4096)"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(["--data-root", str(root), "prune", *args, "--dry-run"])
        assert exit_info.value.code == 2
        assert capsys.readouterr().err.startswith(start)
