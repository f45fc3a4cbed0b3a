"""The ledger backends the shared contract suites run against, behind one fixture.

``ledger_backend`` is parametrised over :data:`BACKENDS`; a test that takes it
(or a fixture built on it, such as the contract suite's ``make_ledger``) runs
once per backend.  A third backend is one more :class:`Backend` here, next to
its dialect module in ``infrastructure/ledger/backend/`` (docs/ledger.md,
"Adding a ledger backend").

* ``sqlite``: a file under the test's ``tmp_path``, always run;
* ``postgres``: ``PENTRACE_TEST_DATABASE_URL`` (skipped without it), with
  uniquely prefixed tables that are dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection

from pentrace.domain.runtime import SessionEvents
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings
from pentrace.infrastructure.ledger.backend.dialect import dialect_for
from pentrace.infrastructure.ledger.reads import LedgerReader, LedgerStats
from pentrace.infrastructure.ledger.replay import LedgerEntry, Scope
from pentrace.infrastructure.ledger.settings import ENV_PATH, ENV_TABLE_PREFIX, ENV_URL

__all__ = [
    "BACKENDS",
    "PG_URL",
    "Backend",
    "LedgerBackend",
    "entries_after",
    "index_names",
    "ledger_backend",
    "ledger_stats",
    "locate",
    "mapping_fails_at",
    "newest_entries",
    "reach",
]

PG_URL = os.environ.get("PENTRACE_TEST_DATABASE_URL") or None


@dataclass(frozen=True)
class Backend:
    """How a test reaches one backend: its URL (None: not available here) and whether
    its tables need a prefix of their own (a shared server) and dropping afterwards."""

    name: str
    url: Callable[[Path], str | None]
    shared: bool
    marks: tuple[Any, ...] = ()
    missing: str = ""


BACKENDS: tuple[Backend, ...] = (
    Backend("sqlite", lambda tmp: f"sqlite:///{tmp / 'runtime_events.db'}", shared=False),
    Backend(
        "postgres",
        lambda _tmp: PG_URL,
        shared=True,
        marks=(pytest.mark.postgres,),
        missing="PostgreSQL runs need PENTRACE_TEST_DATABASE_URL",
    ),
)


@dataclass
class LedgerBackend:
    """One backend for one test: databases, settings and CLI variables that all name it."""

    backend: Backend
    url: str
    prefix: str
    opened: list[LedgerDatabase] = field(default_factory=list)

    @property
    def name(self) -> str:
        """``sqlite``, ``postgres``, ..."""
        return self.backend.name

    def database(self, *, prefix: str | None = None, **options: Any) -> LedgerDatabase:
        """A :class:`LedgerDatabase` on this backend (closed, and dropped, afterwards)."""
        db = LedgerDatabase(
            self.url, table_prefix=self.prefix if prefix is None else prefix, **options
        )
        self.opened.append(db)
        return db

    def settings(self, base: LedgerSettings | None = None) -> LedgerSettings:
        """``base`` (default: no limits) pointed at this backend, its prefix included."""
        base = base if base is not None else LedgerSettings().with_limits_off()
        return base.model_copy(update={"url": self.url, "table_prefix": self.prefix})

    def env(self) -> dict[str, str]:
        """The variables that make ``pentrace`` (and ``LedgerSettings.from_env``) use it."""
        return {ENV_URL: self.url, ENV_PATH: "", ENV_TABLE_PREFIX: self.prefix}

    def close(self) -> None:
        """Drop what a shared server holds for this test, close every database."""
        for db in self.opened:
            if self.backend.shared and not db.read_only:
                db.drop_all()
            db.close()


def reach(backend: Backend, folder: Path) -> LedgerBackend | None:
    """A fresh ledger place on ``backend`` (a file in ``folder``, or new table names on a
    shared server); None when the backend is not reachable here."""
    url = backend.url(folder)
    if url is None:
        return None
    return LedgerBackend(backend, url, f"t{uuid.uuid4().hex[:12]}_" if backend.shared else "")


@pytest.fixture(params=[pytest.param(b, id=b.name, marks=b.marks) for b in BACKENDS])
def ledger_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerBackend]:
    """Each ledger backend in turn (skipped where it is not reachable)."""
    backend: Backend = request.param
    handle = reach(backend, tmp_path)
    if handle is None:
        pytest.skip(backend.missing)
    yield handle
    handle.close()


# Reads as the tests written before the one read API (ADR 0078) call them: functions of a
# ledger.  Each is the method of LedgerReader it names.
def locate(ledger: LedgerReader, event_id: str, scope: Scope | None = None) -> int | None:
    """:meth:`LedgerReader.locate`."""
    return ledger.locate(event_id, scope)


def newest_entries(
    ledger: LedgerReader, count: int, *, session: SessionKey | str | None = None
) -> list[LedgerEntry]:
    """:meth:`LedgerReader.newest_entries`."""
    return ledger.newest_entries(count, session=session)


def entries_after(
    ledger: LedgerReader,
    notification_id: int,
    *,
    session: SessionKey | str | None = None,
    limit: int = 1000,
) -> list[LedgerEntry]:
    """:meth:`LedgerReader.entries_after`."""
    return ledger.entries_after(notification_id, session=session, limit=limit)


def ledger_stats(ledger: LedgerReader) -> LedgerStats:
    """:meth:`LedgerReader.stats`."""
    return ledger.stats()


def index_names(conn: Connection, table: str) -> set[str]:
    """The indexes of ``table``, as the connection's dialect lists them."""
    return dialect_for(conn.engine.url).index_names(conn, table)


def mapping_fails_at(session: str | None, position: int, *more: int) -> Callable[..., Any]:
    """A ``SessionEvents.screened`` that meets, at the records of ``position`` and ``more``
    (of ``session``, or of any session), a value it cannot take: the kind of failure a lone
    surrogate inside a tool call's arguments was (ADR 0079).  Patch it in with
    ``monkeypatch.setattr``."""
    return mapping_fails_for({(session, at) for at in (position, *more)})


def mapping_fails_for(places: set[tuple[str | None, int]]) -> Callable[..., Any]:
    """:func:`mapping_fails_at` for each ``(session id or None, position)`` of ``places``."""
    original = SessionEvents.screened

    def screened(self: SessionEvents, at: int, record: Any) -> Any:
        if (self.key.session_id, at) in places or (None, at) in places:
            self.skip(at, record)  # as the mapping does before it meets the value
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
        return original(self, at, record)

    return screened
