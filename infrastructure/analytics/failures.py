"""Events a projection's handler could not take: recorded, counted, listed, forgotten (ADR 0032).

A handler error on one event does not stop the projection: the event's
read-model writes are rolled back, the event is recorded here - in the same
transaction that moves the tracking position past it - and catch-up goes on.
A row names the projection, the session (``project/agent/session-id``), the
event's stream position and notification id, its type, and the error's type
and first line (secrets redacted, at most :data:`MESSAGE_LIMIT` characters).

``PENTRACE_ANALYTICS_MAX_FAILURES`` (default: the projection's
``max_failures``, 100) bounds how many may be recorded before the projection
stops instead; 0 stops on the first error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from sqlalchemy import Connection, exc, text

from pentrace.domain.redaction.text import redact_secrets_in_text
from pentrace.domain.session.key import parse_session_stream
from pentrace.errors import ConfigError
from pentrace.infrastructure.analytics.database import FAILURES_TABLE, AnalyticsDatabase
from pentrace.infrastructure.ledger.backend.credentials import mask_text

__all__ = [
    "ENV_MAX_FAILURES",
    "EventFailure",
    "count_failures",
    "failure_of",
    "failure_warnings",
    "forget_failure",
    "isolable",
    "max_failures",
    "read_failures",
    "record_failures",
    "select_failures",
    "stored_failures",
]

ENV_MAX_FAILURES: Final = "PENTRACE_ANALYTICS_MAX_FAILURES"
MESSAGE_LIMIT: Final = 300
_COLUMNS: Final = (
    "application_name, stream_id, sequence, notification_id, event_type, project, agent, "
    "session_id, error_type, error_message, attempts"
)


@dataclass(frozen=True)
class EventFailure:
    """One event a projection's handler raised on, and what it raised."""

    projection: str
    stream_id: str
    sequence: int
    notification_id: int | None
    event_type: str
    project: str
    agent: str
    session_id: str
    error_type: str
    error_message: str
    attempts: int = 1

    @property
    def session(self) -> str:
        """``project/agent/session-id`` (the stream id for an event outside a session)."""
        if not self.session_id:
            return self.stream_id
        return f"{self.project}/{self.agent}/{self.session_id}"

    def where(self) -> str:
        """Where the event is: session, sequence, notification id and type."""
        notification = self.notification_id if self.notification_id is not None else "unknown"
        return (
            f"session {self.session}, sequence {self.sequence} "
            f"(notification {notification}, {self.event_type})"
        )

    def describe(self) -> str:
        """Where the event is, and the error."""
        return f"{self.where()}: {self.error_type}: {self.error_message}"

    def as_json(self) -> dict[str, object]:
        """The ``--json`` shape (a documented contract: fields are only ever added)."""
        return {
            "projection": self.projection,
            "session": self.session,
            "project": self.project,
            "agent": self.agent,
            "session_id": self.session_id,
            "sequence": self.sequence,
            "notification_id": self.notification_id,
            "event_type": self.event_type,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "attempts": self.attempts,
        }


def isolable(error: Exception) -> bool:
    """True for an error of the handler; False when the database itself is gone (then stop)."""
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return False
    return not isinstance(error, exc.DisconnectionError | exc.TimeoutError | MemoryError)


def failure_of(
    projection: str,
    stream_id: str,
    sequence: int,
    event_type: str,
    notification_id: int | None,
    error: BaseException,
) -> EventFailure:
    """The record of ``error`` on one event: first line only, secrets masked, truncated."""
    lines = str(error).strip().splitlines()
    first = lines[0] if lines else ""
    message = mask_text(redact_secrets_in_text(first))
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 3] + "..."
    key = parse_session_stream(stream_id)
    return EventFailure(
        projection=projection,
        stream_id=stream_id,
        sequence=sequence,
        notification_id=notification_id,
        event_type=event_type,
        project=key.project if key else "",
        agent=key.agent if key else "",
        session_id=key.session_id if key else "",
        error_type=type(error).__name__,
        error_message=message,
    )


def max_failures(default: int, env: Mapping[str, str]) -> int:
    """The failure limit: ``PENTRACE_ANALYTICS_MAX_FAILURES`` when set, else ``default``."""
    value = (env.get(ENV_MAX_FAILURES) or "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise ConfigError(
            f"{ENV_MAX_FAILURES}: expected a whole number >= 0, found {value[:20]!r}",
            hint="0 stops a projection on its first handler error; unset it for the default",
        )
    return number


def record_failures(conn: Connection, failures: Iterable[EventFailure]) -> None:
    """Insert the failures (a failure recorded again counts one more attempt)."""
    rows = [
        {
            "application_name": f.projection,
            "stream_id": f.stream_id,
            "sequence": f.sequence,
            "notification_id": f.notification_id,
            "event_type": f.event_type,
            "project": f.project,
            "agent": f.agent,
            "session_id": f.session_id,
            "error_type": f.error_type,
            "error_message": f.error_message,
            "attempts": f.attempts,
        }
        for f in failures
    ]
    if not rows:
        return
    names = _COLUMNS.split(", ")
    sql = (
        f"INSERT INTO {FAILURES_TABLE} ({_COLUMNS}) VALUES ({', '.join(':' + n for n in names)}) "
        "ON CONFLICT (application_name, stream_id, sequence) DO UPDATE SET "
        "notification_id = COALESCE(excluded.notification_id, "
        f"{FAILURES_TABLE}.notification_id), error_type = excluded.error_type, "
        f"error_message = excluded.error_message, attempts = {FAILURES_TABLE}.attempts + 1"
    )
    conn.execute(text(sql), rows)


def forget_failure(conn: Connection, failure: EventFailure) -> bool:
    """Delete one failure row; False when it was already gone (another retry took it)."""
    result = conn.execute(
        text(
            f"DELETE FROM {FAILURES_TABLE} WHERE application_name = :n "
            "AND stream_id = :s AND sequence = :q"
        ),
        {"n": failure.projection, "s": failure.stream_id, "q": failure.sequence},
    )
    return bool(result.rowcount)


def stored_failures(conn: Connection, projection: str) -> int:
    """How many events of this projection are recorded as failed (as ``conn`` sees it)."""
    value = conn.execute(
        text(f"SELECT COUNT(*) FROM {FAILURES_TABLE} WHERE application_name = :n"),
        {"n": projection},
    ).scalar_one()
    return int(value)


def count_failures(db: AnalyticsDatabase, projection: str) -> int:
    """How many events of this projection are recorded as failed."""
    with db.reading("count a projection's failed events") as conn:
        return stored_failures(conn, projection)


def read_failures(db: AnalyticsDatabase, projection: str) -> list[EventFailure]:
    """The projection's failed events, in ledger order."""
    with db.reading("read a projection's failed events") as conn:
        return select_failures(conn, projection)


def select_failures(
    conn: Connection, projection: str, *, for_update: bool = False
) -> list[EventFailure]:
    """The projection's failed events as ``conn`` sees them (``for_update``: rows locked)."""
    lock = " FOR UPDATE" if for_update and conn.dialect.name == "postgresql" else ""
    rows = conn.execute(
        text(
            f"SELECT {_COLUMNS} FROM {FAILURES_TABLE} WHERE application_name = :n "
            f"ORDER BY notification_id, stream_id, sequence{lock}"
        ),
        {"n": projection},
    ).all()
    return [
        EventFailure(
            projection=str(row[0]),
            stream_id=str(row[1]),
            sequence=int(row[2]),
            notification_id=None if row[3] is None else int(row[3]),
            event_type=str(row[4]),
            project=str(row[5] or ""),
            agent=str(row[6] or ""),
            session_id=str(row[7] or ""),
            error_type=str(row[8]),
            error_message=str(row[9]),
            attempts=int(row[10]),
        )
        for row in rows
    ]


def failure_warnings(db: AnalyticsDatabase, projections: Iterable[str]) -> list[str]:
    """One line per projection whose numbers leave out events its handler failed on."""
    found = []
    for projection in projections:
        failures = read_failures(db, projection)
        if not failures:
            continue
        sessions = sorted({f.session for f in failures})
        more = f" and {len(sessions) - 3} more" if len(sessions) > 3 else ""
        found.append(
            f"projection {projection!r} skipped {len(failures)} event(s) its handler failed on "
            f"(in {', '.join(sessions[:3])}{more}); these numbers leave them out: "
            f"`pentrace projections status {projection} --failures`"
        )
    return found
