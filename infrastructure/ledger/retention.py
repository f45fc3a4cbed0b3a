"""Retention: by age, then count, then size, in Penguin's order.

Differences from Penguin, each a fixed weakness:

* Age is measured on ``inserted_at`` (the ledger's clock when the row was
  written), not on the producer's ``time``; an event stamped 0, missing, or
  with a skewed clock is never deleted by the write that stored it (W3, W4).
* A limit of ``None`` (``0``/``off`` in the environment) disables that limit;
  ``max_events=0`` never wipes the ledger (W5).
* Every deletion first records, per stream, the highest sequence and
  notification id it removed (the *watermarks* table), so replay can tell an
  evicted cursor from one that never existed (W6).

Size on SQLite is measured after ``wal_checkpoint(TRUNCATE)``; a checkpoint
that cannot finish skips size pruning, and an incremental vacuum follows a
size prune.  On PostgreSQL the size is ``pg_total_relation_size`` scaled by
the live share of tuples (dead tuples only go away with VACUUM, which we
leave to autovacuum).  The newest row is never deleted by size pruning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, case, delete, func, select

from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
from pentrace.infrastructure.ledger.backend.schema import event_id_of

__all__ = [
    "RetentionPlan",
    "RetentionPolicy",
    "RetentionReport",
    "Watermark",
    "apply_retention",
    "ledger_size",
    "plan_retention",
    "raise_watermark",
]

_DAY_MS = 86_400_000


@dataclass(frozen=True)
class RetentionPolicy:
    """Limits; ``None`` disables one."""

    max_events: int | None = 100_000
    max_age_days: float | None = 14.0
    max_bytes: int | None = 268_435_456


@dataclass(frozen=True)
class RetentionReport:
    """How many rows each rule deleted, and whether size pruning was skipped."""

    by_age: int = 0
    by_count: int = 0
    by_size: int = 0
    size_skipped: bool = False

    @property
    def deleted(self) -> int:
        """Rows deleted in total."""
        return self.by_age + self.by_count + self.by_size


@dataclass(frozen=True)
class RetentionPlan:
    """Rows each retention rule would delete now, in the order cleanup applies them."""

    by_age: int
    by_count: int
    by_size: int
    rows: int
    bytes: int | None
    age_cutoff_ms: int | None


def plan_retention(db: LedgerDatabase, policy: RetentionPolicy, now_ms: int) -> RetentionPlan:
    """What :func:`apply_retention` would delete now, computed without deleting (the size
    rule is an estimate, as SQLite only learns the freed size after the deletion)."""
    events = db.tables.events
    cutoff: int | None = None
    with db.reading("plan ledger retention") as conn:
        total = int(conn.execute(select(func.count()).select_from(events)).scalar_one())
        by_age = 0
        if policy.max_age_days is not None and policy.max_age_days > 0:
            cutoff = now_ms - int(policy.max_age_days * _DAY_MS)
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
    size = db.dialect.size(db, checkpoint=False)
    by_size = 0
    # Deleting rows does not shrink the file until a vacuum, so cleanup measures the size
    # before any space is freed; estimate the same way it decides.
    limit = policy.max_bytes
    if limit is not None and limit > 0 and size is not None and size > limit and remaining > 1:
        per_row = max(1, size // remaining)
        target = min(remaining - 1, max(1, int(limit * 0.9) // per_row))
        by_size = remaining - target
    return RetentionPlan(by_age, by_count, by_size, total, size, cutoff)


def apply_retention(db: LedgerDatabase, policy: RetentionPolicy, now_ms: int) -> RetentionReport:
    """Apply the policy once; ``now_ms`` is the ledger clock (milliseconds)."""
    events = db.tables.events
    by_age = by_count = 0
    with db.writing("apply ledger retention") as conn:
        if policy.max_age_days is not None and policy.max_age_days > 0:
            cutoff = now_ms - int(policy.max_age_days * _DAY_MS)
            by_age = _prune(db, conn, events.c.inserted_at < cutoff)
        if policy.max_events is not None and policy.max_events > 0:
            by_count = _keep_newest(db, conn, policy.max_events)
    if policy.max_bytes is None or policy.max_bytes <= 0:
        return RetentionReport(by_age, by_count)
    size = ledger_size(db)
    if size is None:
        return RetentionReport(by_age, by_count, size_skipped=True)
    by_size = 0
    if size > policy.max_bytes:
        with db.writing("apply ledger size retention") as conn:
            rows = conn.execute(select(func.count()).select_from(events)).scalar_one()
            if rows > 1:
                per_row = max(1, size // rows)
                target = min(rows - 1, max(1, int(policy.max_bytes * 0.9) // per_row))
                by_size = _keep_newest(db, conn, target)
        if by_size:
            db.dialect.after_size_prune(db)
    return RetentionReport(by_age, by_count, by_size)


def ledger_size(db: LedgerDatabase) -> int | None:
    """Bytes the ledger takes, or ``None`` when SQLite's WAL checkpoint could not finish."""
    return db.dialect.size(db, checkpoint=True)


def _keep_newest(db: LedgerDatabase, conn: Connection, keep: int) -> int:
    events = db.tables.events
    cutoff = conn.execute(
        select(events.c.notification_id)
        .order_by(events.c.notification_id.desc())
        .limit(1)
        .offset(keep)
    ).scalar_one_or_none()
    if cutoff is None:
        return 0
    return _prune(db, conn, events.c.notification_id <= cutoff)


def _prune(db: LedgerDatabase, conn: Connection, condition: ColumnElement[bool]) -> int:
    events = db.tables.events
    groups = conn.execute(
        select(
            events.c.stream_id,
            func.max(events.c.sequence),
            func.max(events.c.notification_id),
            func.max(event_id_of(events)),
            func.count(),
        )
        .where(condition)
        .group_by(events.c.stream_id)
    ).all()
    if not groups:
        return 0
    for stream_id, max_sequence, max_notification_id, some_id, count in groups:
        raise_watermark(
            db,
            conn,
            Watermark(
                stream_id, some_id.rpartition(":")[0], max_sequence, max_notification_id, count
            ),
        )
    conn.execute(delete(events).where(condition))
    return int(sum(group[4] for group in groups))


@dataclass(frozen=True)
class Watermark:
    """What retention removed from one stream: the highest sequence and notification id,
    the id prefix of its events, and how many rows."""

    stream_id: str
    id_prefix: str
    max_sequence: int
    max_notification_id: int
    rows: int


def raise_watermark(db: LedgerDatabase, conn: Connection, mark: Watermark) -> None:
    """Record that ``mark.rows`` rows of a stream are gone, up to its sequence and id."""
    marks = db.tables.watermarks
    statement = db.dialect.upsert(marks).values(
        stream_id=mark.stream_id,
        id_prefix=mark.id_prefix,
        max_sequence=mark.max_sequence,
        max_notification_id=mark.max_notification_id,
        pruned_rows=mark.rows,
    )
    new = statement.excluded
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=[marks.c.stream_id],
            set_={
                "max_sequence": _greatest(marks.c.max_sequence, new.max_sequence),
                "max_notification_id": _greatest(
                    marks.c.max_notification_id, new.max_notification_id
                ),
                "pruned_rows": marks.c.pruned_rows + new.pruned_rows,
            },
        )
    )


def _greatest(left: Any, right: Any) -> Any:
    return case((left > right, left), else_=right)
