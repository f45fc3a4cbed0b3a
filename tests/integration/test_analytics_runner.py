"""The runner catches up, then follows live events; gaps are loud; projections see redacted
events only.  SQLite always; PostgreSQL (ledger and read model) when configured."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

import pytest

from pentrace import testing as pt
from pentrace.errors import ProjectionGapError
from pentrace.infrastructure.analytics import (
    AnalyticsEvent,
    AnalyticsProjection,
    Transaction,
    handles,
)
from pentrace.infrastructure.analytics.builtin.tokens import TokenUse
from pentrace.infrastructure.analytics.examples import dump
from pentrace.infrastructure.analytics.rebuild import rebuild
from pentrace.infrastructure.analytics.runner import AnalyticsRunner, catch_up, open_ledger
from pentrace.infrastructure.ledger.bulk import sync
from tests.support import sync_ledger


class Arguments(AnalyticsProjection):
    """Keeps every tool call's arguments as the projection received them."""

    name = "arguments"
    schema: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS seen_arguments (call_id VARCHAR(100) PRIMARY KEY, body TEXT)",
    )

    @handles("tool.called")
    def on_call(self, event: AnalyticsEvent, tx: Transaction) -> None:
        tx.put(
            "seen_arguments",
            {"call_id": event.correlation["tool_call_id"]},
            body=event.payload["arguments"],
        )


def _session(root: Path, number: int, total: int = 30) -> None:
    commands: list[pt.Command] = [
        pt.StartSession(),
        pt.UserInput("go"),
        pt.BeginRequest(),
        pt.ToolCall(f"c{number}", "http", '{"url":"https://x","api_key":"plain-secret-1"}'),
        pt.EndRequest(),
        pt.TokenUsage(pt.TokenCounts(0, 0, 0, total), pt.TokenCounts(0, 0, 0, total)),
    ]
    pt.write_trace(root, commands, session_id=f"session-2026-07-18-11-10-22-{number:08x}")


def _synced(root: Path, env: dict[str, str], numbers: Iterable[int]) -> None:
    """Write a 30-token session per number, then index them all into the ledger."""
    for number in numbers:
        _session(root, number)
    sync_ledger(root, env)


def _totals(root: Path, env: dict[str, str]) -> int:
    return sum(row[-1] for row in dump(TokenUse, root, env)["tok_daily"])


def test_a_runner_catches_up_then_follows_events_indexed_while_it_runs(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _synced(tmp_path, env, range(3))
    with AnalyticsRunner(TokenUse, data_root=tmp_path, env=env) as runner:
        ledger = open_ledger(tmp_path, env)
        try:
            runner.wait(ledger.max_notification_id(), timeout=20)
            assert _totals(tmp_path, env) == 90
            _session(tmp_path, 3, total=7)
            sync(ledger, tmp_path)
            runner.wait(ledger.max_notification_id(), timeout=20)
        finally:
            ledger.close()
        assert _totals(tmp_path, env) == 97


def test_projections_receive_redacted_events_only(tmp_path: Path, env: dict[str, str]) -> None:
    _synced(tmp_path, env, [1])
    catch_up(Arguments, data_root=tmp_path, env=env)
    [(call_id, body)] = dump(Arguments, tmp_path, env)["seen_arguments"]
    assert call_id == "c1"
    assert "plain-secret-1" not in body
    assert '"api_key":"[redacted]"' in body
    rebuild(Arguments, data_root=tmp_path, env=env)
    assert dump(Arguments, tmp_path, env)["seen_arguments"] == [(call_id, body)]


def test_events_pruned_before_a_projection_read_them_are_a_loud_gap_until_a_rebuild(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _synced(tmp_path, env, range(4))
    pruning = {**env, "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS": "5"}
    ledger = open_ledger(tmp_path, pruning)
    try:
        assert ledger.cleanup().deleted > 0
    finally:
        ledger.close()
    with pytest.raises(ProjectionGapError, match=r"pentrace projections rebuild tokens"):
        AnalyticsRunner(TokenUse, data_root=tmp_path, env=env)
    report = rebuild(TokenUse, data_root=tmp_path, env=env)
    assert report.sessions == 4
    assert _totals(tmp_path, env) == 120  # every session, from the traces
    catch_up(TokenUse, data_root=tmp_path, env=env)  # no gap any more
    assert _totals(tmp_path, env) == 120
