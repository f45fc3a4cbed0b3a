"""Penguin's ``penguin.system.runtime_event_ledger`` API over pentrace's ledger.

``RuntimeEventLedger(path, *, policy=...)`` keeps Penguin's constructor,
methods and result types (``bool`` from ``append``, a count from ``extend``,
:class:`ReplayResult` with plain dict events, a bounds dict), and stores into
a pentrace ledger file, which ``pentrace ledger ...`` and the SSE service
read.  Where Penguin is weak it is not followed (``docs/runtime-events.md``):

* opening the ledger raises the compat sequence counters past what the file
  already holds, so a restarted process does not reuse ids (W1);
* an id held with other content is skipped with a logged warning instead of
  silently (W1), and so is an envelope that fails validation or redaction;
* age retention is measured on the ledger's clock, not the producer's (W3,
  W4), and ``max_events <= 0`` means no count limit instead of "delete
  everything" (W5);
* a gap reports bounds within the replay scope and why the cursor is missing
  (``reason``: ``evicted`` or ``unknown_event_id``) (W6).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Connection, func, select

from pentrace.compat.penguin import _common
from pentrace.compat.penguin.policy import (
    DEFAULT_LEDGER_CLEANUP_INTERVAL_SECONDS,
    DEFAULT_LEDGER_MAX_AGE_DAYS,
    DEFAULT_LEDGER_MAX_BYTES,
    DEFAULT_LEDGER_MAX_EVENTS,
    RuntimeEventLedgerPolicy,
    default_ledger_path,
    policy_from_env,
)
from pentrace.errors import LedgerConflictError, LedgerError
from pentrace.infrastructure.ledger import LedgerSettings, open_ledger
from pentrace.infrastructure.ledger import RuntimeEventLedger as _Store
from pentrace.infrastructure.ledger.rows import envelope_row
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts

__all__ = [
    "DEFAULT_LEDGER_CLEANUP_INTERVAL_SECONDS",
    "DEFAULT_LEDGER_MAX_AGE_DAYS",
    "DEFAULT_LEDGER_MAX_BYTES",
    "DEFAULT_LEDGER_MAX_EVENTS",
    "ReplayResult",
    "RuntimeEventLedger",
    "RuntimeEventLedgerPolicy",
    "default_ledger_path",
    "get_runtime_event_ledger",
    "policy_from_env",
]

_ATTR: Final = "_runtime_event_ledger_v1"
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReplayResult:
    """Penguin's replay result; ``reason`` (pentrace's) says why a cursor was not found."""

    found: bool
    events: list[dict[str, Any]]
    oldest_event_id: str | None = None
    newest_event_id: str | None = None
    reason: str | None = None


_PROCESS_LEDGER: RuntimeEventLedger | None = None


def get_runtime_event_ledger(core: Any | None = None) -> RuntimeEventLedger:
    """The ledger attached to ``core`` (made on first use), else the process's one."""
    global _PROCESS_LEDGER
    if core is not None:
        existing = getattr(core, _ATTR, None)
        if isinstance(existing, RuntimeEventLedger):
            return existing
        ledger = RuntimeEventLedger(default_ledger_path(), policy=policy_from_env())
        setattr(core, _ATTR, ledger)
        return ledger
    if _PROCESS_LEDGER is None:
        _PROCESS_LEDGER = RuntimeEventLedger(default_ledger_path(), policy=policy_from_env())
    return _PROCESS_LEDGER


def _settings(policy: RuntimeEventLedgerPolicy) -> LedgerSettings:
    # The compat ledger runs cleanup itself (cleanup_if_due), so the store never does.
    age = policy.max_age_seconds
    return LedgerSettings(
        max_events=policy.max_events if policy.max_events > 0 else None,
        max_age_days=age / 86_400 if age is not None and age > 0 else None,
        max_bytes=policy.max_bytes
        if policy.max_bytes is not None and policy.max_bytes > 0
        else None,
        cleanup_interval_seconds=None,
    )


def _problem(event: Mapping[str, Any]) -> str | None:
    try:
        envelope_row(event, 0)
    except LedgerError as error:
        return str(error)
    return None


class RuntimeEventLedger:
    """Penguin's ledger class: redacted RuntimeEvents in a pentrace ledger file at ``path``."""

    def __init__(self, path: str | Path, *, policy: RuntimeEventLedgerPolicy | None = None) -> None:
        self.path = Path(path).expanduser()
        self.policy = policy or RuntimeEventLedgerPolicy()
        self._lock = threading.RLock()
        self._last_cleanup = 0.0
        self._cleanup_pending = False
        self._opened: _Store | None = None

    @property
    def store(self) -> _Store:
        """The pentrace ledger underneath, opened on first use (as Penguin opens lazily).

        A file Penguin wrote is opened read-only: replay, ``newest``, ``bounds``
        and ``contains`` read it, and a write raises ``LedgerFormatError``
        naming ``pentrace ledger import-penguin``.
        """
        with self._lock:
            if self._opened is None:
                settings = _settings(self.policy).model_copy(
                    update={"path": self.path, "timeouts": DatabaseTimeouts.from_env()}
                )
                self._opened = open_ledger(settings, penguin_read_only=True)
                _common.raise_counters(_high_water(self._opened))
            return self._opened

    # -- writing -----------------------------------------------------------------
    def append(self, event: Mapping[str, Any]) -> bool:
        """Store one envelope; False when it is invalid, not fully redacted or already held."""
        return self.extend([event]) == 1

    def extend(self, events: Iterable[Mapping[str, Any]]) -> int:
        """Store envelopes in one transaction; returns how many rows were new."""
        pending = []
        for event in events:
            problem = _problem(event)
            if problem is None:
                pending.append(event)
            else:
                _log.warning("runtime event not stored: %s", problem)
        if not pending:
            return 0
        with self._lock:
            try:
                stored = self._write(pending)
            except LedgerConflictError:
                stored = sum(self._write_or_skip(event) for event in pending)
        return stored

    def _write(self, events: list[Mapping[str, Any]]) -> int:
        hook: Callable[[Connection], None] = lambda conn: self.cleanup_if_due(conn=conn)  # noqa: E731
        stored = self.store.extend(events, before_commit=hook)
        if self._cleanup_pending:
            self._cleanup_pending = False
            self.cleanup()
        return stored

    def _write_or_skip(self, event: Mapping[str, Any]) -> int:
        try:
            return self._write([event])
        except LedgerConflictError as error:
            _log.warning("runtime event not stored: %s", error)
            return 0

    # -- reading -----------------------------------------------------------------
    def contains(self, event_id: str) -> bool:
        """Whether the event id is currently retained."""
        return self.store.contains(event_id)

    def replay_after(
        self,
        last_event_id: str,
        *,
        limit: int | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        directory: str | None = None,
    ) -> ReplayResult:
        """Events after the cursor in insertion order; a gap has ``found=False`` and no events."""
        if not isinstance(last_event_id, str) or not last_event_id:
            return ReplayResult(False, [], **self.bounds())
        result = self.store.replay_after(
            last_event_id,
            limit if limit is not None and limit > 0 else None,
            session_id=session_id or None,
            agent_id=agent_id or None,
            directory=directory or None,
        )
        if result.gap is not None:
            gap = result.gap
            return ReplayResult(False, [], gap.oldest_event_id, gap.newest_event_id, gap.reason)
        oldest, newest = self.store.bounds(session_id or None, agent_id or None, directory or None)
        return ReplayResult(True, [entry.envelope() for entry in result.events], oldest, newest)

    def newest(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """The newest ``limit`` envelopes, oldest first."""
        return [entry.envelope() for entry in self.store.newest(max(limit, 0))]

    def bounds(self, *, conn: object | None = None) -> dict[str, str | None]:
        """``{"oldest_event_id", "newest_event_id"}`` of the whole ledger (``conn`` is ignored)."""
        oldest, newest = self.store.bounds()
        return {"oldest_event_id": oldest, "newest_event_id": newest}

    # -- retention ---------------------------------------------------------------
    def cleanup_if_due(self, *, conn: object | None = None) -> None:
        """Clean up when the policy's interval has passed (``<= 0``: every write; inf: never)."""
        now = time.monotonic()
        interval = self.policy.cleanup_interval_seconds
        if interval > 0 and now - self._last_cleanup < interval:
            return
        self.cleanup(conn=conn)
        self._last_cleanup = now

    def cleanup(self, *, conn: object | None = None) -> None:
        """Apply age, count and size retention; inside a write (``conn``) it runs after commit."""
        if conn is not None:
            self._cleanup_pending = True
            return
        self.store.cleanup()

    def close(self) -> None:
        """Close the database connections (Penguin has no close; harmless to skip)."""
        with self._lock:
            if self._opened is not None:
                self._opened.close()
                self._opened = None


def _high_water(store: _Store) -> dict[str, int]:
    """The highest sequence per stream the ledger holds or retention pruned."""
    events, marks = store.db.tables.events, store.db.tables.watermarks
    with store.db.reading("read the ledger's high-water marks") as conn:
        held = conn.execute(
            select(events.c.stream_id, func.max(events.c.sequence)).group_by(events.c.stream_id)
        ).all()
        pruned = conn.execute(select(marks.c.stream_id, marks.c.max_sequence)).all()
    marks_by_stream: dict[str, int] = {}
    for stream, sequence in [*held, *pruned]:
        marks_by_stream[str(stream)] = max(marks_by_stream.get(str(stream), 0), int(sequence))
    return marks_by_stream
