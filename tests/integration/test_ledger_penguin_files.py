"""Ledger files Penguin wrote: detected, read read-only, served over SSE, and imported.

``tests/fixtures/penguin/penguin_ledger.db`` was written by Penguin's own
``RuntimeEventLedger`` (``record_ledger.py`` beside it): ten rows of two
sessions and the global stream, rowids 3..12 (two were evicted), one row
with a GitHub token Penguin's key rules did not catch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pentrace.cli.app import app
from pentrace.domain.redaction import is_redacted
from pentrace.domain.runtime import build_event
from pentrace.domain.session.key import SessionKey
from pentrace.errors import LedgerError, LedgerFormatError, LedgerLockedError, NotFoundError
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.opener import forget_sessions
from pentrace.infrastructure.ledger.penguin_import import import_penguin_ledger
from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.sse_harness import Server, SseClient
from tests.integration.test_ledger_contract import make_ledger as backend_ledger
from tests.support import clean_env, run_pentrace

FIXTURE = Path(__file__).parent.parent / "fixtures" / "penguin" / "penguin_ledger.db"
PENGUIN_IDS = [
    *(f"evt:session:ses_a:{n:08d}" for n in (3, 4, 5)),
    *(f"evt:session:ses_b:{n:08d}" for n in (1, 2, 3, 4, 5)),
    "evt:global:00000001",
    "evt:global:00000002",
]
TOKEN = "ghp_" + "0123456789abcdefghijABCDEFGHIJ012345"


pytestmark = pytest.mark.usefixtures("own_stores")


def penguin_root(tmp_path: Path) -> tuple[Path, Path]:
    """A data root whose ledger file is the Penguin-written fixture."""
    root = tmp_path / "root"
    path = root / "runtime_events" / "runtime_events.db"
    path.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURE, path)
    return root, path


def digest(path: Path) -> tuple[str, list[str]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        names = sorted(row[0] for row in conn.execute("SELECT name FROM sqlite_master"))
    return hashlib.sha256(path.read_bytes()).hexdigest(), names


def cli(root: Path, *args: str) -> Any:
    return CliRunner().invoke(app, ["--data-root", str(root), "ledger", *args])


def failing(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A real ``pentrace ledger ...`` process, for the error line and hint a user sees."""
    env = clean_env()
    result = run_pentrace(root, "ledger", *args, env=env)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    return result


def test_stats_tail_and_replay_read_a_penguin_ledger_and_leave_the_file_as_it_was(
    tmp_path: Path,
) -> None:
    root, path = penguin_root(tmp_path)
    before = digest(path)
    stats = cli(root, "stats", "--json")
    assert stats.exit_code == 0, stats.output
    figures = json.loads(stats.stdout)
    assert (figures["format"], figures["rows"], figures["streams"]) == ("penguin", 10, 3)
    assert (figures["oldest_event_id"], figures["newest_event_id"]) == (
        PENGUIN_IDS[0],
        PENGUIN_IDS[-1],
    )
    tail = cli(root, "tail", "-n", "3", "--json")
    assert [json.loads(line)["event"]["id"] for line in tail.stdout.splitlines()] == PENGUIN_IDS[
        -3:
    ]
    assert [json.loads(line)["notification_id"] for line in tail.stdout.splitlines()] == [
        10,
        11,
        12,
    ]
    replay = cli(root, "replay", "--after", PENGUIN_IDS[3], "--session", "ses_b", "--json")
    assert replay.exit_code == 0, replay.output
    assert [item["event"]["id"] for item in json.loads(replay.stdout)["events"]] == PENGUIN_IDS[4:]
    assert digest(path) == before


def test_a_write_command_refuses_a_penguin_ledger_and_names_the_import_command(
    tmp_path: Path,
) -> None:
    root, path = penguin_root(tmp_path)
    before = digest(path)
    result = failing(root, "sync")
    assert "Penguin-format ledger" in result.stderr
    assert f"hint: import it into a pentrace ledger: `pentrace ledger import-penguin {path}`" in (
        result.stderr
    )
    assert digest(path) == before
    with pytest.raises(LedgerFormatError, match="Penguin-format ledger"):
        RuntimeEventLedger.open(root)


def test_read_commands_never_create_tables_in_a_sqlite_file_that_holds_no_ledger(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    path = root / "runtime_events" / "runtime_events.db"
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    before = digest(path)
    for command in (["stats"], ["tail"], ["replay", "--after", "x"]):
        assert "no ledger in" in failing(root, *command).stderr
    with pytest.raises(NotFoundError, match="expected a runtime_events table"):
        LedgerDatabase.for_path(path, read_only=True)
    assert digest(path) == before


def test_a_read_only_handle_refuses_writes_with_a_clear_error(tmp_path: Path) -> None:
    _, path = penguin_root(tmp_path)
    ledger = RuntimeEventLedger(LedgerDatabase.for_path(path, read_only=True))
    try:
        assert ledger.db.format == "penguin"
        assert ledger.contains(PENGUIN_IDS[0])
        with pytest.raises(LedgerFormatError, match="never writes into it"):
            ledger.clear()
    finally:
        ledger.close()


def _target(tmp_path: Path) -> RuntimeEventLedger:
    path = tmp_path / "pentrace" / "runtime_events.db"
    return RuntimeEventLedger.open(settings=LedgerSettings(path=path).with_limits_off())


def test_an_import_keeps_every_id_so_an_old_cursor_resumes_and_a_second_run_adds_nothing(
    tmp_path: Path,
) -> None:
    _, path = penguin_root(tmp_path)
    target = _target(tmp_path)
    try:
        report = import_penguin_ledger(path, target)
        assert (report.read, report.imported, report.already_held) == (10, 10, 0)
        assert [entry.event_id for entry in target.newest(20)] == PENGUIN_IDS
        resumed = target.replay_after(PENGUIN_IDS[4], session_id="ses_b")
        assert resumed.found
        assert [entry.event_id for entry in resumed.events] == PENGUIN_IDS[5:]
        again = import_penguin_ledger(path, target)
        assert (again.imported, again.already_held, again.collisions) == (0, 10, [])
    finally:
        target.close()


def test_an_import_reports_ids_and_stream_positions_the_ledger_holds_otherwise(
    tmp_path: Path,
) -> None:
    _, path = penguin_root(tmp_path)
    target = _target(tmp_path)

    def event(sequence: int, event_id: str | None = None) -> dict[str, Any]:
        return build_event(
            event_type="message.updated",
            payload={"sessionID": "ses_b", "text": "pentrace's own"},
            time_ms=1,
            sequence=sequence,
            event_id=event_id,
        ).to_builtins()

    try:
        target.extend([event(1), event(2, event_id="evt:other:2")])
        report = import_penguin_ledger(path, target)
        assert report.imported == 8
        assert [(note.event_id, note.rowid) for note in report.collisions] == [
            ("evt:session:ses_b:00000001", 6),
            ("evt:session:ses_b:00000002", 7),
        ]
        assert "other content" in report.collisions[0].reason
        assert "evt:other:2 at stream session:ses_b, sequence 2" in report.collisions[1].reason
    finally:
        target.close()


def test_secrets_penguin_missed_are_redacted_on_the_way_in(tmp_path: Path) -> None:
    _, path = penguin_root(tmp_path)
    target = _target(tmp_path)
    try:
        report = import_penguin_ledger(path, target)
        assert [note.event_id for note in report.redacted] == ["evt:session:ses_b:00000005"]
        stored = target.replay_after(PENGUIN_IDS[6], 1).events[0]
        envelope = stored.envelope()
        assert envelope["id"] == "evt:session:ses_b:00000005"
        assert TOKEN not in stored.event_json.decode()
        assert is_redacted(envelope)
        assert envelope["privacy"] == {
            "classification": "sensitive",
            "redacted": True,
            "redacted_fields": ["env.github_token"],
        }
    finally:
        target.close()
    assert TOKEN.encode() not in (tmp_path / "pentrace" / "runtime_events.db").read_bytes()


def test_importing_the_configured_ledger_file_moves_it_aside_first(tmp_path: Path) -> None:
    root, path = penguin_root(tmp_path)
    before = digest(path)
    result = cli(root, "import-penguin", str(path), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    moved = path.with_name("runtime_events.penguin.db")
    assert (report["moved_to"], report["imported"]) == (str(moved), 10)
    assert digest(moved) == before
    stats = json.loads(cli(root, "stats", "--json").stdout)
    assert (stats["format"], stats["rows"], stats["newest_event_id"]) == (
        "pentrace",
        10,
        PENGUIN_IDS[-1],
    )
    assert cli(root, "sync").exit_code == 0


def test_the_sse_service_replays_a_penguin_ledger_from_an_old_clients_last_event_id(
    tmp_path: Path,
) -> None:
    root, path = penguin_root(tmp_path)
    before = digest(path)
    server = Server(root).start()
    try:
        client = SseClient(
            server.url + "/api/v1/events/sse",
            {"session_id": "ses_b"},
            {"Last-Event-ID": PENGUIN_IDS[4]},
        )
        frames = client.events(5)
        client.close()
    finally:
        server.stop()
    assert [frame.id for frame in frames] == PENGUIN_IDS[5:]
    assert frames[0].data["properties"]["sessionID"] == "ses_b"
    assert digest(path) == before


def test_a_file_sqlite_cannot_read_is_a_clear_format_error(tmp_path: Path) -> None:
    path = tmp_path / "runtime_events.db"
    path.write_bytes(b"not a database, just some bytes" * 100)
    with pytest.raises(LedgerFormatError, match="found a file SQLite cannot read"):
        LedgerDatabase.for_path(path, read_only=True)
    with pytest.raises(LedgerFormatError, match="found a file SQLite cannot read"):
        LedgerDatabase.for_path(path)


def test_a_schema_mismatch_inside_an_operation_does_not_blame_the_disk(tmp_path: Path) -> None:
    path = tmp_path / "runtime_events.db"
    ledger = RuntimeEventLedger(LedgerDatabase.for_path(path))
    try:
        with sqlite3.connect(path) as conn:
            conn.execute("DROP TABLE runtime_event_watermarks")
        with pytest.raises(LedgerError, match="no such table") as raised:
            ledger.held_sequences("session:s1")
        assert "not full" not in (raised.value.hint or "")
        assert "not the ledger's" in (raised.value.hint or "")
    finally:
        ledger.close()


def test_forgetting_deleted_sessions_leaves_a_penguin_file_alone(tmp_path: Path) -> None:
    root, path = penguin_root(tmp_path)
    before = digest(path)
    assert forget_sessions(DataRoot(root), [SessionKey("p", "a", "ses_a")]) == {}
    assert digest(path) == before


def test_a_file_locked_by_another_process_is_a_lock_error_not_a_format_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runtime_events.db"
    holder = sqlite3.connect(path, isolation_level=None)  # rollback journal: readers wait
    holder.execute("CREATE TABLE notes (body TEXT)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(LedgerLockedError, match="database is locked"):
            LedgerDatabase.for_path(path, busy_timeout_ms=50)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_importing_a_file_that_is_not_penguins_fails_before_any_ledger_is_made(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    result = failing(root, "import-penguin", str(other))
    assert (
        "expected a Penguin-format ledger, found a database without a runtime_events table"
        in result.stderr
    )
    assert not (root / "runtime_events" / "runtime_events.db").exists()
    assert "no Penguin ledger at" in failing(root, "import-penguin", str(tmp_path / "no.db")).stderr


make_ledger = backend_ledger  # the contract suite's fixture, over every backend


def test_an_import_works_on_every_ledger_backend(
    tmp_path: Path,
    make_ledger: Callable[..., RuntimeEventLedger],
) -> None:
    _, path = penguin_root(tmp_path)
    target = make_ledger()
    target.append(
        build_event(
            event_type="message.updated",
            payload={"sessionID": "ses_b"},
            time_ms=1,
            sequence=1,
            event_id="evt:other:1",
        ).to_builtins()
    )
    report = import_penguin_ledger(path, target)
    assert (report.read, report.imported, len(report.collisions)) == (10, 9, 1)
    resumed = target.replay_after(PENGUIN_IDS[0])
    assert [entry.event_id for entry in resumed.events] == [
        event_id for event_id in PENGUIN_IDS[1:] if event_id != "evt:session:ses_b:00000001"
    ]
    assert import_penguin_ledger(path, target).already_held == 9


@pytest.mark.postgres
def test_a_read_only_open_of_a_database_without_ledger_tables_creates_none(
    postgres_url: str,
) -> None:
    url = postgres_url
    prefix = f"ro{os.getpid()}_"
    with pytest.raises(NotFoundError, match=f"expected a {prefix}runtime_events table"):
        LedgerDatabase(url, table_prefix=prefix, read_only=True)
    writer = LedgerDatabase(url, table_prefix=prefix)
    reader = LedgerDatabase(url, table_prefix=prefix, read_only=True)
    try:
        with pytest.raises(LedgerError, match="open read-only"), reader.writing("write"):
            pass
    finally:
        reader.close()
        writer.drop_all()
        writer.close()


def test_a_pentrace_ledger_from_before_the_watermark_table_still_reads_read_only(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runtime_events.db"
    ledger = RuntimeEventLedger(LedgerDatabase.for_path(path))
    ledger.append(build_event(event_type="x.y", payload={}, time_ms=1, sequence=1).to_builtins())
    ledger.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE runtime_event_watermarks")
        conn.execute("DROP TABLE runtime_event_tracking")
    before = digest(path)
    reader = RuntimeEventLedger(LedgerDatabase.for_path(path, read_only=True))
    try:
        gap = reader.replay_after("evt:global:00000009")
        assert gap.gap is not None
        assert gap.gap.reason == "unknown_event_id"
        assert [entry.event_id for entry in gap.events] == ["evt:global:00000001"]
    finally:
        reader.close()
    assert digest(path) == before
