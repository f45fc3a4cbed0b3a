"""One parsed trace line: the unit every reader, fold and projection works on.

A :class:`TraceRecord` keeps the line's JSON text exactly as written (``raw``)
plus the handful of header fields the folds branch on.  msgspec decodes the
line straight into the record, skipping large payloads (tool output, fidelity
blobs) rather than materialising them.  The full value is decoded lazily, on
demand.

Parsing follows PenguinHarness's reader (``docs/trace-format.md``): lines are
trimmed with the ECMAScript whitespace set, parsed as strict JSON (no ``NaN``
or ``Infinity``, lone surrogate escapes allowed), and *any* JSON value is a
record - ``42`` and ``[]`` included; only a JSON object whose ``type`` is
``event_msg`` or ``model_msg`` takes part in resume.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Final

import msgspec
from msgspec import StructMeta

from pentrace.domain.json_codec import json_bytes, loads_strict

__all__ = [
    "JS_WHITESPACE",
    "NO_PAYLOAD",
    "MalformedLine",
    "PayloadHead",
    "TraceRecord",
    "decode_line",
    "decode_lines",
    "js_trim",
]

# ECMAScript WhiteSpace + LineTerminator: what String.prototype.trim removes.
# U+0085 and U+001C..U+001F are *not* in it (Python's str.strip removes them).
JS_WHITESPACE: Final = (
    "\t\n\x0b\x0c\r \u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_ASCII_WHITESPACE: Final = b"\t\n\x0b\x0c\r "


class MalformedLine(ValueError):
    """A non-empty trace line that is not strict JSON."""


class PayloadHead(msgspec.Struct, frozen=True, gc=False):
    """The payload fields the folds branch on; every other payload field is skipped."""

    type: Any = None
    role: Any = None
    tool_call_id: Any = None
    status: Any = None
    stop_reason: Any = None


NO_PAYLOAD: Final = PayloadHead()
_NO_VALUE: Final = object()
_any_decoder: Final = msgspec.json.Decoder()
_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}


def _slow_decode(text: str) -> Any:
    """Decode what msgspec refuses but JSON.parse accepts (lone surrogates, 1e400, 1e5000)."""
    try:
        return loads_strict(text)
    except ValueError as exc:
        raise MalformedLine(str(exc)) from None


def _decode_value(raw: bytes) -> Any:
    try:
        return _any_decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return _slow_decode(raw.decode("utf-8", "replace"))


class _ParsingMeta(StructMeta):
    """``TraceRecord(raw, line)`` parses ``raw``; msgspec's decoder builds records without it."""

    def __call__(cls, raw: bytes, line: int = 0) -> Any:
        decoder = _decoders.get(cls)
        if decoder is None:
            decoder = _decoders[cls] = msgspec.json.Decoder(cls)
        try:
            record = decoder.decode(raw)
        except msgspec.ValidationError:
            record = StructMeta.__call__(cls)
            record._set_head_from_value(_decode_value(raw))
        except (msgspec.DecodeError, RecursionError):
            # msgspec raises RecursionError on deep nesting; the slow path reports it as malformed.
            text = raw.decode("utf-8", "replace")
            value = _slow_decode(text)
            # Invalid UTF-8 is kept as U+FFFD, as a JavaScript TextDecoder does.
            raw = text.encode("utf-8", "surrogatepass")
            record = StructMeta.__call__(cls)
            record._set_head_from_value(value)
        else:
            record._value = _NO_VALUE  # in case the line spells out our private key
        record.raw = raw
        record.line = line
        return record


class TraceRecord(msgspec.Struct, metaclass=_ParsingMeta, gc=False, eq=False):
    """One parsed trace line.

    ``kind`` is the envelope ``type`` (``session_meta``, ``model_msg``,
    ``event_msg``; anything else is kept but ignored by the folds), ``ptype``
    the payload ``type``.  ``role``, ``tool_call_id``, ``status`` and
    ``stop_reason`` are the payload fields of the same names, ``None`` when
    absent; ``head`` holds all five (:data:`NO_PAYLOAD` when the envelope has
    no payload object).  ``has_origin`` is true when the envelope carries a
    truthy ``origin`` list.  ``line`` is the 1-based line number in the shard
    it came from (0 when the record was not read from a file).

    ``TraceRecord(raw, line)`` parses ``raw``.  The line is decoded straight
    into the record (the field names map to the envelope's keys), and with
    ``gc=False``: a resume keeps a million records alive, and untracked ones
    cost the cycle collector nothing.  That is safe because a record holds
    only JSON values, which cannot refer back to it.  Records compare and
    hash by identity.
    """

    # raw, line and the value cache are set after decoding; their keys only keep them
    # apart from the envelope's own (a line that uses one is overwritten, or re-parsed).
    raw: bytes = msgspec.field(default=b"", name="pentrace:raw")
    line: int = msgspec.field(default=0, name="pentrace:line")
    kind: Any = msgspec.field(default=None, name="type")
    head: PayloadHead = msgspec.field(default=NO_PAYLOAD, name="payload")
    origin: Any = None
    _value: Any = msgspec.field(default=_NO_VALUE, name="pentrace:value")

    # Payload fields as read-only attributes; attrgetter keeps their access in C.
    ptype = property(attrgetter("head.type"), doc="The payload ``type``.")
    role = property(attrgetter("head.role"), doc="The payload ``role``.")
    tool_call_id = property(attrgetter("head.tool_call_id"), doc="The payload ``tool_call_id``.")
    status = property(attrgetter("head.status"), doc="The payload ``status``.")
    stop_reason = property(attrgetter("head.stop_reason"), doc="The payload ``stop_reason``.")

    @property
    def has_payload(self) -> bool:
        """True when the envelope's ``payload`` is an object."""
        return self.head is not NO_PAYLOAD

    @property
    def has_origin(self) -> bool:
        """True when the envelope's ``origin`` is truthy."""
        return bool(self.origin)

    def _set_head_from_value(self, value: Any) -> None:
        self._value = value
        envelope = value if isinstance(value, dict) else {}
        payload = envelope.get("payload")
        self.kind = envelope.get("type")
        self.origin = envelope.get("origin")
        if isinstance(payload, dict):
            self.head = PayloadHead(
                payload.get("type"),
                payload.get("role"),
                payload.get("tool_call_id"),
                payload.get("status"),
                payload.get("stop_reason"),
            )
        else:
            self.head = NO_PAYLOAD

    def value(self) -> Any:
        """The whole line decoded to builtins (dict, list, str, int, float, ...)."""
        if self._value is _NO_VALUE:
            self._value = _decode_value(self.raw)
        return self._value

    def payload(self) -> dict[str, Any]:
        """The payload object, or an empty dict when the line has none."""
        value = self.value()
        payload = value.get("payload") if isinstance(value, dict) else None
        return payload if isinstance(payload, dict) else {}

    @property
    def is_event(self) -> bool:
        """An ``event_msg`` envelope."""
        return bool(self.kind == "event_msg")

    @property
    def is_model_msg(self) -> bool:
        """A complete model message: ``model_msg`` whose payload type is not a partial."""
        ptype = self.head.type
        return bool(self.kind == "model_msg") and not (
            isinstance(ptype, str) and ptype.startswith("partial_")
        )

    def __repr__(self) -> str:
        return f"TraceRecord(line={self.line}, kind={self.kind!r}, ptype={self.ptype!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.raw, self.line))

    @classmethod
    def from_value(cls, value: Any, line: int = 0) -> TraceRecord:
        """Build a record from builtins (tests, synthesized placeholders)."""
        record = cls(json_bytes(value), line)
        record._value = value
        return record


_decoders[TraceRecord] = msgspec.json.Decoder(TraceRecord)


def js_trim(raw: bytes) -> bytes:
    """Trim a line the way ECMAScript's ``String.prototype.trim`` would.

    The common case (ASCII at both ends) never decodes the line.  Invalid
    UTF-8 becomes U+FFFD, as in a JavaScript ``TextDecoder``.
    """
    stripped = raw.strip(_ASCII_WHITESPACE)
    if stripped and (stripped[0] >= 0x80 or stripped[-1] >= 0x80):
        text = raw.decode("utf-8", "replace").strip(JS_WHITESPACE)
        return text.encode("utf-8", "surrogatepass")
    return stripped


def decode_line(raw: bytes, line: int = 0) -> TraceRecord | None:
    """Parse one line (without its ``\\n``).

    Returns ``None`` for a line that is empty after the trim, raises
    :class:`MalformedLine` for one that is not strict JSON.
    """
    # Hot path: an object line starting with "{" and ending with "}" has nothing to trim.
    if raw and raw[0] == 0x7B and raw[-1] == 0x7D:
        trimmed = raw
    else:
        trimmed = js_trim(raw)
        if not trimmed:
            return None
    if not trimmed.isascii():
        try:
            trimmed.decode("utf-8")
        except UnicodeDecodeError:
            # Invalid UTF-8 becomes U+FFFD, as a JavaScript TextDecoder does.
            trimmed = trimmed.decode("utf-8", "replace").encode("utf-8")
    return TraceRecord(trimmed, line)


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def decode_lines(lines: list[bytes], first_line: int) -> tuple[list[TraceRecord], int] | None:
    """Parse consecutive lines (without their ``\\n``), numbered from ``first_line``.

    Returns the records and how many lines were blank, or ``None`` when a
    line is malformed: the caller then goes line by line with
    :func:`decode_line` to place the error.  The same rules as
    :func:`decode_line`, with the common line (a ``{...}`` object in valid
    UTF-8) decoded inline: a resume spends most of its time here.
    """
    records: list[TraceRecord] = []
    append = records.append
    decode = _decoders[TraceRecord].decode
    blanks = 0
    for number, raw in enumerate(lines, first_line):
        # Nothing to trim and no UTF-8 to repair: decoding the header is the whole job.
        if raw and raw[0] == 0x7B and raw[-1] == 0x7D and (raw.isascii() or _is_utf8(raw)):
            try:
                record = decode(raw)
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
                pass  # decode_line below sorts out odd values and malformed JSON
            else:
                record.raw = raw
                record.line = number
                if record._value is not _NO_VALUE:
                    record._value = _NO_VALUE  # the line spells out our private key
                append(record)
                continue
        try:
            parsed = decode_line(raw, number)
        except MalformedLine:
            return None
        if parsed is None:
            blanks += 1
        else:
            append(parsed)
    return records, blanks
