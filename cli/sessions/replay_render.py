"""Render replay items for reading: roles, tool calls with their outputs, thinking collapsed.

Pure formatting (no I/O): :func:`render_replay` returns the lines that
``pentrace replay`` prints or pages.  Dropped, open and pending records are
shown only when the caller passes them, each line prefixed with a marker
naming why it is not committed history.
"""

from __future__ import annotations

from typing import Any, Final

from pentrace.domain.omnimessage.images import record_images, summary
from pentrace.projections.replay_view import ReplayItem, pair_calls

__all__ = ["MAX_OUTPUT_LINES", "render_replay"]

MAX_OUTPUT_LINES: Final = 20
_MARKS: Final = {"dropped": "x ", "open": "? ", "pending": "> "}


def _indent(text: str, prefix: str) -> list[str]:
    lines = text.split("\n")
    return [lines[0], *(prefix + line for line in lines[1:])]


def _clip(text: str) -> str:
    lines = text.split("\n")
    if len(lines) <= MAX_OUTPUT_LINES:
        return text
    more = len(lines) - MAX_OUTPUT_LINES
    return "\n".join([*lines[:MAX_OUTPUT_LINES], f"... ({more} more lines; --raw shows all)"])


def _str(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else repr(value)


def _images(payload: dict[str, Any], prefix: str) -> list[str]:
    images = record_images("tool_call_output", payload)
    if not images:
        return []
    shown = "; ".join(summary(image) for image in images[:5])
    more = f"; and {len(images) - 5} more" if len(images) > 5 else ""
    return [f"{prefix}[{len(images)} image(s) in the output: {shown}{more}]"]


def _mcp_results(payload: dict[str, Any]) -> str:
    lines = [f"mcp servers connected: {_str(payload.get('status')) or 'unknown'}"]
    results = payload.get("results")
    for result in results if isinstance(results, list) else []:
        if not isinstance(result, dict):
            continue
        tools = result.get("tools")
        parts = [_str(result.get("status")) or "?"]
        if tools is not None:
            parts.append(f"{tools} tool(s)")
        if result.get("duration_ms") is not None:
            parts.append(f"{result.get('duration_ms')} ms")
        error = f" - {_str(result.get('error'))}" if result.get("error") else ""
        name, transport = _str(result.get("server")), _str(result.get("transport"))
        lines.append(f"  {name} ({transport}): {', '.join(parts)}{error}")
    return "\n".join(lines)


class _Renderer:
    def __init__(self, items: list[ReplayItem]) -> None:
        self.items = items
        self.lines: list[str] = []
        self.used: set[int] = set()
        self.pairs = pair_calls(items)

    def emit(self, item: ReplayItem, text: str) -> None:
        mark = _MARKS.get(item.state, "")
        for line in text.split("\n"):
            self.lines.append(mark + line)

    def run(self) -> list[str]:
        current_round: int | None = None
        for index, item in enumerate(self.items):
            if index in self.used:
                continue
            if item.round != current_round and item.round is not None:
                self.round_header(item)
            current_round = item.round
            text = self.describe(index, item)
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

    def describe(self, index: int, item: ReplayItem) -> str | None:
        record = item.record
        payload = record.payload()
        ptype = record.ptype
        if record.kind == "model_msg":
            return self.message(index, record.role, ptype, payload)
        if record.kind == "session_meta":
            model = f"{_str(payload.get('provider'))}/{_str(payload.get('model_id'))}"
            if item.position == 1:
                return f"session {_str(payload.get('session_id'))}  model {model}"
            return f"=== shard {item.shard:03d} (new context after compaction) ==="
        if record.kind != "event_msg":
            return f"[record of type {_str(record.kind) or 'unknown'}]"
        return self.event(ptype, payload)

    def message(self, index: int, role: Any, ptype: Any, payload: dict[str, Any]) -> str | None:
        who = _str(role) or "?"
        sender = payload.get("sender")
        if isinstance(sender, str) and sender != "user":
            who = f"{who} ({sender})"
        if ptype == "text":
            return "\n".join(_indent(f"{who}: {_str(payload.get('text'))}", "  "))
        if ptype in ("thinking", "inline_thinking"):
            body = payload.get("thinking", payload.get("data"))
            return f"{who} thinking: [collapsed, {len(_str(body))} chars]"
        if ptype == "tool_call":
            return self.tool_call(payload)
        if ptype == "tool_call_output":
            call = _str(payload.get("tool_call_id"))
            out = _clip(_str(payload.get("output")))
            lines = _indent(f"output for {call} (no call shown): {out}", "    ")
            return "\n".join([*lines, *_images(payload, "    ")])
        images = record_images(ptype, payload)
        if images:
            return f"{who}: [image: {summary(images[0])}]"
        if ptype == "inline_data":
            mime = _str(payload.get("mime_type")) or "data"
            return f"{who}: [inline {mime}, {len(_str(payload.get('data'))) * 3 // 4} bytes]"
        return f"{who}: [{_str(ptype) or 'message'}]"

    def tool_call(self, payload: dict[str, Any]) -> str:
        call = _str(payload.get("tool_call_id"))
        lines = [
            f"tool call {_str(payload.get('name'))} {_str(payload.get('arguments'))}  [{call}]"
        ]
        for approval in self.pairs.approvals.get(call, []):
            self.used.add(approval)
            decision = _str(self.items[approval].record.payload().get("decision"))
            lines.append(f"    approval: {decision}")
        output = self.pairs.outputs.get(call)
        if output is None:
            lines.append("    output: (none recorded)")
        else:
            self.used.add(output)
            out_payload = self.items[output].record.payload()
            stop = out_payload.get("stop_reason")
            failed = f" [{stop}]" if isinstance(stop, str) and stop != "completed" else ""
            text = _clip(_str(out_payload.get("output")))
            lines.extend(_indent(f"    output{failed}: {text}", "      "))
            lines.extend(_images(out_payload, "      "))
        return "\n".join(lines)

    def event(self, ptype: Any, payload: dict[str, Any]) -> str | None:
        if ptype == "request_begin":
            return None
        if ptype == "request_end":
            status = _str(payload.get("status"))
            if status == "completed":
                return None
            error = _str(payload.get("error_message")) or "no error message"
            attempt = payload.get("attempt")
            tried = f" (attempt {attempt})" if attempt is not None else ""
            return f"request {status or 'ended'}{tried}: {error}"
        if ptype == "mcp_connect_begin":
            servers = payload.get("servers")
            listed = [_str(n) for n in servers] if isinstance(servers, list) else []
            return f"mcp: connecting to {', '.join(listed) or 'no servers'}"
        if ptype == "mcp_connect_end":
            return _mcp_results(payload)
        if ptype == "token_usage":
            session, request = payload.get("session"), payload.get("request")
            total = session.get("total") if isinstance(session, dict) else None
            last = request.get("total") if isinstance(request, dict) else None
            return f"tokens: session total {total}, this request {last}"
        if ptype == "tool_list_ready":
            tools = payload.get("tools")
            names = (
                [t.get("name") for t in tools if isinstance(t, dict)]
                if isinstance(tools, list)
                else []
            )
            return f"tools: {', '.join(_str(n) for n in names) or 'none'}"
        if ptype == "approval_decision":
            return (
                f"approval: {_str(payload.get('decision'))} for {_str(payload.get('tool_call_id'))}"
            )
        if ptype == "compaction_begin":
            mode, reason = _str(payload.get("mode")), _str(payload.get("reason"))
            return f"=== compaction begins ({mode}, {reason}) ==="
        if ptype == "compaction_end":
            return f"=== compaction ends: {_str(payload.get('status'))} ==="
        if ptype == "abort":
            return f"abort: {_str(payload.get('reason')) or 'no reason given'}"
        if ptype == "subagent":
            return f"subagent started: {_str(payload.get('session_id'))}"
        if ptype == "goal_finished":
            outcome = _str(payload.get("outcome"))
            return f"goal finished: {outcome} after {payload.get('rounds')} rounds"
        return f"[{_str(ptype) or 'event'}]"


def render_replay(items: list[ReplayItem]) -> list[str]:
    """The readable lines of ``items`` (already filtered to what should be shown)."""
    return _Renderer(items).run()
