"""One parsed trace line: the unit every reader, fold and projection works on.

A :class:`TraceRecord` keeps the line's JSON text exactly as written (``raw``)
plus the handful of header fields the folds branch on, decoded once with a
narrow msgspec Struct so that large payloads (tool output, fidelity blobs) are
skipped rather than materialised.  The full value is decoded lazily, on demand.

Parsing follows PenguinHarness's reader (``docs/trace-format.md``): lines are
trimmed with the ECMAScript whitespace set, parsed as strict JSON (no ``NaN``
or ``Infinity``, lone surrogate escapes allowed), and *any* JSON value is a
record - ``42`` and ``[]`` included; only a JSON object whose ``type`` is
``event_msg`` or ``model_msg`` takes part in resume.
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

__all__ = [
    "JS_WHITESPACE",
    "MalformedLine",
    "TraceRecord",
    "decode_line",
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


# gc=False: these structs live only inside TraceRecord.__init__ and hold JSON values,
# which cannot form cycles; untracked structs are much cheaper to allocate.
class _Payload(msgspec.Struct, gc=False):
    type: Any = None
    role: Any = None
    tool_call_id: Any = None
    status: Any = None
    stop_reason: Any = None


class _Envelope(msgspec.Struct, gc=False):
    type: Any = None
    payload: _Payload | None = None
    origin: Any = None


_head_decoder: Final = msgspec.json.Decoder(_Envelope)
_any_decoder: Final = msgspec.json.Decoder()
_NO_VALUE: Final = object()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_int(digits: str) -> Any:
    # Python refuses int() on more than 4300 digits; JSON.parse gives a double (maybe Infinity).
    return int(digits) if len(digits) <= 4000 else float(digits)


def _slow_decode(text: str) -> Any:
    """Decode what msgspec refuses but JSON.parse accepts (lone surrogates, 1e400, 1e5000)."""
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int)
    except (ValueError, RecursionError) as exc:
        raise MalformedLine(str(exc)) from None


class TraceRecord:
    """One parsed trace line.

    ``kind`` is the envelope ``type`` (``session_meta``, ``model_msg``,
    ``event_msg``; anything else is kept but ignored by the folds), ``ptype``
    the payload ``type``.  ``role``, ``tool_call_id``, ``status`` and
    ``stop_reason`` are the payload fields of the same names, ``None`` when
    absent.  ``has_origin`` is true when the envelope carries a truthy
    ``origin`` list.  ``line`` is the 1-based line number in the shard it came
    from (0 when the record was not read from a file).
    """

    __slots__ = (
        "_value",
        "has_origin",
        "has_payload",
        "kind",
        "line",
        "origin",
        "ptype",
        "raw",
        "role",
        "status",
        "stop_reason",
        "tool_call_id",
    )

    line: int
    raw: bytes
    kind: Any
    ptype: Any
    role: Any
    tool_call_id: Any
    status: Any
    stop_reason: Any
    origin: Any
    has_origin: bool
    has_payload: bool
    _value: Any

    def __init__(self, raw: bytes, line: int = 0) -> None:
        self.raw = raw
        self.line = line
        self._value = _NO_VALUE
        try:
            head = _head_decoder.decode(raw)
        except msgspec.ValidationError:
            self._set_head_from_value(self.value())
            return
        except (msgspec.DecodeError, RecursionError):
            # msgspec raises RecursionError on deep nesting; the slow path reports it as malformed.
            text = raw.decode("utf-8", "replace")
            self._value = _slow_decode(text)
            # Invalid UTF-8 is kept as U+FFFD, as a JavaScript TextDecoder does.
            self.raw = text.encode("utf-8", "surrogatepass")
            self._set_head_from_value(self._value)
            return
        self.kind = head.type
        origin = self.origin = head.origin
        self.has_origin = origin is not None and bool(origin)
        payload = head.payload
        if payload is None:
            self.has_payload = False
            self.ptype = self.role = self.tool_call_id = self.status = self.stop_reason = None
        else:
            self.has_payload = True
            self.ptype = payload.type
            self.role = payload.role
            self.tool_call_id = payload.tool_call_id
            self.status = payload.status
            self.stop_reason = payload.stop_reason

    def _set_head_from_value(self, value: Any) -> None:
        envelope = value if isinstance(value, dict) else {}
        payload = envelope.get("payload")
        self.kind = envelope.get("type")
        self.origin = envelope.get("origin")
        self.has_origin = bool(self.origin)
        self.has_payload = isinstance(payload, dict)
        fields = payload if isinstance(payload, dict) else {}
        self.ptype = fields.get("type")
        self.role = fields.get("role")
        self.tool_call_id = fields.get("tool_call_id")
        self.status = fields.get("status")
        self.stop_reason = fields.get("stop_reason")

    def value(self) -> Any:
        """The whole line decoded to builtins (dict, list, str, int, float, ...)."""
        if self._value is _NO_VALUE:
            try:
                self._value = _any_decoder.decode(self.raw)
            except (msgspec.DecodeError, RecursionError):
                self._value = _slow_decode(self.raw.decode("utf-8", "replace"))
        return self._value

    def payload(self) -> dict[str, Any]:
        """The payload object, or an empty dict when the line has none."""
        value = self.value()
        payload = value.get("payload") if isinstance(value, dict) else None
        return payload if isinstance(payload, dict) else {}

    @property
    def is_event(self) -> bool:
        return bool(self.kind == "event_msg")

    @property
    def is_model_msg(self) -> bool:
        """A complete model message: ``model_msg`` whose payload type is not a partial."""
        return bool(self.kind == "model_msg") and not (
            isinstance(self.ptype, str) and self.ptype.startswith("partial_")
        )

    def __repr__(self) -> str:
        return f"TraceRecord(line={self.line}, kind={self.kind!r}, ptype={self.ptype!r})"

    @classmethod
    def from_value(cls, value: Any, line: int = 0) -> TraceRecord:
        """Build a record from builtins (tests, synthesized placeholders)."""
        record = cls(msgspec.json.encode(value), line)
        record._value = value
        return record


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
