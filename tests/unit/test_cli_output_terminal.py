"""The terminal side of ``pentrace.cli.output``: rich, imported only there, draws the table
and the progress bars; piped output does without it."""

from __future__ import annotations

import sys

import pytest

from pentrace.cli import output
from tests.support import loaded_by


def test_a_table_on_a_terminal_is_drawn_by_rich(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(output, "stdout_is_tty", lambda: True)
    output.emit_table(("model", "total"), [["gpt-x", 12], ["claude-y", 3400]], title="tokens")
    drawn = capsys.readouterr().out
    for shown in ("tokens", "claude-y", "3,400"):  # counts read with separators (issue #31)
        assert shown in drawn
    assert "\t" not in drawn  # not the piped form


def test_progress_on_a_terminal_yields_every_item(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert list(output.progress(iter(range(5)), total=5, label="reading")) == [0, 1, 2, 3, 4]
    with output.byte_progress(10, "copying") as advance:
        assert advance is not output._ignore  # the bar's, on a terminal
        advance(4)
        advance(6)


def test_json_and_piped_output_do_not_import_rich() -> None:
    code = "from pentrace.cli import output; output.emit_json({'a': 1}); output.emit_table('a', [])"
    assert loaded_by(code, "rich", "rich.console") == []
