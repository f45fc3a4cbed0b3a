"""Opening database connections: which URLs are accepted, and the timeouts every one gets.

One place for the ledger, the analytics database and the LISTEN connections:

* :func:`database_url` accepts ``sqlite:///PATH`` and PostgreSQL URLs (``postgresql://``
  and ``postgres://`` mean psycopg 3, the driver pentrace ships with) and refuses
  anything else with a :class:`~pentrace.errors.ConfigError` that names the
  setting, never a traceback or the password.
* :func:`postgres_engine` gives every PostgreSQL connection a connect timeout
  (psycopg enforces it on the client, so a server that accepts and never answers
  is covered), ``statement_timeout`` and ``lock_timeout`` through the startup
  ``options``, and the client-side :mod:`deadline <.deadline>` that cuts a server
  that stopped answering.  Values the URL gives itself (``?connect_timeout=``,
  ``?options=-c statement_timeout=...``) win.
* :func:`listen_connection` opens a NOTIFY connection with the same settings.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Engine, create_engine, event, exc, text
from sqlalchemy.engine import URL, make_url

from pentrace.errors import ConfigError
from pentrace.infrastructure.ledger.backend.credentials import mask_url
from pentrace.infrastructure.ledger.backend.deadline import DEADLINES
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "SUPPORTED_URLS",
    "connect_args",
    "database_url",
    "listen_connection",
    "postgres_engine",
    "run_guarded",
    "schema_lock",
    "statement_deadline",
]

SUPPORTED_URLS: Final = "sqlite:////absolute/path.db or postgresql://USER@HOST[:PORT]/DATABASE"
_POSTGRES_DRIVERS: Final = frozenset({"postgresql", "postgres", "postgresql+psycopg"})
# A healthy server answers a cancelled statement well within this, past statement_timeout.
_GRACE_SECONDS: Final = 5.0


def database_url(url: str, *, setting: str) -> URL:
    """The parsed URL, with ``postgresql://`` bound to psycopg; ConfigError for the rest."""
    try:
        parsed = make_url(url)
    except exc.ArgumentError:
        raise ConfigError(
            # Not echoed: a value that does not parse may be a password typed in the wrong place.
            f"{setting}: expected a database URL such as {SUPPORTED_URLS}, "
            f"found a value that does not parse as one ({len(url)} characters)",
            hint=f"fix {setting}, or unset it to use the SQLite file under the data root",
        ) from None
    if parsed.drivername in _POSTGRES_DRIVERS:
        return parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() == "sqlite" and parsed.drivername in {"sqlite", "sqlite+pysqlite"}:
        return parsed
    raise ConfigError(
        f"{setting}: unsupported database URL scheme {parsed.drivername!r} "
        f"in {mask_url(url)}; expected sqlite or postgresql",
        hint=f"set {setting} to {SUPPORTED_URLS}",
    )


def statement_deadline(timeouts: DatabaseTimeouts) -> float | None:
    """Seconds after which the client gives up on a statement: the server's
    ``statement_timeout`` plus a grace for its answer (None when there is no limit)."""
    seconds = timeouts.statement_seconds
    return None if seconds is None else seconds + _GRACE_SECONDS


def postgres_engine(url: URL, timeouts: DatabaseTimeouts, **options: Any) -> Engine:
    """An engine over psycopg with the connect, statement and lock timeouts applied."""
    engine = create_engine(url, connect_args=connect_args(url, timeouts), **options)
    guard = statement_deadline(timeouts)
    ping = timeouts.connect_seconds or _GRACE_SECONDS
    if guard is not None:
        arm = _arming(guard)
        event.listen(engine, "before_cursor_execute", arm)
        # Only while a statement is in flight: a connection held idle between
        # statements is the caller's business, not a silent server.
        event.listen(engine, "after_cursor_execute", _disarming)
        event.listen(engine, "commit", arm)
        event.listen(engine, "rollback", arm)
        event.listen(engine.pool, "reset", _on_reset(guard))
    event.listen(engine.pool, "checkout", _pinging(engine, ping))
    for name in ("checkin", "invalidate", "soft_invalidate", "close", "close_detached"):
        event.listen(engine.pool, name, _disarm)
    return engine


def listen_connection(url: str, timeouts: DatabaseTimeouts) -> psycopg.Connection[Any]:
    """An autocommit psycopg connection for LISTEN, with the same timeouts as the engines."""
    import psycopg  # only PostgreSQL ledgers listen; SQLite commands skip the import

    parsed = make_url(url)
    conninfo = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    return psycopg.connect(conninfo, autocommit=True, **connect_args(parsed, timeouts))


def run_guarded(conn: psycopg.Connection[Any], statement: str, timeouts: DatabaseTimeouts) -> None:
    """Execute one statement on a raw connection under the client-side deadline."""
    seconds = timeouts.connect_seconds or _GRACE_SECONDS
    DEADLINES.arm(conn, seconds)
    try:
        conn.execute(statement)
    finally:
        DEADLINES.disarm(conn)


@contextmanager
def schema_lock(engine: Engine, name: str) -> Iterator[None]:
    """On PostgreSQL, one process at a time creates or upgrades the tables called ``name``.

    Two ``CREATE TABLE IF NOT EXISTS`` of one new table in parallel (several
    agent hosts' followers starting against a fresh database) make one of them
    fail on ``pg_type``'s unique index.  A session advisory lock keyed by the
    name serializes them; the second then finds the tables.  SQLite: no-op.
    """
    if engine.dialect.name == "sqlite":
        yield
        return
    key = {"key": f"pentrace schema {name}"}
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(hashtext(:key))"), key)
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(hashtext(:key))"), key)
            conn.commit()


def connect_args(url: URL, timeouts: DatabaseTimeouts) -> dict[str, Any]:
    """The psycopg connection arguments that carry the timeouts (the URL's own values win)."""
    args: dict[str, Any] = {}
    if timeouts.connect_seconds is not None and "connect_timeout" not in url.query:
        # libpq counts whole seconds, and psycopg at least 2.
        args["connect_timeout"] = max(2, math.ceil(timeouts.connect_seconds))
    settings = []
    if timeouts.statement_seconds is not None:
        settings.append(f"-c statement_timeout={math.ceil(timeouts.statement_seconds * 1000)}")
    if timeouts.lock_seconds is not None:
        settings.append(f"-c lock_timeout={math.ceil(timeouts.lock_seconds * 1000)}")
    given = url.query.get("options")
    if given:
        # The URL's own options come last, so its -c settings override ours.
        settings.extend(given if isinstance(given, tuple) else [given])
    if settings:
        args["options"] = " ".join(settings)
    return args


def _driver_connection(conn: Any) -> Any:
    """The psycopg connection under a SQLAlchemy one, or None once it was invalidated."""
    if conn.invalidated or conn.closed:
        return None
    try:
        return conn.connection.dbapi_connection
    except exc.SQLAlchemyError:
        return None


def _arming(seconds: float) -> Any:
    def arm(conn: Any, *_args: Any) -> None:
        driver = _driver_connection(conn)
        if driver is not None:
            DEADLINES.arm(driver, seconds)

    return arm


def _on_reset(seconds: float) -> Any:
    def arm(dbapi_connection: Any, *_args: Any) -> None:
        DEADLINES.arm(dbapi_connection, seconds)

    return arm


def _pinging(engine: Engine, seconds: float) -> Any:
    """A pool check-out that pings under a short deadline (instead of ``pool_pre_ping``,
    which would wait for ever on a server that stopped answering)."""

    def ping(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        DEADLINES.arm(dbapi_connection, seconds)
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as error:
            DEADLINES.disarm(dbapi_connection)
            DEADLINES.expired()  # handled here: the pool reconnects, or reports its own error
            # The pool replaces the connection and tries once more.
            raise exc.DisconnectionError(type(error).__name__) from error
        DEADLINES.disarm(dbapi_connection)

    return ping


def _disarming(conn: Any, *_args: Any) -> None:
    driver = _driver_connection(conn)
    if driver is not None:
        DEADLINES.disarm(driver)


def _disarm(dbapi_connection: Any, *_args: Any) -> None:
    DEADLINES.disarm(dbapi_connection)
