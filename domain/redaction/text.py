"""Secrets inside free text: where they are, and their replacement by markers.

Every rule is scanned on its own over the original string and yields the span
to hide; overlapping spans are merged and each merged span becomes one marker
such as ``[redacted:github_token]``.  Scanning the rules separately (rather
than one alternation in one pass) means a match of one rule can never swallow
the first half of another secret and leave its tail behind.

Speed matters: this runs on every string of every ledger row.  The shape
rules (:mod:`pentrace.domain.redaction.shapes`) are gated by a literal each;
the ``name=value`` and ``name: value`` rules (:mod:`pentrace.domain.redaction.named`)
start from the few secret words in the text and look around them for the
name, the separator and the value.
"""

from __future__ import annotations

import re
import string
from functools import lru_cache
from typing import Final

from pentrace.domain.redaction import shapes as _shapes
from pentrace.domain.redaction.named import IDENTIFIER, NAME_WINDOW, named_spans, secret_words
from pentrace.domain.redaction.policy import current, on_install
from pentrace.domain.redaction.shapes import shape_spans

__all__ = [
    "MARKER",
    "find_secret_spans",
    "is_marker",
    "redact_secrets_in_text",
    "secret_words",
]

MARKER: Final = re.compile(r"\[redacted(?::[a-z0-9_]+)?\]")
# Id stems known clean whatever number follows them (``_clean_with_any_number``);
# only texts of up to ``_CACHED_LENGTH`` characters, so the set stays small.
_DIGITS: Final = "0123456789"
_CLEAN_STEMS: Final = 4096
_clean_stems: set[str] = set()
_ASCII_LOWER: Final = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
# ``pwd=x`` is the shortest text any rule hides a value in.
_SHORTEST_SECRET: Final = 5
_CACHED_LENGTH: Final = 256
_BLOB_LENGTH: Final = 512
_BLOB: Final = re.compile(r"[A-Za-z0-9+/_=-]+")
_KNOWN_PREFIXES: Final = ("sk-", "sk_", "rk_", "gh", "github_pat_", "glpat-", "xox", "xapp-")
_KNOWN_PREFIXES_MORE: Final = ("AIza", "hf_", "npm_", "whsec_", "eyJ", "AKIA", "ASIA")


def _reload() -> None:
    _clean_stems.clear()
    _replace_short.cache_clear()


def is_marker(text: str) -> bool:
    """True when ``text`` holds only redaction markers, spaces and punctuation."""
    return not any(char.isalnum() for char in MARKER.sub("", text))


def _widen(start: int, end: int, markers: list[tuple[int, int]]) -> tuple[int, int]:
    # A span that cuts into a marker takes the whole marker: half a marker is
    # plain text again, and replacing must only ever shrink what is unredacted.
    for left, right in markers:
        if left < end and start < right:
            start, end = min(start, left), max(end, right)
    return start, end


def _merge(spans: list[tuple[int, int, str]], text: str) -> list[tuple[int, int, str]]:
    markers = [m.span() for m in MARKER.finditer(text)] if "[redacted" in text else []
    policy = current()
    kept = sorted(
        (*_widen(start, end, markers), kind)
        for start, end, kind in spans
        # Text that is already a marker is never a secret, even where a marker's
        # ``:`` looks like a URL userinfo or a ``name: value`` pair to some rule.
        if end > start
        and not is_marker(text[start:end])
        and not (policy.allowed_values and policy.allows(text[start:end]))
        and not any(left <= start and end <= right for left, right in markers)
    )
    merged: list[tuple[int, int, str]] = []
    for start, end, kind in kept:
        if merged and start < merged[-1][1]:
            last_start, last_end, last_kind = merged[-1]
            merged[-1] = (last_start, max(last_end, end), last_kind)
        else:
            merged.append((start, end, kind))
    return merged


def find_secret_spans(text: str) -> list[tuple[int, int, str]]:
    """Merged, sorted ``(start, end, kind)`` spans of every secret found in ``text``."""
    lowered = text.lower()
    if len(lowered) != len(text):
        # Some non-ASCII letters grow when lowercased; keep offsets aligned.
        lowered = text.translate(_ASCII_LOWER)
    spans: list[tuple[int, int, str]] = []
    shape_spans(text, lowered, spans)
    named_spans(text, lowered, spans)
    return _merge(spans, text) if spans else []


def _replace(text: str) -> str:
    # Replacing one span can change what a neighbouring rule sees (a swallowed
    # quote no longer ends a header value), so repeat until nothing is found:
    # the result is a fixed point, which is what makes redaction idempotent.
    # Every round turns at least one letter or digit outside markers into a
    # marker and never cuts a marker (``_widen``), so the loop ends.
    spans = find_secret_spans(text)
    while spans:
        pieces: list[str] = []
        cursor = 0
        for start, end, kind in spans:
            pieces.append(text[cursor:start])
            pieces.append(f"[redacted:{kind}]")
            cursor = end
        pieces.append(text[cursor:])
        text = "".join(pieces)
        spans = find_secret_spans(text)
    return text


# Ids, names, paths and enum-like values repeat in every event of a session.
_replace_short: Final = lru_cache(maxsize=8192)(_replace)
on_install(_reload)


def _is_opaque_blob(text: str) -> bool:
    # Base64 image data and provider ``fidelity`` signatures are opaque bytes: a
    # random ``sk-…`` or ``AKIA…`` run inside one is chance, and rewriting it
    # would corrupt the blob in a redacted export.
    if text.startswith("data:"):
        comma = text.find(";base64,", 0, 200)
        return comma != -1 and _BLOB.fullmatch(text, comma + 8) is not None
    return _BLOB.fullmatch(text) is not None and not text.startswith(
        _KNOWN_PREFIXES + _KNOWN_PREFIXES_MORE
    )


def _clean_with_any_number(stem: str) -> bool:
    """True when ``stem + digits`` is clean for every run of ASCII digits.

    For an ids-only ``stem`` (name characters and ``:``) that ends in ``:``,
    holds no shape gate and has no part longer than the name window, the
    digits can only be a value after the last part: no shape can start in
    or reach into them (no gate holds ``:`` before a digit or only digits, and
    no token shape crosses a ``:``), and every name judged is a whole part of
    the stem (``named._no_secret_part``).  Any digits then make the same spans as
    ``0`` does, so ``stem + "0"`` stands for all of them; the verdict is
    remembered per stem (event ids ``evt:<stream>:<sequence>`` and OpenCode
    ids ``<type>:<session>:<position>`` share one per stream).
    """
    if stem in _clean_stems:
        return True
    if (
        len(stem) + 1 < _SHORTEST_SECRET
        or not stem.endswith(":")
        or IDENTIFIER.fullmatch(stem) is None
        or any(len(part) > NAME_WINDOW for part in stem.split(":"))
        or _shapes.UNGATED_CUSTOM
        or any(gate in stem for gate in _shapes.GATES)
        or any(gate in stem.lower() for gate in _shapes.LOWERED_GATES)
        or _replace(stem + "0") != stem + "0"
    ):
        return False
    if len(_clean_stems) >= _CLEAN_STEMS:
        _clean_stems.clear()
    _clean_stems.add(stem)
    return True


def redact_secrets_in_text(text: str) -> str:
    """``text`` with every secret span replaced by ``[redacted:<kind>]``."""
    if len(text) < _SHORTEST_SECRET:
        return text
    if (
        text[-1] in _DIGITS
        and len(text) <= _CACHED_LENGTH
        and _clean_with_any_number(text.rstrip(_DIGITS))
    ):
        return text
    if len(text) <= _CACHED_LENGTH:
        return _replace_short(text)
    if len(text) >= _BLOB_LENGTH and _is_opaque_blob(text):
        return text
    return _replace(text)
