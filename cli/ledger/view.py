"""How ``pentrace ledger`` shows ledger rows: table rows, JSON lines, ISO times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import typer

from pentrace.cli.output import emit_json_lines, emit_table
from pentrace.domain.omnimessage import format_timestamp
from pentrace.infrastructure.ledger import LedgerEntry

__all__ = ["COLUMNS", "iso", "json_entry", "print_entries", "table_row"]

COLUMNS = ("notification", "event_id", "type", "category", "time", "session")


def iso(ms: Any) -> str | None:
    """Milliseconds since the epoch as the trace writes times; ``None`` for a non-integer."""
    if not isinstance(ms, int):
        return None
    return format_timestamp(datetime.fromtimestamp(ms / 1000, UTC))


def table_row(entry: LedgerEntry) -> tuple[Any, ...]:
    envelope = entry.envelope()
    scope = envelope.get("scope") if isinstance(envelope.get("scope"), dict) else {}
    return (
        entry.notification_id,
        entry.event_id,
        envelope.get("type"),
        envelope.get("category"),
        iso(envelope.get("time")),
        _session(scope) if isinstance(scope, dict) else None,
    )


def _session(scope: dict[str, Any]) -> str | None:
    """The session column: ``project/agent/session-id`` when the scope names the owner."""
    session, project, agent = (scope.get(k) for k in ("session_id", "project_id", "agent_id"))
    if not isinstance(session, str):
        return None
    if isinstance(project, str) and isinstance(agent, str) and project and agent:
        return f"{project}/{agent}/{session}"
    return session


def json_entry(entry: LedgerEntry) -> dict[str, Any]:
    """``{"notification_id", "event"}``: the JSON shape of one row."""
    return {"notification_id": entry.notification_id, "event": entry.envelope()}


def print_entries(entries: list[LedgerEntry], as_json: bool, *, header: bool) -> None:
    """JSON lines, or a table (``header``) or bare tab-separated lines (follow-up pages)."""
    if as_json:
        emit_json_lines(json_entry(entry) for entry in entries)
    elif header:
        emit_table(COLUMNS, (table_row(entry) for entry in entries))
    else:
        for entry in entries:
            typer.echo("\t".join("-" if v is None else str(v) for v in table_row(entry)))
