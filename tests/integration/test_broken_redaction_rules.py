"""A broken ``redaction.toml`` in the data root: the trace is still recorded, and nothing
reaches the ledger or a live subscriber, which may only see what the root's rules
redacted (ADR 0022).  The error names the file, the line and a hint; once the file is
fixed, ``pentrace ledger sync`` indexes what was recorded meanwhile.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from pentrace.domain.redaction.policy import DEFAULT, install
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.eventstore.recording import open_recording
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.live.hook import LedgerHook
from pentrace.infrastructure.ledger.settings import default_ledger_path
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.reader import read_session
from tests.support import clean_env, record_answered_turn, run_pentrace, start_sample_session

pytestmark = pytest.mark.usefixtures("own_stores")

# Line 3 has no value: not valid TOML.
BROKEN = '[[rules]]\nid = "acme_token"\nregex =\n'
FIXED = '[[rules]]\nid = "acme_token"\nregex = "acme_[0-9a-f]{32}"\n'


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "data"
    path.mkdir()
    (path / "redaction.toml").write_text(BROKEN)
    yield path
    install(DEFAULT)  # the process-wide policy, for the tests that follow


def record_one_turn(application: SessionApplication) -> str:
    handle = start_sample_session(application)
    record_answered_turn(handle, "hello", "hi")
    handle.close()
    return handle.session_id


def trace_records(root: Path, session_id: str) -> int:
    [ref] = [ref for ref in DataRoot(root).iter_sessions() if ref.session_id == session_id]
    return sum(1 for _ in read_session(ref.shards))


def ledger_rows(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT count(*) FROM runtime_events").fetchone()[0])


def the_error(caplog: pytest.LogCaptureFixture) -> str:
    [error] = [r for r in caplog.records if r.levelno == logging.ERROR]
    return error.getMessage()


def test_open_recording_records_the_trace_and_names_the_broken_rules(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING), open_recording(root, "proj", "agent") as recording:
        live = recording.subscribe_live()
        session_id = record_one_turn(recording.application)
        assert recording.flush(timeout=10)
        assert recording.ledger is None
        with pytest.raises(queue.Empty):
            live.get_nowait()  # nothing redacted by the built-in rules alone is published
    assert trace_records(root, session_id) == 6  # meta, tools, input, begin, text, end
    assert not default_ledger_path(root).exists()
    message = the_error(caplog)
    assert f"{root / 'redaction.toml'}: not valid TOML" in message
    assert "at line 3" in message
    assert "hint: see docs/redaction.md" in message
    assert "recording the trace only" in message


def test_a_hook_over_an_open_ledger_gets_nothing_while_the_rules_are_broken(
    root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.db"
    ledger = RuntimeEventLedger(LedgerDatabase.for_path(path), LedgerSettings())
    hook = LedgerHook(ledger, data_root=root, project="proj", agent="agent")
    live = hook.subscribe_live()
    try:
        with caplog.at_level(logging.ERROR):
            application = SessionApplication(root, "proj", "agent", on_recorded=hook)
        with application:
            session_id = record_one_turn(application)
        assert hook.flush(timeout=10)
    finally:
        hook.close()
        ledger.close()
    assert trace_records(root, session_id) == 6
    assert ledger_rows(path) == 0
    with pytest.raises(queue.Empty):
        live.get_nowait()
    assert "at line 3" in the_error(caplog)


def test_ledger_sync_refuses_until_the_rules_are_fixed_then_indexes_everything(
    root: Path,
) -> None:
    with SessionApplication(root, "proj", "agent") as application:
        session_id = record_one_turn(application)
    refused = run_pentrace(root, "ledger", "sync", env=clean_env())
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith(f"error: {root / 'redaction.toml'}: not valid TOML")
    assert "at line 3" in refused.stderr
    assert "hint: see docs/redaction.md" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not default_ledger_path(root).exists()  # nothing reached the ledger
    (root / "redaction.toml").write_text(FIXED)
    synced = run_pentrace(root, "ledger", "sync", env=clean_env())
    assert synced.returncode == 0, synced.stderr
    assert ledger_rows(default_ledger_path(root)) == trace_records(root, session_id)
