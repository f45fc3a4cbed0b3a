"""One window of a session's replay as HTML: rounds marked committed, dropped or open, text as
safe Markdown, thinking collapsed, images (:mod:`.session_images`), tool calls paired with
approvals and outputs, truncation markers, aborts, retries, MCP results, compactions, shard
boundaries and subagent links.

Every payload is redacted (:func:`pentrace.domain.redaction.redact`) before any of it is
shown; the raw record is fetched on demand (``data-raw``), redacted too unless the
request carries the token (ADR 0012).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from pentrace.domain.omnimessage.images import record_images
from pentrace.domain.redaction import redact
from pentrace.projections.audit_problem import Problem
from pentrace.projections.replay_view import ReplayItem, pair_calls
from pentrace.service.web.layout import PREFIX, esc, number
from pentrace.service.web.markdown import render_markdown
from pentrace.service.web.output import archive_link
from pentrace.service.web.session_images import image_html

__all__ = ["render_items"]

_MARKER: Final = re.compile(r"\[output (?:truncated|archived|archive failed)[^\]\n]*\]")
_SWITCH: Final = re.compile(r"\[model_switch_from\]\n(?P<block>.*?)\[/model_switch_from\]\n*", re.S)
_ROUND: Final = {
    "committed": "committed",
    "dropped": "dropped: not in the committed history",
    "open": "open: never ended (a crash, or still running)",
    "pending": "pending input",
}


def _s(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _switch_banner(text: str) -> tuple[str, str]:
    """A banner for a model switch's ``[model_switch_from]`` block, and the text after it."""
    match = _SWITCH.match(text)
    if match is None:
        return "", text
    fields = dict(line.split(": ", 1) for line in match.group("block").splitlines() if ": " in line)
    source = fields.get("session_id", "")
    banner = (
        f'<p class="banner">model switch from {esc(fields.get("previous_model", "?"))}; '
        f'source session <a href="{PREFIX}/s/{esc(source)}">{esc(source)}</a></p>'
    )
    return banner, text[match.end() :]


def _output(text: str, base: str) -> str:
    shown = esc(text)
    marked = _MARKER.sub(lambda m: f'<mark class="truncated">{m.group(0)}</mark>', shown)
    return f"<pre>{marked}</pre>{archive_link(base, text)}"


class _Window:
    def __init__(
        self, items: Sequence[ReplayItem], base: str, problems: list[Problem], image_cap: int
    ) -> None:
        self.items = items
        self.base = base
        self.image_cap = image_cap
        self.payloads = [redact(item.record.payload()).value for item in items]
        self.pairs = pair_calls(items)
        self.findings: dict[int, list[Problem]] = {}
        for problem in problems:
            if problem.position is not None:
                self.findings.setdefault(problem.position, []).append(problem)
        self.used: set[int] = set()

    def images(self, position: int, ptype: Any, payload: dict[str, Any]) -> str:
        """The images of the record at ``position`` (its redacted ``payload``)."""
        return "".join(
            image_html(image, f"{self.base}/images/{position}/{image.index}", self.image_cap)
            for image in record_images(ptype, payload)
        )

    def message(self, index: int, item: ReplayItem, payload: dict[str, Any]) -> str:
        who = esc(_s(item.record.role) or "?")
        ptype = item.record.ptype
        if ptype == "text":
            banner, rest = _switch_banner(_s(payload.get("text")))
            text = render_markdown(rest)
            return f'{banner}<div class="msg {who}"><b>{who}</b>{text}</div>'
        if ptype in ("thinking", "inline_thinking"):
            body = _s(payload.get("thinking", payload.get("data")))
            return (
                f'<details class="thinking"><summary>{who} thinking ({len(body)} chars)</summary>'
                f"<pre>{esc(body)}</pre></details>"
            )
        if ptype == "tool_call":
            return self.tool_call(payload)
        if ptype == "tool_call_output":
            return (
                f'<div class="tool"><b>output for {esc(_s(payload.get("tool_call_id")))}</b> '
                "(its call is not in this window)"
                f"{_output(_s(payload.get('output')), self.base)}"
                f"{self.images(item.position, ptype, payload)}</div>"
            )
        images = self.images(item.position, ptype, payload)
        if images:
            return f'<div class="msg {who}"><b>{who}</b>{images}</div>'
        if ptype == "inline_data":
            mime = _s(payload.get("mime_type")) or "data"
            return f'<p class="meta">{who}: [inline {esc(mime)}, not shown]</p>'
        return f'<p class="meta">{who}: [{esc(ptype or "message")}]</p>'

    def tool_call(self, payload: dict[str, Any]) -> str:
        call = _s(payload.get("tool_call_id"))
        parts = [
            f'<div class="tool"><b>tool call {esc(_s(payload.get("name")))}</b> '
            f"<code>{esc(call)}</code><pre>{esc(_s(payload.get('arguments')))}</pre>"
        ]
        for approval in self.pairs.approvals.get(call, []):
            self.used.add(approval)
            decision = _s(self.payloads[approval].get("decision"))
            parts.append(f'<p class="approval {esc(decision)}">approval: {esc(decision)}</p>')
        output = self.pairs.outputs.get(call)
        if output is None:
            parts.append('<p class="meta">output: none recorded in this window</p>')
        else:
            self.used.add(output)
            out = self.payloads[output]
            stop = _s(out.get("stop_reason"))
            label = f" [{esc(stop)}]" if stop and stop != "completed" else ""
            parts.append(
                f'<p class="out{" failed" if label else ""}">output{label}</p>'
                + _output(_s(out.get("output")), self.base)
                + self.images(self.items[output].position, "tool_call_output", out)
            )
        return "".join(parts) + "</div>"

    def event(self, item: ReplayItem, payload: dict[str, Any]) -> str | None:
        ptype = item.record.ptype
        if ptype == "request_begin":
            return None
        if ptype == "request_end":
            status = _s(payload.get("status"))
            if status == "completed":
                return None
            attempt = payload.get("attempt")
            tried = f" (attempt {esc(attempt)})" if attempt is not None else ""
            error = _s(payload.get("error_message")) or "no error message"
            return f'<p class="failed">request {esc(status)}{tried}: {esc(error)}</p>'
        if ptype == "mcp_connect_end":
            results = payload.get("results")
            rows = [
                f"<li>{esc(_s(r.get('server')))} ({esc(_s(r.get('transport')))}): "
                f"{esc(_s(r.get('status')))}"
                + (f", {esc(r.get('tools'))} tool(s)" if r.get("tools") is not None else "")
                + (f" - {esc(_s(r.get('error')))}" if r.get("error") else "")
                + "</li>"
                for r in (results if isinstance(results, list) else [])
                if isinstance(r, dict)
            ]
            return f'<div class="mcp"><b>MCP connect</b><ul>{"".join(rows)}</ul></div>'
        if ptype == "compaction_begin":
            return (
                f'<p class="compaction">compaction begins ({esc(_s(payload.get("mode")))}, '
                f"{esc(_s(payload.get('reason')))})</p>"
            )
        if ptype == "compaction_end":
            summary = _s(payload.get("summary"))
            shown = f"<details><summary>summary</summary>{render_markdown(summary)}</details>"
            return (
                f'<div class="compaction">compaction ends: {esc(_s(payload.get("status")))}'
                f"{shown if summary else ''}</div>"
            )
        if ptype == "abort":
            return f'<p class="failed">abort: {esc(_s(payload.get("reason")) or "no reason")}</p>'
        if ptype == "subagent":
            child = _s(payload.get("session_id"))
            link = f'<a href="{PREFIX}/s/{esc(child)}">{esc(child)}</a>'
            return f'<p class="subagent">subagent: {link}</p>'
        if ptype == "token_usage":
            request, session = payload.get("request"), payload.get("session")
            last = request.get("total") if isinstance(request, dict) else None
            total = session.get("total") if isinstance(session, dict) else None
            return (
                f'<p class="meta">tokens: this request {number(last)}, session {number(total)}</p>'
            )
        if ptype == "approval_decision":
            return f'<p class="approval">approval: {esc(_s(payload.get("decision")))}</p>'
        if ptype == "goal_finished":
            return f'<p class="meta">goal finished: {esc(_s(payload.get("outcome")))}</p>'
        return f'<p class="meta">[{esc(_s(ptype) or "event")}]</p>'

    def body(self, index: int, item: ReplayItem) -> str | None:
        payload = self.payloads[index]
        payload = payload if isinstance(payload, dict) else {}
        kind = item.record.kind
        if kind == "model_msg":
            return self.message(index, item, payload)
        if kind == "session_meta":
            forked = payload.get("forked_from")
            fork = ""
            if isinstance(forked, dict):
                source = _s(forked.get("session_id"))
                fork = (
                    f'<p class="banner">forked from <a href="{PREFIX}/s/{esc(source)}">'
                    f"{esc(source)}</a> after turn {esc(forked.get('turn'))}</p>"
                )
            if item.position == 1:
                return fork + (
                    f'<p class="meta">session {esc(_s(payload.get("session_id")))}, model '
                    f"{esc(_s(payload.get('provider')))}/{esc(_s(payload.get('model_id')))}</p>"
                )
            return f'<p class="shard">shard {item.shard:03d} begins: a new context</p>'
        if kind == "event_msg":
            return self.event(item, payload)
        return f'<p class="meta">[record of type {esc(_s(kind) or "unknown")}]</p>'

    def render(self) -> list[str]:
        out: list[str] = []
        current: int | None = None
        for index, item in enumerate(self.items):
            if item.round is not None and item.round != current:
                label = "compaction request" if item.in_compaction else f"turn {item.turn}"
                status = f" ({esc(item.status)})" if item.status else ""
                out.append(
                    f'<h3 class="round {item.state}">{label}, request {item.round}: '
                    f"{_ROUND.get(item.state, item.state)}{status}</h3>"
                )
            current = item.round
            if index in self.used:
                continue
            shown = self.body(index, item)
            findings = "".join(
                f'<p class="finding {esc(p.severity)}">audit {esc(p.severity)}: {esc(p.code)}: '
                f"{esc(p.message)}</p>"
                for p in self.findings.get(item.position, [])
            )
            if shown is None and not findings:
                continue
            out.append(
                f'<div class="item {item.state}" id="p{item.position}" tabindex="-1" data-nav>'
                f'<span class="pos">#{item.position}</span>{shown or ""}{findings}'
                f'<button type="button" class="raw" data-raw="{esc(self.base)}/records/'
                f'{item.position}">raw record</button></div>'
            )
        return out


def render_items(
    items: Sequence[ReplayItem], base: str, problems: list[Problem], image_cap: int
) -> list[str]:
    """The HTML of ``items`` (a window of the replay); ``base`` is the session page's URL;
    images larger than ``image_cap`` bytes are named, not requested."""
    return _Window(items, base, problems, image_cap).render()
