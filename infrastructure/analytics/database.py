"""The analytics database: a SQLite file or a PostgreSQL URL, its driver-error conversion, its
one builder at a time (:func:`analytics_owner`), and what the read-model queries share
(groupings, time bounds, plain rows).

Read models of every projection live here, next to one tracking table
(``analytics_tracking``) that records how far each projection has read the
ledger.  Because both are in one database, a projection's writes and its
tracking position commit in one transaction (exactly once).

The default file is ``<data root>/analytics/analytics.db``;
``PENTRACE_ANALYTICS_URL`` names another database (PostgreSQL by URL; give
``?options=-csearch_path%3D<schema>`` to keep read models in a schema).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Connection, Engine, exc, inspect, text

from pentrace.errors import AnalyticsError, UsageError
from pentrace.infrastructure.ledger.backend.connections import DEADLINES, database_url
from pentrace.infrastructure.ledger.backend.dialect import (
    LedgerDialect,
    database_file,
    dialect_for,
)
from pentrace.infrastructure.ledger.backend.errors import driver_reason
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts, safe_url
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.storage.modes import prepare_sqlite_file, repair_modes, sqlite_files
from pentrace.infrastructure.storage.sqlite import owner

__all__ = [
    "ENV_ANALYTICS_URL",
    "FINE",
    "GROUPS",
    "AnalyticsDatabase",
    "analytics_owner",
    "analytics_url",
    "column_of",
    "converted",
    "days_clause",
    "is_fine",
    "rows_of",
    "scheme_of",
]

ENV_ANALYTICS_URL: Final = "PENTRACE_ANALYTICS_URL"
TRACKING_TABLE: Final = "analytics_tracking"

# Which session key each read model was built with (ADR 0023): a tracking row
# without a row here predates (project, agent, session id) keys.
IDENTITY_TABLE: Final = "analytics_identity"
IDENTITY_SCHEME: Final = "2"


def scheme_of(version: int) -> str:
    """What ``analytics_identity.scheme`` holds for a read model built by ``version`` of its
    projection: the key scheme alone for version 1 (as read models built before projection
    versions hold it), then ``2/<version>``."""
    return IDENTITY_SCHEME if version == 1 else f"{IDENTITY_SCHEME}/{version}"


# Events a projection's handler raised on, recorded with the tracking position (ADR 0032).
FAILURES_TABLE: Final = "analytics_failures"
# Per session, the trace positions a cold build folded straight from the traces (ADR 0050):
# the runner skips ledger events at or below them.
MARKS_TABLE: Final = "analytics_trace_marks"


def analytics_url(data_root: Path, environ: Mapping[str, str] | None = None) -> str:
    """The analytics database URL: ``PENTRACE_ANALYTICS_URL``, else the data root's file."""
    env = environ if environ is not None else {}
    url = (env.get(ENV_ANALYTICS_URL) or "").strip()
    if url:
        return url
    return f"sqlite:///{DataRoot(data_root).path / 'analytics' / 'analytics.db'}"


def analytics_owner(data_root: Path) -> AbstractContextManager[None]:
    """Be the one builder of the data root's read models (issue #32): a cold build, a
    catch-up or a rebuild in another thread or process waits, then finds them current.
    Re-entrant within a thread; the lock is ``<root>/.pentrace/analytics.lock``."""
    path = DataRoot(data_root).path / ".pentrace" / "analytics"
    return owner(path, "the analytics read models", error=AnalyticsError)


@contextmanager
def converted(operation: str, where: str) -> Iterator[None]:
    """Turn driver errors raised in the block into :class:`AnalyticsError` (first line only)."""
    try:
        yield
    except exc.DBAPIError as error:
        reason = driver_reason(error)
        silent = DEADLINES.expired()
        if silent is not None:
            reason = f"no answer within {silent:g} s: {reason}"
        raise AnalyticsError(
            f"{operation} on {where}: the database refused it ({reason})",
            hint="check that the analytics database is reachable and writable; "
            "`pentrace projections rebuild NAME` recreates a read model",
        ) from error
    except (exc.TimeoutError, exc.DisconnectionError) as error:  # the pool, no driver error
        raise AnalyticsError(
            f"{operation} on {where}: no usable database connection ({type(error).__name__})",
            hint="check that the analytics database is reachable and answering",
        ) from error


class AnalyticsDatabase:
    """An engine over the analytics database, with the tracking table created."""

    def __init__(self, url: str, timeouts: DatabaseTimeouts | None = None) -> None:
        """``timeouts`` default to the environment's (:meth:`DatabaseTimeouts.from_env`)."""
        timeouts = timeouts if timeouts is not None else DatabaseTimeouts.from_env()
        parsed = database_url(url, setting=ENV_ANALYTICS_URL)
        self.url = url
        #: The ledger's backend seam, shared: the same engine setup per backend.
        self.dialect: LedgerDialect = dialect_for(parsed)
        self._path = database_file(
            parsed,
            self.dialect,
            what="the analytics database",
            hint=f"set {ENV_ANALYTICS_URL} to sqlite:////path/analytics.db",
        )
        self.where = safe_url(url) if self._path is None else str(self._path)
        if self._path is not None:
            prepare_sqlite_file(self._path)
            options: dict[str, Any] = {"connect_args": {"check_same_thread": False}}
        else:
            options = {}
        self.engine: Engine = self.dialect.engine(parsed, timeouts, **options)
        if not self.has_tables((TRACKING_TABLE, IDENTITY_TABLE, FAILURES_TABLE, MARKS_TABLE)):
            self._create_tables()
        if self._path is not None:
            repair_modes(sqlite_files(self._path), where=self.where)  # SQLite's side files

    def has_tables(self, names: Iterable[str]) -> bool:
        """Whether every table of ``names`` exists: read first, so that opening a database
        whose tables are in place never waits for the write lock (issue #32)."""
        with self.reading("list the analytics tables") as conn:
            present = {name.lower() for name in inspect(conn).get_table_names()}
        return all(name.lower() in present for name in names)

    def _create_tables(self) -> None:
        with self.writing("create the tracking table") as conn:
            conn.exec_driver_sql(
                f"CREATE TABLE IF NOT EXISTS {TRACKING_TABLE} ("
                "application_name VARCHAR(200) PRIMARY KEY, notification_id BIGINT NOT NULL)"
            )
            conn.exec_driver_sql(
                f"CREATE TABLE IF NOT EXISTS {IDENTITY_TABLE} ("
                "application_name VARCHAR(200) PRIMARY KEY, scheme VARCHAR(20) NOT NULL)"
            )
            conn.exec_driver_sql(
                f"CREATE TABLE IF NOT EXISTS {FAILURES_TABLE} ("
                "application_name VARCHAR(200) NOT NULL, stream_id TEXT NOT NULL, "
                "sequence BIGINT NOT NULL, notification_id BIGINT, event_type TEXT NOT NULL, "
                "project TEXT, agent TEXT, session_id TEXT, error_type TEXT NOT NULL, "
                "error_message TEXT NOT NULL, attempts BIGINT NOT NULL, "
                "PRIMARY KEY (application_name, stream_id, sequence))"
            )
            conn.exec_driver_sql(
                f"CREATE TABLE IF NOT EXISTS {MARKS_TABLE} ("
                "application_name VARCHAR(200) NOT NULL, stream_id TEXT NOT NULL, "
                "position BIGINT NOT NULL, PRIMARY KEY (application_name, stream_id))"
            )

    @property
    def placeholder(self) -> str:
        """The driver's positional parameter marker (sqlite3 ``?``, psycopg ``%s``)."""
        return self.dialect.placeholder

    @contextmanager
    def reading(self, operation: str) -> Iterator[Connection]:
        """A read-only connection, rolled back at the end."""
        with converted(operation, self.where), self.engine.connect() as conn:
            yield conn
            conn.rollback()

    @contextmanager
    def writing(self, operation: str) -> Iterator[Connection]:
        """A write transaction (``BEGIN IMMEDIATE`` on SQLite) committed when the block ends."""
        with converted(operation, self.where):
            engine = self.engine.execution_options(**self.dialect.write_options)
            with engine.begin() as conn:
                yield conn

    def connect_for_writing(self) -> Connection:
        """A connection whose next ``begin()`` takes the write lock (caller closes it)."""
        with converted("connect to the analytics database", self.where):
            return self.engine.execution_options(**self.dialect.write_options).connect()

    def close(self) -> None:
        """Dispose of the connection pool."""
        self.engine.dispose()


# -- what the read-model queries share: the groupings, time bounds and plain rows --

GROUPS: Final = {
    "model": "model",
    "provider": "provider",
    "agent": "agent",
    "project": "project",
    "day": "day",
    "session": "session_id",
    "hour": "substr(minute, 1, 13)",
    "minute": "minute",
}
# Groupings finer than a day: read from the per-minute tables (``*_minutes``), whose
# ``minute`` (``YYYY-MM-DDTHH:MM``) begins with the hour and the day.
FINE: Final = ("hour", "minute")
_IN_MINUTES: Final = {"day": "substr(minute, 1, 10)"}


# requests: requests begun; usage_records: token_usage records (session_numbers).
def column_of(by: str, allowed: tuple[str, ...] = tuple(GROUPS), *, minutes: bool = False) -> str:
    """The SQL expression of a grouping (``minutes``: in a per-minute table)."""
    if by not in allowed:
        raise UsageError(
            f"--by: expected one of {', '.join(allowed)}, found {by!r}",
            hint=f"for example --by {allowed[0]}",
        )
    if not minutes and by in FINE:
        raise UsageError(
            f"--by {by}: this figure is kept per UTC day only",
            hint="group by day, or by another field",
        )
    return _IN_MINUTES.get(by, GROUPS[by]) if minutes else GROUPS[by]


def is_fine(by: str | None, since: str | None, until: str | None) -> bool:
    """Whether a query needs the per-minute tables: a grouping or a bound finer than a day."""
    return by in FINE or any(bound and len(bound) > 10 for bound in (since, until))


def days_clause(
    since: str | None, until: str | None, column: str = "day", agent: str | None = None
) -> tuple[str, dict[str, Any]]:
    """A WHERE clause for the inclusive bounds ``since``..``until`` (and one agent, if given).

    Bounds are UTC days (``YYYY-MM-DD``) or, on a ``minute`` column, minutes
    (``YYYY-MM-DDTHH:MM``); a day as the upper bound of minutes includes its last minute.
    """
    clauses, params = [], {}
    if agent is not None:
        clauses.append("agent = :agent")
        params["agent"] = agent
    if column != "minute":
        since, until = since and since[:10], until and until[:10]
    elif until and len(until) == 10:
        until += "T23:59"
    if since:
        clauses.append(f"{column} >= :since")
        params["since"] = since
    if until:
        clauses.append(f"{column} <= :until")
        params["until"] = until
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def rows_of(db: AnalyticsDatabase, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    with db.reading("read analytics") as conn:
        return [dict(row) for row in conn.execute(text(sql), params).mappings()]
