"""SQLite specifics: PRAGMAs, lock errors, size measurement."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import literal_column, select

from pentrace.domain.runtime import build_event
from pentrace.errors import ConfigError, LedgerError, LedgerLockedError
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.backend.codec import derived_session
from pentrace.infrastructure.ledger.backend.schema import LastSegment as _LastSegment
from pentrace.infrastructure.ledger.replay import _page_statement
from pentrace.infrastructure.ledger.retention import ledger_size
from pentrace.infrastructure.ledger.store import RuntimeEventLedger as LedgerRecorder
from tests.integration.test_ledger_contract import make_event


def _ledger_at(path: Path, *positions: int) -> RuntimeEventLedger:
    """A ledger file at ``path`` with the retention limits off; session s1's events at
    ``positions`` appended to it."""
    ledger = RuntimeEventLedger(LedgerDatabase.for_path(path), LedgerSettings().with_limits_off())
    for position in positions:
        ledger.append(make_event("s1", position))
    return ledger


def test_the_file_uses_wal_and_incremental_auto_vacuum(tmp_path: Path) -> None:
    path = tmp_path / "runtime_events" / "runtime_events.db"
    RuntimeEventLedger.open(settings=LedgerSettings(path=path)).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL


def test_a_write_blocked_by_another_process_lock_is_a_ledger_locked_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.db"
    ledger = RuntimeEventLedger(
        LedgerDatabase.for_path(path, busy_timeout_ms=50), LedgerSettings().with_limits_off()
    )
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(
            LedgerLockedError, match=r"append to the ledger on .*events\.db.*locked"
        ):
            ledger.append(make_event("s1", 1))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert ledger.append(make_event("s1", 1)) is True
    ledger.close()


def test_size_is_measured_after_a_wal_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    ledger = _ledger_at(path)
    ledger.extend([make_event("s1", n, {"text": "y" * 4000}) for n in range(1, 50)])
    size = ledger_size(ledger.db)
    assert size is not None
    assert size >= 49 * 4000
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    ledger.close()


def test_an_unreachable_server_is_a_ledger_error_that_hides_the_password() -> None:
    url = "postgresql+psycopg://app:s3cret-pw@127.0.0.1:1/ledger"
    with pytest.raises(
        LedgerError, match=r"create the ledger schema on .*app:\*\*\*@127\.0\.0\.1:1"
    ) as caught:
        LedgerDatabase(url)
    assert "s3cret-pw" not in str(caught.value)
    assert caught.value.hint is not None


def test_an_in_memory_sqlite_url_is_refused_as_a_config_error() -> None:
    with pytest.raises(ConfigError, match="needs a file path"):
        LedgerDatabase("sqlite://")


def session_page_plan(ledger: RuntimeEventLedger, conn: sqlite3.Connection) -> str:
    """SQLite's plan for a replay page of session ``s1``."""
    statement = _page_statement(
        ledger.db, "session_id", "own", True, False, False, False, False, True, False
    ).compile(dialect=ledger.db.engine.dialect, compile_kwargs={"literal_binds": False})
    values = {**statement.params, "session_id": "s1", "after": 0, "limit": 10}
    plan = conn.execute(
        f"EXPLAIN QUERY PLAN {statement}", [values[n] for n in statement.positiontup or []]
    ).fetchall()
    return str(plan)


def test_a_ledger_made_by_an_earlier_version_is_upgraded_in_place(tmp_path: Path) -> None:
    # Earlier versions stored Penguin's payload_json / projection_json copies and
    # indexed (session, agent, directory); rebuild that shape by hand.
    path = tmp_path / "events.db"
    old = _ledger_at(path, 1)
    old.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX runtime_events_session_position_idx")
        conn.execute("DROP INDEX runtime_events_type_position_idx")
        conn.execute("CREATE INDEX runtime_events_type_idx ON runtime_events (event_type)")
        conn.execute("ALTER TABLE runtime_events ADD COLUMN payload_json TEXT")
        conn.execute("ALTER TABLE runtime_events ADD COLUMN projection_json TEXT")
        conn.execute("UPDATE runtime_events SET payload_json = '{}'")
        conn.execute(
            "CREATE INDEX runtime_events_scope_idx "
            "ON runtime_events (session_id, agent_id, directory)"
        )
    ledger = _ledger_at(path)
    assert ledger.append(make_event("s1", 2)) is True
    with sqlite3.connect(path) as conn:
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        plan = session_page_plan(ledger, conn)
        copies = conn.execute("SELECT payload_json FROM runtime_events ORDER BY 1").fetchall()
    assert {"runtime_events_session_position_idx", "runtime_events_type_position_idx"} <= indexes
    assert not {"runtime_events_scope_idx", "runtime_events_type_idx"} & indexes
    assert "runtime_events_session_position_idx" in plan
    assert "TEMP B-TREE" not in plan
    assert copies == [(None,), ("{}",)]  # new rows leave the old copy columns empty
    page = ledger.replay_after(None, session_id="s1")
    assert [entry.event_id for entry in page.events] == [
        "evt:session:s1:00000001",
        "evt:session:s1:00000002",
    ]
    ledger.close()


@pytest.mark.parametrize(
    ("lead", "index"),
    [
        ("session_id", "runtime_events_session_position_idx"),
        ("agent_id", "runtime_events_agent_idx"),
        ("directory", "runtime_events_directory_idx"),
    ],
)
def test_a_page_filtered_by_agent_or_directory_alone_is_an_index_range_scan(
    tmp_path: Path, lead: str, index: str
) -> None:
    # Without a session filter, the agent (else the directory) filter leads: its own
    # rows and the unscoped rows are two range scans in global order, not a walk of
    # the whole ledger from the cursor.
    path = tmp_path / "events.db"
    ledger = _ledger_at(path, 1)
    params = {lead: "x", "after": 0, "through": 10, "limit": 10}
    with sqlite3.connect(path) as conn:
        for branch in ("own", "unscoped"):
            statement = _page_statement(
                ledger.db, lead, branch, True, True, False, False, False, True, False
            ).compile(dialect=ledger.db.engine.dialect)
            names = statement.positiontup or []
            plan = str(
                conn.execute(
                    f"EXPLAIN QUERY PLAN {statement}",
                    [{**statement.params, **params}[n] for n in names],
                ).fetchall()
            )
            assert index in plan, (branch, plan)
            assert "TEMP B-TREE" not in plan, (branch, plan)
    ledger.close()


def test_a_driver_error_in_a_replay_page_is_a_ledger_error_not_a_driver_exception(
    tmp_path: Path,
) -> None:
    # Pages run on the driver cursor (LedgerDatabase.fetch); its errors must still
    # come out as pentrace's ledger errors, naming the operation and the file.
    path = tmp_path / "events.db"
    ledger = _ledger_at(path, 1)
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE runtime_events RENAME COLUMN event_json TO moved_json")
    with pytest.raises(LedgerError, match=r"replay the ledger on .*events\.db.*event_json"):
        ledger.replay_after(None, session_id="s1")
    with pytest.raises(LedgerError, match=r"select ledger notifications on .*events\.db"):
        ledger.select_notifications(None, 10, topics=["message.updated", "other.type"])
    ledger.close()


def test_a_commit_through_one_ledger_object_wakes_the_subscriptions_of_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both objects open the same file (a server's SSE ledger and an analytics runner,
    # say).  The follower's poll is set to an hour: only the shared wake-up can
    # deliver the row before the join below gives up.
    path = tmp_path / "events.db"
    writer = _ledger_at(path)
    follower = RuntimeEventLedger(
        LedgerDatabase.for_path(tmp_path / "." / "events.db"), LedgerSettings().with_limits_off()
    )
    follower.poll_interval = 3600
    polled_empty = threading.Event()
    select = follower.select_notifications

    def spy(*args: Any, **kwargs: Any) -> Any:
        rows = select(*args, **kwargs)
        if not rows:
            polled_empty.set()  # the follower goes to sleep next
        return rows

    monkeypatch.setattr(follower, "select_notifications", spy)
    received: list[str] = []
    subscription = follower.subscribe(gt=None)

    def follow() -> None:
        for notification in subscription:
            received.append(str(notification.originator_id))
            return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        assert polled_empty.wait(timeout=60)
        writer.append(make_event("s1", 1))
        thread.join(timeout=60)
        assert received == ["session:s1"]
    finally:
        subscription.stop()
        thread.join(timeout=60)
        writer.close()
        follower.close()


def test_the_busy_timeout_is_the_lock_timeout_of_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PENTRACE_DB_LOCK_TIMEOUT", raising=False)
    default = LedgerDatabase.for_path(tmp_path / "default.db")
    default.close()
    assert default.busy_timeout_ms == 5000  # was 30 s; the CLI's --wait was 5 s already
    monkeypatch.setenv("PENTRACE_DB_LOCK_TIMEOUT", "0.25")
    db = LedgerDatabase.for_path(tmp_path / "ledger.db")
    try:
        with db.raw_sqlite("read the busy timeout") as conn:
            assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 250
    finally:
        db.close()


_EARLIER_SESSION_INDEX = (
    "CREATE INDEX runtime_events_session_position_idx ON runtime_events ((CASE WHEN "
    "(session_id IS NOT NULL) THEN nullif(session_id, '') WHEN (substr(stream_id, 1, 8) = "
    "'session:') THEN substr(stream_id, length(rtrim(stream_id, replace(stream_id, '/', ''))) "
    "+ 1) ELSE NULL END), notification_id)"
)


def test_a_session_index_of_the_earlier_expression_is_made_again_and_pages_use_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.db"
    old = _ledger_at(path, 1)
    old.close()
    with sqlite3.connect(path) as conn:  # the index as the earlier version made it
        conn.execute("DROP INDEX runtime_events_session_position_idx")
        conn.execute(_EARLIER_SESSION_INDEX)
    ledger = _ledger_at(path)
    with sqlite3.connect(path) as conn:
        (made,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'runtime_events_session_position_idx'"
        ).fetchone()
        plan = session_page_plan(ledger, conn)
    assert "rtrim" in made  # the fallback for streams without exactly two '/'
    assert made != _EARLIER_SESSION_INDEX
    assert "runtime_events_session_position_idx" in plan
    assert "TEMP B-TREE" not in plan
    ledger.close()


def test_reopening_a_ledger_of_today_makes_no_index_again(tmp_path: Path) -> None:
    """Each index's stored statement matches today's spelling, so an open rebuilds none
    (a mismatch would rebuild the session index on every writable open)."""
    path = tmp_path / "events.db"

    def index_pages() -> dict[str, int]:
        with sqlite3.connect(path) as conn:
            rows = conn.execute(
                "SELECT name, rootpage FROM sqlite_master WHERE type = 'index'"
            ).fetchall()
        return {str(name): int(page) for name, page in rows}

    first = _ledger_at(path, 1)
    first.close()
    before = index_pages()
    assert "runtime_events_session_position_idx" in before
    for n in range(2):
        again = _ledger_at(path, 2 + n)
        again.close()
    assert index_pages() == before


@pytest.mark.parametrize(
    "stream",
    ["session:p/a/s-1", "session:p/a/b/s-2", "session:s-3", "session:p/", "session:é/ü/ñ"],
)
def test_the_session_of_a_session_stream_is_its_last_segment_in_sql_as_in_python(
    tmp_path: Path, stream: str
) -> None:
    db = LedgerDatabase.for_path(tmp_path / "events.db")
    with db.reading("evaluate") as conn:
        found = conn.execute(select(_LastSegment(literal_column(f"'{stream}'")))).scalar_one()
    db.close()
    assert found == derived_session(stream)


def test_a_stream_id_with_a_lone_surrogate_is_found_as_given(tmp_path: Path) -> None:
    """Rows hold text with lone surrogates escaped (ADR 0015); reads by stream escape the
    id they are given the same way, instead of failing to bind it."""
    stream = "session:p1/agent-0/x\ud800y"
    ledger = _ledger_at(tmp_path / "events.db")
    events = [
        build_event(event_type="tool.called", payload={"n": n}, time_ms=1_700_000_000_000,
                    sequence=n, stream_id=stream, scope={}).to_builtins()
        for n in (1, 2)
    ]  # fmt: skip
    assert ledger.extend(events) == 2
    assert ledger.held_sequences(stream) == ({1, 2}, 0)
    assert [e.originator_version for e in LedgerRecorder(ledger.db).select_events(stream)] == [
        1,
        2,
    ]
    assert ledger.forget_stream(stream) == 2
    assert ledger.count() == 0
    ledger.close()
