"""Helpers Penguin's runtime-event functions share: defaults, directories, the clock."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pentrace.compat.penguin import _counters
from pentrace.domain.runtime.scope import normalize_directory as _normalize_directory

__all__ = [
    "extract_directory",
    "fill_defaults",
    "first_string",
    "normalize_event_directory",
    "now_ms",
]


def now_ms() -> int:
    return int(time.time() * 1000)


def first_string(mapping: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def normalize_event_directory(directory: str | None) -> str | None:
    """An absolute, normalised directory (``~`` expanded), or None for a blank or non-string."""
    home, cwd = _counters.home_and_cwd()
    return _normalize_directory(directory, home=home, cwd=cwd)


def extract_directory(payload: Mapping[str, Any]) -> str | None:
    # Penguin's order: top-level ``directory`` (a blank one ends the search),
    # then ``directory``, ``path.cwd`` and ``cwd`` of ``info``, ``path``, ``part``.
    value = payload.get("directory")
    if isinstance(value, str) and value:
        return normalize_event_directory(value)
    for parent in ("info", "path", "part"):
        nested = payload.get(parent)
        if not isinstance(nested, Mapping):
            continue
        path = nested.get("path")
        for candidate in (
            nested.get("directory"),
            path.get("cwd") if isinstance(path, Mapping) else None,
            nested.get("cwd"),
        ):
            if isinstance(candidate, str) and candidate:
                return normalize_event_directory(candidate)
    return None


def fill_defaults(
    properties: dict[str, Any],
    session_keys: tuple[str, ...],
    default_agent_id: str | None,
    default_session_id: str | None,
) -> None:
    if default_session_id and not first_string(properties, session_keys):
        properties["sessionID"] = default_session_id
    if default_agent_id and not first_string(properties, ("agentID", "agent_id")):
        properties["agentID"] = default_agent_id
