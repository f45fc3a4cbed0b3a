"""The one place where database driver errors become pentrace errors.

Every database call of the ledger runs inside :func:`converted`.  SQLAlchemy
wraps the driver's exception (sqlite3, psycopg); we look at the PEP 249 class
and turn it into a :class:`~pentrace.errors.LedgerError` subclass.  Messages
name the operation and the database (password hidden), never row values.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from eventsourcing.persistence import IntegrityError as RecorderIntegrityError
from sqlalchemy import exc

from pentrace.errors import LedgerConflictError, LedgerError, LedgerLockedError
from pentrace.infrastructure.ledger.backend.connections import DEADLINES
from pentrace.infrastructure.ledger.backend.credentials import mask_text

__all__ = ["LedgerIntegrityError", "converted", "driver_reason"]


class LedgerIntegrityError(LedgerConflictError, RecorderIntegrityError):
    """A unique key was violated; also eventsourcing's IntegrityError, as its recorders expect."""


_LOCKED_HINT = (
    "another process holds a write lock on the ledger; retry, or wait longer "
    "(`pentrace ledger --wait SECONDS`, PENTRACE_DB_LOCK_TIMEOUT); "
    "`pentrace ledger sync` fills in events the live path missed"
)


_TIMEOUT_HINT = (
    "check that the database server is up and answering; the waits are set by "
    "PENTRACE_DB_CONNECT_TIMEOUT and PENTRACE_DB_STATEMENT_TIMEOUT (seconds)"
)


_SCHEMA_HINT = (
    "the database's tables are not the ledger's: point the ledger setting at a pentrace "
    "ledger (`pentrace ledger status` says what the file holds), or at a new file"
)


@contextmanager
def converted(operation: str, where: str) -> Iterator[None]:
    """Run a block of database work, converting driver errors raised inside it."""
    try:
        yield
    except exc.IntegrityError as error:
        raise LedgerIntegrityError(
            f"{operation} on {where}: a unique key already holds a different row "
            f"({_reason(error)})",
            hint="event ids and (stream, sequence) pairs are unique; "
            "rebuild the ledger with `pentrace ledger rebuild` if it disagrees with the traces",
        ) from error
    except exc.OperationalError as error:
        reason = _reason(error)
        if "locked" in reason or "busy" in reason:
            raise LedgerLockedError(
                f"{operation} on {where}: database is locked", hint=_LOCKED_HINT
            ) from error
        if "lock timeout" in reason:
            raise LedgerLockedError(
                f"{operation} on {where}: another writer held the lock past the lock timeout",
                hint=_LOCKED_HINT,
            ) from error
        if "statement timeout" in reason:
            raise LedgerError(
                f"{operation} on {where}: the statement ran past the statement timeout ({reason})",
                hint=_TIMEOUT_HINT,
            ) from error
        silent = DEADLINES.expired()
        if silent is not None or "timeout expired" in reason:
            waited = f" within {silent:g} s" if silent is not None else ""
            raise LedgerError(
                f"{operation} on {where}: the server did not answer{waited} ({reason})",
                hint=_TIMEOUT_HINT,
            ) from error
        raise LedgerError(
            f"{operation} on {where}: the database refused the operation ({reason})",
            hint=_SCHEMA_HINT
            if reason.startswith(("no such column", "no such table", "table "))
            else "check that the database is reachable, writable and not full",
        ) from error
    except exc.DBAPIError as error:
        raise LedgerError(
            f"{operation} on {where}: database error ({_reason(error)})",
            hint="check the ledger URL and that the server is running",
        ) from error
    except (exc.TimeoutError, exc.DisconnectionError, exc.InvalidRequestError) as error:
        # Pool and connection-state errors carry no driver error: a pool with no free
        # connection (pool_timeout), or reconnect attempts exhausted at check-out
        # ("This connection is closed").  Other InvalidRequestErrors are our own bugs.
        if isinstance(error, exc.InvalidRequestError) and "connection is closed" not in str(error):
            raise
        silent = DEADLINES.expired()
        waited = f"; the server did not answer within {silent:g} s" if silent is not None else ""
        raise LedgerError(
            f"{operation} on {where}: no usable database connection "
            f"({type(error).__name__}{waited})",
            hint=_TIMEOUT_HINT,
        ) from error
    except OSError as error:
        raise LedgerError(
            f"{operation} on {where}: {error.strerror or type(error).__name__}",
            hint="check that the ledger's folder exists, is a folder and is writable "
            "(PENGUIN_RUNTIME_EVENT_LEDGER_PATH)",
        ) from error


def _reason(error: exc.DBAPIError) -> str:
    """The driver's first message line: no SQL text, no parameters (they may hold payloads),
    no credentials (a driver may repeat the connection string)."""
    return driver_reason(error)


def driver_reason(error: exc.DBAPIError) -> str:
    """The first line of a wrapped driver error, credentials masked, at most 200 characters."""
    original = error.orig
    text = str(original) if original is not None else type(error).__name__
    first = text.strip().splitlines()[0] if text.strip() else type(original).__name__
    return mask_text(first)[:200]
