"""What a RuntimeEvent is about: scope, correlation, subject, stream id and id slug.

These are Penguin's derivation rules (``docs/runtime-events.md``) as pure
functions.  Penguin resolves directories with ``Path.expanduser().resolve()``,
which reads the process's home, working directory and symlinks; here
:func:`normalize_directory` takes ``home`` and ``cwd`` as arguments and does
``os.path.normpath`` only, so the same input always gives the same scope.
Callers at the boundary pass the real home and working directory when they
want Penguin's exact result.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Final

from pentrace.domain.session.key import percent_encode

__all__ = [
    "BODY_READS",
    "CORRELATION_KEYS",
    "SCOPE_KEYS",
    "derive_stream_id",
    "derive_subject",
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
