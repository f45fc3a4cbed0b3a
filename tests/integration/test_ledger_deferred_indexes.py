"""A bulk load into an empty SQLite events table makes its scoped indexes last (ADR 0073).

Real SQLite files throughout: the indexes a sync leaves are compared with a
new ledger's own, a ledger holding rows keeps its indexes live, a failing
load gets them back, and a sync killed with SIGKILL while they are absent
leaves a ledger whose next open makes them.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path

import pytest

from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.infrastructure.ledger.backend.sqlite import SQLiteDialect
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.bulk.deferred import DEFERRED, indexes_after_rows
from pentrace.infrastructure.ledger.settings import LedgerSettings
from pentrace.testing.files import write_shards
from tests.integration.test_ledger_bulk import corpus
from tests.integration.test_ledger_indexer import AGENT, PROJECT, open_ledger, trace_lines
from tests.support import kill_sync_after

_SCOPED = {f"runtime_events_{suffix}" for suffix in DEFERRED}


def index_sql(path: Path) -> dict[str, str]:
    """Every index of the events table and its stored statement (autoindexes: '')."""
    with contextlib.closing(sqlite3.connect(path, timeout=5)) as conn:
        rows = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
            "AND tbl_name = 'runtime_events'"
        ).fetchall()
    return {str(name): str(sql or "") for name, sql in rows}


def test_a_sync_into_an_empty_ledger_ends_with_the_indexes_a_new_ledger_has(
    tmp_path: Path,
) -> None:
    open_ledger(tmp_path / "new.db").close()
    expected = index_sql(tmp_path / "new.db")
    assert set(expected) >= _SCOPED
    corpus(tmp_path / "root")
    ledger = open_ledger(tmp_path / "events.db")
    assert sync(ledger, tmp_path / "root").indexed > 0
    ledger.close()
    assert index_sql(tmp_path / "events.db") == expected


def test_the_scoped_indexes_are_absent_during_a_load_into_an_empty_ledger(
    tmp_path: Path,
) -> None:
    ledger = open_ledger(tmp_path / "events.db")
    with indexes_after_rows(ledger.db, worth_it=True) as deferred:
        assert deferred
        during = set(index_sql(tmp_path / "events.db"))
    assert not during & _SCOPED
    assert "runtime_events_event_id_idx" in during  # the key constraints stay live
    assert "runtime_events_inserted_idx" in during
    assert set(index_sql(tmp_path / "events.db")) >= _SCOPED
    ledger.close()


def test_a_ledger_holding_rows_keeps_its_indexes_live(tmp_path: Path) -> None:
    corpus(tmp_path / "root")
    ledger = open_ledger(tmp_path / "events.db")
    sync(ledger, tmp_path / "root")
    before = index_sql(tmp_path / "events.db")
    with indexes_after_rows(ledger.db, worth_it=True) as deferred:
        assert not deferred
        assert index_sql(tmp_path / "events.db") == before
    ledger.close()


@pytest.mark.parametrize("worth_it", [False, True])
def test_nothing_is_dropped_where_it_is_not_worth_it_or_the_dialect_keeps_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worth_it: bool
) -> None:
    if worth_it:  # a dialect that keeps its indexes live (PostgreSQL's answer)
        monkeypatch.setattr(SQLiteDialect, "defers_indexes", False)
    ledger = open_ledger(tmp_path / "events.db")
    before = index_sql(tmp_path / "events.db")
    with indexes_after_rows(ledger.db, worth_it=worth_it) as deferred:
        assert not deferred
        assert index_sql(tmp_path / "events.db") == before
    ledger.close()


def test_a_load_that_fails_gets_its_indexes_back_and_its_error_is_raised(
    tmp_path: Path,
) -> None:
    ledger = open_ledger(tmp_path / "events.db")
    expected = index_sql(tmp_path / "events.db")
    with (
        pytest.raises(RuntimeError, match="the load failed"),
        indexes_after_rows(ledger.db, worth_it=True),
    ):
        raise RuntimeError("the load failed")
    assert index_sql(tmp_path / "events.db") == expected
    ledger.close()


def test_a_sync_killed_while_the_indexes_wait_leaves_a_ledger_its_next_open_mends(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    for number in range(40):
        session_id = f"session-2026-12-02-10-00-00-{number:08d}"
        write_shards(root, PROJECT, AGENT, session_id, [trace_lines(session_id, 40)])
    path = tmp_path / "events.db"
    open_ledger(tmp_path / "new.db").close()
    expected = index_sql(tmp_path / "new.db")
    at_kill = set(kill_sync_after(root, path, 200, index_sql) or ())
    assert at_kill, "no rows were seen before the kill"
    assert not at_kill & _SCOPED, "the indexes were not waiting for the rows"
    ledger: RuntimeEventLedger = open_ledger(path)  # a writable open makes what is missing
    assert index_sql(path) == expected
    report = sync(ledger, root)
    assert report.indexed + report.already_held == 40 * 121
    assert ledger.count() == 40 * 121
    ledger.close()
    assert index_sql(path) == expected


def test_a_ledger_whose_rows_retention_deleted_is_not_new_to_a_sync(tmp_path: Path) -> None:
    """Watermarks without rows: the positions retention pruned are not indexed again."""
    corpus(tmp_path / "root")
    ledger = open_ledger(tmp_path / "events.db")
    first = sync(ledger, tmp_path / "root").indexed
    later = time.time() + 30 * 86400
    aged = LedgerSettings(max_events=None, max_age_days=1.0, max_bytes=None)
    assert RuntimeEventLedger(ledger.db, aged, clock=lambda: later).cleanup().by_age == first
    assert ledger.count() == 0
    assert not ledger.holds_nothing()
    again = sync(ledger, tmp_path / "root")
    assert again.indexed == 0
    assert again.already_held == first
    assert ledger.count() == 0
    ledger.close()
