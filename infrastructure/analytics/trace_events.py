"""A session's trace records as the redacted envelopes the ledger would hold for them."""

from __future__ import annotations

import gc
from collections.abc import Collection, Iterator
from typing import Final, NamedTuple

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import SessionEvents, event_type_for
from pentrace.infrastructure.ledger.bulk import SESSION_ERRORS, SessionFailure
from pentrace.infrastructure.ledger.rows import ROW_COLUMNS, encoded_values
from pentrace.infrastructure.storage.layout import SessionRef
from pentrace.infrastructure.trace.reader import read_session
from pentrace.projections.analytics.events import AnalyticsEvent, decode_event

__all__ = ["SessionFold", "fold_session", "fold_sessions", "session_events"]

_JSON: Final = ROW_COLUMNS.index("event_json")


def _envelopes(
    ref: SessionRef, limit: int | None, types: Collection[str]
) -> Iterator[tuple[int, bytes | None]]:
    """``(position, envelope JSON)`` of each record up to ``limit``; None for a skipped type."""
    mapper = SessionEvents(ref.key)
    record: TraceRecord
    for position, record in enumerate(read_session(ref.shards), start=1):
        if limit is not None and position > limit:
            return
        if types and event_type_for(record, position) not in types:
            mapper.skip(position, record)
            yield position, None
            continue
        # The ledger's own row check: an envelope it would refuse (RedactionError) is not
        # folded either, and the session stops there, as its ``ledger sync`` does.
        yield position, encoded_values(mapper.encoded(position, record), 0)[_JSON]


def session_events(
    ref: SessionRef, limit: int | None = None, types: Collection[str] = ()
) -> Iterator[AnalyticsEvent]:
    """Each record (positions 1..``limit``) mapped, redacted and decoded as the ledger's would be.

    The records take the indexer's path (:class:`~pentrace.domain.runtime.SessionEvents`),
    so the envelope bytes decoded here are the ones ``ledger sync`` stores.  With
    ``types``, records of other event types are skipped before the (costly)
    mapping and redaction.
    """
    for _, data in _envelopes(ref, limit, types):
        if data is not None:
            yield decode_event(data)


class SessionFold(NamedTuple):
    """A session's envelopes of the wanted types, how many records were read, and a failure.

    ``folded`` is the highest trace position the envelopes cover (its trace
    mark); after a failure it is the last position read before it.
    """

    ref: SessionRef
    envelopes: list[bytes]
    folded: int
    failure: SessionFailure | None


def fold_session(ref: SessionRef, types: Collection[str]) -> SessionFold:
    """Every record of ``ref`` as :func:`session_events` maps it, as bytes (a worker's task).

    A failure of the session's own (its trace unreadable, a record the
    redaction check refuses) keeps the envelopes before it, as ``ledger
    sync`` keeps the rows before it.
    """
    envelopes: list[bytes] = []
    folded = 0
    try:
        for position, data in _envelopes(ref, None, types):
            if data is not None:
                envelopes.append(data)
            folded = position
    except SESSION_ERRORS as error:
        return SessionFold(ref, envelopes, folded, SessionFailure.of(ref, error))
    return SessionFold(ref, envelopes, folded, None)


def fold_sessions(refs: list[SessionRef], types: Collection[str]) -> list[SessionFold]:
    """:func:`fold_session` of each session (one worker task holds a few)."""
    # A worker lives for one build and makes no cycles: collecting only slows it.
    gc.disable()
    return [fold_session(ref, types) for ref in refs]
