"""Hidden temp files a killed writer leaves: audit reports them, --fix and the next writer
remove them (only stale ones of their own session), delete removes everything of a session."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pentrace.infrastructure.search.index import search_index_path
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.writer import open_session_writer
from tests.integration.test_file_modes import RECORD
from tests.support import clean_env, run_pentrace

CHILD = Path(__file__).with_name("writer_child.py")
SID = "session-2026-11-29-10-00-00-0123abcd"
OTHER = "session-2026-11-29-10-00-00-0badcafe"
PROJECT, AGENT = "proj", "agent"


def pentrace(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pentrace(root, *args, env=clean_env())


def kill_during_rotation(root: Path, session_id: str) -> Path:
    """SIGKILL a real writer while it writes the temp file of its next shard; return it."""
    traces = DataRoot(root).traces_dir(PROJECT, AGENT)
    for _ in range(5):
        child = subprocess.Popen(
            [sys.executable, str(CHILD), "rotate", str(root), session_id, str(48_000_000)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "READY"
        found: list[Path] = []
        give_up = time.monotonic() + 20
        while not found and time.monotonic() < give_up and child.poll() is None:
            found = list(traces.glob(f"*/.{session_id}_002.jsonl.*.tmp"))
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        if found and found[0].exists():
            return found[0]
        # The rotation won the race: start over with a fresh shard.
        for path in traces.rglob(f"*{session_id}*"):
            path.unlink()
    pytest.fail("no kill landed while the next shard's temp file existed")


def problems(root: Path, code: str) -> list[dict[str, object]]:
    done = pentrace(root, "audit", "--json", "--no-ledger")
    report = json.loads(done.stdout)
    return [p for p in report["problems"] if p["code"] == code]


@pytest.fixture
def live_pid() -> Iterator[int]:
    """The pid of a process that stays alive for the test."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait()


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_writer_killed_in_rotation_leaves_a_temp_the_audit_reports_and_the_next_writer_removes(
    tmp_path: Path,
) -> None:
    temp = kill_during_rotation(tmp_path, SID)
    [stale] = problems(tmp_path, "stale_temp_file")
    assert (stale["path"], stale["severity"], stale["fix"]) == (str(temp), "warning", "remove_temp")
    writer = open_session_writer(DataRoot(tmp_path), PROJECT, AGENT, SID)
    writer.close()
    assert not temp.exists()
    assert problems(tmp_path, "stale_temp_file") == []


def test_audit_fix_removes_a_stale_temp_file(tmp_path: Path) -> None:
    temp = kill_during_rotation(tmp_path, SID)
    done = pentrace(tmp_path, "audit", "--fix", "--no-ledger")
    assert f"changed: [remove_temp] {SID} {temp}: removed a stale temp file" in done.stdout
    assert not temp.exists()
    assert "stale_temp_file" not in pentrace(tmp_path, "audit", "--no-ledger").stdout


def test_the_next_writer_removes_only_its_own_sessions_stale_temps(
    tmp_path: Path, live_pid: int
) -> None:
    root = DataRoot(tmp_path)
    writer = open_session_writer(root, PROJECT, AGENT, SID)
    writer.append(b'{"type":"session_meta","payload":{}}')
    day = writer.path.parent
    writer.close()
    checkpoints = root.traces_dir(PROJECT, AGENT) / ".checkpoints"
    checkpoints.mkdir(mode=0o700)
    gone = dead_pid()
    dead_checkpoint = checkpoints / f".{SID}_002.json.{gone}.tmp"
    live_checkpoint = checkpoints / f".{SID}_003.json.{live_pid}.tmp"  # a reader writing it now
    other_session = day / f".{OTHER}_002.jsonl.{gone}.tmp"
    for path in (dead_checkpoint, live_checkpoint, other_session):
        path.write_bytes(b"{}")
    audited = {p["path"] for p in problems(tmp_path, "stale_temp_file")}
    assert audited == {str(dead_checkpoint), str(other_session)}  # not the live one
    open_session_writer(root, PROJECT, AGENT, SID).close()
    assert not dead_checkpoint.exists()
    assert live_checkpoint.exists()
    assert other_session.exists()


def test_delete_removes_shards_checkpoints_temps_archives_and_the_lock(tmp_path: Path) -> None:
    root, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", RECORD, str(root), str(work)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    sid = done.stdout.strip()
    traces = DataRoot(root).traces_dir(PROJECT, AGENT)
    assert list((traces / ".checkpoints").glob(f"{sid}_*.json"))
    day = DataRoot(root).find_shards(PROJECT, AGENT, sid)[-1].path.parent
    (day / f".{sid}_003.jsonl.{dead_pid()}.tmp").write_bytes(b'{"type":"session_meta"')
    (traces / ".checkpoints" / f".{sid}_003.json.{dead_pid()}.tmp").write_bytes(b"{}")
    assert pentrace(root, "search", "task").returncode == 0  # the index holds its text
    done = pentrace(root, "delete", sid, "--yes")
    assert done.returncode == 0, done.stderr
    left = [p for p in root.rglob("*") if sid in p.name]
    assert left == []
    # Nothing under the traces holds the session's system prompt any more ...
    assert not [p for p in traces.rglob("*") if p.is_file() and b"secret prompt" in p.read_bytes()]
    # ... and the search index dropped its text at once, not at its next refresh.
    with sqlite3.connect(search_index_path(DataRoot(root))) as db:
        assert db.execute("SELECT count(*) FROM sessions").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM docs").fetchone() == (0,)


def test_a_temp_file_of_a_session_that_never_got_a_shard_is_reported_and_removed(
    tmp_path: Path,
) -> None:
    day = DataRoot(tmp_path).traces_dir(PROJECT, AGENT) / "2026-11-29"
    day.mkdir(parents=True, mode=0o700)
    temp = day / f".{OTHER}_001.jsonl.{dead_pid()}.tmp"  # killed creating its first shard
    temp.write_bytes(b'{"type":"session_meta","payload":{"system_prompt":"s')
    [stale] = problems(tmp_path, "stale_temp_file")
    assert (stale["path"], stale["session_id"]) == (str(temp), OTHER)
    done = pentrace(tmp_path, "audit", "--fix", "--no-ledger")
    assert f"changed: [remove_temp] {OTHER} {temp}" in done.stdout
    assert not temp.exists()
    assert [p for p in tmp_path.rglob("*") if OTHER in p.name] == []  # no lock file left
    assert problems(tmp_path, "stale_temp_file") == []
