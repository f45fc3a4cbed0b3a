"""A ledger's first zstd dictionary, trained on its own envelopes (ADR 0058).

A sync into a ledger without a dictionary trains one before it builds rows,
on the envelopes of the first records of its first sessions (built and
redaction-checked exactly as the rows will be), so every row it writes is
compressed.  A ledger that only the live path or an ingest follower writes
trains one from its own stored rows once it holds :data:`TRAIN_AFTER` of
them; the rows written before stay plain, and readable.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from sqlalchemy import select

from pentrace.domain.runtime import SessionEvents
from pentrace.errors import LedgerError, TraceError
from pentrace.infrastructure.ledger.backend.codec import MIN_SAMPLES, RowCodec
from pentrace.infrastructure.ledger.backend.row_form import add_dictionary, read_plain
from pentrace.infrastructure.ledger.rows import encoded_values
from pentrace.infrastructure.storage.layout import SessionRef
from pentrace.infrastructure.trace.reader import read_session

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.store import RuntimeEventLedger

__all__ = ["SAMPLES", "TRAIN_AFTER", "stored_rows_codec", "sync_codec"]

#: Envelopes a dictionary is trained on, and how many one session may give.
SAMPLES: Final = 2000
_PER_SESSION: Final = 20
#: Plain rows a ledger without a dictionary takes before it trains one from them.
TRAIN_AFTER: Final = 1000
_log = logging.getLogger(__name__)


def sync_codec(ledger: RuntimeEventLedger, refs: Iterable[SessionRef]) -> RowCodec:
    """The codec a sync of ``refs`` writes with: the ledger's, after training its first
    dictionary on the sessions' envelopes when it has none (and they are enough)."""
    codec = ledger.db.codec
    if codec.current is not None or ledger.db.read_only:
        return codec
    samples: list[bytes] = []
    for ref in refs:
        samples += _session_samples(ref)
        if len(samples) >= SAMPLES:
            break
    return _trained(ledger, samples)


def stored_rows_codec(ledger: RuntimeEventLedger) -> RowCodec:
    """The codec after training a first dictionary on the ledger's newest rows, when it has
    none and holds at least :data:`TRAIN_AFTER` rows (the live path's trigger)."""
    db = ledger.db
    events = db.tables.events
    with db.reading("sample the ledger's envelopes") as conn:
        rows = conn.execute(
            select(events.c.event_json).order_by(events.c.notification_id.desc()).limit(SAMPLES)
        ).all()
    if len(rows) < TRAIN_AFTER:
        return db.codec
    samples = read_plain(db, rows, 0, None)
    return _trained(ledger, [sample for sample in samples if sample[:1] == b"{"])


def _trained(ledger: RuntimeEventLedger, samples: list[bytes]) -> RowCodec:
    if len(samples) < MIN_SAMPLES:
        return ledger.db.codec
    codec = add_dictionary(ledger.db, samples[:SAMPLES], ledger.now_ms())
    _log.info("ledger %s: dictionary %s trained on %d envelopes", ledger.db.where,
              codec.current, len(samples))  # fmt: skip
    return codec


def _session_samples(ref: SessionRef) -> list[bytes]:
    """The first envelopes of a session, as its rows hold them (a failing session: none)."""
    mapper = SessionEvents(ref.key)
    found: list[bytes] = []
    try:
        for position, record in enumerate(read_session(ref.shards), start=1):
            found.append(encoded_values(mapper.encoded(position, record), 0)[-1])
            if len(found) >= _PER_SESSION:
                break
    except (LedgerError, TraceError, OSError):
        pass  # the sync reports it when it builds the session
    return found
