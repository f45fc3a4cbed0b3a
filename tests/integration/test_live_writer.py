"""The live ledger writer on a real SQLite ledger: locked, broken and repaired under it.

A real second connection holds the write lock, or the events table is
dropped, while the hook keeps saving.  The assertions are on what happened
(returned, queued, dropped, logged once), never on how long it took; joins
and process timeouts are failure guards only.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from pentrace.domain.runtime import SessionEvents
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.indexer import build_events
from pentrace.infrastructure.ledger.live.hook import LedgerHook
from pentrace.infrastructure.ledger.live.writer import CircuitBreaker, LiveBatch, LiveWriter
from pentrace.infrastructure.ledger.rows import as_envelope, envelope_row
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts
from pentrace.testing.files import write_shards
from pentrace.testing.render import numbered_records
from tests.integration.ledger_backends import mapping_fails_at
from tests.integration.test_ledger_indexer import AGENT, PROJECT, SESSION, numbered, trace_lines

GUARD = 60.0
REPO = Path(__file__).resolve().parents[2]


def finishes(work: Callable[[], object]) -> None:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(GUARD)
    assert not thread.is_alive(), f"still blocked after {GUARD} s"


def patient_ledger(path: Path) -> RuntimeEventLedger:
    """A ledger whose writes wait (up to a minute) for another process's lock."""
    timeouts = DatabaseTimeouts(lock_seconds=GUARD)
    db = LedgerDatabase.for_path(path, timeouts=timeouts)
    return RuntimeEventLedger(db, LedgerSettings().with_limits_off())


def batches(turns: int) -> list[LiveBatch]:
    lines = numbered(trace_lines(SESSION, turns))
    events = build_events(SESSION, lines, project=PROJECT, agent=AGENT, directory=None)
    rows = [envelope_row(as_envelope(event), 0) for event in events]
    return [LiveBatch(SESSION, n + 1, n + 1, [row]) for n, row in enumerate(rows)]


def test_saves_return_while_another_process_holds_the_lock_and_land_when_it_lets_go(
    tmp_path: Path,
) -> None:
    lines = trace_lines(SESSION, 2)
    write_shards(tmp_path, PROJECT, AGENT, SESSION, [lines])
    ledger = patient_ledger(tmp_path / "events.db")
    hook = LedgerHook(ledger, data_root=tmp_path, project=PROJECT, agent=AGENT)
    holder = sqlite3.connect(tmp_path / "events.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    with hook.subscribe_live() as live:

        def save_each() -> None:
            for record in numbered_records(lines):
                hook(SESSION, [record])

        finishes(save_each)
        published = [live.get_nowait() for _ in lines]  # at once, ledger or not
    assert len(published) == len(lines)
    assert hook.flush(timeout=0) is False  # still waiting for the lock
    assert hook.writer is not None
    assert hook.writer.written == 0
    holder.rollback()
    assert hook.flush(timeout=GUARD)
    assert ledger.count() == len(lines)
    assert hook.writer.dropped == 0
    hook.close()
    ledger.close()


def test_a_full_queue_drops_new_batches_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = patient_ledger(tmp_path / "events.db")
    writer = LiveWriter(ledger, capacity=2, wait_seconds=0)
    holder = sqlite3.connect(tmp_path / "events.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    offered = batches(3)
    writer.submit(offered[0])
    pause = threading.Event()
    while writer._queue.qsize():  # until the writer holds it, waiting for the lock
        pause.wait(0.01)
    with caplog.at_level(logging.WARNING):
        for batch in offered[1:]:
            writer.submit(batch)
    assert caplog.text.count("live ledger queue full") == 1
    assert writer.dropped == len(offered) - 3  # one being written, two queued
    holder.rollback()
    assert writer.close(GUARD)
    assert writer.written + writer.dropped == len(offered)
    assert ledger.count() == writer.written
    ledger.close()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_breaker_stops_writes_to_a_failing_ledger_and_logs_once_each_way(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = patient_ledger(tmp_path / "events.db")
    clock = Clock()
    breaker = CircuitBreaker(threshold=3, base_seconds=10, clock=clock)
    writer = LiveWriter(ledger, breaker=breaker)
    with sqlite3.connect(tmp_path / "events.db") as saboteur:
        saboteur.execute("DROP TABLE runtime_events")
    offered = batches(3)  # 10 one-envelope batches
    with caplog.at_level(logging.WARNING):
        for batch in offered[:6]:
            writer.submit(batch)
            assert writer.flush(GUARD)
        assert breaker.is_open
        assert caplog.text.count("ledger write failed for session") == 3
        assert caplog.text.count("ledger unavailable after 3 failed writes") == 1
        assert breaker.skipped == 3  # the other three never touched the ledger

        ledger.db.tables.metadata.create_all(ledger.db.engine)  # repaired
        writer.submit(offered[6])  # still paused
        clock.now += 10
        for batch in offered[7:]:
            writer.submit(batch)
            assert writer.flush(GUARD)
    assert not breaker.is_open
    assert caplog.text.count("ledger writes resumed; 7 live event(s) were dropped") == 1
    assert ledger.count() == 3
    writer.close()
    ledger.close()


_CHILD = """
import sys
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.live.hook import LedgerHook
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts
from pentrace.testing.render import numbered_records
from tests.integration.test_ledger_indexer import AGENT, PROJECT, SESSION, trace_lines
root, path = sys.argv[1], sys.argv[2]
db = LedgerDatabase.for_path(path, timeouts=DatabaseTimeouts(lock_seconds=3600))
hook = LedgerHook(RuntimeEventLedger(db, LedgerSettings()), data_root=root, project=PROJECT,
                  agent=AGENT)
print("opened", flush=True)
sys.stdin.readline()  # the parent takes the write lock
for record in numbered_records(trace_lines(SESSION, 3)):
    hook(SESSION, [record])
print("saved", flush=True)
"""


def test_a_process_exits_promptly_with_writes_queued_for_a_locked_ledger(tmp_path: Path) -> None:
    write_shards(tmp_path, PROJECT, AGENT, SESSION, [trace_lines(SESSION, 3)])
    path = tmp_path / "events.db"
    patient_ledger(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path), str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    ) as child:
        assert child.stdout is not None
        assert child.stdin is not None
        try:
            assert child.stdout.readline() == "opened\n"
            holder.execute("BEGIN IMMEDIATE")
            child.stdin.write("go\n")
            child.stdin.flush()
            # The guard: without a bounded exit the child would wait an hour for the lock.
            stdout, stderr = child.communicate(timeout=GUARD)
        finally:
            holder.rollback()
            child.kill()
    assert child.returncode == 0, stderr
    assert stdout == "saved\n"
    assert "Traceback" not in stderr


def test_an_idle_writer_ends_its_thread_and_the_next_save_starts_another(tmp_path: Path) -> None:
    ledger = patient_ledger(tmp_path / "events.db")
    writer = LiveWriter(ledger, idle_seconds=0.05)
    offered = batches(1)
    with writer._idle:  # (reentrant) the thread cannot end before we have seen it
        writer.submit(offered[0])
        first = writer._thread
    assert first is not None
    assert writer.flush(GUARD)
    first.join(GUARD)  # ends by itself once idle
    assert not first.is_alive()
    writer.submit(offered[1])
    assert writer.flush(GUARD)
    assert writer.written == 2
    assert ledger.count() == 2
    writer.close()
    ledger.close()


def test_a_record_the_mapping_cannot_take_is_one_log_line_and_the_save_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADR 0079: a value the mapping cannot take (as a lone surrogate inside a tool call's
    arguments was) neither raises into the save nor stops its other records."""
    lines = trace_lines(SESSION, 2)
    write_shards(tmp_path, PROJECT, AGENT, SESSION, [lines])
    monkeypatch.setattr(SessionEvents, "screened", mapping_fails_at(None, 3))
    ledger = patient_ledger(tmp_path / "events.db")
    hook = LedgerHook(ledger, data_root=tmp_path, project=PROJECT, agent=AGENT)
    with hook.subscribe_live() as live, caplog.at_level(logging.ERROR):
        hook(SESSION, numbered_records(lines))  # one save of every record
        published = [live.get_nowait().event_id for _ in range(len(lines) - 1)]
    assert hook.flush(timeout=GUARD)
    assert [event_id.rsplit(":", 1)[1] for event_id in published] == [
        f"{n:08d}" for n in range(1, len(lines) + 1) if n != 3
    ]
    assert ledger.held_sequences(f"session:{PROJECT}/{AGENT}/{SESSION}")[0] == {
        n for n in range(1, len(lines) + 1) if n != 3
    }
    assert caplog.text.count(f"ledger refused session {SESSION}, position 3") == 1
    assert "UnicodeEncodeError: surrogates not allowed" in caplog.text
    hook.close()
    ledger.close()
