"""Opening database connections: which URLs are accepted, and the timeouts every one gets.

One place for the ledger, the analytics database and the LISTEN connections:

* :func:`database_url` accepts ``sqlite:///PATH`` and PostgreSQL URLs (``postgresql://``
  and ``postgres://`` mean psycopg 3, the driver pentrace ships with) and refuses
  anything else with a :class:`~pentrace.errors.ConfigError` that names the
  setting, never a traceback or the password.
* :func:`postgres_engine` gives every PostgreSQL connection a connect timeout
  (psycopg enforces it on the client, so a server that accepts and never answers
  is covered), ``statement_timeout`` and ``lock_timeout`` through the startup
  ``options``, and the client-side deadline (:class:`Deadlines`, below) that cuts a server
  that stopped answering.  Values the URL gives itself (``?connect_timeout=``,
  ``?options=-c statement_timeout=...``) win.
* :func:`listen_connection` opens a NOTIFY connection with the same settings.

The client-side deadline (:class:`Deadlines`): ``statement_timeout`` is enforced by
the server, so it does nothing when the server (or a proxy, or a half-dead network
path) accepts bytes and never answers: psycopg then waits on the socket for ever.
One daemon thread per process shuts down the socket of a connection whose armed
deadline passed.  The blocked call wakes at once with "server closed the
connection", SQLAlchemy drops that connection from its pool, and the thread that
was blocked can ask :meth:`Deadlines.expired` to say why.  Connections are armed
before each statement, commit, rollback and pool ping, disarmed when a statement
returns, and disarmed before they are checked in or closed, so a socket number is
never touched after the connection that owned it let it go.
"""

from __future__ import annotations

import heapq
import math
import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Engine, create_engine, event, exc
from sqlalchemy.engine import URL, make_url

from pentrace.errors import ConfigError
from pentrace.infrastructure.ledger.backend.credentials import mask_url
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "DEADLINES",
    "SUPPORTED_URLS",
    "Deadlines",
    "connect_args",
    "database_url",
    "listen_connection",
    "lock_wait",
    "postgres_engine",
    "run_guarded",
    "statement_deadline",
]

SUPPORTED_URLS: Final = "sqlite:////absolute/path.db or postgresql://USER@HOST[:PORT]/DATABASE"
_POSTGRES_DRIVERS: Final = frozenset({"postgresql", "postgres", "postgresql+psycopg"})
# A healthy server answers a cancelled statement well within this, past statement_timeout.
_GRACE_SECONDS: Final = 5.0
# A database's "wait for ever" stands as a day when the lock wait is off.
NO_LIMIT_MS: Final = 86_400_000


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


def lock_wait(timeouts: DatabaseTimeouts) -> float:
    """The lock wait in seconds: at least a millisecond, a day for none (SQLite's busy
    timeout, and how long a schema creation retries a busy file)."""
    lock = timeouts.lock_seconds
    return (NO_LIMIT_MS if lock is None else max(1, int(lock * 1000))) / 1000


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


class Deadlines:
    """Armed deadlines of driver connections, each cut by shutting its socket down."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        # id(connection) -> (deadline, socket fd, seconds, thread id)
        self._armed: dict[int, tuple[float, int, float, int]] = {}
        self._heap: list[tuple[float, int]] = []
        # The earliest heap entry of each connection: re-arming a connection (every
        # statement) pushes nothing new unless its deadline moves earlier.
        self._queued: dict[int, float] = {}
        self._expired: dict[int, float] = {}
        self._thread: threading.Thread | None = None
        self.cut = 0

    def arm(self, connection: Any, seconds: float) -> None:
        """Cut ``connection`` (a psycopg connection) unless disarmed within ``seconds``."""
        try:
            fd = int(connection.fileno())
        except Exception:  # noqa: BLE001  # a closed connection has no socket to watch
            return
        deadline = time.monotonic() + seconds
        with self._cond:
            key = id(connection)
            self._armed[key] = (deadline, fd, seconds, threading.get_ident())
            queued = self._queued.get(key)
            if queued is None or deadline < queued:
                self._queued[key] = deadline
                heapq.heappush(self._heap, (deadline, key))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="pentrace-db-deadlines", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def disarm(self, connection: Any) -> None:
        """Forget the deadline of ``connection`` (harmless when none is armed)."""
        if connection is None:
            return
        with self._cond:
            self._armed.pop(id(connection), None)

    def expired(self) -> float | None:
        """The seconds of a deadline that cut a connection of this thread since the last
        call (and forget it), or None."""
        with self._cond:
            return self._expired.pop(threading.get_ident(), None)

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    deadline, key = heapq.heappop(self._heap)
                    if self._queued.get(key) == deadline:
                        del self._queued[key]
                    armed = self._armed.get(key)
                    if armed is None:
                        continue  # disarmed
                    if armed[0] > now:  # armed again since: wait for the new deadline
                        if key not in self._queued:
                            self._queued[key] = armed[0]
                            heapq.heappush(self._heap, (armed[0], key))
                        continue
                    del self._armed[key]
                    # Recorded first: the woken thread asks expired() at once.
                    self._expired[armed[3]] = armed[2]
                    self.cut += 1
                    _shut_down(armed[1])
                wait = self._heap[0][0] - now if self._heap else None
                self._cond.wait(wait)


def _shut_down(fd: int) -> None:
    # shutdown() acts on the socket, not on the descriptor, so a duplicate reaches the
    # connection's socket while the driver keeps its own descriptor (and closes it).
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


DEADLINES: Final = Deadlines()
