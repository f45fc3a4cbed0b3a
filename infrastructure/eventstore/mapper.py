"""The mapper between Session events and trace lines: the stored state IS the line.

eventsourcing's stock :class:`~eventsourcing.persistence.Mapper` serialises an
event's ``__dict__`` through a transcoder.  Here the event already carries its
envelope bytes, so writing is a lookup of the topic, and reading rebuilds the
event from the line without any JSON transcoder (only the ``timestamp`` field
is decoded).  Ciphers and compressors are refused: a trace is plain JSONL that
PenguinHarness must be able to read.
"""

from __future__ import annotations

from typing import Any, Final

from eventsourcing.domain import CanInitAggregate
from eventsourcing.persistence import Cipher, Compressor, Mapper, StoredEvent, Transcoder
from eventsourcing.utils import get_topic, resolve_topic

from pentrace.domain.kinds import event_class_for
from pentrace.domain.records import TraceRecord
from pentrace.domain.session.aggregate import Session
from pentrace.domain.session.events import EVENT_CLASSES, HEADER, SessionEvent, ShardOpened
from pentrace.domain.session.lines import read_timestamp
from pentrace.errors import ConfigError

__all__ = [
    "SESSION_TOPIC",
    "SHARD_OPENED_TOPIC",
    "TraceMapper",
    "stored_event_for",
    "topic_for",
]

SESSION_TOPIC: Final = get_topic(Session)
SHARD_OPENED_TOPIC: Final = get_topic(ShardOpened)

_TOPIC_OF: Final[dict[type[SessionEvent], str]] = {cls: get_topic(cls) for cls in EVENT_CLASSES}
_CLASS_OF: Final[dict[str, type[SessionEvent]]] = {t: c for c, t in _TOPIC_OF.items()}
_CREATED: Final = frozenset(t for c, t in _TOPIC_OF.items() if issubclass(c, CanInitAggregate))


def topic_for(record: TraceRecord, position: int) -> str:
    """The topic of the event class a record at ``position`` stands for."""
    return _TOPIC_OF[event_class_for(record, position)]


def stored_event_for(session_id: str, record: TraceRecord, position: int) -> StoredEvent:
    """The StoredEvent for a trace record read at ``position`` of ``session_id``.

    The parsed header rides along outside the dataclass fields (so equality
    and the stored state are untouched) and :class:`TraceMapper` hands it to
    the event, so ``apply`` does not parse the line a second time.
    """
    stored = object.__new__(StoredEvent)
    state = {
        "originator_id": session_id,
        "originator_version": position,
        "topic": _TOPIC_OF[event_class_for(record, position)],
        "state": record.raw,
        HEADER: record,
    }
    object.__setattr__(stored, "__dict__", state)
    return stored


class TraceMapper(Mapper[str]):
    """Maps Session events to StoredEvents whose ``state`` is the trace line, and back."""

    def __init__(
        self,
        transcoder: Transcoder | None = None,
        compressor: Compressor | None = None,
        cipher: Cipher | None = None,
    ) -> None:
        if compressor is not None or cipher is not None:
            raise ConfigError(
                "the trace store keeps plain JSONL lines, found a "
                + ("cipher" if cipher is not None else "compressor")
                + " configured (CIPHER_TOPIC / COMPRESSOR_TOPIC)",
                hint="unset CIPHER_TOPIC, CIPHER_KEY and COMPRESSOR_TOPIC for the trace store",
            )
        # The transcoder is never used: lines are already encoded envelopes.
        super().__init__(transcoder or _NoTranscoder())

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        """The event's own line, under its class topic."""
        cls = type(domain_event)
        event_state = domain_event.__dict__
        # Built like the library's Mapper builds events: the frozen dataclass
        # __init__ would cost as much as the rest of a save.
        stored = object.__new__(StoredEvent)
        state = {
            "originator_id": event_state["originator_id"],
            "originator_version": event_state["originator_version"],
            "topic": _TOPIC_OF.get(cls) or get_topic(cls),
            "state": event_state["line"],
        }
        object.__setattr__(stored, "__dict__", state)
        return stored

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        """Rebuild the event from the line; no dataclass ``__init__`` on the hot path."""
        topic = stored_event.topic
        cls = _CLASS_OF.get(topic) or resolve_topic(topic)
        line = stored_event.state
        state: dict[str, Any] = {
            "originator_id": stored_event.originator_id,
            "originator_version": stored_event.originator_version,
            "timestamp": read_timestamp(line),
            "line": line,
        }
        if topic in _CREATED:
            state["originator_topic"] = SESSION_TOPIC
        header = stored_event.__dict__.get(HEADER)
        if header is not None:
            state[HEADER] = header
        event = object.__new__(cls)
        object.__setattr__(event, "__dict__", state)
        return event


class _NoTranscoder(Transcoder):
    """Stands in for the transcoder the base class expects; traces never need one."""

    def encode(self, obj: Any) -> bytes:
        """Never called: trace lines are encoded by the domain."""
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:
        """Never called: trace lines are decoded by the mapper itself."""
        raise NotImplementedError
