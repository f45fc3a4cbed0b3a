"""Shared parts of the ingest tests: foreign lines, ledger checks, a follower process."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from datetime import date
from pathlib import Path

from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.foreign_writer import line

__all__ = [
    "AGENT",
    "DAY",
    "PROJECT",
    "SESSION",
    "WRITER",
    "FollowerProcess",
    "append",
    "held_positions",
    "line",
    "open_test_ledger",
    "shard",
    "wait_until",
]

PROJECT, AGENT = "demo", "harness"
SESSION = "session-2026-11-29-10-00-00-0a1b2c3d"
DAY = date(2026, 11, 29)
WRITER = Path(__file__).with_name("foreign_writer.py")
GUARD = 60.0


def shard(root: Path, session: str = SESSION, index: int = 1, day: date = DAY) -> Path:
    """The path of a shard under ``root`` (folders created)."""
    path = DataRoot(root).shard_path(PROJECT, AGENT, session, index, day)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def append(path: Path, data: bytes) -> None:
    """One write(2) on an O_APPEND descriptor, as the harness writes."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def open_test_ledger(path: Path) -> RuntimeEventLedger:
    return RuntimeEventLedger(LedgerDatabase.for_path(path), LedgerSettings().with_limits_off())


def held_positions(ledger_path: Path, session: str = SESSION) -> list[int]:
    """The session's sequences in ledger (notification) order, read with plain sqlite3."""
    if not ledger_path.exists():
        return []
    with closing(sqlite3.connect(ledger_path)) as conn:
        try:
            # The session's stream ends with its id (its column may be left out: ADR 0058).
            rows = conn.execute(
                "SELECT sequence FROM runtime_events WHERE substr(stream_id, -?) = ? "
                "ORDER BY notification_id",
                (len(session) + 1, f"/{session}"),
            ).fetchall()
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):
                return []  # the follower is still creating the schema
            raise
    return [row[0] for row in rows]


def wait_until(condition: Callable[[], bool], what: str, guard: float = GUARD) -> None:
    """Wait for ``condition`` (a generous guard against hangs, never a timing assertion)."""
    deadline = time.monotonic() + guard
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class FollowerProcess:
    """``pentrace ingest --follow ...`` as a real process, JSON logs on stderr, a health file."""

    def __init__(
        self, root: Path, ledger: Path, *args: str, env: dict[str, str] | None = None
    ) -> None:
        self.health = ledger.with_name(f"health-{time.monotonic_ns()}.json")
        environ = {**os.environ}
        for name in ("PENTRACE_LEDGER_URL", "PENGUIN_RUNTIME_EVENT_LEDGER_URL"):
            environ.pop(name, None)  # SQLite unless ``env`` names a URL
        environ.update(
            PENGUIN_HOME=str(root), PENGUIN_RUNTIME_EVENT_LEDGER_PATH=str(ledger), **(env or {})
        )
        command = [sys.executable, "-m", "pentrace", "ingest", "--follow", "--log-format", "json"]
        self.process = subprocess.Popen(
            [*command, "--health-file", str(self.health), *args],
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def ready(self) -> None:
        """Wait until the first pass is done (the signal handlers are in place by then)."""
        wait_until(
            lambda: self.health.exists() or self.process.poll() is not None, "the health file"
        )
        assert self.process.poll() is None, self.process.communicate()[1]

    def stop(self) -> tuple[int, str]:
        """SIGTERM once ready; the exit code and stderr."""
        self.ready()
        self.process.send_signal(signal.SIGTERM)
        _, err = self.process.communicate(timeout=60)
        return self.process.returncode, err

    def kill(self) -> int:
        """SIGKILL; the exit code."""
        self.process.send_signal(signal.SIGKILL)
        self.process.communicate(timeout=60)
        return self.process.returncode

    def close(self) -> None:
        """Kill it unless it has exited (for ``finally`` blocks)."""
        if self.process.poll() is None:
            self.kill()
