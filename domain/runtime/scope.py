"""What a RuntimeEvent is about, and the envelope fields between its id and its payload.

Penguin's derivation rules (``docs/runtime-events.md``) as pure functions:
scope, correlation, subject, stream id and id slug.  Penguin resolves
directories with ``Path.expanduser().resolve()``, which reads the process's
home, working directory and symlinks; here :func:`normalize_directory` takes
``home`` and ``cwd`` as arguments and does ``os.path.normpath`` only, so the
same input always gives the same scope.  Callers at the boundary pass the real
home and working directory when they want Penguin's exact result.

Below them, the header those rules make, redacted: category, subject, scope,
correlation, actor and projections are derived from the (redacted) payload
and the explicit arguments, and every one that can carry caller data goes
through the same redaction as the payload (W7).  A :class:`Header` holds the
fields all events of a session and type share, so the trace mapping
(:mod:`.mapping`) computes it once for many events.

``redacting=False`` builds the same fields with nothing redacted: the bulk
path's *candidate* envelope, which stands only when the screen then clears
its encoded bytes (:mod:`.session_events`), in which case every redaction
here would have left it unchanged.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Final, NamedTuple

from pentrace.domain.redaction import redact_text
from pentrace.domain.redaction.core import redact_flat
from pentrace.domain.session.key import percent_encode

__all__ = [
    "BODY_READS",
    "CATEGORIES",
    "CORRELATION_KEYS",
    "DEFAULT_SOURCE",
    "SCOPE_KEYS",
    "Header",
    "derive_stream_id",
    "derive_subject",
    "envelope_correlation",
    "envelope_header",
    "envelope_projections",
    "event_category",
    "extract_correlation",
    "extract_scope",
    "first_string",
    "normalize_directory",
    "slug_stream_id",
    "source_id",
]

# Target -> payload keys, first non-empty string wins (Penguin's order).
SCOPE_KEYS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("session_id", ("sessionID", "session_id", "conversation_id")),
    ("conversation_id", ("conversation_id", "sessionID", "session_id")),
    ("agent_id", ("agentID", "agent_id")),
    ("task_id", ("taskID", "task_id", "task")),
    ("run_id", ("runID", "run_id")),
    ("project_id", ("projectID", "project_id")),
    ("provider_id", ("providerID", "provider_id")),
    ("model_id", ("modelID", "model_id")),
)
CORRELATION_KEYS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("request_id", ("requestID", "request_id")),
    ("trace_id", ("traceID", "trace_id")),
    ("parent_event_id", ("parentEventID", "parent_event_id")),
)
_NESTED: Final = ("part", "info", "status")
_DIRECTORY_CONTAINERS: Final = ("info", "path", "part")
_SUBJECT_KEYS: Final = ("session_id", "task_id", "run_id", "agent_id")
_SOURCE_KEYS: Final = ("id", "requestID", "messageID", "partID")
# Penguin reads no request id inside ``part`` / ``info``: a part names itself.
_NESTED_SOURCE_KEYS: Final = ("id", "messageID", "partID")
_SLUG_SAFE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-")
_SLUG_MAX: Final = 80
_SLUG_HEAD: Final = 48
# Every top-level key the scope and correlation rules read: a payload with
# none of them (most records) has an empty scope and no correlation ids.
_SCOPE_READS: Final = frozenset(
    {key for _, keys in SCOPE_KEYS for key in keys}
    | {"directory", *_DIRECTORY_CONTAINERS, *_NESTED}
)
_CORRELATION_READS: Final = frozenset(key for _, keys in CORRELATION_KEYS for key in keys)
# Every top-level payload key scope, correlation, category (``part``) and,
# without a session id in scope, subject (the source id keys) may read.
BODY_READS: Final = _SCOPE_READS | _CORRELATION_READS | {*_SOURCE_KEYS, "part", "info"}


def first_string(mapping: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` in ``mapping`` whose value is a non-empty string, else None."""
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def normalize_directory(
    raw: object, *, home: str | None = None, cwd: str | None = None
) -> str | None:
    """A directory as scope stores it, or None for a non-string or blank value.

    ``~`` expands only when ``home`` is given; a relative path is made absolute
    only when ``cwd`` is given.  ``..``, ``.`` and trailing slashes are folded.
    """
    if not isinstance(raw, str) or not raw.strip():
        return None
    path = raw.strip()
    if home is not None and (path == "~" or path.startswith("~/")):
        path = home + path[1:]
    if cwd is not None and not os.path.isabs(path):
        path = os.path.join(cwd, path)
    return os.path.normpath(path)


def _directory_candidate(payload: Mapping[str, Any]) -> object:
    # Penguin takes the first non-empty *string* candidate, even when it is
    # blank, which then yields no directory at all; other values are skipped.
    candidates: list[object] = [payload.get("directory")]
    for name in _DIRECTORY_CONTAINERS:
        container = payload.get(name)
        if isinstance(container, Mapping):
            path = container.get("path")
            candidates.append(container.get("directory"))
            candidates.append(path.get("cwd") if isinstance(path, Mapping) else None)
            candidates.append(container.get("cwd"))
    return next((c for c in candidates if isinstance(c, str) and c), None)


def extract_scope(
    payload: Mapping[str, Any], *, home: str | None = None, cwd: str | None = None
) -> dict[str, str]:
    """Penguin's scope of a (redacted) payload: ids, then directory and workspace.

    The outer level wins over ``part``, which wins over ``info``, then ``status``.
    """
    scope: dict[str, str] = {}
    if type(payload) is dict and _SCOPE_READS.isdisjoint(payload):
        return scope
    for target, keys in SCOPE_KEYS:
        value = first_string(payload, keys)
        if value is not None:
            scope[target] = value
    for name in _NESTED:
        nested = payload.get(name)
        if isinstance(nested, Mapping):
            for key, value in extract_scope(nested, home=home, cwd=cwd).items():
                scope.setdefault(key, value)
    # Last, as Penguin does: this level's directory replaces a nested one in place.
    directory = normalize_directory(_directory_candidate(payload), home=home, cwd=cwd)
    if directory is not None:
        scope["directory"] = directory
        scope["workspace"] = directory
    return scope


def extract_correlation(
    payload: Mapping[str, Any], explicit: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Explicit correlation, then request, trace and parent event ids from top-level strings."""
    correlation = dict(explicit or {})
    if type(payload) is dict and _CORRELATION_READS.isdisjoint(payload):
        return correlation
    for target, keys in CORRELATION_KEYS:
        if not correlation.get(target):
            value = first_string(payload, keys)
            if value is not None:
                correlation[target] = value
    return correlation


def source_id(payload: Mapping[str, Any]) -> str | None:
    """The payload's own id: top-level ``id``, ``requestID``, ``messageID``, ``partID``, then
    the ``id``, ``messageID`` or ``partID`` of ``part``, then of ``info`` (Penguin's rule)."""
    found = first_string(payload, _SOURCE_KEYS)
    if found is not None:
        return found
    for name in ("part", "info"):
        nested = payload.get(name)
        if isinstance(nested, Mapping):
            found = first_string(nested, _NESTED_SOURCE_KEYS)
            if found is not None:
                return found
    return None


def derive_subject(event_type: str, scope: Mapping[str, Any], payload: Mapping[str, Any]) -> str:
    """``<scope key>:<value>``, else ``<type>:<source id>``, else the type itself."""
    for key in _SUBJECT_KEYS:
        value = scope.get(key)
        if isinstance(value, str) and value:
            return f"{key}:{value}"
    found = source_id(payload)
    return f"{event_type}:{found}" if found is not None else event_type


def derive_stream_id(scope: Mapping[str, Any]) -> str:
    """Session, then run, then task, then a workspace hash, then ``global``."""
    for key, prefix in (("session_id", "session"), ("run_id", "run"), ("task_id", "task")):
        value = scope.get(key)
        if isinstance(value, str) and value:
            return f"{prefix}:{value}"
    where = scope.get("directory") or scope.get("workspace")
    if isinstance(where, str) and where:
        return f"workspace:{hashlib.sha256(where.encode('utf-8')).hexdigest()[:12]}"
    return "global"


@lru_cache(maxsize=4096)
def slug_stream_id(stream_id: str) -> str:
    """The stream id as it appears inside event ids; injective, unlike Penguin's (W2).

    A stream id made only of ``[A-Za-z0-9_.:-]`` is used exactly as Penguin
    uses it.  Any other character is percent-encoded as UTF-8 (``%`` too, as
    it is not in the safe set), so ``a b``, ``a/b`` and ``séance``/``sèance``
    stay apart and an all-CJK id does not become empty.  Over 80 characters,
    Penguin's rule applies to the encoded form: its first 48 characters, ``-``
    and a sha256 prefix of the whole.
    """
    if not stream_id:
        return "global"
    encoded = percent_encode(stream_id, _SLUG_SAFE)
    if len(encoded) <= _SLUG_MAX:
        return encoded
    digest = hashlib.sha256(encoded.encode("ascii")).hexdigest()[:12]
    return f"{encoded[:_SLUG_HEAD]}-{digest}"


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
