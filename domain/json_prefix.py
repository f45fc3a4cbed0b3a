"""Is a line the beginning of a JSON object that was cut off? (the test for a torn fragment)

A writer killed mid-``write(2)`` leaves a *prefix* of a record: bytes that a
JSON parser reads without a single syntax error until the input runs out.
Real corruption (a stray edit, zeroed blocks, two records spliced together,
text that was never JSON) breaks the grammar somewhere.  This module checks
exactly that, on bytes (a cut may fall inside a UTF-8 sequence), with the
strings - nearly all of a record - matched by one regular expression each.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["is_object_prefix"]

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
