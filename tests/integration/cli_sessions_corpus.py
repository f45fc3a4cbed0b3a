"""A small real data root for the session CLI tests: three sessions in two projects."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from pentrace import testing as pt
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.storage.layout import DataRoot
from tests.support import list_files_opening, text_turn

# A and B share the token prefix "3f8", so "3f8" is ambiguous and "3f8a" is not.
SID_A: Final = "session-2026-07-18-11-10-22-3f8a1c2d"
SID_B: Final = "session-2026-07-19-09-00-00-3f8b0000"
SID_C: Final = "session-2026-07-20-09-00-00-77770001"


def _usage(total: int) -> pt.TokenUsage:
    return pt.TokenUsage(
        pt.TokenCounts(output=total // 10, total=total), pt.TokenCounts(total=total)
    )


def commands_a() -> list[pt.Command]:
    """Two turns, an aborted request between them that is retried, one tool call."""
    return [
        *list_files_opening(),
        pt.AssistantText("one file: a.txt"),
        pt.EndRequest("completed"),
        _usage(300),
        *text_turn("show a.txt", "THIS ROUND WAS DROPPED", "aborted"),
        pt.BeginRequest(),
        pt.AssistantText("a.txt is empty"),
        pt.EndRequest("completed"),
        _usage(500),
    ]


def commands_b() -> list[pt.Command]:
    """Another model; the last request failed."""
    return [
        pt.StartSession(model_id="gpt-5", provider="openai"),
        *text_turn("hello", "hi"),
        _usage(100),
        pt.UserInput("again"),
        pt.BeginRequest(),
        pt.EndRequest("failed"),
    ]


def commands_c() -> list[pt.Command]:
    """One turn, then a compaction that never ended (an error)."""
    return [
        pt.StartSession(),
        *text_turn("build it", "built"),
        _usage(900),
        pt.CompactionBegin(),
    ]


def write_session(
    root: Path, commands: list[pt.Command], sid: str, start: datetime, where: tuple[str, str]
) -> list[Path]:
    """Render ``commands`` as session ``sid`` from ``start`` under ``where`` (project, agent)."""
    shards = pt.render_shards(commands, session_id=sid, start=start)
    return pt.write_shards(DataRoot(root), where[0], where[1], sid, shards, day=start.date())


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


def synced_ledger(root: Path) -> RuntimeEventLedger:
    """The root's own SQLite ledger (no retention) with every trace indexed."""
    ledger = RuntimeEventLedger.open(root, LedgerSettings().with_limits_off())
    sync(ledger, root)
    return ledger
