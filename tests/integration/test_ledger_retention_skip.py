"""A sync leaves out what the count limit drops, and ends where insert-then-prune ends.

The reference inserts every new row (limits off), then applies retention with
``max_events``.  The retention-aware sync, on a handle with that limit, skips
the rows retention would drop and then applies retention: the rows, their
notification ids, the watermarks and the next id handed out must be the same,
on SQLite and on PostgreSQL, on a fresh ledger and on one that already holds
rows and a watermark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from pentrace import testing as pt
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.indexer import index_records
from pentrace.infrastructure.ledger.settings import ENV_MAX_EVENTS
from pentrace.testing.files import write_shards
from tests.integration.ledger_backends import BACKENDS, LedgerBackend, reach
from tests.integration.test_ledger_indexer import AGENT, PROJECT, trace_lines
from tests.otel_support import turns
from tests.support import assert_clean_error, cli_json, run_pentrace

SESSIONS = [f"session-2026-11-30-09-00-00-0000000{n}" for n in range(6)]
NOW_S = 1_790_000_000.0


def handle(backend: LedgerBackend, prefix: str, max_events: int | None) -> RuntimeEventLedger:
    """A ledger on ``backend`` under ``prefix`` with only the count limit, a fixed clock."""
    limits = LedgerSettings(max_events=max_events, max_age_days=None, max_bytes=None)
    settings = backend.settings(limits).model_copy(update={"table_prefix": prefix})
    return RuntimeEventLedger(backend.database(prefix=prefix), settings, clock=lambda: NOW_S)


def state(ledger: RuntimeEventLedger) -> tuple[list[Any], list[Any]]:
    """Every row (notification id first) and every watermark, in order."""
    tables = ledger.db.tables
    with ledger.db.reading("read the whole ledger for a test") as conn:
        rows = conn.execute(select(tables.events).order_by(tables.events.c.notification_id))
        marks = conn.execute(select(tables.watermarks).order_by(tables.watermarks.c.stream_id))
        return [tuple(row) for row in rows], [tuple(mark) for mark in marks]


def traces(root: Path, turns: int) -> None:
    for number, session_id in enumerate(SESSIONS):
        write_shards(root, PROJECT, AGENT, session_id, [trace_lines(session_id, number + turns)])


def next_id(ledger: RuntimeEventLedger) -> int:
    """The notification id the next stored row gets (the row is stored)."""
    session = "session-2026-11-30-10-00-00-0000000a"
    first = trace_lines(session, 0)[0]
    index_records(ledger, session, [(1, first)], project=PROJECT, agent=AGENT)
    return int(max(row[0] for row in state(ledger)[0]))


def reference_and_skipping(
    backend: LedgerBackend, root: Path, limit: int, *, workers: int = 1
) -> tuple[RuntimeEventLedger, RuntimeEventLedger, int]:
    """Sync ``root`` both ways; returns both ledgers and how many rows the sync skipped."""
    everything = handle(backend, f"{backend.prefix}ref_", None)
    sync(everything, root)
    pruned = handle(backend, f"{backend.prefix}ref_", limit)
    pruned.cleanup()
    skipping = handle(backend, f"{backend.prefix}skip_", limit)
    report = sync(skipping, root, workers=workers)
    skipping.cleanup()
    assert report.indexed + report.retention_skipped + report.already_held == sync_count(root)
    return pruned, skipping, report.retention_skipped


def sync_count(root: Path) -> int:
    return sum(path.read_bytes().count(b"\n") for path in root.rglob("*.jsonl"))


@pytest.mark.parametrize("limit", [1, 30, 86])
def test_a_fresh_sync_skips_what_retention_drops_and_ends_like_insert_then_prune(
    ledger_backend: LedgerBackend, tmp_path: Path, limit: int
) -> None:
    traces(tmp_path, 2)  # 6 sessions, 87 records
    reference, skipping, skipped = reference_and_skipping(ledger_backend, tmp_path, limit)
    assert skipped == 87 - limit
    assert state(skipping) == state(reference)
    assert len(state(skipping)[0]) == limit
    assert next_id(skipping) == next_id(reference)


def test_a_sync_onto_held_rows_and_a_watermark_ends_like_insert_then_prune(
    ledger_backend: LedgerBackend, tmp_path: Path
) -> None:
    traces(tmp_path, 1)
    for prefix in ("ref_", "skip_"):
        earlier = handle(ledger_backend, f"{ledger_backend.prefix}{prefix}", None)
        sync(earlier, tmp_path)
        handle(ledger_backend, f"{ledger_backend.prefix}{prefix}", 40).cleanup()
    traces(tmp_path, 3)  # every session grows by two requests: 36 new records
    reference, skipping, skipped = reference_and_skipping(ledger_backend, tmp_path, 20)
    assert skipped == 16
    assert state(skipping) == state(reference)
    assert next_id(skipping) == next_id(reference)


def test_a_sync_that_retention_drops_nothing_of_skips_nothing(
    ledger_backend: LedgerBackend, tmp_path: Path
) -> None:
    traces(tmp_path, 2)
    reference, skipping, skipped = reference_and_skipping(ledger_backend, tmp_path, 500)
    assert skipped == 0
    assert state(skipping) == state(reference)


def test_workers_skip_the_same_rows(tmp_path: Path) -> None:
    backend = reach(BACKENDS[0], tmp_path)
    assert backend is not None
    traces(tmp_path, 2)
    reference, skipping, skipped = reference_and_skipping(backend, tmp_path, 45, workers=2)
    assert skipped == 42
    assert state(skipping) == state(reference)
    backend.close()


def test_a_sync_while_retention_is_held_inserts_every_row(tmp_path: Path) -> None:
    # stats --sync holds retention: its projections read every row the sync indexes.
    backend = reach(BACKENDS[0], tmp_path)
    assert backend is not None
    traces(tmp_path, 2)
    ledger = handle(backend, "", 10)
    with ledger.retention_held():
        report = sync(ledger, tmp_path)
        assert (report.indexed, report.retention_skipped, ledger.count()) == (87, 0, 87)
    assert ledger.count() == 10  # applied when the hold ends
    backend.close()


def test_ledger_sync_applies_the_configured_count_limit_and_reports_the_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces(tmp_path, 2)
    monkeypatch.setenv(ENV_MAX_EVENTS, "25")
    assert cli_json(tmp_path, "ledger", "sync") == {
        "sessions": 6,
        "indexed": 25,
        "already_held": 0,
        "retention_skipped": 62,
    }
    ledger = RuntimeEventLedger.open(tmp_path)
    newest = [entry.event_id for entry in ledger.newest(25)]
    ledger.close()
    assert newest[-1] == SessionKey(PROJECT, AGENT, SESSIONS[-1]).event_id(22)
    assert len(newest) == 25


def test_stats_builds_from_the_traces_what_retention_pruned_before_any_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large first import into a fresh root indexes more than the count limit keeps: the
    read models, never built, are built from the traces instead of refusing with a gap."""
    reference, limited = tmp_path / "reference", tmp_path / "limited"
    for root in (reference, limited):
        for number, session_id in enumerate(SESSIONS[:3]):
            pt.write_trace(root, turns(4 + number), project=PROJECT, agent=AGENT,
                           session_id=session_id)  # fmt: skip
    want = cli_json(reference, "stats", "tokens", "--by", "session")
    assert sum(row["output"] for row in want["rows"]) > 0
    monkeypatch.setenv(ENV_MAX_EVENTS, "10")
    cli_json(limited, "ledger", "sync")
    ledger = RuntimeEventLedger.open(limited)
    try:
        assert ledger.pruned_through() > 0  # retention went past what any read model read
    finally:
        ledger.close()
    assert cli_json(limited, "stats", "tokens", "--by", "session") == want
    # Once built, the read model follows the ledger as before: a second run agrees.
    assert cli_json(limited, "stats", "tokens", "--by", "session") == want


def test_a_gap_stays_loud_when_the_ledger_holds_streams_whose_traces_are_not_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger shared with other hosts (docs/deployment.md): this root's traces cannot give
    back what retention pruned of theirs, so `stats` refuses as before, naming the rebuild."""
    root = tmp_path / "data"
    for number, session_id in enumerate(SESSIONS[:3]):
        pt.write_trace(root, turns(4 + number), project=PROJECT, agent=AGENT,
                       session_id=session_id)  # fmt: skip
    monkeypatch.setenv(ENV_MAX_EVENTS, "10")
    cli_json(root, "ledger", "sync")
    # Another host's session: in the ledger, its trace elsewhere.
    for shard in root.glob(f"*/agents/*/traces/*/{SESSIONS[0]}_*.jsonl"):
        shard.unlink()
    done = run_pentrace(root, "stats", "tokens", "--json", env={ENV_MAX_EVENTS: "10"})
    assert_clean_error(done, 1, "projection 'tokens': ledger retention deleted events")
    assert "pentrace projections rebuild tokens" in done.stderr
