"""A session's trace records as the redacted envelopes the ledger would hold for them."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Final

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.runtime import event_type_for, runtime_event_from_record
from pentrace.infrastructure.ledger.indexer import record_workspace
from pentrace.infrastructure.storage.layout import SessionRef
from pentrace.infrastructure.trace.reader import read_session
from pentrace.projections.analytics.events import AnalyticsEvent, decode_event

__all__ = ["session_events"]

_encode: Final = JsonEncoder().encode


def session_events(
    ref: SessionRef, limit: int | None = None, types: Collection[str] = ()
) -> Iterator[AnalyticsEvent]:
    """Each record (positions 1..``limit``) mapped, redacted and decoded as the ledger's would be.

    The directory is the first ``session_meta``'s workspace, as the indexer takes it.
    With ``types``, records of other event types are skipped before the
    (costly) mapping and redaction.
    """
    directory: str | None = None
    for position, record in enumerate(read_session(ref.shards), start=1):
        if limit is not None and position > limit:
            return
        if position == 1:
            directory = record_workspace(record)
        if types and event_type_for(record, position) not in types:
            continue
        event = runtime_event_from_record(
            record,
            session_id=ref.session_id,
            position=position,
            project=ref.project,
            agent=ref.agent,
            directory=directory,
        )
        yield decode_event(_encode(event))
