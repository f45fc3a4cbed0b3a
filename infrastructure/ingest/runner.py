"""Running the follower as a service: notifications or polling, health, shutdown.

Filesystem notifications come from ``watchfiles`` (Rust ``notify``; inotify
on Linux), ADR 0027.  A notification about a shard re-reads that session; one
about a folder (a new project, agent or date folder) re-reads the whole root,
since a file created before the new folder's watch existed is otherwise
missed.  With no notification in ``rescan`` seconds, the whole root is read
anyway, so a lost notification costs at most that much delay.  When
notifications are unavailable (or ``poll`` is set) the root is read every
``interval`` seconds.  ``stop`` ends the loop after the current batch, whose
cursor has committed with its rows.

The ledger's retention limits apply as on every path into it: each write may
run the cleanup when its interval has passed, and a run ends with one, as
``ledger sync`` does.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pentrace.errors import ConfigError, PentraceError
from pentrace.infrastructure.ingest.follower import Follower, SessionKey
from pentrace.infrastructure.ingest.logs import report
from pentrace.infrastructure.ledger.store import RuntimeEventLedger
from pentrace.infrastructure.storage.layout import DataRoot, parse_shard_name

__all__ = ["EmbeddedIngest", "IngestRunner", "changed_sessions"]

if TYPE_CHECKING:
    from pentrace.infrastructure.agents.importer import AgentFeed

_DEBOUNCE_MS: Final = 20
_STEP_MS: Final = 1
_TIMEOUT_MS: Final = 500


def changed_sessions(root: Path, paths: Iterable[str]) -> tuple[set[SessionKey], bool]:
    """The sessions whose shards changed, and whether a folder changed (read everything).

    Only ``<project>/agents/<agent>/traces/<day>/<shard>`` matters; everything
    else under the root (the SQLite ledger and its WAL, search indexes, agent
    state) is ignored, or the follower's own commits would wake it.
    """
    keys: set[SessionKey] = set()
    everything = False
    for raw in paths:
        try:
            parts = Path(raw).relative_to(root).parts
        except ValueError:
            continue
        if len(parts) == 1:
            # A new project folder; files at the top (a health file, say) are not projects.
            everything = everything or Path(raw).is_dir()
            continue
        if parts[1] != "agents" or (len(parts) >= 4 and parts[3] != "traces"):
            continue
        if len(parts) <= 5:
            everything = True  # agents/, an agent, its traces/ or a date folder
            continue
        parsed = parse_shard_name(parts[5]) if len(parts) == 6 else None
        if parsed is not None:
            keys.add((parts[0], parts[2], parsed[0]))
    return keys, everything


class IngestRunner:
    """Drives a :class:`Follower` until ``stop`` is set (or once)."""

    def __init__(
        self,
        follower: Follower,
        *,
        poll: bool = False,
        interval: float = 0.5,
        rescan: float = 5.0,
        health_file: Path | None = None,
        health_interval: float = 30.0,
        feed: AgentFeed | None = None,
    ) -> None:
        self.follower = follower
        self.feed = feed  # other agents' stores, imported as they change (docs/agents.md)
        self.stop = follower.stop
        self.poll = poll
        self.interval = interval
        self.rescan = rescan
        self.health_file = health_file
        self.health_interval = health_interval
        self.mode = "poll" if poll else "notify"
        self._last_health = self._last_file = 0.0
        self._health_written = False

    def run_once(self) -> None:
        """One pass over the root, the ledger's retention, then the health line."""
        self._feed_all()
        self.follower.scan()
        self._retention()
        self.health(force=True)

    # -- other agents' stores (issue #28): imported into the root, then followed ------
    def _feed_all(self) -> None:
        if self.feed is not None:
            self._fed(*self.feed.import_all())

    def _feed_changed(self, paths: list[str]) -> None:
        if self.feed is not None and paths:
            self._fed(*self.feed.import_changed(paths))

    def _fed(self, written: set[SessionKey], warnings: list[str]) -> None:
        for warning in warnings:
            report(logging.WARNING, warning, event="agents")
        for key in sorted(written):
            self.follower.follow_session(key)

    def run(self) -> None:
        """Follow until stopped: notifications when possible, else polling."""
        root = self.follower.root.path
        root.mkdir(parents=True, exist_ok=True)
        report(logging.INFO, "ingest started", event="started", root=str(root), mode=self.mode)
        self._feed_all()
        self.follower.scan()
        self.health(force=True)
        if not self.poll:
            try:
                self._watch(root)
            except (OSError, RuntimeError, ImportError) as error:
                self.mode = "poll"
                report(
                    logging.WARNING,
                    "filesystem notifications are unavailable; polling instead",
                    event="fallback",
                    error=f"{type(error).__name__}: {error}",
                )
        if not self.stop.is_set():
            self._poll()
        self._retention()
        self.health(force=True)
        report(logging.INFO, "ingest stopped", event="stopped", **self._counters())

    def _retention(self) -> None:
        """Apply the ledger's retention limits; a failure is logged (the rows stand)."""
        try:
            self.follower.ledger.cleanup()
        except PentraceError as error:
            report(
                logging.WARNING,
                "ledger retention failed; it runs again with the next write",
                event="retention_failed",
                error=error.message,
            )

    def _watch(self, root: Path) -> None:
        import watchfiles  # imported here: only the notifying follower needs it

        last_full = time.monotonic()
        stores = self.feed.watched() if self.feed is not None else []
        for changes in watchfiles.watch(
            root,
            *stores,
            stop_event=self.stop,
            debounce=_DEBOUNCE_MS,
            step=_STEP_MS,
            rust_timeout=_TIMEOUT_MS,
            yield_on_timeout=True,
            raise_interrupt=False,
            ignore_permission_denied=True,
        ):
            keys, everything = changed_sessions(root, (path for _, path in changes))
            self._feed_changed([path for _, path in changes if not path.startswith(str(root))])
            if everything or time.monotonic() - last_full >= self.rescan:
                self._feed_all()
                self.follower.scan()
                last_full = time.monotonic()
            else:
                for key in sorted(keys):
                    self.follower.follow_session(key)
            self.health()

    def _poll(self) -> None:
        while not self.stop.wait(self.interval):
            self._feed_all()
            self.follower.scan()
            self.health()

    def _write_health(self, path: Path, body: dict[str, Any]) -> None:
        """Replace the health file atomically; the first failure is fatal, later ones logged."""
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(body, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(temporary, path)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            if not self._health_written:
                raise ConfigError(
                    f"cannot write the health file {path}: {reason}",
                    hint="pass a --health-file in a writable folder",
                ) from None
            report(
                logging.WARNING,
                "health file not written",
                event="health_failed",
                path=str(path),
                error=reason,
            )
            return
        self._health_written = True

    # -- health ------------------------------------------------------------------
    def _counters(self) -> dict[str, Any]:
        return {"mode": self.mode, **asdict(self.follower.stats)}

    def health(self, *, force: bool = False) -> None:
        """Rewrite the health file (at most once a second); log the health line (per interval)."""
        now = time.monotonic()
        counters = self._counters()
        if self.health_file is not None and (force or now - self._last_file >= 1.0):
            self._write_health(self.health_file, {"status": "ok", "time": time.time(), **counters})
            self._last_file = now
        if force or now - self._last_health >= self.health_interval:
            report(logging.INFO, "health", event="health", **counters)
            self._last_health = now


class EmbeddedIngest:
    """The follower on a background thread of another command (``pentrace serve --ingest``)."""

    def __init__(
        self, root: DataRoot, ledger: RuntimeEventLedger, feed: AgentFeed | None = None
    ) -> None:
        self.ledger = ledger
        self.runner = IngestRunner(Follower(ledger, root), feed=feed)
        self.thread = threading.Thread(target=self.runner.run, name="pentrace-ingest", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Finish the current batch (its cursor commits), then close the ledger."""
        self.runner.stop.set()
        self.thread.join(timeout=30)
        self.ledger.close()
