"""Whether a RuntimeEvent envelope is well formed, each problem naming its field.

Penguin's ledger accepts an envelope when ``schema_version`` is v1, ``id``
and ``type`` are non-empty strings, ``payload`` and ``privacy`` are mappings
and the privacy block is either ``public`` with ``redacted: false`` or
``sensitive`` with ``redacted: true`` and a list of fields.  The same rules
hold here, a little stricter: ``redacted_fields`` is always a list of
strings, and a ``public`` block lists none.  So ``public`` with ``redacted:
true`` or without ``redacted``, ``sensitive`` with ``redacted: false`` and an
unknown classification such as ``internal`` are refused, as Penguin refuses
them.  (Whether the envelope is fully redacted is
:func:`pentrace.domain.redaction.is_redacted`.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["CLASSIFICATIONS", "envelope_problems", "privacy_problem"]

SCHEMA_VERSION: Final = "penguin.runtime_event.v1"
CLASSIFICATIONS: Final = ("public", "sensitive")


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value[:40])
    return type(value).__name__


def privacy_problem(privacy: Mapping[str, Any]) -> str | None:
    """What is wrong with a privacy block (``privacy.<field>: expected ..., found ...``)."""
    classification = privacy.get("classification")
    redacted = privacy.get("redacted", ...)
    fields = privacy.get("redacted_fields", ...)
    if classification not in CLASSIFICATIONS:
        return (
            "privacy.classification: expected 'public' or 'sensitive', "
            f"found {_shown(classification)}"
        )
    if fields is ... or not isinstance(fields, list):
        shown = "nothing" if fields is ... else _shown(fields)
        return f"privacy.redacted_fields: expected a list, found {shown}"
    if not all(isinstance(path, str) for path in fields):
        return "privacy.redacted_fields: expected a list of strings, found a non-string item"
    want = classification == "sensitive"
    if redacted is ... or redacted is not want:
        found = "nothing" if redacted is ... else _shown(redacted)
        return (
            f"privacy.redacted: expected {_shown(want)} for classification "
            f"{classification!r}, found {found}"
        )
    if not want and fields:
        return (
            "privacy.redacted_fields: expected [] for classification 'public', "
            f"found {len(fields)} path(s)"
        )
    return None


def envelope_problems(envelope: Mapping[str, Any]) -> list[str]:
    """Every shape problem of an envelope, each naming its field; empty when it is well formed."""
    problems = []
    version = envelope.get("schema_version")
    if version != SCHEMA_VERSION:
        problems.append(f"schema_version: expected {SCHEMA_VERSION!r}, found {_shown(version)}")
    for key in ("id", "type"):
        value = envelope.get(key)
        if not isinstance(value, str) or not value:
            problems.append(f"{key}: expected a non-empty string, found {_shown(value)}")
    if not isinstance(envelope.get("payload"), Mapping):
        problems.append(f"payload: expected an object, found {_shown(envelope.get('payload'))}")
    privacy = envelope.get("privacy")
    if not isinstance(privacy, Mapping):
        problems.append(f"privacy: expected an object, found {_shown(privacy)}")
    else:
        problem = privacy_problem(privacy)
        if problem is not None:
            problems.append(problem)
    return problems
