"""Helpers Penguin's runtime-event functions share: defaults, directories, the clock, and the
in-process sequence counters (one per stream id)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any, Final

from pentrace.domain.runtime.scope import first_string
from pentrace.domain.runtime.scope import normalize_directory as _normalize_directory

__all__ = [
    "extract_directory",
    "fill_defaults",
    "first_string",
    "home_and_cwd",
    "next_sequence",
    "normalize_event_directory",
    "now_ms",
    "raise_counter",
    "reset_runtime_event_sequences",
]


def now_ms() -> int:
    return int(time.time() * 1000)


def normalize_event_directory(directory: str | None) -> str | None:
    """An absolute, normalised directory (``~`` expanded), or None for a blank or non-string."""
    home, cwd = home_and_cwd()
    return _normalize_directory(directory, home=home, cwd=cwd)


def _nested(value: object, dicts_only: bool) -> Mapping[str, Any] | None:
    if isinstance(value, dict) or (not dicts_only and isinstance(value, Mapping)):
        return value
    return None


def raw_directory(payload: Mapping[str, Any], *, dicts_only: bool = False) -> str | None:
    """The first non-blank directory candidate of a payload, as written (not normalised).

    Penguin's order: top-level ``directory``, then ``directory``, ``path.cwd`` and
    ``cwd`` of ``info``, ``path``, ``part``.  The runtime-event helpers look into
    any mapping; the OpenCode ones (``dicts_only``) only into a ``dict``, as in Penguin.
    """
    value = payload.get("directory")
    if isinstance(value, str) and value:
        return value
    for parent in ("info", "path", "part"):
        nested = _nested(payload.get(parent), dicts_only)
        if nested is None:
            continue
        path = _nested(nested.get("path"), dicts_only)
        for candidate in (
            nested.get("directory"),
            None if path is None else path.get("cwd"),
            nested.get("cwd"),
        ):
            if isinstance(candidate, str) and candidate:
                return candidate
    return None


def extract_directory(payload: Mapping[str, Any]) -> str | None:
    """:func:`raw_directory`, normalised."""
    raw = raw_directory(payload)
    return None if raw is None else normalize_event_directory(raw)


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


_lock: Final = threading.Lock()
_sequences: dict[str, int] = {}


def next_sequence(stream_id: str) -> int:
    """The stream's next sequence, from 1."""
    with _lock:
        number = _sequences.get(stream_id, 0) + 1
        _sequences[stream_id] = number
        return number


def raise_counter(stream_id: str, sequence: int) -> None:
    """Make the stream's next automatic sequence come after ``sequence``."""
    with _lock:
        _sequences[stream_id] = max(_sequences.get(stream_id, 0), sequence)


def raise_counters(high_water: Mapping[str, int]) -> None:
    """:func:`raise_counter` for every stream of ``high_water``."""
    with _lock:
        for stream_id, sequence in high_water.items():
            _sequences[stream_id] = max(_sequences.get(stream_id, 0), sequence)


def reset_runtime_event_sequences(high_water: Mapping[str, int] | None = None) -> None:
    """Forget every per-stream counter; with ``high_water``, continue after those sequences.

    Pass the ledger's highest stored sequence per stream after a restart so new
    events do not reuse ids the ledger already holds (Penguin's W1).
    """
    with _lock:
        _sequences.clear()
        _sequences.update(high_water or {})


def home_and_cwd() -> tuple[str, str]:
    """What Penguin's ``Path.expanduser().resolve()`` reads: the home and working directory."""
    return os.path.expanduser("~"), os.getcwd()
