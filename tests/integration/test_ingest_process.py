"""`pentrace ingest --follow` as a real process beside a foreign writer process.

The writer is not pentrace (tests/integration/foreign_writer.py appends lines
with os.write, as PenguinHarness does).  Waits are on conditions with generous
guards; nothing asserts a time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from tests.integration.ingest_harness import (
    WRITER,
    FollowerProcess,
    append,
    held_positions,
    line,
    shard,
    wait_until,
)
from tests.integration.sse_harness import child_env


def writer(path: Path, first: int, count: int, pause: float = 0.0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(path), str(first), str(count), str(pause)],
        stdout=subprocess.DEVNULL,
        text=True,
    )


def log_events(stderr: str) -> list[dict[str, object]]:
    return [json.loads(text) for text in stderr.splitlines() if text.startswith("{")]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.mark.parametrize("mode", [(), ("--poll", "--interval", "0.05")], ids=["notify", "poll"])
def test_a_foreign_writers_records_arrive_while_the_follower_runs(
    root: Path, tmp_path: Path, mode: tuple[str, ...]
) -> None:
    ledger = tmp_path / "ledger.db"
    follower = FollowerProcess(root, ledger, *mode)
    try:
        follower.ready()
        child = writer(shard(root), 1, 200, 0.002)
        assert child.wait(timeout=60) == 0
        wait_until(lambda: len(held_positions(ledger)) == 200, "all 200 records")
    finally:
        code, err = follower.stop()
    assert code == 0, err
    assert held_positions(ledger) == list(range(1, 201))
    started = [e for e in log_events(err) if e.get("event") == "started"]
    assert started
    assert started[0]["mode"] == ("poll" if mode else "notify")


def test_sigkill_mid_stream_then_restart_indexes_every_record_exactly_once(
    root: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.db"
    total = 3000
    child = writer(shard(root), 1, total, 0.0005)
    follower = FollowerProcess(root, ledger)
    try:
        wait_until(lambda: len(held_positions(ledger)) >= 50, "the first records")
        assert follower.kill() == -signal.SIGKILL
        killed_at = len(held_positions(ledger))
        follower = FollowerProcess(root, ledger)
        assert child.wait(timeout=120) == 0
        wait_until(lambda: len(held_positions(ledger)) >= total, "every record after the restart")
    finally:
        child.kill()
        code, err = follower.stop()
    assert code == 0, err
    assert killed_at > 0
    assert held_positions(ledger) == list(range(1, total + 1))


def test_sigterm_finishes_commits_the_cursor_and_exits_zero(root: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    append(shard(root), b"".join(line(n) for n in range(1, 6)))
    follower = FollowerProcess(root, ledger)
    wait_until(lambda: len(held_positions(ledger)) == 5, "the five records")
    code, err = follower.stop()
    assert code == 0, err
    events = [e.get("event") for e in log_events(err)]
    assert events[0] == "started"
    assert events[-1] == "stopped"
    body = json.loads(follower.health.read_text())
    assert body["indexed"] == 5
    assert body["lag_bytes"] == 0
    assert body["status"] == "ok"
    # The cursor committed: a one-shot run afterwards finds nothing new and no duplicates.
    again = FollowerProcess(root, ledger)
    code, err = again.stop()
    assert code == 0, err
    health_lines = [e for e in log_events(err) if e.get("event") == "health"]
    assert health_lines[-1]["already_held"] == 0
    assert health_lines[-1]["indexed"] == 0


def test_without_notifications_the_follower_falls_back_to_polling(
    root: Path, tmp_path: Path
) -> None:
    # A watchfiles that cannot load, as on a system without its wheel.
    shim = tmp_path / "shim" / "watchfiles"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('no notify backend here')\n")
    ledger = tmp_path / "ledger.db"
    follower = FollowerProcess(
        root, ledger, "--interval", "0.05", env={"PYTHONPATH": str(shim.parent)}
    )
    try:
        # The follower says when it gives up on notifications: from then on it polls, and
        # only polling can find what is appended after that line.
        fallback = follower.wait_for_event("fallback")
        append(shard(root), line(1) + line(2))
        follower.wait_until(lambda: len(held_positions(ledger)) == 2, "both records")
    finally:
        code, err = follower.stop()
    assert code == 0, err
    assert "no notify backend" in str(fallback["error"])
    stopped = [e for e in log_events(err) if e.get("event") == "stopped"]
    assert stopped[0]["mode"] == "poll"
    assert held_positions(ledger) == [1, 2]


def test_a_one_shot_run_indexes_what_is_there_and_prints_a_summary(
    root: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.db"
    append(shard(root), line(1) + line(2) + line(3)[:5])
    env = {**child_env(root), "PENGUIN_RUNTIME_EVENT_LEDGER_PATH": str(ledger)}
    done = subprocess.run(
        [sys.executable, "-m", "pentrace", "ingest", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["indexed"] == 2
    assert summary["sessions"] == 1
    assert held_positions(ledger) == [1, 2]


def test_once_and_follow_together_is_a_usage_error_without_a_traceback(
    root: Path, tmp_path: Path
) -> None:
    env = {**child_env(root), "PENGUIN_RUNTIME_EVENT_LEDGER_PATH": str(tmp_path / "l.db")}
    done = subprocess.run(
        [sys.executable, "-m", "pentrace", "ingest", "--once", "--follow"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "--once" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "l.db").exists()


def test_rotation_into_a_new_date_folder_and_a_new_session_are_followed_live(
    root: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.db"
    other = "session-2026-11-30-09-00-00-0e0f1a2b"
    later = date(2026, 11, 30)
    follower = FollowerProcess(root, ledger)
    try:
        follower.ready()
        assert writer(shard(root), 1, 5).wait(timeout=60) == 0
        wait_until(lambda: len(held_positions(ledger)) == 5, "the first shard")
        # The writer rotates to _002, in a folder that did not exist when the watch began.
        assert writer(shard(root, index=2, day=later), 6, 5).wait(timeout=60) == 0
        assert writer(shard(root, other, day=later), 1, 3).wait(timeout=60) == 0
        wait_until(lambda: len(held_positions(ledger)) == 10, "the rotated shard")
        wait_until(lambda: len(held_positions(ledger, other)) == 3, "the new session")
    finally:
        code, err = follower.stop()
    assert code == 0, err
    assert held_positions(ledger) == list(range(1, 11))
    assert held_positions(ledger, other) == [1, 2, 3]


def test_an_unwritable_health_file_is_a_clear_error(root: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    env = {**child_env(root), "PENGUIN_RUNTIME_EVENT_LEDGER_PATH": str(tmp_path / "l.db")}
    done = subprocess.run(
        [sys.executable, "-m", "pentrace", "ingest", "--health-file", str(blocker / "h.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert f"cannot write the health file {blocker / 'h.json'}" in done.stderr
    assert "Traceback" not in done.stderr
