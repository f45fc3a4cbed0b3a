"""Trace records into the ledger: the live hook, catch-up sync, rebuild, and W1/W8 restarts."""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.indexer import index_records, rebuild
from pentrace.infrastructure.ledger.live.hook import LedgerHook
from pentrace.testing.files import write_shards
from pentrace.testing.render import envelope_line, numbered_records
from tests.integration.test_ledger_contract import ids

SESSION = "session-2026-11-29-10-00-00-0a1b2c3d"
OTHER = "session-2026-11-29-11-00-00-0e0f1a2b"
PROJECT, AGENT = "demo", "coder"


def trace_lines(session_id: str, turns: int) -> list[bytes]:
    """A session_meta, then ``turns`` committed requests of three records each."""
    meta = {
        "session_id": session_id,
        "provider": "openai",
        "model_id": "gpt-5",
        "model_context_window": 200000,
        "system_prompt": "be brief",
        "agent_state": {},
        "workspace": "/srv/app",
    }
    lines = [envelope_line("2026-11-29T10:00:00.000Z", "session_meta", meta)]
    for turn in range(turns):
        stamp = f"2026-11-29T10:00:{turn + 1:02d}.000Z"
        lines.append(envelope_line(stamp, "event_msg", {"type": "request_begin"}))
        lines.append(
            envelope_line(
                stamp, "model_msg", {"type": "text", "role": "assistant", "text": f"answer {turn}"}
            )
        )
        lines.append(
            envelope_line(stamp, "event_msg", {"type": "request_end", "status": "completed"})
        )
    return lines


def numbered(lines: list[bytes], first: int = 1) -> list[tuple[int, bytes]]:
    return list(enumerate(lines, start=first))


def open_ledger(path: Path) -> RuntimeEventLedger:
    return RuntimeEventLedger(LedgerDatabase.for_path(path), LedgerSettings().with_limits_off())


def event_id(session_id: str, position: int) -> str:
    return SessionKey(PROJECT, AGENT, session_id).event_id(position)


def test_sync_indexes_every_record_once_and_a_second_sync_changes_nothing(
    tmp_path: Path,
) -> None:
    write_shards(tmp_path, PROJECT, AGENT, SESSION, [trace_lines(SESSION, 2)])
    write_shards(tmp_path, PROJECT, AGENT, OTHER, [trace_lines(OTHER, 1)])
    ledger = open_ledger(tmp_path / "events.db")
    first = sync(ledger, tmp_path)
    assert (first.sessions, first.indexed) == (2, 11)
    again = sync(ledger, tmp_path)
    assert (again.indexed, again.already_held) == (0, 11)
    scoped = ledger.replay_after(None, session_id=SESSION)
    assert ids(scoped.events) == [event_id(SESSION, n) for n in range(1, 8)]
    assert scoped.events[0].envelope()["scope"]["directory"] == "/srv/app"


def test_sync_fills_the_positions_the_live_path_missed(tmp_path: Path) -> None:
    lines = trace_lines(SESSION, 2)
    write_shards(tmp_path, PROJECT, AGENT, SESSION, [lines])
    ledger = open_ledger(tmp_path / "events.db")
    held = [(n, lines[n - 1]) for n in (1, 2, 6)]
    index_records(ledger, SESSION, held, project=PROJECT, agent=AGENT, directory="/srv/app")
    assert sync(ledger, tmp_path).indexed == 4
    assert sorted(ids(ledger.replay_after(None).events)) == [
        event_id(SESSION, n) for n in range(1, 8)
    ]


def test_rebuild_recreates_the_ledger_with_the_same_ids_and_envelopes(tmp_path: Path) -> None:
    write_shards(tmp_path, PROJECT, AGENT, SESSION, [trace_lines(SESSION, 3)])
    ledger = open_ledger(tmp_path / "events.db")
    sync(ledger, tmp_path)
    before = [(e.event_id, e.event_json) for e in ledger.replay_after(None).events]
    report = rebuild(ledger, tmp_path)
    assert report.indexed == len(before) == 10
    assert [(e.event_id, e.event_json) for e in ledger.replay_after(None).events] == before


def test_w1_after_a_restart_new_records_get_new_ids_and_none_is_dropped(tmp_path: Path) -> None:
    lines = trace_lines(SESSION, 2)
    path = tmp_path / "events.db"
    first_process = open_ledger(path)
    index_records(first_process, SESSION, numbered(lines[:3]), project=PROJECT, agent=AGENT)
    first_process.close()

    restarted = open_ledger(path)
    new = index_records(
        restarted, SESSION, numbered(lines[3:], first=4), project=PROJECT, agent=AGENT
    )
    assert new == 4
    after = restarted.replay_after(event_id(SESSION, 3))
    assert ids(after.events) == [event_id(SESSION, n) for n in range(4, 8)]
    assert index_records(restarted, SESSION, numbered(lines), project=PROJECT, agent=AGENT) == 0


def test_the_hook_indexes_and_publishes_with_the_sessions_workspace(tmp_path: Path) -> None:
    lines = trace_lines(SESSION, 1)
    write_shards(tmp_path, PROJECT, AGENT, SESSION, [lines])
    ledger = open_ledger(tmp_path / "events.db")
    hook = LedgerHook(ledger, data_root=tmp_path, project=PROJECT, agent=AGENT)
    with hook.subscribe_live() as live:
        hook(SESSION, numbered_records(lines[2:], first=3))
        published = [live.get_nowait(), live.get_nowait()]
    assert hook.flush(timeout=60)  # the ledger is written in the background
    assert [entry.event_id for entry in published] == [event_id(SESSION, 3), event_id(SESSION, 4)]
    assert published[0].envelope()["scope"]["directory"] == "/srv/app"
    stored = ledger.replay_after(None).events
    assert [entry.event_json for entry in stored] == [entry.event_json for entry in published]
    assert sync(ledger, tmp_path).indexed == 2  # same envelopes: no conflict, only the gap


def test_a_failing_ledger_does_not_stop_live_delivery_and_logs_no_payload(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lines = trace_lines(SESSION, 1)
    write_shards(tmp_path, PROJECT, AGENT, SESSION, [lines])
    path = tmp_path / "events.db"
    ledger = open_ledger(path)
    with sqlite3.connect(path) as saboteur:
        saboteur.execute("DROP TABLE runtime_events")
    hook = LedgerHook(ledger, data_root=tmp_path, project=PROJECT, agent=AGENT)
    with caplog.at_level(logging.WARNING), hook.subscribe_live() as live:
        hook(SESSION, numbered_records(lines))
        assert live.get_nowait().event_id == event_id(SESSION, 1)
        assert hook.flush(timeout=60)  # the ledger is written in the background
    assert "ledger write failed for session" in caplog.text
    assert "answer 0" not in caplog.text


_CHILD = """
import os, sys, time
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.live.hook import LedgerHook
from pentrace.testing.render import numbered_records
from tests.integration.test_ledger_indexer import AGENT, PROJECT, SESSION, trace_lines
root, db = sys.argv[1], sys.argv[2]
ledger = RuntimeEventLedger(LedgerDatabase.for_path(db), LedgerSettings().with_limits_off())
hook = LedgerHook(ledger, data_root=root, project=PROJECT, agent=AGENT)
lines = trace_lines(SESSION, 3)
for item in numbered_records(lines):
    hook(SESSION, [item])
assert hook.flush(timeout=60)  # written in the background: wait until it is in the ledger
print("indexed", flush=True)
time.sleep(60)
"""


def test_w8_events_indexed_live_survive_a_sigkill_with_no_client_connected(
    tmp_path: Path,
) -> None:
    write_shards(tmp_path, PROJECT, AGENT, SESSION, [trace_lines(SESSION, 3)])
    db = tmp_path / "events.db"
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path), str(db)],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline() == b"indexed\n"
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    survivor = open_ledger(db)
    assert ids(survivor.replay_after(None).events) == [event_id(SESSION, n) for n in range(1, 11)]
    assert survivor.replay_after(event_id(SESSION, 1)).found is True
