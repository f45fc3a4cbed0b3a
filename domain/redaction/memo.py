"""Memoised redaction of flat envelope fields (scope, actor, correlation).

The same few ids, names and directories make up these fields in every event
of a session, so the policy's verdict on them repeats.  The memo key is the
dict's items *and* the exact type of every value, so ``1`` and ``True``
(equal and equally hashed in Python, but redacted as different JSON) never
share an entry; floats are left out (``0.0 == -0.0``).  Every call gets its
own copy of the cached dict, so a caller that mutates its result changes no
other event.
"""

from __future__ import annotations

from typing import Any, Final

from pentrace.domain.redaction.core import redact

__all__ = ["redact_flat"]

_FLAT: Final = frozenset({str, int, bool, type(None)})
_STR: Final = frozenset({str})
# Bounded: a long-lived process sees ever new sessions; clearing all at once
# costs one miss per live value, far less than tracking recency per hit.
_MAX_ENTRIES: Final = 4096
_memo: dict[object, tuple[dict[str, Any], list[str]]] = {}


def redact_flat(value: Any, *, depth: int = 0) -> tuple[Any, list[str]]:
    """``redact(value, depth=depth)`` as ``(value, paths)``; memoised for flat dicts.

    The paths list may be shared between calls: read it, do not change it.
    """
    if type(value) is dict:
        types = tuple(map(type, value.values()))
        if _FLAT.issuperset(types) and _STR.issuperset(map(type, value)):
            key = (depth, tuple(value.items()), types)
            hit = _memo.get(key)
            if hit is None:
                result = redact(value, depth=depth)
                if len(_memo) >= _MAX_ENTRIES:
                    _memo.clear()
                hit = _memo[key] = (dict(result.value), result.paths)
            return dict(hit[0]), hit[1]
    result = redact(value, depth=depth)
    return result.value, result.paths
