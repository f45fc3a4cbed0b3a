"""Which secrets sit in the traces: ``pentrace scan``'s library half.

:func:`scan_traces` reads every record of the given sessions once, screens its
bytes and walks only the records the screen cannot clear.  The derived stores
are scanned by :mod:`pentrace.infrastructure.audit.stores`.  A finding
carries a masked preview (:mod:`pentrace.domain.redaction.core`), never
the secret.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from pentrace.domain.redaction.core import find_secrets
from pentrace.domain.redaction.screen import may_change
from pentrace.infrastructure.storage.layout import SessionRef
from pentrace.infrastructure.trace.reader import read_shard

__all__ = ["ScanFinding", "scan_traces"]


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
