"""Penguin's ``penguin.web.services.opencode_events`` helpers over the compat envelope.

Same names, signatures and results.  ``record_opencode_event`` persists to
:func:`pentrace.compat.penguin.get_runtime_event_ledger` (pentrace's ledger);
``emit_opencode_event`` and ``schedule_opencode_event`` need only an object
with an ``event_bus.emit(name, payload)`` coroutine, as Penguin's do.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from pentrace.compat.penguin._common import first_string, raw_directory
from pentrace.compat.penguin.runtime_events import (
    normalize_event_directory,
    opencode_payload_from_runtime_event,
    runtime_event_from_opencode,
    wrap_opencode_event,
)

__all__ = [
    "GLOBAL_STATUS_EVENTS",
    "directory_matches",
    "emit_opencode_event",
    "extract_event_directory",
    "extract_event_session",
    "normalize_directory",
    "normalize_opencode_event",
    "record_opencode_event",
    "schedule_opencode_event",
    "sse_event_frame",
]

GLOBAL_STATUS_EVENTS: Final[set[str]] = {
    "vcs.branch.updated",
    "lsp.updated",
    "lsp.client.diagnostics",
}
_SESSION_KEYS: Final = ("sessionID", "conversation_id", "session_id")
_BACKGROUND_TASKS: set[asyncio.Task[None]] = set()


def normalize_directory(directory: str | None) -> str | None:
    """An absolute, normalised directory, or None for a blank or non-string value."""
    return normalize_event_directory(directory)


def directory_matches(left: str | None, right: str | None) -> bool:
    """Whether two directory strings name the same place (equal once normalised, or one file)."""
    left_norm, right_norm = normalize_directory(left), normalize_directory(right)
    if not left_norm or not right_norm:
        return False
    if left_norm == right_norm:
        return True
    try:
        return Path(left_norm).samefile(right_norm)
    except OSError:
        return False


def extract_event_session(properties: dict[str, Any]) -> str | None:
    """The session of an OpenCode payload: top level, then ``part``, then ``info``."""
    found = first_string(properties, _SESSION_KEYS)
    if found:
        return found
    for parent in ("part", "info"):
        nested = properties.get(parent)
        if isinstance(nested, dict):
            found = first_string(nested, _SESSION_KEYS)
            if found:
                return found
    return None


def extract_event_directory(properties: dict[str, Any]) -> str | None:
    """The raw directory of an OpenCode payload (Penguin's candidates, not normalised)."""
    return raw_directory(properties, dicts_only=True)


def _extract_event_agent(properties: dict[str, Any]) -> str | None:
    found = first_string(properties, ("agentID", "agent_id"))
    part = properties.get("part")
    if not found and isinstance(part, dict):
        found = first_string(part, ("agentID", "agent_id"))
    return found


def normalize_opencode_event(
    data: dict[str, Any],
    *,
    order: int,
    default_agent_id: str | None = None,
    default_directory: str | None = None,
    default_session_id: str | None = None,
    now_ms: int | None = None,
) -> dict[str, Any] | None:
    """The TUI-facing ``{id, order, time, type, properties}`` of an event, or None if malformed."""
    event_type = data.get("type")
    if not isinstance(event_type, str) or not event_type:
        return None
    raw = data.get("properties")
    properties = dict(raw) if isinstance(raw, dict) else {}
    session_id = extract_event_session(properties) or default_session_id
    if session_id and not isinstance(properties.get("sessionID"), str):
        properties["sessionID"] = session_id
    directory = normalize_directory(extract_event_directory(properties)) or normalize_directory(
        default_directory
    )
    if directory:
        properties["directory"] = directory
    agent_id = _extract_event_agent(properties) or default_agent_id
    if agent_id and not isinstance(properties.get("agentID"), str):
        properties["agentID"] = agent_id
    runtime_event = runtime_event_from_opencode(
        {
            "id": data.get("id"),
            "runtime_event": data.get("runtime_event"),
            "type": event_type,
            "properties": properties,
        },
        default_agent_id=default_agent_id,
        default_directory=default_directory,
        default_session_id=default_session_id,
        now_ms=now_ms,
        sequence=order,
    )
    return None if runtime_event is None else opencode_payload_from_runtime_event(runtime_event)


def sse_event_frame(event: dict[str, Any]) -> str:
    """One SSE frame: ``id: <id>`` when the event has one, then ``data: <json>``."""
    event_id = event.get("id")
    prefix = f"id: {event_id}\n" if isinstance(event_id, str) and event_id else ""
    return f"{prefix}data: {json.dumps(event)}\n\n"


def record_opencode_event(
    core: Any, data: dict[str, Any], *, persist: bool = True
) -> dict[str, Any] | None:
    """Build an OpenCode payload's envelope, store it (unless ``persist=False``) and stamp
    ``data`` in place with the envelope, its id, type, time, order and properties."""
    runtime_event = runtime_event_from_opencode(data)
    if runtime_event is None:
        return None
    if persist:
        from pentrace.compat.penguin.ledger import get_runtime_event_ledger

        get_runtime_event_ledger(core).append(runtime_event)
    data["runtime_event"] = runtime_event
    projected = opencode_payload_from_runtime_event(runtime_event)
    data["id"] = projected["id"]
    if isinstance(projected["type"], str) and projected["type"]:
        data["type"] = projected["type"]
    data["time"] = projected["time"]
    data["order"] = projected["order"]
    data["properties"] = projected["properties"]
    return runtime_event


async def emit_opencode_event(core: Any, event_type: str, properties: dict[str, Any]) -> None:
    """Emit ``opencode_event`` with the wrapped payload on ``core.event_bus`` (if it has one)."""
    emit = getattr(getattr(core, "event_bus", None), "emit", None)
    if callable(emit):
        await emit("opencode_event", wrap_opencode_event(event_type, properties))


def schedule_opencode_event(
    core_getter: Callable[[], Any],
    event_type: str,
    properties: dict[str, Any],
    *,
    logger: logging.Logger | None = None,
) -> None:
    """Emit from sync or async code: a task on the running loop, else run to completion."""

    async def runner() -> None:
        try:
            await emit_opencode_event(core_getter(), event_type, properties)
        except Exception:
            if logger:
                logger.debug("Failed to emit opencode event %s", event_type, exc_info=True)

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        task = loop.create_task(runner())
        _BACKGROUND_TASKS.add(task)
        task.add_done_callback(_BACKGROUND_TASKS.discard)
        return
    try:
        asyncio.run(runner())
    except Exception:
        if logger:
            logger.debug("Failed to schedule opencode event %s", event_type, exc_info=True)
