"""What kind of SQLite file a ledger path holds, and how to read one read-only.

Penguin writes its ledger to the same default path pentrace uses
(``<workspace>/runtime_events/runtime_events.db``), with its own table:
``runtime_events(event_id TEXT PRIMARY KEY, ..., payload_json,
projection_json, event_json TEXT)`` and no ``notification_id``.  Before a
ledger is opened its file is looked at without writing anything:

* ``pentrace``: the events table has ``notification_id``;
* ``penguin``: a ``runtime_events`` table with Penguin's columns;
* ``empty``: no tables (a new file);
* ``other``: tables, but no ledger table (pentrace may add its own);
* ``foreign``: a ledger table of neither shape.

A read-only handle opens the file with ``mode=ro``, so nothing is created or
changed in it.  On a Penguin file each connection gets TEMP objects that
shadow the main schema under pentrace's names: a view ``runtime_events``
over Penguin's table (``rowid`` - its insertion order - as
``notification_id``, ``event_json`` as bytes) and empty watermark and
tracking tables.  Every pentrace read then works unchanged, and every write
is refused.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Final, Literal
from urllib.parse import quote

from pentrace.errors import LedgerError, LedgerFormatError, LedgerLockedError, NotFoundError

__all__ = [
    "PENGUIN_COLUMNS",
    "FileFormat",
    "connect_read_only",
    "file_format",
    "foreign_format_error",
    "penguin_format_error",
    "penguin_rows",
    "penguin_rows_held",
    "refuse_foreign_writes",
]

FileFormat = Literal["pentrace", "penguin", "empty", "other", "foreign"]
PENGUIN_TABLE: Final = "runtime_events"
PENGUIN_COLUMNS: Final = (
    "event_id", "stream_id", "sequence", "event_type", "category", "event_time",
    "inserted_at", "session_id", "conversation_id", "agent_id", "task_id", "run_id",
    "project_id", "directory", "privacy_classification", "redacted", "payload_json",
    "projection_json", "event_json",
)  # fmt: skip
_SHARED: Final = PENGUIN_COLUMNS[1:14]  # stream_id .. directory


def _uri(path: Path) -> str:
    return f"file:{quote(str(path.resolve()))}?mode=ro"


def _columns(conn: sqlite3.Connection, schema: str, table: str) -> set[str]:
    rows = conn.execute(f"PRAGMA {schema}.table_info({_quoted(table)})").fetchall()
    return {str(row[1]) for row in rows}


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def file_format(path: Path, events_table: str, timeout_seconds: float = 30.0) -> FileFormat:
    """The kind of ledger ``path`` holds (it must exist); reads only, writes nothing."""
    if not path.is_file():  # SQLite would block for ever reading a FIFO's header
        raise LedgerFormatError(
            f"{path}: expected a regular SQLite file, found something else",
            hint="point the ledger setting at a regular file",
        )
    conn = sqlite3.connect(_uri(path), uri=True, timeout=timeout_seconds)
    try:
        tables = {
            str(row[0])
            for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if not tables:
            return "empty"
        if events_table in tables and "notification_id" in _columns(conn, "main", events_table):
            return "pentrace"
        if PENGUIN_TABLE in tables and set(PENGUIN_COLUMNS) <= _columns(
            conn, "main", PENGUIN_TABLE
        ):
            return "penguin"
        return "foreign" if events_table in tables or PENGUIN_TABLE in tables else "other"
    except sqlite3.DatabaseError as error:
        reason = str(error)
        if "locked" in reason or "busy" in reason:
            raise LedgerLockedError(
                f"read the ledger's schema on {path}: database is locked",
                hint="another process holds a lock on the ledger; retry, or raise --wait",
            ) from error
        if "not a database" not in reason:
            raise LedgerError(
                f"read the ledger's schema on {path}: the database refused it ({reason})",
                hint="check that the ledger file is readable",
            ) from error
        raise LedgerFormatError(
            f"{path}: expected a SQLite ledger file, found a file SQLite cannot read ({reason})",
            hint="point PENGUIN_RUNTIME_EVENT_LEDGER_PATH at the ledger file",
        ) from error
    finally:
        conn.close()


def penguin_format_error(path: Path, operation: str) -> LedgerFormatError:
    """The error for a write to a Penguin-format file (read commands open it read-only)."""
    return LedgerFormatError(
        f"{operation} on {path}: this is a Penguin-format ledger (table runtime_events with "
        "payload_json and no notification_id); pentrace reads it but never writes into it",
        hint=f"import it into a pentrace ledger: `pentrace ledger import-penguin {path}`",
    )


def _shim(
    conn: sqlite3.Connection, events: str, watermarks: str, tracking: str, *, penguin: bool
) -> None:
    """TEMP objects under pentrace's names for what the main schema lacks.

    On a Penguin file: all three.  On a pentrace ledger made before the
    watermark or tracking table existed: an empty one in its place, as a
    writing open would have created it.
    """
    present = {str(row[0]) for row in conn.execute("SELECT name FROM main.sqlite_master")}
    if penguin:
        columns = ", ".join(_SHARED)
        conn.execute(
            f"CREATE TEMP VIEW IF NOT EXISTS {_quoted(events)} AS "
            f"SELECT rowid AS notification_id, event_id, {columns}, "
            "privacy_classification, redacted, CAST(event_json AS BLOB) AS event_json "
            f"FROM main.{PENGUIN_TABLE}"
        )
    if penguin or watermarks not in present:
        conn.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {_quoted(watermarks)} (stream_id TEXT PRIMARY KEY, "
            "id_prefix TEXT NOT NULL, max_sequence INTEGER NOT NULL, "
            "max_notification_id INTEGER NOT NULL, pruned_rows INTEGER NOT NULL)"
        )
    if penguin or tracking not in present:
        conn.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {_quoted(tracking)} "
            "(application_name TEXT PRIMARY KEY, notification_id INTEGER NOT NULL)"
        )


def connect_read_only(
    path: Path,
    timeout_seconds: float,
    *,
    penguin: bool,
    names: tuple[str, str, str],
) -> sqlite3.Connection:
    """A ``mode=ro`` connection, with pentrace-named TEMP shadows where needed (:func:`_shim`)."""
    if not path.is_file():
        raise NotFoundError(
            f"no ledger at {path}: expected a SQLite ledger file, found none",
            hint="run `pentrace ledger sync` to build it from the traces",
        )
    conn = sqlite3.connect(_uri(path), uri=True, timeout=timeout_seconds, check_same_thread=False)
    conn.isolation_level = None
    _shim(conn, *names, penguin=penguin)
    return conn


def foreign_format_error(path: Path) -> LedgerFormatError:
    return LedgerFormatError(
        f"{path}: expected a pentrace or Penguin ledger, found a runtime_events table of "
        "another shape; pentrace does not write into it",
        hint="point PENGUIN_RUNTIME_EVENT_LEDGER_PATH at a ledger file, or at a new path",
    )


def refuse_foreign_writes(path: Path, events_table: str, timeout_seconds: float = 30.0) -> None:
    """Raise unless pentrace may create or use its tables in ``path`` (new, empty or its own)."""
    found = file_format(path, events_table, timeout_seconds) if path.is_file() else "empty"
    if found == "penguin":
        raise penguin_format_error(path, "open the ledger for writing")
    if found == "foreign":
        raise foreign_format_error(path)


def penguin_rows(path: Path, page: int) -> Iterator[list[tuple[int, str, int, str]]]:
    """The rows of a Penguin ledger file, ``page`` at a time in its order (``rowid``), as
    ``(rowid, event_id, inserted_at, event_json)`` (read-only)."""
    uri = f"file:{path.resolve()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    try:
        after = 0
        while True:
            rows = conn.execute(
                "SELECT rowid, event_id, inserted_at, event_json FROM runtime_events "
                "WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (after, page),
            ).fetchall()
            if not rows:
                return
            yield rows
            after = int(rows[-1][0])
    finally:
        conn.close()


def penguin_rows_held(path: Path) -> int:
    """How many rows a Penguin ledger file holds (read-only)."""
    conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM runtime_events").fetchone()[0])
    finally:
        conn.close()
