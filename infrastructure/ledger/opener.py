"""The one way to open the ledger: :func:`open_ledger` with one :class:`LedgerSettings`.

Every caller (the CLI's ledger commands, ``pentrace serve``, the SSE
service, ``open_recording``, the analytics runner and its application, the
ingest follower) builds a :class:`~.settings.LedgerSettings` - normally with
``LedgerSettings.from_env()`` - and passes it here, so the URL or path, the
table prefix (``PENTRACE_LEDGER_TABLE_PREFIX``), the timeouts with the lock
wait, and the retention limits are decided in one place.

Where: ``settings.url`` wins; otherwise the SQLite file ``settings.path``,
or ``<data_root>/runtime_events/runtime_events.db``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pentrace.errors import ConfigError, LedgerFormatError, NotFoundError
from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
from pentrace.infrastructure.ledger.backend.formats import file_format
from pentrace.infrastructure.ledger.settings import LedgerSettings, default_ledger_path
from pentrace.infrastructure.ledger.store import RuntimeEventLedger
from pentrace.infrastructure.redaction_policy import activate_policy

__all__ = ["ledger_file", "open_ledger"]


def ledger_file(settings: LedgerSettings, data_root: Path | None) -> Path | None:
    """The SQLite file the settings name (None when a URL names the ledger)."""
    if settings.url is not None:
        return None
    if settings.path is not None:
        return settings.path
    if data_root is None:
        raise ConfigError(
            "the ledger location is unknown: expected a data root, "
            "PENGUIN_RUNTIME_EVENT_LEDGER_PATH or PENTRACE_LEDGER_URL, found none",
            hint="set PENGUIN_HOME or PENGUIN_RUNTIME_EVENT_LEDGER_PATH",
        )
    return default_ledger_path(data_root)


def open_ledger(
    settings: LedgerSettings,
    data_root: Path | None = None,
    *,
    read_only: bool = False,
    penguin_read_only: bool = False,
    must_exist: bool = False,
    redaction_policy: bool = True,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
) -> RuntimeEventLedger:
    """The ledger ``settings`` name (see the module docstring for where).

    ``read_only`` creates and changes nothing (and reads a Penguin-format
    file); ``penguin_read_only`` opens a Penguin-format file read-only
    instead of refusing it, and everything else for writing (the SSE
    service); ``must_exist`` refuses to create a SQLite file that a command
    would only find empty.  With ``redaction_policy`` the data root's policy
    is made active first (the policy the rows were redacted with).
    """
    if data_root is not None and redaction_policy:
        activate_policy(data_root)
    path = ledger_file(settings, data_root)
    if path is None:
        assert settings.url is not None
        db = _database(settings.url, settings, read_only=read_only)
        return RuntimeEventLedger(db, settings, clock=clock, monotonic=monotonic)
    if must_exist and not path.is_file():
        raise NotFoundError(
            f"no ledger at {path}: expected a SQLite ledger file, found none",
            hint="run `pentrace ledger sync` to build it from the traces",
        )
    url = f"sqlite:///{path}"
    try:
        db = _database(url, settings, read_only=read_only)
    except LedgerFormatError:
        events = f"{settings.table_prefix}runtime_events"
        if not penguin_read_only or file_format(path, events) != "penguin":
            raise
        db = _database(url, settings, read_only=True)
    return RuntimeEventLedger(db, settings, clock=clock, monotonic=monotonic)


def _database(url: str, settings: LedgerSettings, *, read_only: bool) -> LedgerDatabase:
    return LedgerDatabase(
        url, table_prefix=settings.table_prefix, timeouts=settings.timeouts, read_only=read_only
    )
