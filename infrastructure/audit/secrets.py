"""Which secrets sit in the traces: ``pentrace scan``'s library half.

:func:`scan_traces` reads every record of the given sessions once, screens its
bytes and walks only the records the screen cannot clear.  The derived stores
are scanned by :mod:`pentrace.infrastructure.audit.secrets`.  A finding
carries a masked preview (:mod:`pentrace.domain.redaction.core`), never
the secret.

Derived stores held to the current policy: the ledger, the search index, read models.

A store written by an older version, or before a rule was added, may hold a
value the policy now hides.  :func:`derived_findings` looks in every store
the data root has (it creates none); :func:`fix_derived` rebuilds what was
found affected with the library functions of the ``ledger``, ``search`` and
``projections`` commands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sqlalchemy import text as sql

from pentrace.domain.redaction.core import find_secrets, find_secrets_in_text
from pentrace.domain.redaction.screen import may_change
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef
from pentrace.infrastructure.trace.reader import read_shard

__all__ = [
    "ScanFinding",
    "derived_findings",
    "fix_derived",
    "scan_analytics",
    "scan_ledger",
    "scan_search_index",
    "scan_traces",
]


@dataclass(frozen=True)
class ScanFinding:
    """One secret found: where (store, file, line, path) and by which rule.

    ``store`` is ``trace``, ``ledger``, ``search`` or ``analytics:<projection>``;
    ``line`` is the trace line, the ledger position or the table row.
    """

    store: str
    rule: str
    session_id: str | None
    file: str
    line: int
    path: str
    preview: str
    project: str | None = None
    agent: str | None = None
    # The ledger stream a ledger finding sits in (what ``--fix`` forgets).
    stream: str | None = None


def scan_traces(
    refs: Iterable[SessionRef], *, on_record: Callable[[int], None] | None = None
) -> Iterator[ScanFinding]:
    """Findings in the trace records of ``refs``, in trace order.

    ``on_record(bytes)`` is called with each record's size (a progress bar).
    """
    for ref in refs:
        for shard in sorted(ref.shards, key=lambda shard: shard.index):
            for record in read_shard(shard.path):
                if on_record is not None:
                    on_record(len(record.raw) + 1)
                if not may_change(record.raw):
                    continue  # the screen cleared it: no decode, no walk
                for found in find_secrets(record.value(), record.raw):
                    yield ScanFinding(
                        "trace", found.rule, ref.session_id, str(shard.path), record.line,
                        found.path, found.preview, ref.project, ref.agent,
                    )  # fmt: skip


_PAGE: Final = 1000


def _scope(envelope: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """The envelope's ``(session, project, agent)`` ids, where it has them."""
    scope = envelope.get("scope")
    scope = scope if isinstance(scope, dict) else {}
    return (
        _text(scope.get("session_id")),
        _text(scope.get("project_id")),
        _text(scope.get("agent_id")),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def scan_ledger(ledger: Any) -> Iterator[ScanFinding]:
    """Ledger rows that the current policy would still change (``ledger`` is open)."""
    cursor: str | None = None
    where = "ledger"
    while True:
        page = ledger.replay_after(cursor, _PAGE)
        if not page.events:
            return
        for entry in page.events:
            envelope = entry.envelope()
            session, project, agent = _scope(envelope)
            stream = envelope.get("stream_id")
            for found in find_secrets(envelope, entry.event_json):
                yield ScanFinding(
                    "ledger", found.rule, session, where, entry.notification_id or 0,
                    found.path, found.preview, project, agent,
                    stream if isinstance(stream, str) else None,
                )  # fmt: skip
        cursor = page.next_cursor


def scan_search_index(index: Any) -> Iterator[ScanFinding]:
    """Search documents whose text the current policy would change."""
    rows = index.conn.execute(
        "SELECT d.body, d.line, s.path, x.session_id, x.project, x.agent FROM docs d "
        "LEFT JOIN sessions x ON x.id = (d.rowid >> 32) "
        "LEFT JOIN shards s ON s.session = x.id AND s.idx = d.shard"
    )
    for body, line, path, session_id, project, agent in rows:
        if not isinstance(body, str):
            continue
        for found in find_secrets_in_text(body):
            yield ScanFinding(
                "search", found.rule, session_id, str(path or index.path), int(line or 0),
                "body", found.preview, project, agent,
            )  # fmt: skip


def scan_analytics(root: Path, names: Iterable[str] | None = None) -> Iterator[ScanFinding]:
    """Read-model cells (built-in projections) whose text the current policy would change."""
    from pentrace.infrastructure.analytics.registry import BUILTINS
    from pentrace.infrastructure.analytics.runner import open_projection

    for name in names if names is not None else BUILTINS:
        projection = open_projection(BUILTINS[name], root)
        db = projection.view.db
        try:
            with db.reading(f"scan the {name} read model") as conn:
                for table in projection.tables:
                    result = conn.execute(sql(f"SELECT * FROM {table}"))
                    columns = list(result.keys())
                    for number, row in enumerate(result, start=1):
                        for column, cell in zip(columns, row, strict=True):
                            if not isinstance(cell, str):
                                continue
                            for found in find_secrets_in_text(cell):
                                yield ScanFinding(
                                    f"analytics:{name}", found.rule, None, table, number,
                                    column, found.preview,
                                )  # fmt: skip
        finally:
            db.close()


def fix_derived(root: DataRoot, findings: Iterable[ScanFinding]) -> list[str]:
    """Rebuild every derived store a finding names; returns what was rebuilt.

    The ledger loses the affected sessions' rows and indexes their traces
    again (``ledger forget`` + ``ledger sync``); the search index and the
    read models are rebuilt whole (``search --rebuild``, ``projections rebuild``).
    """
    stores = {finding.store for finding in findings}
    streams = {f.stream for f in findings if f.store == "ledger" and f.stream}
    done: list[str] = []
    if "ledger" in stores:
        from pentrace.infrastructure.ledger import RuntimeEventLedger
        from pentrace.infrastructure.ledger.bulk import sync

        ledger = RuntimeEventLedger.open(root.path)
        try:
            for stream in sorted(streams):
                ledger.forget_stream(stream)
            sync(ledger, root)
        finally:
            ledger.close()
        done.append("ledger")
    if "search" in stores:
        from pentrace.infrastructure.search.index import SearchIndex

        with SearchIndex(root) as index:
            index.rebuild(root.iter_sessions())
        done.append("search")
    names = sorted(store.partition(":")[2] for store in stores if store.startswith("analytics:"))
    if names:
        from pentrace.infrastructure.analytics.rebuild import rebuild
        from pentrace.infrastructure.analytics.registry import BUILTINS

        for name in names:
            rebuild(BUILTINS[name], data_root=root.path)
            done.append(f"analytics:{name}")
    return done


def derived_findings(root: DataRoot) -> Iterator[ScanFinding]:
    """Findings in every derived store of ``root`` that exists (none is created)."""
    from pentrace.infrastructure.analytics.database import analytics_url
    from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
    from pentrace.infrastructure.ledger.settings import default_ledger_path
    from pentrace.infrastructure.search.index import SearchIndex, search_index_path

    settings = LedgerSettings.from_env()
    if settings.url is not None or (settings.path or default_ledger_path(root.path)).exists():
        ledger = RuntimeEventLedger.open(root.path, settings)
        try:
            yield from scan_ledger(ledger)
        finally:
            ledger.close()
    if search_index_path(root).exists():
        with SearchIndex(root) as index:
            yield from scan_search_index(index)
    url = analytics_url(root.path)
    if not url.startswith("sqlite:///") or Path(url.removeprefix("sqlite:///")).exists():
        yield from scan_analytics(root.path)
