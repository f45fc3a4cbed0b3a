"""The one way to open the ledger: :func:`open_ledger` with one :class:`LedgerSettings`.

Every caller (the CLI's commands, ``pentrace serve`` and its SSE service,
``open_recording``, the analytics runner and its application, the ingest
follower, ``pentrace audit``) passes a :class:`~.settings.LedgerSettings` -
by default ``LedgerSettings.from_env()`` - here, so the URL or path, the table
prefix (``PENTRACE_LEDGER_TABLE_PREFIX``), the timeouts with the lock wait,
and the retention limits are decided in one place.

Where: ``settings.url`` wins; otherwise the SQLite file ``settings.path``,
or ``<data_root>/runtime_events/runtime_events.db``.

:class:`LedgerApplication` is the read-only eventsourcing ``Application`` over
the ledger the environment names, for the library's ``ProjectionRunner``
(the analytics runner): ``ProjectionRunner(application_class=LedgerApplication,
projection_class=..., view_class=..., env=...)`` follows the ledger and hands
each row to the projection as a :class:`LedgerEvent`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from eventsourcing.application import Application
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import ApplicationRecorder, JSONTranscoder, Mapper, StoredEvent

from pentrace.domain.json_codec import JsonDecoder
from pentrace.domain.session.key import SessionKey
from pentrace.errors import ConfigError, LedgerError, LedgerFormatError, NotFoundError
from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
from pentrace.infrastructure.ledger.backend.formats import file_format
from pentrace.infrastructure.ledger.settings import LedgerSettings, default_ledger_path
from pentrace.infrastructure.ledger.store import RuntimeEventLedger
from pentrace.infrastructure.redaction_policy import activate_policy
from pentrace.infrastructure.storage.layout import DataRoot

__all__ = [
    "LedgerApplication",
    "LedgerEvent",
    "LedgerMapper",
    "forget_sessions",
    "ledger_file",
    "open_ledger",
]

_decode: Final = JsonDecoder[Any]().decode


def ledger_file(
    settings: LedgerSettings | None = None, data_root: DataRoot | Path | None = None
) -> Path | None:
    """The SQLite file the settings (default: the environment's) name, None when a URL
    names the ledger."""
    settings = settings if settings is not None else LedgerSettings.from_env()
    data_root = data_root.path if isinstance(data_root, DataRoot) else data_root
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
    settings: LedgerSettings | None = None,
    data_root: DataRoot | Path | None = None,
    *,
    wait_seconds: float | None = None,
    keep_everything: bool = False,
    read_only: bool = False,
    penguin_read_only: bool = False,
    must_exist: bool = False,
    redaction_policy: bool = True,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
) -> RuntimeEventLedger:
    """The ledger ``settings`` (default: the environment's) name; see the module docstring.

    ``wait_seconds`` replaces the settings' lock wait (``ledger --wait``);
    ``keep_everything`` turns retention off for this handle (an audit, an
    import); ``read_only`` creates and changes nothing (and reads a
    Penguin-format file); ``penguin_read_only`` opens a Penguin-format file
    read-only instead of refusing it, and everything else for writing (the SSE
    service); ``must_exist`` refuses to create a SQLite file that a command
    would only find empty.  With ``redaction_policy`` the data root's policy is
    made active first (the policy the rows were redacted with; a CLI command
    has activated its own already).
    """
    settings = settings if settings is not None else LedgerSettings.from_env()
    if wait_seconds is not None:
        settings = settings.with_lock_wait(wait_seconds)
    if keep_everything:
        settings = settings.with_limits_off()
    root = data_root.path if isinstance(data_root, DataRoot) else data_root
    if root is not None and redaction_policy:
        activate_policy(root)
    path = ledger_file(settings, root)
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


def forget_sessions(root: DataRoot, sessions: Iterable[SessionKey]) -> dict[SessionKey, int]:
    """Remove the ledger events of sessions whose traces were deleted (``pentrace delete``,
    ``prune``); returns the rows removed per session, ``{}`` when there is no ledger yet
    (or the file is Penguin's, which pentrace never writes).  The ledger is derived from
    traces, so a deleted session's events would otherwise stay replayable over SSE and
    counted by projections."""
    wanted = list(sessions)
    if not wanted:
        return {}
    try:
        ledger = open_ledger(
            data_root=root, wait_seconds=5.0, must_exist=True, keep_everything=True,
            redaction_policy=False,
        )  # fmt: skip
    except (NotFoundError, LedgerFormatError):
        return {}  # no ledger, or Penguin's file, which holds none of pentrace's sessions
    try:
        return {key: ledger.forget_stream(key.stream_id) for key in wanted}
    finally:
        ledger.close()


def _database(url: str, settings: LedgerSettings, *, read_only: bool) -> LedgerDatabase:
    return LedgerDatabase(
        url, table_prefix=settings.table_prefix, timeouts=settings.timeouts, read_only=read_only
    )


@dataclass(frozen=True)
class LedgerEvent:
    """One ledger row as a domain event: stream, sequence, type and the envelope JSON."""

    originator_id: str
    originator_version: int
    event_type: str
    event_json: bytes

    def envelope(self) -> dict[str, Any]:
        """The redacted RuntimeEvent envelope, decoded."""
        value = _decode(self.event_json)
        return value if isinstance(value, dict) else {"value": value}


class LedgerMapper(Mapper[str]):
    """Maps ledger notifications to :class:`LedgerEvent` (the ledger is written by the indexer)."""

    def __init__(self) -> None:
        super().__init__(transcoder=JSONTranscoder())

    def to_domain_event(self, stored_event: StoredEvent) -> DomainEventProtocol[str]:
        """A :class:`LedgerEvent` for a stored row; no topic resolution, no class lookup."""
        return LedgerEvent(
            str(stored_event.originator_id),
            stored_event.originator_version,
            stored_event.topic,
            stored_event.state,
        )

    def to_stored_event(self, domain_event: DomainEventProtocol[str]) -> StoredEvent:
        """Refused: rows enter the ledger through the indexer, never through an application."""
        raise LedgerError(
            "the ledger application is read-only: expected no saves, found one",
            hint="index trace records with pentrace.infrastructure.ledger.indexer",
        )


class LedgerApplication(Application[str]):
    """Read-only application whose recorder is the RuntimeEvent ledger."""

    name = "RuntimeEventLedger"

    def construct_mapper(self) -> Mapper[str]:
        """The ledger's mapper."""
        return LedgerMapper()

    def construct_recorder(self) -> ApplicationRecorder:
        """Open the ledger the environment names."""
        env = {key: str(value) for key, value in self.env.items()}
        return open_ledger(LedgerSettings.from_env(env), DataRoot.from_env(env).path)

    def close(self) -> None:
        """Close the application and the ledger's connections."""
        super().close()
        if isinstance(self.recorder, RuntimeEventLedger):
            self.recorder.close()
