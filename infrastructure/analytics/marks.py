"""Trace marks: per session, how far a cold build folded a read model straight from the traces.

A cold build (:mod:`~pentrace.infrastructure.analytics.cold`) feeds a
projection every record of every session's trace, without the ledger.  It
writes, in the same transaction as the read model and its tracking position,
one row per session: the highest trace position it folded.  A ledger event
is the record at position ``sequence`` of the session ``stream_id``, so when
the ledger later holds those records the runner skips every event at or
below its session's mark (they are in the read model already) and applies
the rest: each record counts once (ADR 0050).

A rebuild replaces the read model from the ledger's positions and drops the
marks in its transaction; marks never change while a tracking row exists
otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Connection, text

from pentrace.infrastructure.analytics.database import MARKS_TABLE, AnalyticsDatabase

__all__ = ["forget_marks", "read_marks", "write_marks"]


def read_marks(db: AnalyticsDatabase, name: str) -> dict[str, int]:
    """The committed marks of projection ``name``: stream id -> highest folded position."""
    with db.reading(f"read the trace marks of {name}") as conn:
        rows = conn.execute(
            text(f"SELECT stream_id, position FROM {MARKS_TABLE} WHERE application_name = :n"),
            {"n": name},
        ).all()
    return {str(stream): int(position) for stream, position in rows}


def write_marks(conn: Connection, name: str, marks: Mapping[str, int]) -> None:
    """Replace the marks of ``name`` with ``marks``, in the caller's transaction."""
    forget_marks(conn, name)
    rows = [{"n": name, "s": stream, "p": position} for stream, position in marks.items()]
    if rows:
        conn.execute(
            text(
                f"INSERT INTO {MARKS_TABLE} (application_name, stream_id, position) "
                "VALUES (:n, :s, :p)"
            ),
            rows,
        )


def forget_marks(conn: Connection, name: str) -> None:
    """Drop the marks of ``name``, in the caller's transaction."""
    conn.execute(text(f"DELETE FROM {MARKS_TABLE} WHERE application_name = :n"), {"n": name})
