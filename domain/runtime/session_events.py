"""The one path from a session's trace records to its RuntimeEvents (ADR 0038).

The live hook, ``ledger sync`` and ``rebuild``, the ingest follower and the
analytics rebuild all map records through :class:`SessionEvents`, so a record
becomes the same envelope, with the same id and the same bytes, whichever
path indexes it.  A session's events take its ``directory`` from the
``workspace`` of its first record when that is a ``session_meta``.

:meth:`SessionEvents.encoded` also encodes the envelope, once: the ledger
stores those bytes and an SSE frame is cut from them.  It first builds the
envelope with nothing redacted and screens its bytes
(:func:`~pentrace.domain.redaction.screen.may_change`): when no redaction
rule can apply anywhere in them, every field's redaction would have left it
as it is, so the candidate *is* the redacted envelope, and the screen's
verdict stands for the ledger's own redaction check (``screened``).  Any
other envelope is built again through the full redaction, and the ledger
checks it in full.  Property tests hold both ways to the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.records import TraceRecord
from pentrace.domain.redaction.screen import may_change
from pentrace.domain.runtime.candidate import Candidates, EncodedCandidate
from pentrace.domain.runtime.envelope import Header, RuntimeEvent
from pentrace.domain.runtime.mapping import event_from_record
from pentrace.domain.session.key import SessionKey

__all__ = ["UNKNOWN", "EncodedEvent", "SessionEvents", "encode_event", "record_workspace"]

_encode_struct: Final = msgspec.json.Encoder().encode
_encode_builtins: Final = JsonEncoder().encode


class EncodedEvent:
    """An envelope and its JSON bytes; ``screened`` when the screen cleared those bytes.

    ``header``, when set, is the shared :class:`Header` a screened candidate
    took its type, category, stream id and scope from (its privacy is
    ``public``, nothing redacted): the ledger derives those columns once per
    header object instead of once per event.  ``event_id``, ``time`` and
    ``sequence`` are the envelope's.  A screened candidate encoded from its
    header's byte template builds its struct (:attr:`event`) only when asked.
    """

    __slots__ = ("_event", "_lazy", "event_id", "header", "json", "screened", "sequence", "time")

    def __init__(
        self, event: RuntimeEvent, json: bytes, screened: bool, header: Header | None = None
    ) -> None:
        self._event: RuntimeEvent | None = event
        self._lazy: tuple[Candidates, TraceRecord, str | None] | None = None
        self.json = json
        self.screened = screened
        self.header = header
        self.event_id: str = event.id
        self.time: int = event.time
        self.sequence: int = event.sequence

    @classmethod
    def of_candidate(
        cls,
        found: EncodedCandidate,
        source: tuple[Candidates, TraceRecord, str | None],
    ) -> EncodedEvent:
        """A screened candidate of :meth:`Candidates.encoded`; its struct is built from
        ``source`` (the candidates, the record, the directory) on first use."""
        encoded = cls.__new__(cls)
        encoded._event = None
        encoded._lazy = source
        encoded.json, encoded.header, encoded.event_id, encoded.time, encoded.sequence = found
        encoded.screened = True
        return encoded

    @property
    def event(self) -> RuntimeEvent:
        """The envelope as a :class:`RuntimeEvent` struct."""
        event = self._event
        if event is None:
            assert self._lazy is not None
            candidates, record, directory = self._lazy
            built = candidates.with_header(self.sequence, record, directory)
            assert built is not None
            event = self._event = built[0]
            self._lazy = None
        return event

    def __repr__(self) -> str:
        return f"EncodedEvent({self.event_id!r}, screened={self.screened})"


def encode_event(event: RuntimeEvent) -> bytes:
    """The envelope's JSON in Penguin's key order (lone surrogates as escapes, ADR 0015)."""
    try:
        return _encode_struct(event)
    except UnicodeEncodeError:
        return _encode_builtins(event.to_builtins())


def record_workspace(record: TraceRecord) -> str | None:
    """The ``workspace`` of a ``session_meta`` record (the events' directory), else None."""
    if record.kind != "session_meta":
        return None
    workspace = record.payload().get("workspace")
    return workspace if isinstance(workspace, str) and workspace else None


class _Unknown:
    """The directory is to be read from the record at position 1."""


UNKNOWN: Final = _Unknown()


class SessionEvents:
    """Map one session's records, each at its 1-based position in the session trace.

    Without ``directory`` the session's workspace is read from the record at
    position 1 (a sync reads the trace from its start); a caller that starts
    later passes it (the live hook reads it from the first shard), and then
    it stands for every record.
    """

    def __init__(self, key: SessionKey, directory: str | _Unknown | None = UNKNOWN) -> None:
        self.key = key
        self._learn = isinstance(directory, _Unknown)
        self.directory = None if isinstance(directory, _Unknown) else directory
        self._candidates = Candidates(key)

    def _see(self, position: int, record: TraceRecord) -> None:
        if position == 1 and self._learn:
            self.directory = record_workspace(record)

    def skip(self, position: int, record: TraceRecord) -> None:
        """Pass over a record that is not mapped (held already), minding the directory."""
        self._see(position, record)

    def event(self, position: int, record: TraceRecord, *, redacting: bool = True) -> RuntimeEvent:
        """The redacted RuntimeEvent of the record at ``position``."""
        self._see(position, record)
        key = self.key
        return event_from_record(
            record,
            session_id=key.session_id,
            position=position,
            project=key.project,
            agent=key.agent,
            directory=self.directory,
            redacting=redacting,
        )

    def encoded(self, position: int, record: TraceRecord) -> EncodedEvent:
        """The redacted RuntimeEvent of the record at ``position`` and its JSON bytes."""
        found = self.screened(position, record)
        if type(found) is EncodedCandidate:
            return EncodedEvent.of_candidate(found, (self._candidates, record, self.directory))
        assert isinstance(found, EncodedEvent)
        return found

    def screened(self, position: int, record: TraceRecord) -> EncodedCandidate | EncodedEvent:
        """:meth:`encoded`, but a candidate the screen cleared as it is (no struct, no
        wrapper): what ``ledger sync`` takes its row from."""
        self._see(position, record)
        candidates = self._candidates
        directory = self.directory
        fast = candidates.encoded(position, record, directory)
        if fast is not None:
            if not may_change(fast.json):
                return fast
            event = self.event(position, record)
            return EncodedEvent(event, encode_event(event), False)
        found = candidates.with_header(position, record, directory)
        header: Header | None = None
        if found is None:
            candidate = self.event(position, record, redacting=False)
        else:
            candidate, header = found
        data = encode_event(candidate)
        if not may_change(data):
            return EncodedEvent(candidate, data, True, header)
        event = self.event(position, record)
        return EncodedEvent(event, encode_event(event), False)

    def encoded_all(self, records: Iterable[tuple[int, TraceRecord]]) -> list[EncodedEvent]:
        """:meth:`encoded` of each ``(position, record)``, in order."""
        return [self.encoded(position, record) for position, record in records]
