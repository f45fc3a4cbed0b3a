"""`pentrace demo` end to end, as `./dev demo` runs it: a real process, no setup."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pentrace.cli.app import app
from pentrace.infrastructure.catalog.listing import list_sessions
from pentrace.infrastructure.storage.layout import DataRoot
from tests.support import run_pentrace


def test_the_demo_records_a_realistic_session_and_shows_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PENGUIN_HOME", "PENTRACE_DEBUG")}
    env["TMPDIR"] = str(tmp_path)  # the demo's temporary data root lands here
    done = run_pentrace(None, "demo", env=env)

    assert done.returncode == 0, done.stderr
    out = done.stdout
    found = re.search(r"^data root: (.+)$", out, re.MULTILINE)
    assert found is not None
    root = DataRoot(Path(found.group(1)))
    assert root.path.is_relative_to(tmp_path)
    for step in ("list", "replay", "show"):  # `list` was `sessions list` (ADR 0092)
        assert f"$ pentrace {step} " in out or f"$ pentrace {step}\n" in out
    # The replay: a dropped (failed) request, tool calls paired with outputs, the compaction.
    assert re.search(r"x-- dropped request 2 \(failed\)", out)
    assert "output [failed]: 1 failed, 3 passed" in out
    assert "approval: deny" in out
    assert "=== shard 002 (new context after compaction) ===" in out
    assert "assistant thinking: [collapsed," in out
    # The ledger was indexed, the audit found the session healthy and ledger-consistent.
    assert "indexed 54 missing event(s)" in out
    assert re.search(r"^clean: 1 session\(s\), 47 record\(s\).*; ledger: /", out, re.MULTILINE)
    # Stats read the analytics read models; request tokens add up to the session's, and the
    # session's requests are show's (5: completed 4, failed 1), its 3 token_usage apart.
    assert re.search(
        r"^demo_project/demo_agent/session-\S+\t5\t3\t3626\t730\t2432\t512\t7300$",
        out,
        re.MULTILINE,
    )
    assert re.search(r"^exec_command\t4\t1\t", out, re.MULTILINE)
    assert "Traceback" not in done.stderr

    rows = {row.summary.source: row for row in list_sessions(root)}
    main, child = rows[None], rows["subagent"]
    assert main.shards == 2
    assert main.summary.turns == 3
    assert main.summary.requests["failed"] == 1
    assert main.summary.tool_calls["exec_command"].failures == 1
    assert main.summary.approvals == {"allow": 5, "deny": 1}
    assert main.summary.subagents == [child.session_id]
    assert main.summary.goals == {"complete": 1}
    assert main.summary.tokens["total"] == 7300
    assert main.summary.tokens["cache_write"] == 512
    assert child.summary.turns == 1


def test_the_demo_writes_into_a_given_data_root(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--data-root", str(tmp_path / "root"), "demo"])

    assert result.exit_code == 0, result.output
    assert f"data root: {tmp_path / 'root'}" in result.stdout
    assert len(list_sessions(DataRoot(tmp_path / "root"))) == 2


def test_the_demo_never_writes_into_the_penguin_home_of_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real-data"
    monkeypatch.setenv("PENGUIN_HOME", str(real))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()

    result = CliRunner().invoke(app, ["demo"])

    assert result.exit_code == 0, result.output
    assert not real.exists()
    found = re.search(r"^data root: (.+)$", result.stdout, re.MULTILINE)
    assert found is not None
    assert Path(found.group(1)).is_relative_to(tmp_path / "tmp")
