"""Bulk folds: a projection's cold build straight from the trace records (ADR 0062).

A cold build (ADR 0050) maps every record of a projection's types to the
redacted envelope the ledger would store, decodes it and runs the handlers
with their merged writes: about 30 us per record, most of it for fields the
projection never reads.  A projection may declare a *bulk fold* instead
(``bulk_fold = MyFold`` in its own class body; a subclass that changes the
handlers does not inherit it).  Its workers then see each record of the
projection's types once, with a :class:`ColdSession` that offers two ways to
read it:

* :meth:`ColdSession.untouched`: the redaction screen clears the record's
  bytes and the session's own strings (project, agent, session id,
  workspace, the ids made of them), so the envelope would hold the record's
  payload and time as written, and the session's key as its scope.  The fold
  may then decode the few fields it needs from ``record.raw`` with a typed
  msgspec Struct;
* :meth:`ColdSession.event`: the exact envelope of the per-event path, mapped
  and redacted (``SessionEvents.encoded``, the ledger's row check), decoded.

The fold aggregates in memory (:meth:`BulkFold.fold`), hands the parent a
picklable partial per worker task (:meth:`BulkFold.take`), the parent merges
them (:meth:`BulkFold.merge`) and writes the read model's rows once
(:meth:`BulkFold.write`).  A fold must leave exactly the rows the handlers
would: the equivalence tests hold each built-in to that.
"""

from __future__ import annotations

import gc
from abc import ABC, abstractmethod
from collections.abc import Collection
from typing import Any, NamedTuple

import msgspec

from pentrace.domain.records import TraceRecord
from pentrace.domain.redaction.screen import may_change
from pentrace.domain.runtime import SessionEvents, event_type_for
from pentrace.domain.runtime.mapping import kinds_for
from pentrace.infrastructure.analytics.transaction import Transaction
from pentrace.infrastructure.ledger.bulk import SESSION_ERRORS, SessionFailure
from pentrace.infrastructure.ledger.bulk.build import RECORD_ERRORS, record_findings
from pentrace.infrastructure.ledger.rows import ROW_COLUMNS, encoded_values
from pentrace.infrastructure.storage.layout import SessionRef
from pentrace.infrastructure.trace.reader import read_session
from pentrace.projections.analytics.events import AnalyticsEvent, decode_event

__all__ = ["BulkFold", "BulkTask", "ColdSession", "bulk_fold_of", "fold_in_bulk"]

_JSON = ROW_COLUMNS.index("event_json")


class ColdSession:
    """One session's records as a bulk fold reads them (see the module docstring).

    ``project``, ``agent`` and ``session_id`` are the session's key; ``session``
    is what :attr:`AnalyticsEvent.session` gives for it.  They are what an
    untouched record's envelope has in its scope.
    """

    def __init__(self, ref: SessionRef, types: Collection[str]) -> None:
        key = ref.key
        self.project, self.agent, self.session_id = key.project, key.agent, key.session_id
        self.session = (
            f"{key.project}/{key.agent}/{key.session_id}"
            if key.project and key.agent
            else key.session_id
        )
        self._types = types
        self._mapper = SessionEvents(key)
        self._clean: bool | None = None

    def see(self, position: int, record: TraceRecord) -> None:
        """Note the session's first record, which names its workspace."""
        self._mapper.skip(position, record)

    def _own_strings_clean(self) -> bool:
        """Whether the screen clears every string of the envelope that comes from the session
        rather than the record: its key, workspace, stream id and the ids made of them."""
        if self._clean is None:
            mapper = self._mapper
            key = mapper.key
            strings = [
                key.project,
                key.agent,
                key.session_id,
                mapper.directory or "",
                key.stream_id,
                key.event_id(1),
                *(f"{kind}:{key.session_id}:" for kind in sorted(self._types)),
            ]
            self._clean = not may_change(msgspec.json.encode(strings))
        return self._clean

    def untouched(self, record: TraceRecord) -> bool:
        """True when redaction would leave this record's envelope as the record and the
        session's key spell it: the fold may read the record's own bytes."""
        return self._own_strings_clean() and not may_change(record.raw)

    def event(self, position: int, record: TraceRecord) -> AnalyticsEvent:
        """The record's envelope exactly as the ledger (and the per-event path) holds it.

        Raises what the ledger's row check raises for it (a ``RedactionError``
        leaves the record out, as its ``ledger sync`` does: ADR 0102).
        """
        encoded = self._mapper.encoded(position, record)
        return decode_event(encoded_values(encoded, 0)[_JSON])


class BulkFold(ABC):
    """A projection's cold build as an in-memory aggregate (see the module docstring).

    One instance folds a worker task's sessions and is emptied by :meth:`take`;
    another, in the parent, merges the partials in data-root order and writes.
    """

    @abstractmethod
    def fold(
        self, session: ColdSession, position: int, event_type: str, record: TraceRecord
    ) -> None:
        """Fold the record at ``position`` (of one of the projection's types) into the aggregate.

        A fold that raises (``ColdSession.event`` refusing a record) must not
        have changed the aggregate for this record: the record is left out (a
        finding) and the session's next records are folded.
        """

    @abstractmethod
    def take(self) -> Any:
        """The aggregate so far, picklable, and start again from nothing."""

    @abstractmethod
    def merge(self, partial: Any) -> None:
        """Add a worker's partial aggregate (the parent's instance)."""

    @abstractmethod
    def write(self, tx: Transaction) -> None:
        """Write the merged aggregate into the read model's fresh tables."""


def bulk_fold_of(projection_class: type[Any]) -> type[BulkFold] | None:
    """The bulk fold the class declares in its own body (a subclass's handlers may differ)."""
    found = vars(projection_class).get("bulk_fold")
    return found if isinstance(found, type) and issubclass(found, BulkFold) else None


class BulkTask(NamedTuple):
    """A worker task's result: per session its records folded, its trace mark and findings
    (in ``refs`` order), and the task's partial aggregate."""

    sessions: list[tuple[SessionRef, int, int, tuple[SessionFailure, ...]]]
    partial: Any


_NONE: frozenset[str] = frozenset()
# Bigger reads than the reader's default: fewer chunks to join, about 10% less reading CPU.
_READ_CHUNK = 4 * 1024 * 1024


def _may_map(kinds: dict[str, frozenset[str] | None] | None, record: TraceRecord) -> bool:
    """Whether the record may map to one of the types ``kinds`` was made for (``kinds_for``)."""
    if kinds is None:
        return True
    kind = record.kind
    if type(kind) is not str:
        return False
    ptypes = kinds.get(kind, _NONE)
    return ptypes is None or (type(record.ptype) is str and record.ptype in ptypes)


def _fold_session(
    fold: BulkFold, ref: SessionRef, types: Collection[str]
) -> tuple[SessionRef, int, int, tuple[SessionFailure, ...]]:
    session = ColdSession(ref, types)
    folded = events = 0
    refused: list[tuple[int, BaseException]] = []
    cut: tuple[SessionFailure, ...] = ()
    try:
        fold_record = fold.fold
        kinds = kinds_for(types)
        records = read_session(ref.shards, chunk_size=_READ_CHUNK)
        for position, record in enumerate(records, start=1):
            if position == 1:
                session.see(position, record)  # the first record names the workspace
            # Most records are of a kind or payload type that maps to none of the types.
            if _may_map(kinds, record):
                event_type = event_type_for(record, position)
                if event_type in types:
                    try:
                        fold_record(session, position, event_type, record)
                    except RECORD_ERRORS as error:  # left out, as the ledger leaves it out
                        refused.append((position, error))
                    else:
                        events += 1
            folded = position
    except SESSION_ERRORS as error:
        cut = (SessionFailure.of(ref, error),)
    return ref, events, folded, (*record_findings(ref, refused), *cut)


def fold_in_bulk(
    fold_class: type[BulkFold], refs: list[SessionRef], types: Collection[str]
) -> BulkTask:
    """Fold the sessions of ``refs`` with a fresh ``fold_class`` (a worker's task)."""
    # A worker lives for one build and makes no cycles: collecting only slows it.
    gc.disable()
    fold = fold_class()
    sessions = [_fold_session(fold, ref, types) for ref in refs]
    return BulkTask(sessions, fold.take())
