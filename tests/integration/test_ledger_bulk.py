"""Bulk ``ledger sync``: workers store what one process stores, and every guarantee holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from pentrace.errors import LedgerConflictError
from pentrace.infrastructure.ledger import LedgerDatabase, RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import SessionBuild, build_session, insert_values
from pentrace.infrastructure.ledger.indexer import index_records, sync
from pentrace.infrastructure.ledger.rows import ROW_COLUMNS, plain_values
from pentrace.infrastructure.storage.layout import iter_sessions
from pentrace.testing.files import write_shards
from tests.integration.test_ledger_indexer import AGENT, PROJECT, open_ledger, trace_lines

SESSIONS = [f"session-2026-11-29-10-00-00-0000000{n}" for n in range(6)]


def corpus(root: Path) -> None:
    for number, session_id in enumerate(SESSIONS):
        write_shards(root, PROJECT, AGENT, session_id, [trace_lines(session_id, number + 2)])


def stored(path: Path) -> list[tuple[object, ...]]:
    """Every row as readers see it but the two columns the clock and the write order set,
    in each stream's order."""
    db = LedgerDatabase.for_path(path, read_only=True)
    events = db.tables.events
    try:
        with db.reading("read the rows") as conn:
            rows = conn.execute(
                select(*(events.c[name] for name in ROW_COLUMNS)).order_by(
                    events.c.stream_id, events.c.notification_id
                )
            ).all()
        plain = [plain_values(tuple(row), db.codec) for row in rows]
    finally:
        db.close()
    kept = ("event_id", "stream_id", "sequence", "event_type", "category", "event_time",
            "session_id", "agent_id", "project_id", "directory", "privacy_classification",
            "redacted", "event_json")  # fmt: skip
    return [tuple(row[name] for name in kept) for row in plain]


def test_workers_store_the_rows_one_process_stores_in_each_sessions_order(
    tmp_path: Path,
) -> None:
    corpus(tmp_path)
    one, two = open_ledger(tmp_path / "one.db"), open_ledger(tmp_path / "two.db")
    assert sync(one, tmp_path).indexed == sync(two, tmp_path, workers=2).indexed == 87
    assert stored(tmp_path / "one.db") == stored(tmp_path / "two.db")
    sequences = [row[2] for row in stored(tmp_path / "two.db") if row[6] == SESSIONS[3]]
    assert sequences == list(range(1, 17))


def test_a_second_sync_with_workers_adds_nothing_and_counts_what_is_held(tmp_path: Path) -> None:
    corpus(tmp_path)
    ledger = open_ledger(tmp_path / "events.db")
    sync(ledger, tmp_path, workers=2)
    again = sync(ledger, tmp_path, workers=2)
    assert (again.sessions, again.indexed, again.already_held) == (6, 0, 87)


def test_a_session_that_cannot_be_read_is_reported_and_the_others_are_indexed(
    tmp_path: Path,
) -> None:
    corpus(tmp_path)
    broken = next(iter(iter_sessions(tmp_path, PROJECT, AGENT)))
    shard = broken.shards[0].path
    shard.unlink()
    shard.symlink_to("/proc/self/mem")  # every read fails (EIO)
    ledger = open_ledger(tmp_path / "events.db")
    report = sync(ledger, tmp_path, workers=2)
    assert [failure.session_id for failure in report.failures] == [broken.session_id]
    assert "cannot read trace file" in report.failures[0].message
    assert report.sessions == 6
    held = {row[6] for row in stored(tmp_path / "events.db")}
    assert held == set(SESSIONS) - {broken.session_id}


def built_session(root: Path) -> tuple[RuntimeEventLedger, list[bytes], SessionBuild]:
    """One session on disk, an empty ledger, and the session's rows built (not yet written)."""
    session_id = SESSIONS[0]
    lines = trace_lines(session_id, 2)
    write_shards(root, PROJECT, AGENT, session_id, [lines])
    ledger = open_ledger(root / "events.db")
    (ref,) = iter_sessions(root, PROJECT, AGENT)
    return ledger, lines, build_session(ref, frozenset(), 0, ledger.now_ms())


def test_rows_the_live_path_stored_first_are_skipped_byte_identical(tmp_path: Path) -> None:
    ledger, lines, build = built_session(tmp_path)
    # The live path stores positions 2 and 3 after the build read the ledger.
    index_records(
        ledger, SESSIONS[0], [(2, lines[1]), (3, lines[2])], project=PROJECT, agent=AGENT,
        directory="/srv/app",
    )  # fmt: skip
    assert insert_values(ledger, build.rows) == len(lines) - 2
    assert ledger.count() == len(lines)


def test_a_held_id_with_other_content_is_refused_not_overwritten(tmp_path: Path) -> None:
    ledger, lines, build = built_session(tmp_path)
    # Held without the session's directory: the same id, other bytes.
    index_records(ledger, SESSIONS[0], [(2, lines[1])], project=PROJECT, agent=AGENT)
    with pytest.raises(LedgerConflictError, match="different content under an id"):
        insert_values(ledger, build.rows)
    assert ledger.count() == 1
