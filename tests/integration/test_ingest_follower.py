"""The ingest follower in-process: cursors, rotation, deletion, torn and changed files."""

from __future__ import annotations

import logging
import os
import sqlite3
from contextlib import closing
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from pentrace.domain.runtime import SessionEvents
from pentrace.infrastructure.ingest import Follower
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.live.hook import LedgerHook
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.testing.render import numbered_records
from tests.integration.ingest_harness import (
    AGENT,
    PROJECT,
    SESSION,
    append,
    held_positions,
    line,
    open_test_ledger,
    shard,
)
from tests.integration.ledger_backends import mapping_fails_at
from tests.support import clean_env, run_pentrace

OTHER = "session-2026-11-29-11-00-00-0e0f1a2b"


def fields(record: logging.LogRecord) -> dict[str, Any]:
    value = getattr(record, "fields", {})
    assert isinstance(value, dict)
    return value


def lines(first: int, last: int) -> bytes:
    return b"".join(line(n) for n in range(first, last + 1))


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """Where a test's SQLite ledger lives."""
    return tmp_path / "ledger.db"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


def follow(root: Path, ledger_path: Path) -> Follower:
    return Follower(open_test_ledger(ledger_path), DataRoot(root))


def test_new_records_are_indexed_once_and_a_restart_continues_from_the_cursor(
    root: Path, ledger: Path
) -> None:
    append(shard(root), lines(1, 3))
    follower = follow(root, ledger)
    assert follower.scan() == 3
    assert follower.scan() == 0
    append(shard(root), lines(4, 5))
    assert follower.scan() == 2
    follower.ledger.close()
    append(shard(root), lines(6, 6))
    again = follow(root, ledger)
    assert again.scan() == 1
    assert again.stats.already_held == 0  # the cursor, not the ledger's duplicates check
    assert held_positions(ledger) == [1, 2, 3, 4, 5, 6]


def test_rows_match_what_ledger_sync_builds(root: Path, tmp_path: Path) -> None:
    append(shard(root), lines(1, 4))
    follow(root, tmp_path / "a.db").scan()
    report = sync(open_test_ledger(tmp_path / "a.db"), DataRoot(root))
    assert (report.indexed, report.already_held) == (0, 4)


def test_rotation_new_date_folder_and_new_session(root: Path, ledger: Path) -> None:
    follower = follow(root, ledger)
    append(shard(root), lines(1, 3))
    follower.scan()
    later = date(2026, 11, 30)
    append(shard(root, index=2, day=later), lines(4, 6))
    append(shard(root, OTHER, day=later), lines(1, 2))
    assert follower.scan() == 5
    assert held_positions(ledger) == [1, 2, 3, 4, 5, 6]
    assert held_positions(ledger, OTHER) == [1, 2]
    assert follower.stats.shards == 3


def test_a_torn_tail_waits_for_its_newline_and_a_healed_fragment_is_skipped(
    root: Path, ledger: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = shard(root)
    whole = line(3)
    append(path, lines(1, 2) + whole[:10])
    follower = follow(root, ledger)
    assert follower.scan() == 2
    assert follower.stats.lag_bytes == 10
    append(path, whole[10:])  # the newline arrives: the record is complete
    assert follower.scan() == 1
    append(path, b'{"timestamp":"2026-11-2')  # torn by a crash ...
    assert follower.scan() == 0
    append(path, b"\n" + line(4))  # ... healed: the next record starts on a new line
    with caplog.at_level(logging.WARNING, logger="pentrace.ingest"):
        assert follower.scan() == 1
    assert held_positions(ledger) == [1, 2, 3, 4]
    assert follower.stats.healed_fragments == 1
    healed = [r for r in caplog.records if fields(r).get("event") == "healed"]
    assert healed
    assert fields(healed[0])["line"] == 4


def test_a_malformed_complete_line_is_skipped_and_reported_apart_from_healed_ones(
    root: Path, ledger: Path, caplog: pytest.LogCaptureFixture
) -> None:
    append(shard(root), lines(1, 1) + b"not json at all\n" + lines(2, 2))
    follower = follow(root, ledger)
    with caplog.at_level(logging.WARNING, logger="pentrace.ingest"):
        assert follower.scan() == 2
    assert (follower.stats.skipped_lines, follower.stats.healed_fragments) == (1, 0)
    skipped = [r for r in caplog.records if fields(r).get("event") == "skipped"]
    assert [fields(r)["line"] for r in skipped] == [2]
    assert held_positions(ledger) == [1, 2]


def test_a_sealed_shards_unterminated_last_record_counts_as_the_reader_counts_it(
    root: Path, ledger: Path
) -> None:
    append(shard(root), lines(1, 2) + line(3).rstrip(b"\n"))
    append(shard(root, index=2), lines(4, 4))
    follow(root, ledger).scan()
    assert held_positions(ledger) == [1, 2, 3, 4]
    assert sync(open_test_ledger(ledger), DataRoot(root)).indexed == 0


def test_a_deleted_session_forgets_its_cursors_and_keeps_its_rows(root: Path, ledger: Path) -> None:
    append(shard(root), lines(1, 2))
    append(shard(root, OTHER), lines(1, 1))
    follower = follow(root, ledger)
    follower.scan()
    os.unlink(shard(root))
    follower.scan()
    assert follower.stats.forgotten_sessions == 1
    assert {c.session[2] for c in follower.cursors.load().values()} == {OTHER}
    assert held_positions(ledger) == [1, 2]


def test_a_truncated_shard_is_reported_and_indexed_again_without_duplicates(
    root: Path, ledger: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = shard(root)
    append(path, lines(1, 4))
    follower = follow(root, ledger)
    follower.scan()
    os.truncate(path, len(lines(1, 2)))
    with caplog.at_level(logging.WARNING, logger="pentrace.ingest"):
        follower.scan()
    assert follower.stats.replaced == 1
    assert any("truncated" in str(fields(r).get("reason")) for r in caplog.records)
    append(path, lines(3, 5))  # the same records again, then a new one
    assert follower.scan() == 1
    assert held_positions(ledger) == [1, 2, 3, 4, 5]


def test_a_replaced_file_with_the_same_records_is_a_no_op_and_new_ones_land(
    root: Path, ledger: Path
) -> None:
    path = shard(root)
    append(path, lines(1, 3))
    follower = follow(root, ledger)
    follower.scan()
    replacement = path.with_name("copy.tmp")
    replacement.write_bytes(lines(1, 4))
    os.replace(replacement, path)  # a new inode
    assert follower.scan() == 1
    assert follower.stats.replaced == 1
    assert follower.stats.already_held == 3
    assert held_positions(ledger) == [1, 2, 3, 4]


def test_a_replaced_file_with_other_records_is_refused_and_reported(
    root: Path, ledger: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = shard(root)
    append(path, lines(1, 3))
    append(shard(root, OTHER), lines(1, 1))
    follower = follow(root, ledger)
    follower.scan()
    replacement = path.with_name("copy.tmp")
    replacement.write_bytes(lines(1, 1) + line(7).replace(b"record 7", b"other"))
    os.replace(replacement, path)
    append(shard(root, OTHER), lines(2, 2))
    with caplog.at_level(logging.ERROR, logger="pentrace.ingest"):
        follower.scan()
    refused = [r for r in caplog.records if fields(r).get("event") == "refused"]
    assert len(refused) == 1
    assert fields(refused[0])["session"] == SESSION
    assert held_positions(ledger, OTHER) == [1, 2]  # other sessions carry on
    assert held_positions(ledger) == [1, 2, 3]  # the ledger keeps what it had


def test_clearing_the_ledger_resets_the_cursors_so_everything_is_indexed_again(
    root: Path, ledger: Path
) -> None:
    append(shard(root), lines(1, 3))
    follower = follow(root, ledger)
    follower.scan()
    follower.ledger.clear()  # `RuntimeEventLedger.clear`: every row goes
    assert follower.cursors.load() == {}
    assert follow(root, ledger).scan() == 3
    assert held_positions(ledger) == [1, 2, 3]


def test_records_the_live_recorder_already_indexed_are_held_not_written_again(
    root: Path, tmp_path: Path
) -> None:
    ledger_path = tmp_path / "ledger.db"
    ledger = open_test_ledger(ledger_path)
    body = [line(n).rstrip(b"\n") for n in range(1, 5)]
    append(shard(root), b"".join(raw + b"\n" for raw in body))
    hook = LedgerHook(ledger, data_root=DataRoot(root), project=PROJECT, agent=AGENT)
    hook(SESSION, numbered_records(body))  # what pentrace's own recording does
    # The hook indexes in a background thread: wait for it, or the follower may come first.
    assert hook.flush(timeout=60)
    hook.close()
    follower = Follower(ledger, DataRoot(root))
    assert follower.scan() == 0
    assert follower.stats.already_held == 4
    assert held_positions(ledger_path) == [1, 2, 3, 4]


def test_two_data_roots_sharing_one_ledger_keep_their_own_cursors(tmp_path: Path) -> None:
    # Two agent hosts, one ledger: neither takes the other's sessions for deleted ones.
    ledger = tmp_path / "ledger.db"
    first, second = tmp_path / "host-a", tmp_path / "host-b"
    append(shard(first), lines(1, 2))
    append(shard(second, OTHER), lines(1, 3))
    a, b = follow(first, ledger), follow(second, ledger)
    assert a.scan() == 2
    assert b.scan() == 3
    append(shard(first), lines(3, 3))
    assert a.scan() == 1
    assert a.stats.forgotten_sessions == 0
    assert b.scan() == 0
    assert [c.session[2] for c in b.cursors.load().values()] == [OTHER]
    assert held_positions(ledger, OTHER) == [1, 2, 3]


def test_two_shards_with_one_index_are_refused_as_the_reader_refuses_them(
    root: Path, ledger: Path
) -> None:
    append(shard(root), lines(1, 2))
    append(shard(root, day=date(2026, 11, 30)), lines(1, 2))  # a stray copy of _001
    follower = follow(root, ledger)
    assert follower.scan() == 0
    assert follower.stats.errors == 1
    assert held_positions(ledger) == []


def test_a_failed_ledger_write_is_logged_with_the_session_and_retried_on_the_next_pass(
    root: Path, ledger: Path, caplog: pytest.LogCaptureFixture
) -> None:
    append(shard(root), lines(1, 2))
    quick = DatabaseTimeouts(lock_seconds=0.05)
    db = LedgerDatabase.for_path(ledger, timeouts=quick)
    follower = Follower(RuntimeEventLedger(db, LedgerSettings().with_limits_off()), DataRoot(root))
    with closing(sqlite3.connect(ledger, isolation_level=None)) as other_writer:
        other_writer.execute("BEGIN IMMEDIATE")  # holds the write lock past the busy timeout
        with caplog.at_level(logging.WARNING, logger="pentrace.ingest"):
            assert follower.scan() == 0
        other_writer.execute("ROLLBACK")
    [failed] = [r for r in caplog.records if fields(r).get("event") == "write_failed"]
    assert failed.levelno == logging.WARNING
    assert {k: fields(failed)[k] for k in ("session", "project", "agent")} == {
        "session": SESSION,
        "project": PROJECT,
        "agent": AGENT,
    }
    assert fields(failed)["hint"]
    assert follower.stats.errors == 1
    assert follower.scan() == 2  # not blocked: the next pass writes it
    assert held_positions(ledger) == [1, 2]


def test_a_record_the_ledger_cannot_take_is_one_finding_and_the_others_are_indexed(
    root: Path, ledger: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    append(shard(root), lines(1, 5))
    append(shard(root, OTHER), lines(1, 2))
    monkeypatch.setattr(SessionEvents, "screened", mapping_fails_at(SESSION, 3))
    follower = follow(root, ledger)
    with caplog.at_level(logging.ERROR, logger="pentrace.ingest"):
        assert follower.scan() == 6
    [refused] = [r for r in caplog.records if fields(r).get("event") == "record_refused"]
    found = fields(refused)
    assert (found["session"], found["position"], found["line"]) == (SESSION, 3, 3)
    assert found["shard"].endswith(f"{SESSION}_001.jsonl")
    assert "UnicodeEncodeError: surrogates not allowed" in found["error"]
    assert "\ud800" not in found["error"]
    assert follower.stats.refused_records == 1
    assert held_positions(ledger) == [1, 2, 4, 5]
    assert held_positions(ledger, OTHER) == [1, 2]
    append(shard(root), lines(6, 6))
    assert follower.scan() == 1  # the cursor moved past it: the session goes on
    assert held_positions(ledger) == [1, 2, 4, 5, 6]


def test_ingest_once_keeps_what_ledger_sync_keeps_under_the_count_limit(
    root: Path, tmp_path: Path
) -> None:
    append(shard(root), lines(1, 30))
    append(shard(root, OTHER), lines(1, 25))
    env = {
        "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS": "20",
        "PENGUIN_RUNTIME_EVENT_LEDGER_CLEANUP_INTERVAL_SECONDS": "3600",
    }
    kept = {}
    for command in (("ingest", "--once", "--json"), ("ledger", "sync", "--json")):
        path = tmp_path / f"{command[0]}.db"
        result = run_pentrace(
            root, *command, env=clean_env(**env, PENGUIN_RUNTIME_EVENT_LEDGER_PATH=str(path))
        )
        assert result.returncode == 0, result.stderr
        kept[command[0]] = (held_positions(path), held_positions(path, OTHER))
    assert kept["ingest"] == kept["ledger"]
    assert sum(len(positions) for positions in kept["ingest"]) == 20
