"""A session's trace records as the redacted envelopes the ledger would hold for them."""

from __future__ import annotations

from collections.abc import Collection, Iterator

from pentrace.domain.runtime import SessionEvents, event_type_for
from pentrace.infrastructure.storage.layout import SessionRef
from pentrace.infrastructure.trace.reader import read_session
from pentrace.projections.analytics.events import AnalyticsEvent, decode_event

__all__ = ["session_events"]


def session_events(
    ref: SessionRef, limit: int | None = None, types: Collection[str] = ()
) -> Iterator[AnalyticsEvent]:
    """Each record (positions 1..``limit``) mapped, redacted and decoded as the ledger's would be.

    The records take the indexer's path (:class:`~pentrace.domain.runtime.SessionEvents`),
    so the envelope bytes decoded here are the ones ``ledger sync`` stores.  With
    ``types``, records of other event types are skipped before the (costly)
    mapping and redaction.
    """
    mapper = SessionEvents(ref.key)
    for position, record in enumerate(read_session(ref.shards), start=1):
        if limit is not None and position > limit:
            return
        if types and event_type_for(record, position) not in types:
            mapper.skip(position, record)
            continue
        yield decode_event(mapper.encoded(position, record).json)
