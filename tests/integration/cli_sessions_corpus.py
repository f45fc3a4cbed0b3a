"""A small real data root for the session CLI tests: three sessions in two projects."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from typer.testing import CliRunner, Result

from pentrace.cli.app import app
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.indexer import sync
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.testing import (
    AssistantText,
    BeginRequest,
    Command,
    CompactionBegin,
    EndRequest,
    StartSession,
    TokenCounts,
    TokenUsage,
    ToolCall,
    ToolOutput,
    UserInput,
    render_shards,
    write_shards,
)

# A and B share the token prefix "3f8", so "3f8" is ambiguous and "3f8a" is not.
SID_A: Final = "session-2026-07-18-11-10-22-3f8a1c2d"
SID_B: Final = "session-2026-07-19-09-00-00-3f8b0000"
SID_C: Final = "session-2026-07-20-09-00-00-77770001"


def _usage(total: int) -> TokenUsage:
    return TokenUsage(TokenCounts(output=total // 10, total=total), TokenCounts(total=total))


def commands_a() -> list[Command]:
    """Two turns, an aborted request between them that is retried, one tool call."""
    return [
        StartSession(),
        UserInput("list the files"),
        BeginRequest(),
        ToolCall("call_1", "exec_command", '{"cmd":"ls"}'),
        ToolOutput("call_1", "a.txt"),
        AssistantText("one file: a.txt"),
        EndRequest("completed"),
        _usage(300),
        UserInput("show a.txt"),
        BeginRequest(),
        AssistantText("THIS ROUND WAS DROPPED"),
        EndRequest("aborted"),
        BeginRequest(),
        AssistantText("a.txt is empty"),
        EndRequest("completed"),
        _usage(500),
    ]


def commands_b() -> list[Command]:
    """Another model; the last request failed."""
    return [
        StartSession(model_id="gpt-5", provider="openai"),
        UserInput("hello"),
        BeginRequest(),
        AssistantText("hi"),
        EndRequest("completed"),
        _usage(100),
        UserInput("again"),
        BeginRequest(),
        EndRequest("failed"),
    ]


def commands_c() -> list[Command]:
    """One turn, then a compaction that never ended (an error)."""
    return [
        StartSession(),
        UserInput("build it"),
        BeginRequest(),
        AssistantText("built"),
        EndRequest("completed"),
        _usage(900),
        CompactionBegin(),
    ]


def write_session(
    root: Path, commands: list[Command], sid: str, start: datetime, where: tuple[str, str]
) -> list[Path]:
    """Render ``commands`` as session ``sid`` from ``start`` under ``where`` (project, agent)."""
    shards = render_shards(commands, session_id=sid, start=start)
    return write_shards(DataRoot(root), where[0], where[1], sid, shards, day=start.date())


def build_corpus(root: Path) -> dict[str, list[Path]]:
    """The three sessions; returns their shard paths by id."""
    return {
        SID_A: write_session(
            root, commands_a(), SID_A, datetime(2026, 7, 18, 3, tzinfo=UTC), ("p1", "a1")
        ),
        SID_B: write_session(
            root, commands_b(), SID_B, datetime(2026, 7, 19, 9, tzinfo=UTC), ("p1", "a1")
        ),
        SID_C: write_session(
            root, commands_c(), SID_C, datetime(2026, 7, 20, 9, tzinfo=UTC), ("p2", "a2")
        ),
    }


def cli(root: Path, *args: str, input_text: str | None = None) -> Result:
    """Run ``pentrace --data-root root ARGS`` in process; library errors stay as exceptions."""
    return CliRunner().invoke(app, ["--data-root", str(root), *args], input=input_text)


def run_process(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pentrace --data-root root ARGS`` as a real process, stdout piped."""
    return subprocess.run(
        [sys.executable, "-m", "pentrace", "--data-root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def synced_ledger(root: Path) -> RuntimeEventLedger:
    """The root's own SQLite ledger (no retention) with every trace indexed."""
    ledger = RuntimeEventLedger.open(root, LedgerSettings().with_limits_off())
    sync(ledger, root)
    return ledger
