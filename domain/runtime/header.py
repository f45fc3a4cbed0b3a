"""The envelope fields between the id and the payload: Penguin's rules, redacted.

Category, subject, scope, correlation, actor and projections are derived from
the (redacted) payload and the explicit arguments, and every one that can
carry caller data goes through the same redaction as the payload (W7).  A
:class:`Header` holds the fields all events of a session and type share, so
the trace mapping (:mod:`.mapping`) computes it once for many events.

``redacting=False`` builds the same fields with nothing redacted: the bulk
path's *candidate* envelope, which stands only when the screen then clears
its encoded bytes (:mod:`.session_events`), in which case every redaction
here would have left it unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from pentrace.domain.redaction import redact_text
from pentrace.domain.redaction.core import redact_flat
from pentrace.domain.runtime.scope import (
    derive_stream_id,
    derive_subject,
    extract_correlation,
    extract_scope,
    normalize_directory,
)

__all__ = [
    "CATEGORIES",
    "DEFAULT_SOURCE",
    "Header",
    "envelope_correlation",
    "envelope_header",
    "envelope_projections",
    "event_category",
]

DEFAULT_SOURCE: Final = "penguin.backend"
CATEGORIES: Final = (
    "session_lifecycle",
    "message_lifecycle",
    "stream_chunk",
    "tool_action_lifecycle",
    "file_diff",
    "task_run_state",
    "provider_model_state",
    "cwm_token_usage",
    "notification",
    "error",
    "user_input_approval",
)
_APPROVAL_TYPES: Final = frozenset(
    {
        "permission.asked",
        "permission.replied",
        "question.asked",
        "question.replied",
        "question.rejected",
    }
)
_PART_TYPES: Final = frozenset({"message.part.updated", "message.part.removed"})
_PREFIX_CATEGORIES: Final = (
    (("tool.", "tool_", "action.", "todo."), "tool_action_lifecycle"),
    (("task.", "run."), "task_run_state"),
    (("provider.", "model."), "provider_model_state"),
    (("token.", "usage.", "context_window.", "cwm."), "cwm_token_usage"),
    (("notification.",), "notification"),
    (("file.", "lsp."), "file_diff"),
)


def event_category(event_type: str, payload: Mapping[str, Any]) -> str:
    """Penguin's first-matching category rule for an event type (case-sensitive)."""
    if event_type in _APPROVAL_TYPES:
        return "user_input_approval"
    if event_type in _PART_TYPES:
        part = payload.get("part")
        part_type = part.get("type") if isinstance(part, Mapping) else None
        return "stream_chunk" if part_type in ("text", "reasoning") else "tool_action_lifecycle"
    if event_type.startswith("message."):
        return "message_lifecycle"
    if event_type.startswith(("session.diff", "vcs.")):
        return "file_diff"
    if event_type.startswith("session.error") or event_type.endswith(".error"):
        return "error"
    if event_type.startswith("session."):
        return "session_lifecycle"
    for prefixes, category in _PREFIX_CATEGORIES:
        if event_type.startswith(prefixes):
            return category
    return "session_lifecycle"


def _kept(name: str, value: Any) -> tuple[Any, list[str]]:
    """One envelope field as given (the candidate of ``redacting=False``)."""
    return value, []


def _redacted(name: str, value: Any) -> tuple[Any, list[str]]:
    """One envelope field redacted, and its hidden paths (``@name`` or ``@name.<path>``)."""
    if not value:
        return value, []
    if isinstance(value, str):
        clean = redact_text(value)
        return clean, [f"@{name}"] if clean != value else []
    clean, paths = redact_flat(value, depth=1)
    return clean, [f"@{name}.{path}" if path else f"@{name}" for path in paths]


class Header(NamedTuple):
    """An envelope's redacted fields from ``type`` to ``actor`` but ``correlation``.

    These are the fields all events of a session and type share; the
    correlation (a tool call id) and the rest change from event to event.
    Hidden paths come in envelope key order: the payload's, ``lead_paths``
    (type to scope), the correlation's, ``actor_paths``, the projections'.
    """

    type: str
    category: str
    source: str
    subject: str
    stream_id: str
    scope: dict[str, Any]
    actor: dict[str, Any]
    lead_paths: list[str]
    actor_paths: list[str]


def _explicit_scope(
    extracted: dict[str, Any],
    explicit: Mapping[str, Any] | None,
    home: str | None,
    cwd: str | None,
) -> dict[str, Any]:
    scope = dict(extracted)
    given = {key: value for key, value in (explicit or {}).items() if value is not None}
    for key in ("directory", "workspace"):
        if isinstance(given.get(key), str) and given[key]:
            given[key] = normalize_directory(given[key], home=home, cwd=cwd) or ""
    if "directory" in given and "workspace" not in given:
        # A directory given explicitly replaces the payload's workspace too (W11).
        given["workspace"] = given["directory"]
    scope.update(given)
    return scope


def envelope_header(
    *,
    event_type: str,
    body: dict[str, Any],
    category: str | None = None,
    source: str = DEFAULT_SOURCE,
    subject: str | None = None,
    stream_id: str | None = None,
    scope: Mapping[str, Any] | None = None,
    actor: Mapping[str, Any] | None = None,
    home: str | None = None,
    cwd: str | None = None,
    redacting: bool = True,
) -> Header:
    """Penguin's rules for the fields between the id and the payload, redacted.

    ``body`` is the already redacted payload, which scope, category and
    subject are read from.  The correlation is :func:`envelope_correlation`.
    With ``redacting=False`` nothing is redacted (see the module docstring).
    """
    field = _redacted if redacting else _kept
    merged_scope, scope_paths = field(
        "scope", _explicit_scope(extract_scope(body, home=home, cwd=cwd), scope, home, cwd)
    )
    event_type, type_paths = field("type", event_type)
    kind, category_paths = field("category", category or event_category(event_type, body))
    source, source_paths = field("source", source)
    about, subject_paths = field(
        "subject", subject or derive_subject(event_type, merged_scope, body)
    )
    stream = stream_id or derive_stream_id(merged_scope)
    kept_actor, actor_paths = field("actor", dict(actor or {}))
    return Header(
        event_type,
        kind,
        source,
        about,
        stream,
        merged_scope,
        kept_actor,
        [*type_paths, *category_paths, *source_paths, *subject_paths, *scope_paths],
        actor_paths,
    )


def envelope_correlation(
    body: Mapping[str, Any],
    correlation: Mapping[str, Any] | None = None,
    *,
    redacting: bool = True,
) -> tuple[dict[str, Any], list[str]]:
    """The redacted correlation of an envelope (explicit ids, then the body's) and its paths."""
    field = _redacted if redacting else _kept
    return field("correlation", extract_correlation(body, correlation))


def envelope_projections(
    projections: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], list[str]]:
    """The redacted projections of an envelope and their paths."""
    return _redacted("projections", dict(projections or {}))
