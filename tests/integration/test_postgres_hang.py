"""A real PostgreSQL that stops answering, through a loopback proxy that accepts and holds.

Saves stay within the live bound (they return; the breaker opens and later
saves skip the ledger), ``open_recording`` and ``pentrace ledger stats`` give
a clear error instead of hanging, a statement on an open connection is cut by
the client-side deadline, and after the server recovers ``ledger sync``
closes the gap.  No test asserts a time: the thread joins and process timeouts
below are failure guards, far above the bounds they guard.

Skipped without ``PENTRACE_TEST_DATABASE_URL``.
"""

from __future__ import annotations

import logging
import os
import queue
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from sqlalchemy import text

from pentrace.domain.session.key import SessionKey
from pentrace.errors import AnalyticsError, LedgerError
from pentrace.infrastructure.analytics.database import AnalyticsDatabase
from pentrace.infrastructure.eventstore.recording import Recording, open_recording
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.backend.connections import DEADLINES
from pentrace.infrastructure.ledger.live.hook import LiveSubscription
from pentrace.infrastructure.ledger.live.writer import CircuitBreaker
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts
from pentrace.testing import StartSession, UserInput, write_trace
from tests.integration.pg_proxy import HangingProxy
from tests.support import (
    NEEDS_POSTGRES,
    POSTGRES_URL,
    REPO,
    postgres_tables,
    record_answered_turn,
    run_pentrace,
    start_sample_session,
)

URL = POSTGRES_URL
GUARD = 90.0  # seconds: a failure guard, never an expectation
T = TypeVar("T")
SHORT = DatabaseTimeouts(connect_seconds=2, statement_seconds=1, lock_seconds=1)

pytestmark = NEEDS_POSTGRES


@pytest.fixture
def proxy() -> Iterator[HangingProxy]:
    assert URL is not None
    with HangingProxy.before(URL) as running:
        yield running


@pytest.fixture
def prefix() -> Iterator[str]:
    with postgres_tables("hang") as name:
        yield name


def finishes(work: Callable[[], T]) -> T:
    """Run ``work`` in a thread and return (or raise) what it did; fail, instead of hanging
    the suite, if it is still blocked after the guard."""
    results: queue.Queue[tuple[bool, object]] = queue.Queue()

    def run() -> None:
        try:
            results.put((True, work()))
        except BaseException as error:  # noqa: BLE001  # handed to the test's thread
            results.put((False, error))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GUARD)
    assert not thread.is_alive(), f"still blocked after {GUARD} s"
    ok, value = results.get_nowait()
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]  # what work() returned


def drained(live: LiveSubscription) -> int:
    count = 0
    while True:
        try:
            live.get_nowait()
        except queue.Empty:
            return count
        count += 1


def record_turns(rec: Recording, workspace: Path, turns: int, sid: str | None = None) -> str:
    application = rec.application
    if sid is None:
        handle = start_sample_session(application, workspace=workspace)
    else:
        handle = application.open_session(sid)
    for turn in range(turns):
        record_answered_turn(handle, f"question {turn}", f"answer {turn}")
    handle.close()
    return handle.session_id


def run_cli(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_pentrace(root, *args, env={**os.environ, **env}, timeout=GUARD, cwd=REPO)


def test_saves_go_on_while_the_server_hangs_and_ledger_sync_closes_the_gap_after(
    tmp_path: Path, proxy: HangingProxy, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert URL is not None
    root, workspace = tmp_path / "data", tmp_path / "work"
    workspace.mkdir()
    db = LedgerDatabase(proxy.url_for(URL), table_prefix=prefix, timeouts=SHORT)
    ledger = RuntimeEventLedger(db, LedgerSettings().with_limits_off())
    rec = open_recording(root, "proj", "agent", ledger=ledger)
    writer = rec.hook.writer
    assert writer is not None
    writer.breaker = CircuitBreaker(threshold=3, base_seconds=2.0, max_seconds=4.0)
    live = rec.subscribe_live(maxsize=10_000)

    sid = record_turns(rec, workspace, 1)
    assert rec.flush(GUARD)
    healthy = writer.written
    assert healthy == 6
    assert ledger.count() == 6
    assert drained(live) == 6

    proxy.hang()
    with caplog.at_level(logging.WARNING):
        finishes(lambda: record_turns(rec, workspace, 5, sid))
        assert drained(live) == 20  # in-process live delivery never waits on the ledger
        turns = 6
        while not writer.breaker.is_open:  # three writes fail in a row
            finishes(lambda: record_turns(rec, workspace, 1, sid))
            turns += 1
            assert finishes(lambda: writer.flush(GUARD))
        finishes(lambda: record_turns(rec, workspace, 5, sid))
        turns += 5
        assert writer.breaker.skipped > 0  # saves while the breaker is open skip the ledger
        assert writer.written == healthy
        assert caplog.text.count("ledger unavailable after 3 failed writes") == 1

        proxy.recover()
        pause = threading.Event()
        while writer.breaker.is_open:  # a closed breaker is learnt from a trial write
            finishes(lambda: record_turns(rec, workspace, 1, sid))
            turns += 1
            assert finishes(lambda: writer.flush(GUARD))
            pause.wait(0.05)
    assert "ledger writes resumed" in caplog.text
    assert caplog.text.count("ledger unavailable after") == 1
    finishes(lambda: rec.close(timeout=GUARD))

    result = run_cli(
        root,
        {"PENTRACE_LEDGER_URL": proxy.url_for(URL), "PENTRACE_LEDGER_TABLE_PREFIX": prefix},
        "ledger",
        "sync",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    direct = RuntimeEventLedger(LedgerDatabase(URL, table_prefix=prefix), LedgerSettings())
    try:
        held, _ = direct.held_sequences(SessionKey("proj", "agent", sid).stream_id)
    finally:
        direct.close()
    assert held == set(range(1, 2 + 4 * turns + 1))  # every record of the trace, none missing


def test_open_recording_and_ledger_stats_give_a_clear_error_against_a_hung_server(
    tmp_path: Path, proxy: HangingProxy, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert URL is not None
    proxy.hang()
    hung = proxy.url_for(URL)
    settings = LedgerSettings(url=hung, timeouts=SHORT)
    with caplog.at_level(logging.WARNING):
        rec = finishes(
            lambda: open_recording(tmp_path / "data", "proj", "agent", ledger_settings=settings)
        )
    assert rec.ledger is None
    assert "recording without the ledger" in caplog.text
    assert "did not answer" in caplog.text

    (tmp_path / "data").mkdir(mode=0o700, exist_ok=True)  # a missing root is a usage error
    result = run_cli(
        tmp_path / "data",
        {"PENTRACE_LEDGER_URL": hung, "PENTRACE_DB_CONNECT_TIMEOUT": "2"},
        "ledger",
        "stats",
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: ")
    assert "did not answer" in result.stderr
    assert "Traceback" not in result.stderr
    assert proxy.held >= 2


def test_a_statement_on_an_open_connection_is_cut_when_the_server_stops_answering(
    proxy: HangingProxy, prefix: str
) -> None:
    assert URL is not None
    db = LedgerDatabase(proxy.url_for(URL), table_prefix=prefix, timeouts=SHORT)
    cut_before = DEADLINES.cut

    def probe() -> None:
        with db.reading("probe the ledger") as conn:
            conn.execute(text("SELECT 1"))
            proxy.hang()
            conn.execute(text("SELECT 2"))

    try:
        with pytest.raises(LedgerError, match="did not answer within 6 s"):  # 1 s + 5 s grace
            finishes(probe)
    finally:
        proxy.recover()
        db.close()
    assert DEADLINES.cut > cut_before


def test_a_subscription_whose_listen_connection_gets_no_answer_still_stops(
    proxy: HangingProxy, prefix: str
) -> None:
    assert URL is not None
    db = LedgerDatabase(proxy.url_for(URL), table_prefix=prefix, timeouts=SHORT)
    ledger = RuntimeEventLedger(db, LedgerSettings())
    held_before = proxy.held
    proxy.hang()

    def subscribe_and_stop() -> None:
        with ledger.subscribe(gt=0) as subscription:
            _wait_for(lambda: proxy.held > held_before)  # its LISTEN connection is held
            subscription.stop()

    try:
        finishes(subscribe_and_stop)  # joins the listener thread: bounded by the connect timeout
    finally:
        proxy.recover()
        ledger.close()


def _wait_for(condition: Callable[[], bool]) -> None:
    pause = threading.Event()
    while not condition():
        pause.wait(0.02)


def test_a_statement_past_the_statement_timeout_is_cancelled_by_the_server(prefix: str) -> None:
    assert URL is not None
    db = LedgerDatabase(URL, table_prefix=prefix, timeouts=SHORT)
    try:

        def sleep_long() -> None:
            with db.reading("sleep on the server") as conn:
                conn.execute(text("SELECT pg_sleep(30)"))

        with pytest.raises(LedgerError, match="ran past the statement timeout"):
            finishes(sleep_long)
    finally:
        db.close()


def test_ledger_wait_bounds_the_wait_for_a_postgresql_writer_lock(
    tmp_path: Path, prefix: str
) -> None:
    import psycopg

    assert URL is not None
    root = tmp_path / "data"
    write_trace(
        root, [StartSession(), UserInput("hi")], session_id="session-2026-07-18-11-10-22-3f8a1c2d"
    )
    db = LedgerDatabase(URL, table_prefix=prefix)  # creates the tables
    db.close()
    conninfo = URL.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo) as holder:
        holder.execute(f"LOCK TABLE {prefix}runtime_events IN EXCLUSIVE MODE")
        result = run_cli(
            root,
            {"PENTRACE_LEDGER_URL": URL, "PENTRACE_LEDGER_TABLE_PREFIX": prefix},
            "ledger",
            "--wait",
            "1",
            "sync",
        )
        holder.rollback()
    assert result.returncode == 1, result.stderr
    assert "held the lock past the lock timeout" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_analytics_database_gives_up_on_a_hung_server(proxy: HangingProxy) -> None:
    assert URL is not None
    proxy.hang()
    with pytest.raises(AnalyticsError, match="timeout expired"):
        finishes(lambda: AnalyticsDatabase(proxy.url_for(URL), SHORT))


def test_a_connection_held_idle_between_statements_is_never_cut(prefix: str) -> None:
    assert URL is not None
    quick = DatabaseTimeouts(connect_seconds=2, statement_seconds=0.1, lock_seconds=1)
    db = LedgerDatabase(URL, table_prefix=prefix, timeouts=quick)
    cut_before = DEADLINES.cut
    try:
        with db.reading("hold a connection") as conn:
            conn.execute(text("SELECT 1"))
            threading.Event().wait(5.5)  # idle past the 5.1 s statement deadline
            assert conn.execute(text("SELECT 2")).scalar_one() == 2
    finally:
        db.close()
    assert DEADLINES.cut == cut_before
