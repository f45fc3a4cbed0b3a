"""`pentrace ledger ...` on real data roots and a real SQLite ledger (and a real lock holder)."""

from __future__ import annotations

import json
import os
import selectors
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pentrace import testing as pt
from pentrace.infrastructure.ledger import default_ledger_path
from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.ledger_backends import LedgerBackend
from tests.support import clean_env, cli_ok, ledger_file_rows, one_turn_session, run_pentrace

SID = "session-2026-07-18-11-10-22-3f8a1c2d"
OTHER = "session-2026-07-19-08-00-00-0badcafe"
OWNER = "default_project/default_agent"  # where write_trace puts sessions

pytestmark = pytest.mark.usefixtures("own_stores")


def run(root: Path, *args: str) -> str:
    return cli_ok(root, "ledger", *args).output


def run_json(root: Path, *args: str) -> Any:
    return json.loads(run(root, *args, "--json"))


def ledger_rows(root: Path) -> list[tuple[int, str, bytes]]:
    return ledger_file_rows(default_ledger_path(root))


def synced(root: Path, *sessions: str) -> None:
    for sid in sessions or (SID,):
        pt.write_trace(root, one_turn_session(), session_id=sid)
    assert run_json(root, "sync")["indexed"] == 8 * len(sessions or (SID,))


def test_sync_is_idempotent_and_reports_counts(tmp_path: Path) -> None:
    synced(tmp_path)
    before = ledger_rows(tmp_path)
    assert run_json(tmp_path, "sync") == {
        "sessions": 1,
        "indexed": 0,
        "already_held": 8,
        "retention_skipped": 0,
    }
    assert ledger_rows(tmp_path) == before
    assert "indexed 0 missing event(s), 8 already held" in run(tmp_path, "sync")


def test_tail_shows_the_newest_events_of_one_session_or_all(tmp_path: Path) -> None:
    synced(tmp_path, SID, OTHER)
    lines = [json.loads(line) for line in run(tmp_path, "tail", "-n", "3", "--json").splitlines()]
    assert [line["event"]["id"][-8:] for line in lines] == ["00000006", "00000007", "00000008"]
    assert {line["event"]["scope"]["session_id"] for line in lines} == {OTHER}
    mine = run(tmp_path, "tail", "-n", "2", "--session", SID, "--json").splitlines()
    assert [json.loads(line)["event"]["id"] for line in mine] == [
        f"evt:session:{OWNER}/{SID}:00000007",
        f"evt:session:{OWNER}/{SID}:00000008",
    ]
    table = run(tmp_path, "tail", "-n", "1").splitlines()
    assert table[0].split("\t") == [
        "notification",
        "event_id",
        "type",
        "category",
        "time",
        "session",
    ]
    assert table[1].split("\t")[2] == "run.completed"


def test_tail_follow_prints_events_indexed_after_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ledger_backend: LedgerBackend
) -> None:
    for name, value in ledger_backend.env().items():
        monkeypatch.setenv(name, value)
    [lines] = pt.render_shards(one_turn_session(), session_id=SID)
    pt.write_shards(tmp_path, "default_project", "default_agent", SID, [lines[:4]])
    run(tmp_path, "sync")
    ledger_backend.database()  # dropped afterwards on a shared server
    env = clean_env()
    env.update(ledger_backend.env())
    # Where commits are announced (NOTIFY), the follower wakes on them: its poll
    # interval is then far longer than the wait for the lines below.
    notified = ledger_backend.database().dialect.notifies
    command = [sys.executable, "-m", "pentrace", "--data-root", str(tmp_path), "ledger", "tail"]
    follower = subprocess.Popen(
        [*command, "-n", "1", "-f", "--json", "--interval", "3600" if notified else "0.05"],
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        assert follower.stdout is not None
        reader = _Lines(follower.stdout.fileno())
        assert json.loads(reader.next())["event"]["sequence"] == 4
        pt.write_shards(tmp_path, "default_project", "default_agent", SID, [lines])
        run(tmp_path, "sync")
        seen = [json.loads(reader.next())["event"]["sequence"] for _ in range(4)]
        assert seen == [5, 6, 7, 8]
    finally:
        follower.terminate()
        follower.wait(timeout=10)
        if follower.stdout is not None:
            follower.stdout.close()


class _Lines:
    """Whole lines from a pipe, read with os.read so nothing hides in a Python buffer."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending = b""

    def next(self, timeout: float = 20.0) -> bytes:
        while b"\n" not in self.pending:
            selector = selectors.DefaultSelector()
            selector.register(self.fd, selectors.EVENT_READ)
            try:
                assert selector.select(timeout), "no output from `ledger tail -f`"
            finally:
                selector.close()
            chunk = os.read(self.fd, 65536)
            assert chunk, "`ledger tail -f` exited"
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line


def test_replay_after_an_event_and_after_an_unknown_or_evicted_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced(tmp_path)
    after = run_json(tmp_path, "replay", "--after", f"evt:session:{OWNER}/{SID}:00000006")
    assert (after["found"], after["gap"]) == (True, None)
    assert [e["event"]["sequence"] for e in after["events"]] == [7, 8]
    unknown = run_json(tmp_path, "replay", "--after", "evt:session:nope:00000001", "-n", "2")
    assert unknown["found"] is False
    assert unknown["gap"] == {
        "last_event_id": "evt:session:nope:00000001",
        "reason": "unknown_event_id",
        "oldest_event_id": f"evt:session:{OWNER}/{SID}:00000001",
        "newest_event_id": f"evt:session:{OWNER}/{SID}:00000008",
    }
    assert [e["event"]["sequence"] for e in unknown["events"]] == [1, 2]
    monkeypatch.setenv("PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS", "3")
    run(tmp_path, "cleanup")
    evicted = run_json(tmp_path, "replay", "--after", f"evt:session:{OWNER}/{SID}:00000002")
    assert evicted["gap"]["reason"] == "evicted"
    assert evicted["gap"]["oldest_event_id"] == f"evt:session:{OWNER}/{SID}:00000006"
    assert [e["event"]["sequence"] for e in evicted["events"]] == [6, 7, 8]


def test_rebuild_recreates_every_row_with_the_same_ids(tmp_path: Path) -> None:
    synced(tmp_path, SID, OTHER)
    before = ledger_rows(tmp_path)
    assert run_json(tmp_path, "rebuild") == {"sessions": 2, "indexed": 16}
    after = ledger_rows(tmp_path)
    assert sorted(row[1:] for row in after) == sorted(row[1:] for row in before)
    assert min(row[0] for row in after) > max(row[0] for row in before)


def test_cleanup_dry_run_shows_each_rule_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced(tmp_path)
    monkeypatch.setenv("PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS", "3")
    before = ledger_rows(tmp_path)
    plan = run_json(tmp_path, "cleanup", "--dry-run")
    assert plan["dry_run"] is True
    assert plan["deleted"] == {"age": 0, "count": 5, "size": 0}
    assert plan["limits"]["count"] == 3
    assert ledger_rows(tmp_path) == before
    assert "would delete 5 row(s) in total" in run(tmp_path, "cleanup", "--dry-run")
    done = run_json(tmp_path, "cleanup")
    assert done["deleted"] == plan["deleted"]
    assert [row[1][-2:] for row in ledger_rows(tmp_path)] == ["06", "07", "08"]


def test_stats_counts_rows_bytes_ends_and_categories(tmp_path: Path) -> None:
    synced(tmp_path, SID, OTHER)
    figures = run_json(tmp_path, "stats")
    assert (figures["rows"], figures["streams"], figures["pruned_rows"]) == (16, 2, 0)
    assert sum(figures["by_category"].values()) == 16
    assert figures["by_category"]["tool_action_lifecycle"] == 6
    assert figures["oldest_event_id"] == f"evt:session:{OWNER}/{SID}:00000001"
    assert figures["newest_event_id"] == f"evt:session:{OWNER}/{OTHER}:00000008"
    assert figures["bytes"] >= default_ledger_path(tmp_path).stat().st_size
    assert figures["oldest_inserted_at"].endswith("Z")


def _trace_files(root: Path, sid: str) -> list[Path]:
    return sorted(root.rglob(f"{sid}_*.jsonl"))


def _streams(root: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, event_id, _ in ledger_rows(root):
        sid = event_id.split(":")[2].rpartition("/")[2]  # evt:session:<owner>/<sid>:<seq>
        counts[sid] = counts.get(sid, 0) + 1
    return counts


def test_forget_removes_the_events_of_a_session_whose_traces_were_deleted(
    tmp_path: Path,
) -> None:
    synced(tmp_path, SID, OTHER)
    for path in _trace_files(tmp_path, OTHER):
        path.unlink()  # deleted by hand, outside pentrace

    assert run_json(tmp_path, "forget", "session-2026-07-19", "--yes") == {
        "removed": {f"{OWNER}/{OTHER}": 8}
    }
    assert _streams(tmp_path) == {SID: 8}
    # With the traces gone, a sync does not bring them back.
    assert run_json(tmp_path, "sync") == {
        "sessions": 1,
        "indexed": 0,
        "already_held": 8,
        "retention_skipped": 0,
    }
    assert _streams(tmp_path) == {SID: 8}


def test_forget_refuses_a_session_that_still_has_traces_and_removes_nothing(
    tmp_path: Path,
) -> None:
    synced(tmp_path, SID, OTHER)
    for path in _trace_files(tmp_path, OTHER):
        path.unlink()
    before = ledger_rows(tmp_path)

    done = _pentrace(tmp_path, "ledger", "forget", OTHER, SID, "--yes")

    assert done.returncode == 2, done.stderr
    first, second = done.stderr.splitlines()[:2]
    assert first == (
        f"error: session {OWNER}/{SID} still has traces under {tmp_path}: expected only "
        "sessions whose traces are gone; its events would come back on the next `ledger sync`"
    )
    assert second == f"hint: delete the session itself: `pentrace delete {OWNER}/{SID}`"
    assert ledger_rows(tmp_path) == before  # not even OTHER's events went


def test_forget_names_an_unknown_or_ambiguous_session_and_asks_before_removing(
    tmp_path: Path,
) -> None:
    synced(tmp_path, SID, OTHER)
    before = ledger_rows(tmp_path)

    unknown = _pentrace(tmp_path, "ledger", "forget", "session-2026-01", "--yes")
    assert unknown.returncode == 2  # a name that matches nothing: 2 everywhere (ADR 0092)
    assert "holds no events of a session 'session-2026-01'" in unknown.stderr
    assert "hint: `pentrace audit` lists the ledger's sessions that have no trace" in unknown.stderr

    ambiguous = _pentrace(tmp_path, "ledger", "forget", "session-2026-07", "--yes")
    assert ambiguous.returncode == 2
    assert f"matches 2 sessions: {OWNER}/{SID}, {OWNER}/{OTHER}" in ambiguous.stderr

    for path in _trace_files(tmp_path, OTHER):
        path.unlink()
    unconfirmed = _pentrace(tmp_path, "ledger", "forget", OTHER)
    assert unconfirmed.returncode == 2
    assert "refusing to remove the ledger events of 1 session(s) without confirmation" in (
        unconfirmed.stderr
    )
    assert ledger_rows(tmp_path) == before


def test_a_read_command_without_a_ledger_is_a_clean_error(sample_root: Path) -> None:
    done = _pentrace(sample_root, "ledger", "stats")
    assert done.returncode == 1
    assert done.stderr.splitlines()[0].startswith("error: no ledger at ")
    assert (
        done.stderr.splitlines()[1]
        == "hint: run `pentrace ledger sync` to build it from the traces"
    )
    assert not default_ledger_path(DataRoot(sample_root).path).exists()


def test_a_locked_ledger_is_a_clean_error_with_a_hint(tmp_path: Path) -> None:
    synced(tmp_path)
    holder = sqlite3.connect(default_ledger_path(tmp_path), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        done = _pentrace(tmp_path, "ledger", "--wait", "0.2", "rebuild")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert done.returncode == 1
    first, second = done.stderr.splitlines()[:2]
    assert first.startswith("error: ")
    assert first.endswith("database is locked")
    assert second.startswith("hint: another process holds a write lock on the ledger")
    assert "Traceback" not in done.stderr
    assert len(ledger_rows(tmp_path)) == 8


def _pentrace(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pentrace(root, *args, env=clean_env())
