"""``pentrace ledger tail``, ``replay`` and ``stats``: the commands that only read; what
every ``pentrace ledger`` command shares (``--wait``, opening the ledger); and how the
commands show ledger rows (table rows, JSON lines, ISO times)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Final

import typer

from pentrace.cli.output import byte_size, emit_json, emit_json_lines, emit_table, text
from pentrace.cli.sessions.args import JsonOption, data_root
from pentrace.domain.omnimessage import format_timestamp
from pentrace.domain.session.key import SessionKey
from pentrace.errors import NoMatchError
from pentrace.infrastructure.operations.ledger import (
    HeadFollower,
    LedgerEntry,
    RuntimeEventLedger,
    open_ledger,
)

__all__ = ["LedgerOptions", "open_for_command", "replay", "stats", "tail"]

_PAGE: Final = 1000


def tail(
    ctx: typer.Context,
    lines: Annotated[
        int, typer.Option("-n", "--lines", help="How many of the newest events.")
    ] = 20,
    follow: Annotated[
        bool, typer.Option("-f", "--follow", help="Keep printing new events as they arrive.")
    ] = False,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Only this session (id, prefix or project/agent/id).",
            show_default=False,
        ),
    ] = None,
    interval: Annotated[float, typer.Option(help="Seconds between polls with -f.")] = 0.5,
    as_json: JsonOption = False,
) -> None:
    """Show the newest ledger events; -f follows new ones (polls the ledger; Ctrl-C stops).

    With --json, one JSON document per line: {"notification_id", "event"}.

    Example: pentrace ledger tail -n 50 -f --session demo/assistant/3f8a1c2d
    """
    ledger = open_for_command(ctx, read_only=True)
    try:
        # With -f, a full project/agent/id may name a session about to start.
        key = _held(ledger, session, waiting=follow)
        entries = ledger.newest_entries(lines, session=key)
        print_entries(entries, as_json, header=True)
        cursor = entries[-1].notification_id or 0 if entries else ledger.head()
        if follow:
            _follow(ledger, cursor, key, interval, as_json)
    finally:
        ledger.close()


def _held(
    ledger: RuntimeEventLedger, session: str | None, *, waiting: bool
) -> SessionKey | str | None:
    """The session ``--session`` names; unless ``waiting`` for it, one the ledger holds
    events of (a reference that matches nothing is an error, not an empty table)."""
    if session is None:
        return None
    key = ledger.session_named(session)
    if not waiting and not ledger.newest_entries(1, session=key):
        raise NoMatchError(
            f"the ledger at {ledger.db.where} holds no events of a session {session!r}",
            hint="`pentrace list` shows the sessions; `pentrace ledger sync` indexes the "
            "ones the ledger is missing",
        )
    return key


def _follow(
    ledger: RuntimeEventLedger,
    cursor: int,
    key: SessionKey | str | None,
    interval: float,
    as_json: bool,
) -> None:
    """Print rows after ``cursor`` as the head moves (woken by NOTIFY where the backend
    has it, else every ``interval`` seconds) until Ctrl-C."""
    position = cursor  # how far the head has been looked at (rows of other sessions too)
    with HeadFollower(ledger, poll_interval=interval, listening_poll=interval) as heads:
        while (head := heads.wait_past(position)) is not None:
            fresh = ledger.entries_after(cursor, session=key, limit=_PAGE)
            if fresh:
                print_entries(fresh, as_json, header=False)
                cursor = fresh[-1].notification_id or cursor
            # Every row up to a head once seen is visible now (pages.py); a full page
            # may have more after it.
            position = cursor if len(fresh) >= _PAGE else max(cursor, head)


def replay(
    ctx: typer.Context,
    after: Annotated[
        str,
        typer.Option("--after", help="Event id to replay after (exclusive).", show_default=False),
    ],
    limit: Annotated[int, typer.Option("--limit", "-n", help="Most events to show.")] = 100,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Only this session (id, prefix or project/agent/id) and unscoped events.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The events after an event id, in global order, with honest gap info.

    When the cursor is no longer retained the gap says whether retention
    evicted it or the id never existed here, the retained range in scope, and
    the replay continues from the oldest retained event.

    Was `ledger replay` (still answered).

    Example: pentrace ledger events --after evt:session:demo/assistant/ses_1:00000042
    """
    ledger = open_for_command(ctx, read_only=True)
    try:
        key = _held(ledger, session, waiting=False)
        owned = key if isinstance(key, SessionKey) else None
        bare = key if isinstance(key, str) else None
        result = ledger.replay_after(
            after,
            limit,
            session_id=owned.session_id if owned else bare,
            agent_id=owned.agent if owned else None,
            project_id=owned.project if owned else None,
        )
    finally:
        ledger.close()
    gap = result.gap
    if as_json:
        emit_json(
            {
                "found": result.found,
                "gap": None
                if gap is None
                else {
                    "last_event_id": gap.last_event_id,
                    "reason": gap.reason,
                    "oldest_event_id": gap.oldest_event_id,
                    "newest_event_id": gap.newest_event_id,
                },
                "events": [json_entry(entry) for entry in result.events],
                "next_cursor": result.next_cursor,
            }
        )
        return
    if gap is not None:
        why = "was evicted by retention" if gap.reason == "evicted" else "is not in this ledger"
        typer.echo(
            f"gap: {gap.last_event_id} {why}; retained: {gap.oldest_event_id or '-'} .. "
            f"{gap.newest_event_id or '-'}; continuing from the oldest retained event",
            err=True,
        )
    emit_table(COLUMNS, (table_row(entry) for entry in result.events))


def stats(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """The ledger's size and range: rows, bytes, oldest and newest events, streams.

    Rows by category too.  Was `ledger stats` (still answered).

    Example: pentrace ledger status --json
    """
    ledger = open_for_command(ctx, read_only=True)
    try:
        figures = ledger.stats()
    finally:
        ledger.close()
    value = {
        "ledger": figures.where,
        "rows": figures.rows,
        "bytes": figures.bytes,
        "oldest_event_id": figures.oldest_event_id,
        "newest_event_id": figures.newest_event_id,
        "oldest_inserted_at": iso(figures.oldest_inserted_ms),
        "newest_inserted_at": iso(figures.newest_inserted_ms),
        "streams": figures.streams,
        "pruned_rows": figures.pruned_rows,
        "by_category": figures.by_category,
        "format": figures.format,
    }
    if as_json:
        emit_json(value)
        return
    shown = {**value, "bytes": byte_size(figures.bytes)}
    for key in (
        "ledger",
        "format",
        "rows",
        "bytes",
        "streams",
        "pruned_rows",
        "oldest_event_id",
        "oldest_inserted_at",
        "newest_event_id",
        "newest_inserted_at",
    ):
        typer.echo(f"{key}: {text(shown[key])}")
    emit_table(("category", "rows"), sorted(figures.by_category.items()))


class LedgerOptions:
    """The group's options (``--wait``), handed to every command through ``ctx.obj``."""

    def __init__(self, wait: float) -> None:
        self.wait = wait


def open_for_command(
    ctx: typer.Context, *, must_exist: bool = True, keep: bool = False, read_only: bool = False
) -> RuntimeEventLedger:
    """The configured ledger with the group's lock wait (see :func:`.opener.open_ledger`)."""
    options: LedgerOptions = ctx.obj
    return open_ledger(
        data_root=data_root(ctx),
        wait_seconds=options.wait,
        must_exist=must_exist,
        keep_everything=keep,
        read_only=read_only,
        redaction_policy=False,  # the command activated the data root's policy already
    )


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
