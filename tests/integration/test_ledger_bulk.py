"""Bulk ``ledger sync``: workers store what one process stores, and every guarantee holds."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest
from sqlalchemy import select

from pentrace.domain.runtime import SessionEvents
from pentrace.errors import LedgerConflictError, LedgerError
from pentrace.infrastructure.ledger import LedgerDatabase, RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import run as bulk
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.bulk.build import SessionBuild, build_session
from pentrace.infrastructure.ledger.bulk.run import insert_values
from pentrace.infrastructure.ledger.indexer import index_records, rebuild
from pentrace.infrastructure.ledger.rows import ROW_COLUMNS, plain_values
from pentrace.infrastructure.storage.layout import SessionRef, iter_sessions
from pentrace.testing.files import write_shards
from tests.integration.ledger_backends import LedgerBackend, mapping_fails_at
from tests.integration.test_ledger_indexer import AGENT, PROJECT, open_ledger, trace_lines

SESSIONS = [f"session-2026-11-29-10-00-00-0000000{n}" for n in range(6)]


def corpus(root: Path) -> None:
    for number, session_id in enumerate(SESSIONS):
        write_shards(root, PROJECT, AGENT, session_id, [trace_lines(session_id, number + 2)])


_KEPT: Final = ("event_id", "stream_id", "sequence", "event_type", "category", "event_time",
                 "session_id", "agent_id", "project_id", "directory", "privacy_classification",
                 "redacted", "event_json")  # fmt: skip


def stored(path: Path) -> list[tuple[object, ...]]:
    """Every row as readers see it but the two columns the clock and the write order set,
    in each stream's order."""
    db = LedgerDatabase.for_path(path, read_only=True)
    try:
        return stored_in(db)
    finally:
        db.close()


def stored_in(db: LedgerDatabase, order: str = "stream") -> list[tuple[object, ...]]:
    """:func:`stored` of an open ledger, in each stream's order or (``order="write"``) in
    the ledger's own."""
    events = db.tables.events
    keys = (
        (events.c.stream_id, events.c.notification_id)
        if order == "stream"
        else (events.c.notification_id,)
    )
    with db.reading("read the rows") as conn:
        rows = conn.execute(select(*(events.c[name] for name in ROW_COLUMNS)).order_by(*keys)).all()
    plain = [plain_values(tuple(row), db.codec) for row in rows]
    return [tuple(row[name] for name in _KEPT) for row in plain]


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


def built_session(
    root: Path, backend: LedgerBackend
) -> tuple[RuntimeEventLedger, list[bytes], SessionBuild]:
    """One session on disk, an empty ledger, and the session's rows built (not yet written)."""
    session_id = SESSIONS[0]
    lines = trace_lines(session_id, 2)
    write_shards(root, PROJECT, AGENT, session_id, [lines])
    ledger = RuntimeEventLedger(backend.database(), backend.settings())
    (ref,) = iter_sessions(root, PROJECT, AGENT)
    return ledger, lines, build_session(ref, frozenset(), 0, ledger.now_ms())


def live_path_holds_2_and_3(ledger: RuntimeEventLedger, lines: list[bytes]) -> None:
    """The live path stores positions 2 and 3 of the first session after a build read the
    ledger (so the build holds rows of keys the ledger now has)."""
    index_records(
        ledger, SESSIONS[0], [(2, lines[1]), (3, lines[2])], project=PROJECT, agent=AGENT,
        directory="/srv/app",
    )  # fmt: skip


def test_rows_the_live_path_stored_first_are_skipped_byte_identical(
    tmp_path: Path, ledger_backend: LedgerBackend
) -> None:
    ledger, lines, build = built_session(tmp_path, ledger_backend)
    live_path_holds_2_and_3(ledger, lines)
    assert insert_values(ledger, build.rows) == len(lines) - 2
    assert ledger.count() == len(lines)


def test_a_held_id_with_other_content_is_refused_not_overwritten(
    tmp_path: Path, ledger_backend: LedgerBackend
) -> None:
    ledger, lines, build = built_session(tmp_path, ledger_backend)
    # Held without the session's directory: the same id, other bytes.
    index_records(ledger, SESSIONS[0], [(2, lines[1])], project=PROJECT, agent=AGENT)
    with pytest.raises(LedgerConflictError, match="different content under an id"):
        insert_values(ledger, build.rows)
    assert ledger.count() == 1


def builders_logged(
    monkeypatch: pytest.MonkeyPatch, log: Path, in_worker: Callable[[], None]
) -> int:
    """Make every build note its process id in ``log``; a forked worker first runs ``in_worker``.

    Returns this process's id.  The forked workers inherit the patched module.
    """
    writer = os.getpid()
    original = bulk.build_session

    def logged(ref: SessionRef, *args: Any) -> SessionBuild:
        if os.getpid() != writer:
            in_worker()
        with log.open("a") as handle:
            handle.write(f"{os.getpid()}\n")
        return original(ref, *args)

    monkeypatch.setattr(bulk, "build_session", logged)
    return writer


def test_the_writer_builds_sessions_itself_while_the_worker_is_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus(tmp_path)
    reference = open_ledger(tmp_path / "one.db")
    sync(reference, tmp_path)
    log = tmp_path / "builders.txt"
    writer = builders_logged(monkeypatch, log, lambda: time.sleep(0.5))
    ledger = open_ledger(tmp_path / "two.db")
    assert sync(ledger, tmp_path, workers=2).indexed == 87
    builders = log.read_text().split()
    assert len(builders) == len(SESSIONS)
    assert str(writer) in builders  # it built while the worker slept
    assert len(set(builders)) == 2  # and the worker built the others
    assert stored(tmp_path / "one.db") == stored(tmp_path / "two.db")
    assert multiprocessing.active_children() == []


def test_an_error_in_a_worker_stops_the_sync_here_and_leaves_no_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus(tmp_path)

    def fail() -> None:
        raise ValueError("a bug in the worker")

    builders_logged(monkeypatch, tmp_path / "builders.txt", fail)
    with pytest.raises(ValueError, match="a bug in the worker"):
        sync(open_ledger(tmp_path / "events.db"), tmp_path, workers=3)
    assert multiprocessing.active_children() == []


def test_a_killed_worker_stops_the_sync_with_a_hint_and_the_next_sync_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus(tmp_path)
    with monkeypatch.context() as patched:
        patched.setattr(bulk, "_AHEAD", 1)  # the first session goes to the worker, and waits
        builders_logged(patched, tmp_path / "builders.txt", lambda: os.kill(os.getpid(), 9))
        with pytest.raises(LedgerError, match=r"sync worker process \(pid \d+\) stopped") as error:
            sync(open_ledger(tmp_path / "events.db"), tmp_path, workers=2)
    assert error.value.hint is not None
    assert "ledger sync" in error.value.hint
    assert multiprocessing.active_children() == []
    report = sync(open_ledger(tmp_path / "events.db"), tmp_path, workers=2)
    assert report.indexed + report.already_held == 87
    assert len(stored(tmp_path / "events.db")) == 87


def test_each_backend_stores_the_rows_one_process_stores_on_sqlite(
    tmp_path: Path, ledger_backend: LedgerBackend
) -> None:
    corpus(tmp_path)
    reference = open_ledger(tmp_path / "one.db")
    sync(reference, tmp_path)
    ledger = RuntimeEventLedger(ledger_backend.database(), ledger_backend.settings())
    assert sync(ledger, tmp_path, workers=2).indexed == 87
    rows = stored_in(ledger.db, order="write")
    normalised = [(*row[:11], bool(row[11]), bytes(row[12])) for row in rows]  # type: ignore[call-overload]
    assert sorted(normalised, key=lambda row: (row[1], row[2])) == stored(tmp_path / "one.db")
    # Each session's rows are in its order, and the sessions follow one another.
    assert [row[2] for row in rows if row[6] == SESSIONS[3]] == list(range(1, 17))


def sequences_by_session(db: LedgerDatabase) -> dict[str, list[int]]:
    """Each session's stored positions, in the ledger's order."""
    found: dict[str, list[int]] = {}
    for row in stored_in(db, order="write"):
        found.setdefault(str(row[6]), []).append(int(row[2]))  # type: ignore[call-overload]
    return found


def test_a_sync_meeting_a_held_id_with_other_content_leaves_out_that_record_alone(
    tmp_path: Path, ledger_backend: LedgerBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus(tmp_path)
    ledger = RuntimeEventLedger(ledger_backend.database(), ledger_backend.settings())
    lines = trace_lines(SESSIONS[2], 4)
    original = bulk.build_session

    def live_path_meanwhile(ref: SessionRef, *args: Any) -> SessionBuild:
        built = original(ref, *args)
        if ref.session_id == SESSIONS[2]:
            # While the sync builds, the live path stores position 2 without the
            # session's directory: the same id, other bytes (a conflict at the insert).
            index_records(ledger, SESSIONS[2], [(2, lines[1])], project=PROJECT, agent=AGENT)
        return built

    monkeypatch.setattr(bulk, "build_session", live_path_meanwhile)
    report = sync(ledger, tmp_path)
    (failure,) = report.failures  # the one record, not the session (ADR 0102)
    assert (failure.session_id, failure.position, failure.line) == (SESSIONS[2], 2, 2)
    assert "different content under an id" in failure.message
    assert "the record was left out" in failure.message
    held = sequences_by_session(ledger.db)
    # The live path's row at position 2 stays; the sync wrote every other record.
    assert held == {
        session: ([2] if session == SESSIONS[2] else [])
        + [
            position
            for position in range(1, len(trace_lines(session, number + 2)) + 1)
            if session != SESSIONS[2] or position != 2
        ]
        for number, session in enumerate(SESSIONS)
    }
    assert report.indexed == sum(len(positions) for positions in held.values()) - 1


@pytest.mark.parametrize("workers", [1, 2])
def test_a_record_the_mapping_cannot_take_is_one_finding_and_the_sync_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    corpus(tmp_path)
    monkeypatch.setattr(SessionEvents, "screened", mapping_fails_at(SESSIONS[1], 3))
    ledger = open_ledger(tmp_path / "events.db")
    report = sync(ledger, tmp_path, workers=workers)
    (failure,) = report.failures
    assert (failure.session_id, failure.position, failure.line) == (SESSIONS[1], 3, 3)
    assert failure.path is not None
    assert failure.path.endswith(f"{SESSIONS[1]}_001.jsonl")
    assert f"position 3 ({failure.path}, line 3)" in failure.message
    assert "UnicodeEncodeError: surrogates not allowed" in failure.message
    assert "\ud800" not in failure.message
    held = sequences_by_session(ledger.db)
    count = len(trace_lines(SESSIONS[1], 3))
    # Every record but that one: position 3 is a gap, the rows after it keep their ids.
    assert held[SESSIONS[1]] == [n for n in range(1, count + 1) if n != 3]
    assert all(len(held[session]) > 3 for session in SESSIONS if session != SESSIONS[1])
    again = sync(ledger, tmp_path, workers=workers)  # the gap is tried again, and reported again
    assert [(f.session_id, f.position) for f in again.failures] == [(SESSIONS[1], 3)]
    assert (again.indexed, again.already_held) == (0, report.indexed)


def test_a_rebuild_leaves_out_the_one_record_it_cannot_take_and_rebuilds_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus(tmp_path)
    ledger = open_ledger(tmp_path / "events.db")
    sync(ledger, tmp_path)
    before = sequences_by_session(ledger.db)
    monkeypatch.setattr(SessionEvents, "screened", mapping_fails_at(SESSIONS[4], 5))
    report = rebuild(ledger, tmp_path)
    (failure,) = report.failures
    assert (failure.session_id, failure.position, failure.line) == (SESSIONS[4], 5, 5)
    assert failure.path is not None
    assert failure.path.endswith(f"{SESSIONS[4]}_001.jsonl")
    after = sequences_by_session(ledger.db)
    assert report.indexed == sum(map(len, after.values()))
    assert sorted(after.pop(SESSIONS[4])) == [n for n in sorted(before.pop(SESSIONS[4])) if n != 5]
    assert {session: sorted(held) for session, held in after.items()} == {
        session: sorted(held) for session, held in before.items()
    }
