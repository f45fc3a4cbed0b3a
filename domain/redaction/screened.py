"""Redaction with the screen in front: for values whose JSON bytes are at hand.

A trace record keeps the line it was decoded from, and the ledger encodes
every envelope anyway; with the bytes, :mod:`~pentrace.domain.redaction.screen`
answers for most records in one pass, and only the rest are walked.
"""

from __future__ import annotations

from typing import Any

from pentrace.domain.redaction.core import is_redacted, redact
from pentrace.domain.redaction.screen import may_change
from pentrace.domain.redaction.walk import Redacted

__all__ = ["is_redacted_encoded", "redact_decoded"]


def redact_decoded(
    value: Any, data: bytes, *, depth: int = 0, engine: str | None = None
) -> Redacted:
    """``redact(value, depth=depth)`` for a value decoded from (a part of) the JSON ``data``.

    The screen reads ``data`` once; where no rule can apply anywhere in it,
    ``value`` itself comes back, unchanged and public, without a walk.
    ``engine`` (``hs`` or ``re``) overrides the screen's engine, for tests.
    """
    if not may_change(data, engine_name=engine):
        return Redacted(value, [], "public")
    return redact(value, depth=depth)


def is_redacted_encoded(value: Any, data: bytes) -> bool:
    """:func:`is_redacted` for a value whose JSON encoding ``data`` is at hand: screened first."""
    return not may_change(data) or is_redacted(value)
