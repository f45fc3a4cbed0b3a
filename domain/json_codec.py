"""Encoding text that is not valid Unicode: lone surrogates become JSON escapes.

A trace line may spell a lone surrogate (``"\\ud800"``): it is valid JSON,
PenguinHarness reads and keeps it, and Python decodes it to a ``str`` holding
U+D800.  A path decoded with ``os.fsdecode`` from bytes that are not UTF-8
holds them too (``'\\udcff'``).  Such a ``str`` has no UTF-8 form, so msgspec,
sqlite3 and every text stream refuse it.

pentrace decides once, here, how such text is carried (ADR 0015): every lone
surrogate is written as its JSON escape, six ASCII characters, lowercase hex
(``\\ud800``), as ECMAScript's ``JSON.stringify`` writes it.  In JSON the
escape reads back as the same code point; in plain text (a terminal, an HTML
page, a search index) the escape is what the reader sees.  Nothing is dropped
and nothing crashes.

:class:`JsonEncoder` wraps one ``msgspec.json.Encoder``.  Its hot path is the
msgspec call alone; only when msgspec refuses the value (``UnicodeEncodeError``)
does it walk the value and spell the offending strings itself.

Torn fragments: :func:`is_object_prefix` tells whether a line is the beginning of a JSON
object that was cut off (a writer killed mid-``write(2)`` leaves a *prefix* of a record:
bytes a JSON parser reads without a syntax error until the input runs out), where real
corruption breaks the grammar somewhere.  It works on bytes (a cut may fall inside a UTF-8
sequence), with the strings - nearly all of a record - matched by one regular expression each.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, Generic, Literal, TypeVar

import msgspec

__all__ = [
    "JsonDecoder",
    "JsonEncoder",
    "encode_escaped",
    "escape_surrogates",
    "is_object_prefix",
    "json_bytes",
    "json_format",
    "loads_strict",
]

Order = Literal["deterministic", "sorted"] | None
T = TypeVar("T")

_ESCAPE: Final = "backslashreplace"  # for a code point below U+10000 this is ``\uXXXX``
_encode_leaf: Final = msgspec.json.Encoder().encode


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate spelled as its JSON escape; other text unchanged.

    The result always has a UTF-8 form.  Only surrogate code points lack one,
    so ``backslashreplace`` touches nothing else.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", _ESCAPE).decode("utf-8")
    return text


def _raw_hook(value: Any) -> Any:
    if isinstance(value, msgspec.Raw):
        return memoryview(value)  # kept apart, byte for byte, by the walk below
    raise TypeError(f"Encoding objects of type {type(value).__name__} is unsupported")


def _string(text: str) -> bytes:
    try:
        return _encode_leaf(text)
    except UnicodeEncodeError:
        # json.dumps escapes control characters exactly as msgspec does (lowercase \u00xx)
        # and leaves the surrogates as they are, for backslashreplace to spell.
        return json.dumps(text, ensure_ascii=False).encode("utf-8", _ESCAPE)


def _write(value: Any, out: list[bytes]) -> None:
    if isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, dict):
        out.append(b"{")
        for index, (key, item) in enumerate(value.items()):
            if index:
                out.append(b",")
            out.append(_string(key))
            out.append(b":")
            _write(item, out)
        out.append(b"}")
    elif isinstance(value, list):
        out.append(b"[")
        for index, item in enumerate(value):
            if index:
                out.append(b",")
            _write(item, out)
        out.append(b"]")
    elif isinstance(value, memoryview):
        out.append(value.tobytes())
    else:
        out.append(_encode_leaf(value))


def encode_escaped(value: Any, order: Order = None) -> bytes:
    """The slow path of :class:`JsonEncoder` on its own, for hot loops that call msgspec directly.

    Such a loop catches ``UnicodeEncodeError`` from its own msgspec encoder and
    calls this, so it pays no wrapper call per record.
    """
    return _escaped(value, order)


def _escaped(value: Any, order: Order) -> bytes:
    builtins = msgspec.to_builtins(
        value, enc_hook=_raw_hook, builtin_types=(memoryview,), order=order, str_keys=True
    )
    out: list[bytes] = []
    _write(builtins, out)
    return b"".join(out)


class JsonEncoder:
    """``msgspec.json.Encoder`` that writes lone surrogates as JSON escapes instead of failing.

    The output is byte for byte msgspec's whenever msgspec can encode the
    value; otherwise the same JSON with each lone surrogate escaped.
    """

    __slots__ = ("_encode", "_order")

    def __init__(self, *, order: Order = None) -> None:
        self._encode = msgspec.json.Encoder(order=order).encode
        self._order: Order = order

    def encode(self, value: Any) -> bytes:
        """The JSON bytes of ``value`` (compact, UTF-8, lone surrogates escaped)."""
        try:
            return self._encode(value)
        except UnicodeEncodeError:
            return _escaped(value, self._order)


_default: Final = JsonEncoder()


def json_bytes(value: Any) -> bytes:
    """Encode ``value`` with the shared default :class:`JsonEncoder`."""
    return _default.encode(value)


def json_format(data: bytes, *, indent: int = 2) -> bytes:
    """``msgspec.json.format``, also for JSON holding lone surrogate escapes (kept escaped)."""
    try:
        return msgspec.json.format(data, indent=indent)
    except msgspec.DecodeError:
        value = loads_strict(data)
        return json.dumps(value, indent=indent, ensure_ascii=False).encode("utf-8", _ESCAPE)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_int(digits: str) -> Any:
    # Python refuses int() on more than 4300 digits; JSON.parse gives a double (maybe Infinity).
    return int(digits) if len(digits) <= 4000 else float(digits)


def loads_strict(data: bytes | str) -> Any:
    """Parse strict JSON the way ``JSON.parse`` does, lone surrogates included.

    The slow path behind msgspec: it accepts what msgspec refuses but
    ``JSON.parse`` takes (lone surrogate escapes, ``1e400``, integers of any
    length) and refuses ``NaN`` and ``Infinity``.  Invalid UTF-8 becomes
    U+FFFD.  Raises ``ValueError`` for text that is not JSON, or nested too
    deeply for Python's parser.
    """
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


class JsonDecoder(Generic[T]):
    """``msgspec.json.Decoder`` that also reads lone surrogate escapes.

    msgspec cannot hold a lone surrogate in a ``str`` and refuses the whole
    document: an escape of one in the bytes (``DecodeError``), or one in a
    ``str`` handed in as the document (``UnicodeEncodeError``: a tool call's
    ``arguments`` decoded from a line that spelt ``\\udc00``).  The slow path,
    taken only then, parses with :func:`loads_strict` and converts the result
    to ``type`` with the same validation.  Types with ``msgspec.Raw`` fields
    cannot take that path; use it for builtins and plain Structs.
    """

    __slots__ = ("_decode", "_type")

    def __init__(self, type: type[T] = Any) -> None:  # type: ignore[assignment]  # Any is msgspec's default
        self._decode = msgspec.json.Decoder(type).decode
        self._type = type

    def decode(self, data: bytes | str) -> T:
        """The value of ``data``; raises ``msgspec.DecodeError`` (or its ``ValidationError``)."""
        try:
            return self._decode(data)
        except msgspec.ValidationError:
            raise
        except (msgspec.DecodeError, RecursionError, UnicodeEncodeError) as exc:
            try:
                value = loads_strict(data)
            except ValueError:
                raise msgspec.DecodeError(str(exc)) from None
            return msgspec.convert(value, self._type)


_WS: Final = re.compile(rb"[ \t\r\n]*")
# A whole string, and a string the input ends inside of (possibly mid-escape).
_STRING: Final = re.compile(rb'"(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+"')
_OPEN_STRING: Final = re.compile(
    rb'"(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+(?:\\(?:u[0-9a-fA-F]{0,3})?)?\Z'
)
_NUMBER: Final = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_OPEN_NUMBER: Final = re.compile(
    rb"(?:-|-?(?:0|[1-9][0-9]*)\.|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?[eE][+-]?)\Z"
)
_LITERALS: Final = (b"true", b"false", b"null")

# What may come next.
_VALUE, _VALUE_OR_CLOSE, _KEY, _KEY_OR_CLOSE, _COLON, _COMMA_OR_CLOSE = range(6)


def _scalar(data: bytes, at: int) -> int | None:
    """End of the scalar at ``at``; ``len(data)`` when the input ends inside it; None: invalid."""
    first = data[at : at + 1]
    if first == b'"':
        match = _STRING.match(data, at)
        if match is not None:
            return match.end()
        return len(data) if _OPEN_STRING.match(data, at) else None
    if first == b"-" or first.isdigit():
        # A number ends at the longest match; what follows ("01", "1x") is the grammar's to judge.
        if _OPEN_NUMBER.match(data, at):
            return len(data)  # cut inside the number: "-", "12." or "1e+"
        match = _NUMBER.match(data, at)
        return match.end() if match is not None else None
    for word in _LITERALS:
        rest = data[at : at + len(word)]
        if rest == word:
            return at + len(word)
        if at + len(rest) == len(data) and word.startswith(rest):
            return len(data)
    return None


def is_object_prefix(data: bytes) -> bool:
    """True when ``data`` is a proper prefix of some JSON object (it starts with ``{``, has
    no syntax error, and ends before the object closes)."""
    if not data.startswith(b"{"):
        return False
    stack = [b"{"]
    expect = _KEY_OR_CLOSE
    at, end = 1, len(data)
    while True:
        if not stack:
            return False  # the object closed: whole (and maybe more after it), not cut off
        at = _WS.match(data, at).end()  # type: ignore[union-attr]  # * always matches
        if at >= end:
            return True  # the input ran out inside the object: a prefix
        char = data[at : at + 1]
        if expect == _COLON:
            if char != b":":
                return False
            at, expect = at + 1, _VALUE
            continue
        if expect == _COMMA_OR_CLOSE:
            if char == b",":
                at, expect = at + 1, (_VALUE if stack[-1] == b"[" else _KEY)
                continue
            if char != (b"]" if stack[-1] == b"[" else b"}"):
                return False
            stack.pop()
            at += 1
            continue
        if char in (b"}", b"]") and expect in (_KEY_OR_CLOSE, _VALUE_OR_CLOSE):
            if (char == b"}") != (expect == _KEY_OR_CLOSE):
                return False
            stack.pop()
            at, expect = at + 1, _COMMA_OR_CLOSE
            continue
        if expect in (_KEY, _KEY_OR_CLOSE):
            if char != b'"':
                return False
            after = _scalar(data, at)
            if after is None:
                return False
            at, expect = after, _COLON
            continue
        if char in (b"{", b"["):
            stack.append(char)
            at, expect = at + 1, (_KEY_OR_CLOSE if char == b"{" else _VALUE_OR_CLOSE)
            continue
        after = _scalar(data, at)
        if after is None:
            return False
        at, expect = after, _COMMA_OR_CLOSE
