"""What the policy would hide in a value: one finding per hidden part, never the secret.

``pentrace scan`` reports where secrets sit.  A finding names the rule (the
marker's kind, or ``secret_key`` where a whole value is hidden under its key
or flag), the path in the record and a preview cut from the *redacted* text
around the marker, so the secret itself is in no finding, no log and no
terminal.  The redaction is the policy's own, so a finding is exactly what
the ledger or an export would hide.
"""

from __future__ import annotations

import re
from typing import Any, Final, NamedTuple

from pentrace.domain.redaction.screened import redact_decoded
from pentrace.domain.redaction.text import MARKER
from pentrace.domain.redaction.walk import REDACTED, TOO_DEEP, redact_reference

__all__ = ["Finding", "find_secrets", "find_secrets_in_text"]

_CONTEXT: Final = 24
_KIND: Final = re.compile(r"\[redacted:([a-z0-9_]+)\]")


class Finding(NamedTuple):
    """One hidden part of a value: the rule, the path (Penguin style) and a masked preview."""

    rule: str
    path: str
    preview: str


def _preview(redacted: str, start: int, end: int) -> str:
    left = max(0, start - _CONTEXT)
    right = min(len(redacted), end + _CONTEXT)
    text = redacted[left:right].replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
    return ("…" if left else "") + text + ("…" if right < len(redacted) else "")


def _text_findings(original: str, redacted: str, path: str, out: list[Finding]) -> None:
    if redacted in (REDACTED, TOO_DEEP):
        out.append(Finding("secret_key", path, f"{REDACTED} ({len(original)} chars)"))
        return
    markers = [m for m in MARKER.finditer(redacted) if m.group() not in original]
    if not markers:
        # A JSON string re-encoded with a whole value hidden inside it.
        out.append(Finding("secret_key", path, _preview(redacted, 0, 0)))
        return
    for marker in markers:
        kind = _KIND.fullmatch(marker.group())
        rule = kind.group(1) if kind else "secret_key"
        out.append(Finding(rule, path, _preview(redacted, marker.start(), marker.end())))


def _diff(original: Any, redacted: Any, path: str, out: list[Finding]) -> None:
    if original == redacted:
        return
    if isinstance(original, dict) and isinstance(redacted, dict):
        for (key, item), (clean_key, clean_item) in zip(
            original.items(), redacted.items(), strict=False
        ):
            where = f"{path}.{clean_key}" if path else str(clean_key)
            if key != clean_key:
                out.append(Finding("secret_in_key", where, f"{clean_key}: {REDACTED}"))
                continue
            _diff(item, clean_item, where, out)
        return
    if isinstance(original, list | tuple) and isinstance(redacted, list):
        for index, (item, clean_item) in enumerate(zip(original, redacted, strict=False)):
            _diff(item, clean_item, f"{path}[{index}]", out)
        return
    if isinstance(redacted, str):
        text = original if isinstance(original, str) else str(original)
        _text_findings(text, redacted, path, out)
        return
    out.append(Finding("secret_key", path, REDACTED))


def find_secrets(value: Any, data: bytes | None = None) -> list[Finding]:
    """Every part of ``value`` the current policy hides, in walk order.

    ``data`` is the JSON ``value`` was decoded from, if at hand: the screen
    reads it first, and a clean record costs no walk.
    """
    result = redact_decoded(value, data) if data is not None else redact_reference(value)
    if not result.paths:
        return []
    out: list[Finding] = []
    _diff(value, result.value, "", out)
    return out


def find_secrets_in_text(text: str) -> list[Finding]:
    """:func:`find_secrets` for one string (search index bodies, read-model cells)."""
    return find_secrets(text)
