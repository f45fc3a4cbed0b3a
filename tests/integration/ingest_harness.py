"""Shared parts of the ingest tests: foreign lines, ledger checks, a follower process."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import closing
from datetime import date
from pathlib import Path
from typing import Any, Final

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
# A follower's start (imports, the ledger schema, the first pass) is about a second of CPU;
# with the CPU taken by other processes it took 30 s here (SCHED_IDLE beside three busy
# loops), half of GUARD.  Waits on a start, and on an exit, get this much (pytest's per-test
# timeout is 300 s), and end at once when the process is gone.
START_GUARD: Final = 240.0


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
            rows = conn.execute(
                "SELECT sequence FROM runtime_events WHERE session_id = ? ORDER BY notification_id",
                (session,),
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
    """``pentrace ingest --follow ...`` as a real process, JSON logs on stderr, a health file.

    A thread reads stderr as it comes, so the follower never blocks on a full pipe and a
    test can wait for the events it logs (:meth:`wait_for_event`) instead of guessing."""

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
        self._lines: list[str] = []
        self._closed = False
        self._arrived = threading.Condition()
        self._reader = threading.Thread(target=self._read, name="follower-stderr", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        with self.process.stderr as stream:
            for text in stream:
                with self._arrived:
                    self._lines.append(text)
                    self._arrived.notify_all()
        with self._arrived:
            self._closed = True
            self._arrived.notify_all()

    def stderr(self) -> str:
        """What the follower has written to stderr so far."""
        with self._arrived:
            return "".join(self._lines)

    def _logged(self, event: str) -> dict[str, Any] | None:
        for text in self._lines:
            if text.startswith("{") and (found := json.loads(text)).get("event") == event:
                return dict(found)
        return None

    def wait_for_event(self, event: str, guard: float = START_GUARD) -> dict[str, Any]:
        """The first log line of ``event`` (``started``, ``fallback``, ...), once it is written;
        an error with the log if the follower exits first or ``guard`` runs out."""
        deadline = time.monotonic() + guard
        with self._arrived:
            while (found := self._logged(event)) is None:
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    why = "exited" if self._closed else f"ran {guard:.0f} s"
                    raise AssertionError(
                        f"the follower {why} without logging {event!r}:\n{''.join(self._lines)}"
                    )
                self._arrived.wait(left)
        return found

    def wait_until(self, condition: Callable[[], bool], what: str, guard: float = GUARD) -> None:
        """:func:`wait_until`, failing at once (with the log) if the follower exits."""
        wait_until(lambda: condition() or self.process.poll() is not None, what, guard)
        if not condition():
            raise AssertionError(f"the follower exited before {what}:\n{self.stderr()}")

    def ready(self) -> None:
        """Wait until the first pass is done (the signal handlers are in place by then)."""
        self.wait_until(self.health.exists, "the health file", START_GUARD)

    def _ended(self) -> int:
        code = self.process.wait(START_GUARD)
        self._reader.join(START_GUARD)
        return code

    def stop(self) -> tuple[int, str]:
        """SIGTERM once ready; the exit code and stderr."""
        self.ready()
        self.process.send_signal(signal.SIGTERM)
        return self._ended(), self.stderr()

    def kill(self) -> int:
        """SIGKILL; the exit code."""
        self.process.send_signal(signal.SIGKILL)
        return self._ended()

    def close(self) -> None:
        """Kill it unless it has exited (for ``finally`` blocks)."""
        if self.process.poll() is None:
            self.kill()
