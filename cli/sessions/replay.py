"""``pentrace replay`` and ``pentrace resume-check``: read a session, see what resume restores."""

from __future__ import annotations

import dataclasses
import sys
from typing import Annotated, Final

import click
import typer

from pentrace.cli.options import JsonLinesOption
from pentrace.cli.output import json_bytes, listed, stdout_is_tty, text
from pentrace.cli.sessions.args import (
    AgentOption,
    JsonOption,
    ProjectOption,
    SessionOrFileArgument,
    one_session,
    session_or_file,
)
from pentrace.cli.sessions.replay_render import render_replay
from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.records import TraceRecord
from pentrace.domain.redaction import redact
from pentrace.infrastructure.operations.documents import replay_document, replay_item
from pentrace.infrastructure.operations.sessions import (
    DataRoot,
    ParseReport,
    SessionRef,
    read_replay,
    resume_trace_file,
)
from pentrace.projections.replay import ReplayItem
from pentrace.projections.resume import ResumeResult, encode_resume_report
from pentrace.projections.synthetic import SyntheticRecord

__all__ = ["redact_items", "register", "replay", "resume_check"]

# Piped JSON is compact, so every envelope is byte for byte the trace's line.
_encoder: Final = JsonEncoder()
_CLOSED: Final = "yes: the next run starts from an empty context"


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def _shown(item: ReplayItem) -> bool:
    """Committed history, plus how a dropped request ended (why it was retried)."""
    record = item.record
    ended = record.kind == "event_msg" and record.ptype == "request_end"
    return item.committed or (item.state == "dropped" and ended)


def redact_items(items: list[ReplayItem]) -> tuple[list[ReplayItem], int]:
    """``items`` with every record passed through the redaction policy, and how many
    values it replaced (lines that did not parse are not replay items)."""
    shown, hidden = [], 0
    for item in items:
        done = redact(item.record.value())
        hidden += len(done.paths)
        record = TraceRecord.from_value(done.value, item.record.line)
        shown.append(dataclasses.replace(item, record=record))
    return shown, hidden


@one_session
def replay(
    _root: DataRoot,
    ref: SessionRef,
    raw: Annotated[
        bool, typer.Option("--raw", help="Print the records as JSONL lines, as written.")
    ] = False,
    include_uncommitted: Annotated[
        bool,
        typer.Option(
            "--include-uncommitted",
            help="Also show dropped rounds (x), unfinished ones (?) and unsent input (>).",
        ),
    ] = False,
    as_json: JsonOption = False,
    as_jsonl: JsonLinesOption = False,
    pager: Annotated[
        bool,
        typer.Option("--pager/--no-pager", help="Page the text (only ever on a terminal)."),
    ] = True,
    redacted: Annotated[
        bool | None,
        typer.Option(
            "--redacted/--no-redacted",
            help="Pass every record through the redaction policy, as export --redacted and "
            "the viewer do [default: redacted on a terminal, as written when piped].",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Replay a session's committed history for reading.

    Roles, tool calls with their approvals and outputs (images named by type and
    size), MCP connect results per server, thinking collapsed, one header per
    turn.  Rounds whose request did not complete are left out, as resume leaves
    them out, except the line saying how each ended (the error of a retried
    request); --include-uncommitted shows them whole, marked.

    On a terminal the records are redacted (a screen is easy to share); piped
    output is as written, as it always was.  --redacted or --no-redacted
    chooses either way, in every format.

    Example: pentrace replay 3f8a --include-uncommitted

    Example: pentrace replay 3f8a --raw --redacted > shared.jsonl
    """
    report = ParseReport()
    items = read_replay(ref, report)
    if stdout_is_tty() if redacted is None else redacted:
        items, hidden = redact_items(items)
        if redacted is None and hidden:
            # Said once, on stderr: the screen shows [redacted] where a value was.
            typer.echo(f"replay: {hidden} value(s) redacted; --no-redacted shows them", err=True)
    shown = items if include_uncommitted else [item for item in items if item.committed]
    if as_jsonl:
        _write(b"".join(_encoder.encode(replay_item(item)) + b"\n" for item in shown))
        return
    if as_json:
        document = replay_document(ref, shown, report, include_uncommitted=include_uncommitted)
        _write(json_bytes(document) + b"\n")
        return
    if raw:
        _write(b"".join(item.record.raw + b"\n" for item in shown))
        return
    # The text also says how a dropped request ended: the reason it was retried.
    lines = render_replay(items if include_uncommitted else [i for i in items if _shown(i)])
    if not report.clean:
        lines.append(f"(reader: {report.note()}; torn tails {len(report.torn_tails)})")
    text = "\n".join(lines) + "\n"
    if stdout_is_tty() and pager:
        click.echo_via_pager(text)
    else:
        typer.echo(text, nl=False)


def _resume_text(label: str, result: ResumeResult, report: ParseReport) -> str:
    placeholders = sum(isinstance(r, SyntheticRecord) for r in result.history) + sum(
        isinstance(r, SyntheticRecord) for r in result.carry_over
    )
    tokens = result.session_tokens  # as the trace holds it: usually counts by name
    shown_tokens = listed(tokens) if isinstance(tokens, dict) else text(tokens)
    lines = [
        f"trace         {label}",
        f"history       {len(result.history)} message(s)",
        f"carry-over    {len(result.carry_over)} message(s) resent with the next input",
        f"placeholders  {placeholders} (interrupted tool calls, never written to disk)",
        f"turns         {result.session_turns}",
        f"tokens        {shown_tokens}; last request total {text(result.last_request_total)}",
        f"closed        {_CLOSED if result.context_closed else 'no'}",
    ]
    if result.pending_summary is not None:
        summary = result.pending_summary.payload().get("text")
        size = len(summary) if isinstance(summary, str) else 0
        lines.append(f"summary       pending, {size} chars, sent in front of the next input")
    if result.dangling_compaction is not None:
        begun = listed(result.dangling_compaction)  # its reason and mode, when recorded
        lines.append(f"dangling      compaction ({begun}); resume closes it as failed")
    lines.append(
        f"reader        {report.note()}; torn tail: {'yes' if report.torn_tails else 'no'}"
    )
    return "\n".join(lines)


def resume_check(
    ctx: typer.Context,
    session_or_path: SessionOrFileArgument,
    project: ProjectOption = None,
    agent: AgentOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print what resume would restore, writing nothing.

    History size, carry-over, placeholders, tokens, turns, closure and summary,
    read from the session's latest shard (the one resume reads).  --json prints
    the resume report contract (docs/resume.md).

    Example: pentrace resume-check 3f8a1c2d --json
    """
    _, ref, alone = session_or_file(ctx, session_or_path, project, agent)
    path = ref.shards[-1].path
    label = str(path) if alone else f"{ref.key.reference} ({path})"
    report = ParseReport()
    result = resume_trace_file(path, report=report)
    if as_json:
        _write(encode_resume_report(result, report) + b"\n")
    else:
        typer.echo(_resume_text(label, result, report))


def register(app: typer.Typer) -> None:
    """Add these commands to the ``pentrace`` app."""
    app.command()(replay)
    app.command("resume-check")(resume_check)
