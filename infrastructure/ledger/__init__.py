"""The durable RuntimeEvent ledger (SQLite by default, PostgreSQL by URL).

``RuntimeEventLedger`` stores redacted RuntimeEvent envelopes, replays them
after a cursor with honest gaps, applies retention, and is an eventsourcing
``ProcessRecorder`` so the library's projections run on it.  Open it with
:func:`open_ledger` and a :class:`LedgerSettings` (``LedgerSettings.from_env()``
by default).  Its reads are :class:`~.reads.LedgerReader`'s, its writes
:mod:`.store`'s; ``ledger sync`` is :func:`.bulk.sync`.  See docs/ledger.md.
"""

from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
from pentrace.infrastructure.ledger.opener import open_ledger
from pentrace.infrastructure.ledger.reads import LedgerReader
from pentrace.infrastructure.ledger.replay import LedgerEntry, ReplayGap, ReplayResult, Scope
from pentrace.infrastructure.ledger.retention import RetentionPolicy, RetentionReport
from pentrace.infrastructure.ledger.settings import LedgerSettings, default_ledger_path
from pentrace.infrastructure.ledger.store import RuntimeEventLedger

__all__ = [
    "LedgerDatabase",
    "LedgerEntry",
    "LedgerReader",
    "LedgerSettings",
    "ReplayGap",
    "ReplayResult",
    "RetentionPolicy",
    "RetentionReport",
    "RuntimeEventLedger",
    "Scope",
    "default_ledger_path",
    "open_ledger",
]
