"""A session's unredacted candidate envelopes, with the parts its events share built once.

:meth:`SessionEvents.encoded <pentrace.domain.runtime.session_events.SessionEvents.encoded>`
screens the *candidate* of each record, the envelope built with nothing
redacted (``event_from_record(..., redacting=False)``).  Most records of a
session differ only in their position, time, payload, correlation and the
opencode projection: their payload holds none of the keys the header reads
(``BODY_READS``), so the header (type to subject, stream id, scope, actor)
depends on the event type, the actor and the session alone (a ``status``
that is not an object, as ``request_end``'s, is one the header does not read).
:class:`Candidates` keeps one header per such combination for the session
and fills in the rest per record; a record of any other shape (no payload
object, a payload the header reads) takes ``event_from_record`` itself.
This is a fast path beside a reference: ``event_from_record`` of
:mod:`.mapping` (the envelope built field by field, then encoded by
``encode_event``).  Both give the same envelope, byte for byte, and these
property tests over generated records hold them to it, hostile values
included (lone surrogates, ``%`` and quotes in names, secrets, odd payload
shapes): ``tests/property/test_candidate_template.py`` (the template's bytes
are the struct's), ``tests/property/test_session_events.py`` (the screened
candidate is the fully redacted envelope and ledger row) and
``tests/property/test_domain_surrogates.py`` (surrogates everywhere); the bulk
benchmark's corpus checks them too.

:meth:`Candidates.encoded` gives the candidate's JSON bytes without the
struct: per header, the envelope's encoding is kept as one byte template
whose slots are what changes per record (position, time, correlation,
payload, the opencode anchor), each filled with the encoding msgspec gives
that value inside the struct (JSON is written value by value, so the bytes
are the struct's).  Tests hold the template's bytes to ``encode_event`` of
:meth:`Candidates.with_header`'s struct.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

import msgspec

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime.envelope import SCHEMA_VERSION, Header, Privacy, RuntimeEvent
from pentrace.domain.runtime.mapping import (
    event_type_for,
    partial_category,
    record_actor,
    record_correlation,
    record_scope,
    stamp_ms,
    time_ms_of,
)
from pentrace.domain.runtime.scope import BODY_READS, envelope_header
from pentrace.domain.session.key import SessionKey

__all__ = ["Candidates", "EncodedCandidate"]

_PUBLIC: Final = "public"
_MAX_HEADERS: Final = 256
# The provider part of the header key of a record that is not a session_meta.
_NOT_META: Final = object()
# The header reads a payload's ``status`` only when it is an object (a nested scope):
# ``request_end``'s string status leaves it as if the key were absent.
_READS_BUT_STATUS: Final = BODY_READS - {"status"}
_encode: Final = msgspec.json.Encoder().encode
# Record kinds whose header the payload type, role, status and sender decide.
_QUICK_KINDS: Final = ("event_msg", "model_msg")
# The privacy block of every candidate: nothing redacted.
_PRIVACY: Final = _encode(Privacy(_PUBLIC, False, []))


class EncodedCandidate(NamedTuple):
    """A candidate's JSON bytes, the shared header it was built from, its id, time and
    sequence (its position)."""

    json: bytes
    header: Header
    event_id: str
    time: int
    sequence: int


def _inner(text: str) -> bytes:
    """The body of ``text``'s JSON string (quotes off), ``%`` doubled for a byte template."""
    return _encode(text)[1:-1].replace(b"%", b"%%")


def _literal(value: object) -> bytes:
    """``value``'s JSON, ``%`` doubled for a byte template."""
    return _encode(value).replace(b"%", b"%%")


class Candidates:
    """The candidate envelopes of one session's records (see the module docstring)."""

    def __init__(self, key: SessionKey) -> None:
        self.key = key
        self._stream = key.stream_id
        self._id_prefix = f"{key.id_prefix}:"
        self._anchor_middle = f":{key.session_id}:"
        self._headers: dict[tuple[Any, ...], Header] = {}
        # Per header object: the envelope's byte template (None: a value msgspec cannot
        # encode, such as a lone surrogate; those records take the struct).
        self._templates: dict[int, tuple[Header, bytes | None]] = {}
        # The header and template of an event or model message, by what they read of it.
        self._shaped: dict[tuple[Any, ...], tuple[Header, bytes | None]] = {}

    def candidate(
        self, position: int, record: TraceRecord, directory: str | None
    ) -> RuntimeEvent | None:
        """``event_from_record(..., redacting=False)`` of the record, or None for an odd shape."""
        found = self.with_header(position, record, directory)
        return None if found is None else found[0]

    def with_header(
        self, position: int, record: TraceRecord, directory: str | None
    ) -> tuple[RuntimeEvent, Header] | None:
        """:meth:`candidate` and the session's shared :class:`Header` it was built from.

        The envelope's type, category, stream id and scope are the header's
        (the scope a copy); one header object serves every record of its
        combination, so a caller may key what it derives from them by it.
        """
        value = record.value()
        payload = value.get("payload") if type(value) is dict else None
        if type(payload) is not dict or not _READS_BUT_STATUS.isdisjoint(payload):
            return None
        if isinstance(payload.get("status"), Mapping):
            return None  # the scope reads a nested status object
        event_type = event_type_for(record, position)
        header = self._header(event_type, record, payload, directory)
        tool_call_id = record.tool_call_id
        anchor = tool_call_id if isinstance(tool_call_id, str) and tool_call_id else position
        event = RuntimeEvent(
            f"{self._id_prefix}{position:08d}",
            SCHEMA_VERSION,
            header.type,
            header.category,
            header.source,
            header.subject,
            time_ms_of(record),
            header.stream_id,
            position,
            dict(header.scope),
            record_correlation(record, payload),
            dict(header.actor),
            Privacy(_PUBLIC, False, []),
            dict(payload),
            {
                "opencode": {
                    "id": f"{event_type}{self._anchor_middle}{anchor}",
                    "type": event_type,
                }
            },
        )
        return event, header

    def encoded(
        self, position: int, record: TraceRecord, directory: str | None
    ) -> EncodedCandidate | None:
        """``encode_event`` of :meth:`candidate`, from the header's byte template, with the
        header, id and time; None for an odd shape or a value msgspec cannot encode."""
        value = record.value()
        payload = value.get("payload") if type(value) is dict else None
        if type(payload) is not dict or not _READS_BUT_STATUS.isdisjoint(payload):
            return None
        given = payload.get("status")
        if given is not None and type(given) is not str and isinstance(given, Mapping):
            return None  # the scope reads a nested status object
        kind, ptype, role, status = record.kind, record.ptype, record.role, record.status
        quick: tuple[Any, ...] | None = None
        shaped = None
        if (
            kind in _QUICK_KINDS
            and type(ptype) is str
            and (role is None or type(role) is str)
            and (status is None or type(status) is str)
        ):
            # All the header and the event type read of such a record (record_actor:
            # a user message's sender; event_type_for: the status), as exact strings.
            sender = payload.get("sender") if kind == "model_msg" and role == "user" else None
            quick = (kind, ptype, role, status, sender if type(sender) is str else None,
                     directory)  # fmt: skip
            shaped = self._shaped.get(quick)
        if shaped is None:
            event_type = event_type_for(record, position)
            header = self._header(event_type, record, payload, directory)
            known = self._templates.get(id(header))
            if known is None or known[0] is not header:
                known = self._template(header, event_type)
            shaped = (known[0], known[1])
            if quick is not None:
                if len(self._shaped) >= _MAX_HEADERS:
                    self._shaped.clear()
                self._shaped[quick] = shaped
        header, template = shaped
        if template is None:
            return None
        time = stamp_ms(value.get("timestamp"))
        tool_call_id = record.tool_call_id
        try:
            if isinstance(tool_call_id, str) and tool_call_id:
                anchor = _encode(tool_call_id)[1:-1]
                correlation = b'{"tool_call_id":"%s"}' % anchor
            else:
                anchor = b"%d" % position
                correlation = b"{}"
            if record.origin or (record.kind == "event_msg" and record.ptype == "subagent"):
                correlation = _encode(record_correlation(record, payload))
            data = template % (position, time, position, correlation, _encode(payload), anchor)
        except UnicodeEncodeError:
            return None  # a lone surrogate: the struct's path escapes it
        return EncodedCandidate(data, header, f"{self._id_prefix}{position:08d}", time, position)

    def _template(self, header: Header, event_type: str) -> tuple[Header, bytes | None]:
        """The envelope of ``header`` as a byte template with six slots: the position
        (``%08d``, in the id), the time, the sequence, the correlation, the payload and the
        opencode anchor (the field order of :class:`RuntimeEvent`)."""
        template: bytes | None
        try:
            template = b"".join((
                b'{"id":"', _inner(self._id_prefix), b'%08d","schema_version":',
                _literal(SCHEMA_VERSION), b',"type":', _literal(header.type),
                b',"category":', _literal(header.category), b',"source":',
                _literal(header.source), b',"subject":', _literal(header.subject),
                b',"time":%d,"stream_id":', _literal(header.stream_id),
                b',"sequence":%d,"scope":', _literal(header.scope),
                b',"correlation":%s,"actor":', _literal(header.actor),
                b',"privacy":', _PRIVACY.replace(b"%", b"%%"),
                b',"payload":%s,"projections":{"opencode":{"id":"',
                _inner(f"{event_type}{self._anchor_middle}"), b'%s","type":',
                _literal(event_type), b"}}}",
            ))  # fmt: skip
        except UnicodeEncodeError:
            template = None
        if len(self._templates) >= _MAX_HEADERS:
            self._templates.clear()
        known = self._templates[id(header)] = (header, template)
        return known

    def _header(
        self, event_type: str, record: TraceRecord, payload: dict[str, Any], directory: str | None
    ) -> Header:
        # What the header depends on when the payload holds no key it reads: the
        # event type, the partial's category, the actor, the directory and a
        # session_meta's provider.  Strings and None, so the key is exact.
        actor = record_actor(record, payload, self.key.agent)
        category = partial_category(record)
        provider: object = _NOT_META
        if record.kind == "session_meta":
            given = payload.get("provider")
            provider = given if isinstance(given, str) else None
        key = (event_type, category, actor["type"], actor["id"], directory, provider)
        header = self._headers.get(key)
        if header is None:
            session, project, agent = self.key.session_id, self.key.project, self.key.agent
            header = envelope_header(
                event_type=event_type,
                body=payload,
                category=category,
                stream_id=self._stream,
                scope=record_scope(record, payload, session, project, agent, directory),
                actor=actor,
                redacting=False,
            )
            if len(self._headers) >= _MAX_HEADERS:
                self._headers.clear()
            self._headers[key] = header
        return header
