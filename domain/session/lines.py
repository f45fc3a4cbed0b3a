"""Encoding the trace lines the Session aggregate writes, and reading back their stamps.

A line is one OmniMessage envelope ``{"timestamp", "type", "payload"}`` with
keys in the order PenguinHarness writes them.  The timestamp is JavaScript's
``Date.toISOString()`` form (UTC, milliseconds, ``Z``), so an event's
``timestamp`` is always truncated to whole milliseconds: reading the line back
gives an equal event.  Opaque provider ``fidelity`` is passed through as
:class:`msgspec.Raw`, byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Final

import msgspec

from pentrace.domain import omnimessage as om
from pentrace.domain.json_codec import JsonEncoder, json_bytes
from pentrace.domain.omnimessage import format_timestamp
from pentrace.domain.records import PayloadHead, TraceRecord

__all__ = [
    "EPOCH",
    "Fidelity",
    "ToolSpec",
    "fidelity_raw",
    "known_record",
    "meta_copy_line",
    "optional",
    "raw_payload",
    "read_timestamp",
    "stamp",
    "token_counts",
    "tool_definition",
]

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

_encoder: Final = JsonEncoder()


class _Stamp(msgspec.Struct):
    timestamp: Any = None


class _RawPayload(msgspec.Struct):
    payload: msgspec.Raw = msgspec.Raw(b"null")


_MILLISECOND: Final = timedelta(milliseconds=1)
_last: tuple[str, datetime] = ("1970-01-01T00:00:00.000Z", EPOCH)
_last_end: datetime = EPOCH + _MILLISECOND
_STAMP_PREFIX: Final = b'{"timestamp":"'
_STAMP_END: Final = len(_STAMP_PREFIX) + len("2026-07-18T03:10:22.531Z")
_last_read: tuple[bytes, datetime] = (b"", EPOCH)
_stamp_decoder: Final = msgspec.json.Decoder(_Stamp)
_payload_decoder: Final = msgspec.json.Decoder(_RawPayload)
# TraceRecord's metaclass parses its argument; the plain Struct constructor takes fields.
_record_fields: Final = partial(msgspec.StructMeta.__call__, TraceRecord)


def stamp(now: datetime) -> tuple[str, datetime]:
    """``now`` as the trace's ISO text and as the millisecond-exact UTC datetime it denotes."""
    global _last, _last_end  # a one-entry cache: the records of one millisecond share a stamp
    last = _last
    try:
        if last[1] <= now < _last_end:
            return last
    except TypeError:
        format_timestamp(now)  # raises UsageError: a naive datetime names no instant
    utc = now if now.tzinfo is UTC else now.astimezone(UTC)
    exact = datetime(
        utc.year,
        utc.month,
        utc.day,
        utc.hour,
        utc.minute,
        utc.second,
        utc.microsecond // 1000 * 1000,
        UTC,
    )
    _last = (format_timestamp(utc), exact)
    _last_end = exact + _MILLISECOND
    return _last


def raw_payload(line: bytes) -> bytes:
    """The payload of ``line`` exactly as written (``null`` when it has none)."""
    try:
        return bytes(_payload_decoder.decode(line).payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return b"null"


def known_record(line: bytes, kind: str, head: PayloadHead) -> TraceRecord:
    """The record reading ``line`` back would give, from what its writer knows.

    ``kind`` is the envelope type and ``head`` the payload's header fields as
    decoding would find them (``None`` for absent ones).  Used for the lines
    whose ``apply`` reads the header, so recording does not decode what it
    has just encoded; :meth:`TraceRecord.value` still decodes ``line`` lazily.
    """
    record: TraceRecord = _record_fields(line, 0, kind, head)
    return record


def meta_copy_line(kind: str, payload: bytes, timestamp: str) -> bytes:
    """A copy of a session_meta / tool_list_ready line with the payload kept byte for byte."""
    return _encoder.encode({"timestamp": timestamp, "type": kind, "payload": msgspec.Raw(payload)})


def read_timestamp(line: bytes) -> datetime:
    """The envelope's timestamp as an aware datetime; the Unix epoch when absent or unreadable.

    Foreign traces may carry odd stamps; a record must still load, so the
    fallback is a fixed value rather than the clock (replays stay deterministic).
    Lines written the usual way start with the stamp, which is then sliced out
    instead of decoding the whole line, and consecutive equal stamps are
    parsed once.
    """
    global _last_read
    if line.startswith(_STAMP_PREFIX) and line[_STAMP_END : _STAMP_END + 2] == b'",':
        text = line[len(_STAMP_PREFIX) : _STAMP_END]
    else:
        try:
            value = _stamp_decoder.decode(line).timestamp
        except (msgspec.DecodeError, msgspec.ValidationError):
            return EPOCH
        if not isinstance(value, str):
            return EPOCH
        text = value.encode("utf-8", "surrogatepass")
    last_text, last_moment = _last_read
    if text == last_text:
        return last_moment
    try:
        parsed = datetime.fromisoformat(text.decode("utf-8", "replace"))
    except ValueError:
        return EPOCH
    moment = parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    _last_read = (text, moment)
    return moment


# Opaque provider fidelity: raw JSON bytes (kept byte for byte), a Raw, or a mapping.
Fidelity = bytes | msgspec.Raw | Mapping[str, Any] | None
# A tool definition, or a mapping with name, description and optional JSON Schema parameters.
ToolSpec = om.ToolDefinition | Mapping[str, Any]


def optional(value: Any) -> Any:
    """``None`` becomes UNSET, so the field is left out of the line."""
    return msgspec.UNSET if value is None else value


def fidelity_raw(value: Fidelity) -> msgspec.Raw | msgspec.UnsetType:
    """Fidelity as raw JSON for a payload field; bytes and Raw are kept byte for byte."""
    if value is None:
        return msgspec.UNSET
    if isinstance(value, bytes):
        return msgspec.Raw(value)
    return om.as_fidelity(value)


def tool_definition(spec: ToolSpec) -> om.ToolDefinition:
    """A tool definition from a struct or a mapping (``parameters`` encoded once, as given)."""
    if isinstance(spec, om.ToolDefinition):
        return spec
    parameters = spec.get("parameters")
    raw = msgspec.UNSET if parameters is None else msgspec.Raw(json_bytes(parameters))
    return om.ToolDefinition(name=spec["name"], description=spec["description"], parameters=raw)


def token_counts(value: om.TokenCounts | Mapping[str, int]) -> om.TokenCounts:
    """TokenCounts from a struct or a mapping of its four fields."""
    if isinstance(value, om.TokenCounts):
        return value
    return om.TokenCounts(**value)
