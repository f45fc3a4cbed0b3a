"""The RuntimeEvent ledger, for ``pentrace ledger ...``, ``serve``, ``ingest`` and the
SSE routes (ADR 0103): opening it, reading pages and following its head, bringing it
in line with the traces (sync, rebuild), forgetting deleted sessions, and moving a
Penguin deployment's ledger over.
"""

from __future__ import annotations

from pathlib import Path

from pentrace.infrastructure.ledger import (
    LedgerEntry,
    LedgerSettings,
    ReplayGap,
    RuntimeEventLedger,
    Scope,
    open_ledger,
)
from pentrace.infrastructure.ledger.backend.formats import file_format
from pentrace.infrastructure.ledger.bulk import SyncReport, sync
from pentrace.infrastructure.ledger.bulk.run import sync_sessions
from pentrace.infrastructure.ledger.indexer import rebuild_sessions
from pentrace.infrastructure.ledger.live.follower import HeadFollower
from pentrace.infrastructure.ledger.opener import forget_sessions, ledger_file
from pentrace.infrastructure.ledger.penguin_import import (
    import_penguin_ledger,
    move_aside,
    penguin_row_count,
)
from pentrace.infrastructure.ledger.replay import Page
from pentrace.infrastructure.storage.layout import DataRoot

__all__ = [
    "HeadFollower",
    "LedgerEntry",
    "LedgerSettings",
    "Page",
    "ReplayGap",
    "RuntimeEventLedger",
    "Scope",
    "SyncReport",
    "forget_sessions",
    "import_penguin_ledger",
    "index_imported",
    "open_ledger",
    "penguin_row_count",
    "penguin_source",
    "rebuild_sessions",
    "sync",
]


def penguin_source(source: Path, root: DataRoot) -> tuple[Path, Path | None]:
    """The Penguin ledger to import from, and where it was moved (None: not moved).

    When ``source`` is the configured ledger file itself, still in Penguin's format, it
    is renamed aside first so that the pentrace ledger can take its place.
    """
    configured = ledger_file(data_root=root)
    if (
        configured is not None
        and configured.exists()
        and source.resolve() == configured.resolve()
        and file_format(source, "runtime_events") == "penguin"
    ):
        moved = move_aside(source)
        return moved, moved
    return source, None


def index_imported(
    root: DataRoot, *, project: str | None, agent: str, written: set[str] | None = None
) -> int:
    """Index the new trace records of ``project``/``agent`` into the ledger, as recording
    does (after an import); the events indexed.  The configured retention applies.

    ``written`` (``project/agent/session`` references) limits it to those sessions, in
    one sync over every core (an import of another agent's store, ADR 0106)."""
    ledger = open_ledger(data_root=root, wait_seconds=5.0, redaction_policy=False)
    try:
        if written is None:
            return sync(ledger, root, project=project, agent=agent).indexed
        refs = [ref for ref in root.iter_sessions(None, agent) if ref.key.reference in written]
        return sync_sessions(ledger, refs, workers=0).indexed
    finally:
        ledger.close()
