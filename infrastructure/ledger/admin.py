"""What ``pentrace ledger ...`` needs beyond the ledger's own API: open, tail, stats, plans.

* :func:`open_ledger` opens the ledger the environment names through the one
  opener (:mod:`.opener`) with the operator's lock wait, and refuses to
  create a SQLite file a read command would only find empty.
* :func:`ledger_stats` counts rows, bytes and categories without writing (no
  WAL checkpoint).
* :func:`retention_plan` says what ``cleanup`` would delete, rule by rule,
  without deleting anything (the size rule is an estimate, as SQLite only
  learns the freed size after the deletion).
* :func:`rebuild_ledger` recreates every row from the traces with the same
  ids, one session at a time so a caller can draw progress.
* :func:`untraced_sessions` checks the sessions ``pentrace ledger forget``
  is asked to remove: held by the ledger, and without traces under the root.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sqlalchemy import func, select

from pentrace.domain.session.key import SessionKey
from pentrace.errors import LedgerFormatError, NotFoundError
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger, opener
from pentrace.infrastructure.ledger.backend.schema import event_id_of
from pentrace.infrastructure.ledger.indexer import SyncReport, rebuild_sessions
from pentrace.infrastructure.ledger.rows import type_category
from pentrace.infrastructure.ledger.sessions import ledger_session, untraced_sessions
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef

__all__ = [
    "LedgerStats",
    "RetentionPlan",
    "configured_ledger_path",
    "ledger_session",
    "ledger_stats",
    "open_ledger",
    "rebuild_ledger",
    "retention_plan",
    "untraced_sessions",
]

_DAY_MS: Final = 86_400_000


def open_ledger(
    root: DataRoot,
    *,
    wait_seconds: float = 5.0,
    must_exist: bool = True,
    keep_everything: bool = False,
    settings: LedgerSettings | None = None,
    read_only: bool = False,
) -> RuntimeEventLedger:
    """The configured ledger for a command: :func:`.opener.open_ledger` with the
    environment's settings (or ``settings``), the operator's lock wait, and retention
    off for this handle with ``keep_everything``.

    ``read_only`` (the read commands) creates and changes nothing, and also
    reads a Penguin-format ledger file.
    """
    settings = settings if settings is not None else LedgerSettings.from_env()
    if keep_everything:
        settings = settings.with_limits_off()
    return opener.open_ledger(
        settings.with_lock_wait(wait_seconds),
        root.path,
        read_only=read_only,
        must_exist=must_exist,
        redaction_policy=False,  # commands activate the data root's policy themselves
    )


def configured_ledger_path(root: DataRoot, settings: LedgerSettings | None = None) -> Path | None:
    """The SQLite file :func:`open_ledger` opens, or None when a URL names the ledger."""
    settings = settings if settings is not None else LedgerSettings.from_env()
    return opener.ledger_file(settings, root.path)


def forget_sessions(root: DataRoot, sessions: Iterable[SessionKey]) -> dict[SessionKey, int]:
    """Remove the ledger events of sessions whose traces were deleted.

    Returns the rows removed per session; ``{}`` when there is no ledger yet
    (or the file is Penguin's, which pentrace never writes).
    The ledger is derived from traces, so a deleted session's events would
    otherwise stay replayable over SSE and counted by projections.
    """
    wanted = list(sessions)
    if not wanted:
        return {}
    try:
        ledger = open_ledger(root, must_exist=True, keep_everything=True)
    except (NotFoundError, LedgerFormatError):
        return {}  # no ledger, or Penguin's file, which holds none of pentrace's sessions
    try:
        return {key: ledger.forget_stream(key.stream_id) for key in wanted}
    finally:
        ledger.close()


def _categories(by_type: Sequence[Any]) -> dict[str, int]:
    """Rows per category from rows per (type, category); NULL is the type's own (ADR 0058)."""
    counts: dict[str, int] = {}
    for event_type, category, count in by_type:
        name = str(category) if category is not None else type_category(str(event_type))
        counts[name] = counts.get(name, 0) + int(count)
    return dict(sorted(counts.items()))


@dataclass(frozen=True)
class LedgerStats:
    """Rows, bytes, the oldest and newest rows, streams and rows per category."""

    where: str
    rows: int
    bytes: int | None
    oldest_event_id: str | None
    newest_event_id: str | None
    oldest_inserted_ms: int | None
    newest_inserted_ms: int | None
    streams: int
    pruned_rows: int
    by_category: dict[str, int] = field(default_factory=dict)
    format: str = "pentrace"


def _size_without_checkpoint(ledger: RuntimeEventLedger) -> int | None:
    db = ledger.db
    return db.dialect.size(db, checkpoint=False)


def ledger_stats(ledger: RuntimeEventLedger) -> LedgerStats:
    """Figures for ``pentrace ledger stats`` (read-only)."""
    events, marks = ledger.db.tables.events, ledger.db.tables.watermarks
    with ledger.db.reading("read ledger statistics") as conn:
        rows, first, last, streams = conn.execute(
            select(
                func.count(),
                func.min(events.c.notification_id),
                func.max(events.c.notification_id),
                func.count(events.c.stream_id.distinct()),
            )
        ).one()
        ends = {
            int(row[0]): (row[1], int(row[2]))
            for row in conn.execute(
                select(events.c.notification_id, event_id_of(events), events.c.inserted_at).where(
                    events.c.notification_id.in_([first or 0, last or 0])
                )
            )
        }
        by_type = conn.execute(
            select(events.c.event_type, events.c.category, func.count()).group_by(
                events.c.event_type, events.c.category
            )
        ).all()
        pruned = conn.execute(select(func.coalesce(func.sum(marks.c.pruned_rows), 0))).scalar()
    oldest, newest = ends.get(first or -1), ends.get(last or -1)
    return LedgerStats(
        where=ledger.db.where,
        rows=int(rows),
        bytes=_size_without_checkpoint(ledger),
        oldest_event_id=oldest[0] if oldest else None,
        newest_event_id=newest[0] if newest else None,
        oldest_inserted_ms=oldest[1] if oldest else None,
        newest_inserted_ms=newest[1] if newest else None,
        streams=int(streams),
        pruned_rows=int(pruned or 0),
        by_category=_categories(by_type),
        format=ledger.db.format or "pentrace",
    )


@dataclass(frozen=True)
class RetentionPlan:
    """Rows each retention rule would delete now, in the order cleanup applies them."""

    by_age: int
    by_count: int
    by_size: int
    rows: int
    bytes: int | None
    age_cutoff_ms: int | None


def retention_plan(ledger: RuntimeEventLedger) -> RetentionPlan:
    """What :meth:`RuntimeEventLedger.cleanup` would delete, computed without deleting."""
    policy, events = ledger.policy, ledger.db.tables.events
    cutoff: int | None = None
    with ledger.db.reading("plan ledger retention") as conn:
        total = int(conn.execute(select(func.count()).select_from(events)).scalar_one())
        by_age = 0
        if policy.max_age_days is not None and policy.max_age_days > 0:
            cutoff = ledger.now_ms() - int(policy.max_age_days * _DAY_MS)
            by_age = int(
                conn.execute(
                    select(func.count()).select_from(events).where(events.c.inserted_at < cutoff)
                ).scalar_one()
            )
    remaining = total - by_age
    by_count = 0
    if policy.max_events is not None and policy.max_events > 0:
        by_count = max(0, remaining - policy.max_events)
        remaining -= by_count
    size = _size_without_checkpoint(ledger)
    by_size = 0
    # Deleting rows does not shrink the file until a vacuum, so cleanup measures
    # the size before any space is freed; estimate the same way it decides.
    limit = policy.max_bytes
    if limit is not None and limit > 0 and size is not None and size > limit and remaining > 1:
        per_row = max(1, size // remaining)
        target = min(remaining - 1, max(1, int(limit * 0.9) // per_row))
        by_size = remaining - target
    return RetentionPlan(by_age, by_count, by_size, total, size, cutoff)


def rebuild_ledger(ledger: RuntimeEventLedger, refs: Iterable[SessionRef]) -> SyncReport:
    """Index each session's trace again (the same event ids), one transaction per session."""
    return rebuild_sessions(ledger, refs)
