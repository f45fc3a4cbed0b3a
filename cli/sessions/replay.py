"""``pentrace replay`` and ``pentrace resume-check``: read a session, see what resume restores.

The replay is rendered for reading here too: :func:`render_replay` is pure
formatting (no I/O) and returns the lines that ``pentrace replay`` prints or pages,
a line or a few for each render item (:mod:`pentrace.projections.replay`, which the
Session page draws too): roles, tool calls with their outputs, thinking collapsed.
Dropped, open and pending records are shown only when the caller passes them, each
line prefixed with a marker naming why it is not committed history.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Annotated, Any, Final

import click
import typer

from pentrace.cli import output
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
from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.omnimessage.images import ImageRef, summary
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
from pentrace.projections.replay import RenderItem, ReplayItem, as_text, build_render_items, draw
from pentrace.projections.resume import ResumeResult, encode_resume_report
from pentrace.projections.synthetic import SyntheticRecord

__all__ = [
    "MAX_OUTPUT_LINES",
    "redact_items",
    "register",
    "render_replay",
    "replay",
    "resume_check",
]

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


MAX_OUTPUT_LINES: Final = 20
_MARKS: Final = {"dropped": "x ", "open": "? ", "pending": "> "}


def _figure(value: Any) -> str:
    """A number from a payload as a person reads it; ``-`` when the record has none."""
    return output.text(value) if value is None or isinstance(value, int | float) else as_text(value)


def _indent(text: str, prefix: str) -> list[str]:
    lines = text.split("\n")
    return [lines[0], *(prefix + line for line in lines[1:])]


def _clip(text: str) -> str:
    lines = text.split("\n")
    if len(lines) <= MAX_OUTPUT_LINES:
        return text
    more = len(lines) - MAX_OUTPUT_LINES
    return "\n".join([*lines[:MAX_OUTPUT_LINES], f"... ({more} more lines; --raw shows all)"])


def _images(images: Sequence[ImageRef], prefix: str) -> list[str]:
    if not images:
        return []
    shown = "; ".join(summary(image) for image in images[:5])
    more = f"; and {len(images) - 5} more" if len(images) > 5 else ""
    return [f"{prefix}[{len(images)} image(s) in the output: {shown}{more}]"]


def _mcp_results(payload: dict[str, Any]) -> str:
    lines = [f"mcp servers connected: {as_text(payload.get('status')) or 'unknown'}"]
    results = payload.get("results")
    for result in results if isinstance(results, list) else []:
        if not isinstance(result, dict):
            continue
        tools = result.get("tools")
        parts = [as_text(result.get("status")) or "?"]
        if tools is not None:
            parts.append(f"{as_text(tools)} tool(s)")
        if result.get("duration_ms") is not None:
            parts.append(f"{as_text(result.get('duration_ms'))} ms")
        error = f" - {as_text(result.get('error'))}" if result.get("error") else ""
        name, transport = as_text(result.get("server")), as_text(result.get("transport"))
        lines.append(f"  {name} ({transport}): {', '.join(parts)}{error}")
    return "\n".join(lines)


class _Renderer:
    def __init__(self, items: list[ReplayItem]) -> None:
        self.items = build_render_items(items)
        self.lines: list[str] = []

    def emit(self, item: ReplayItem, text: str) -> None:
        mark = _MARKS.get(item.state, "")
        for line in text.split("\n"):
            self.lines.append(mark + line)

    def run(self) -> list[str]:
        current_round: int | None = None
        for entry in self.items:
            if entry.folded:
                continue
            item = entry.item
            if item.round != current_round and item.round is not None:
                self.round_header(item)
            current_round = item.round
            text = draw(entry, self)
            if text is not None:
                self.emit(item, text)
        return self.lines

    def round_header(self, item: ReplayItem) -> None:
        if item.state == "committed":
            label = "compaction request" if item.in_compaction else f"turn {item.turn}"
            self.lines.append(f"--- {label} (request {item.round}) ---")
        elif item.state == "dropped":
            status = item.status or "no end: a new request began"
            self.lines.append(
                f"x-- dropped request {item.round} ({status}): not in the committed history --x"
            )
        else:
            self.lines.append(f"?-- request {item.round} never ended (crash or still running) --?")

    def session(self, entry: RenderItem) -> str:
        model = f"{entry.text('provider')}/{entry.text('model_id')}"
        return f"session {entry.text('session_id')}  model {model}"

    def shard(self, entry: RenderItem) -> str:
        return f"=== shard {entry.item.shard:03d} (new context after compaction) ==="

    def record(self, entry: RenderItem) -> str:
        return f"[record of type {as_text(entry.record.kind) or 'unknown'}]"

    @staticmethod
    def who(entry: RenderItem) -> str:
        who = as_text(entry.record.role) or "?"
        sender = entry.payload.get("sender")
        return f"{who} ({sender})" if isinstance(sender, str) and sender != "user" else who

    def text(self, entry: RenderItem) -> str:
        return "\n".join(_indent(f"{self.who(entry)}: {entry.text('text')}", "  "))

    def thinking(self, entry: RenderItem) -> str:
        return f"{self.who(entry)} thinking: [collapsed, {len(entry.thinking)} chars]"

    def tool_output(self, entry: RenderItem) -> str:
        call, out = entry.text("tool_call_id"), _clip(entry.text("output"))
        lines = _indent(f"output for {call} (no call shown): {out}", "    ")
        return "\n".join([*lines, *_images(entry.images, "    ")])

    def image(self, entry: RenderItem) -> str:
        return f"{self.who(entry)}: [image: {summary(entry.images[0])}]"

    def inline_data(self, entry: RenderItem) -> str:
        mime, size = entry.text("mime_type") or "data", len(entry.text("data")) * 3 // 4
        return f"{self.who(entry)}: [inline {mime}, {size} bytes]"

    def message(self, entry: RenderItem) -> str:
        return f"{self.who(entry)}: [{as_text(entry.record.ptype) or 'message'}]"

    def tool_call(self, entry: RenderItem) -> str:
        call = entry.text("tool_call_id")
        lines = [f"tool call {entry.text('name')} {entry.text('arguments')}  [{call}]"]
        for approval in entry.approvals:
            lines.append(f"    approval: {approval.text('decision')}")
        output = entry.output
        if output is None:
            lines.append("    output: (none recorded)")
        else:
            stop = output.payload.get("stop_reason")
            failed = f" [{stop}]" if isinstance(stop, str) and stop != "completed" else ""
            text = _clip(output.text("output"))
            lines.extend(_indent(f"    output{failed}: {text}", "      "))
            lines.extend(_images(output.images, "      "))
        return "\n".join(lines)

    def request_failed(self, entry: RenderItem) -> str:
        error = entry.text("error_message") or "no error message"
        attempt = entry.payload.get("attempt")
        tried = f" (attempt {attempt})" if attempt is not None else ""
        return f"request {entry.text('status') or 'ended'}{tried}: {error}"

    def event(self, entry: RenderItem) -> str:
        ptype, payload = entry.record.ptype, entry.payload
        if entry.record.kind == "session_meta":
            return f"model: {entry.text('provider')}/{entry.text('model_id')}"
        if ptype == "foreign_record":
            note = entry.text("note")
            kept = f"[kept from {entry.text('agent')}: {entry.text('record_type')}"
            return kept + (f" ({note})]" if note else "]")
        if ptype == "mcp_connect_begin":
            servers = payload.get("servers")
            listed = [as_text(n) for n in servers] if isinstance(servers, list) else []
            return f"mcp: connecting to {', '.join(listed) or 'no servers'}"
        if ptype == "mcp_connect_end":
            return _mcp_results(payload)
        if ptype == "token_usage":
            session, request = payload.get("session"), payload.get("request")
            total = session.get("total") if isinstance(session, dict) else None
            last = request.get("total") if isinstance(request, dict) else None
            return f"tokens: session total {_figure(total)}, this request {_figure(last)}"
        if ptype == "tool_list_ready":
            tools = payload.get("tools")
            names = (
                [t.get("name") for t in tools if isinstance(t, dict)]
                if isinstance(tools, list)
                else []
            )
            return f"tools: {', '.join(as_text(n) for n in names) or 'none'}"
        if ptype == "approval_decision":
            return f"approval: {entry.text('decision')} for {entry.text('tool_call_id')}"
        if ptype == "compaction_begin":
            mode, reason = entry.text("mode"), entry.text("reason")
            return f"=== compaction begins ({mode}, {reason}) ==="
        if ptype == "compaction_end":
            return f"=== compaction ends: {entry.text('status')} ==="
        if ptype == "abort":
            return f"abort: {entry.text('reason') or 'no reason given'}"
        if ptype == "subagent":
            return f"subagent started: {entry.text('session_id')}"
        if ptype == "goal_finished":
            outcome = entry.text("outcome")
            return f"goal finished: {outcome} after {_figure(payload.get('rounds'))} rounds"
        return f"[{as_text(ptype) or 'event'}]"


def render_replay(items: list[ReplayItem]) -> list[str]:
    """The readable lines of ``items`` (already filtered to what should be shown)."""
    return _Renderer(items).run()
