"""Render replay items for reading: roles, tool calls with their outputs, thinking collapsed.

Pure formatting (no I/O): :func:`render_replay` returns the lines that
``pentrace replay`` prints or pages, a line or a few for each render item
(:mod:`pentrace.projections.replay`, which the Session page draws too).
Dropped, open and pending records are shown only when the caller passes them,
each line prefixed with a marker naming why it is not committed history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pentrace.cli import output
from pentrace.domain.omnimessage.images import ImageRef, summary
from pentrace.projections.replay import RenderItem, ReplayItem, as_text, build_render_items, draw

__all__ = ["MAX_OUTPUT_LINES", "render_replay"]

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
