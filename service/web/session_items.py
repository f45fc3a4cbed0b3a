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
from typing import Final

from pentrace.domain.redaction import redact
from pentrace.projections.audit import Problem
from pentrace.projections.replay import RenderItem, ReplayItem, as_text, build_render_items, draw
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
        self.items = build_render_items(
            items, [redact(item.record.payload()).value for item in items]
        )
        self.base = base
        self.image_cap = image_cap
        self.findings: dict[int, list[Problem]] = {}
        for problem in problems:
            if problem.position is not None:
                self.findings.setdefault(problem.position, []).append(problem)

    def images(self, entry: RenderItem) -> str:
        """The images of ``entry`` (from its redacted payload), each from the image route."""
        return "".join(
            image_html(image, f"{self.base}/images/{entry.position}/{image.index}", self.image_cap)
            for image in entry.images
        )

    @staticmethod
    def who(entry: RenderItem) -> str:
        return esc(as_text(entry.record.role) or "?")

    def text(self, entry: RenderItem) -> str:
        who = self.who(entry)
        banner, rest = _switch_banner(entry.text("text"))
        return f'{banner}<div class="msg {who}"><b>{who}</b>{render_markdown(rest)}</div>'

    def thinking(self, entry: RenderItem) -> str:
        body = entry.thinking
        return (
            f'<details class="thinking"><summary>{self.who(entry)} thinking ({len(body)} chars)'
            f"</summary><pre>{esc(body)}</pre></details>"
        )

    def tool_output(self, entry: RenderItem) -> str:
        return (
            f'<div class="tool"><b>output for {esc(entry.text("tool_call_id"))}</b> '
            "(its call is not in this window)"
            f"{_output(entry.text('output'), self.base)}{self.images(entry)}</div>"
        )

    def image(self, entry: RenderItem) -> str:
        who = self.who(entry)
        return f'<div class="msg {who}"><b>{who}</b>{self.images(entry)}</div>'

    def inline_data(self, entry: RenderItem) -> str:
        mime = entry.text("mime_type") or "data"
        return f'<p class="meta">{self.who(entry)}: [inline {esc(mime)}, not shown]</p>'

    def message(self, entry: RenderItem) -> str:
        ptype = entry.record.ptype
        return f'<p class="meta">{self.who(entry)}: [{esc(ptype or "message")}]</p>'

    def tool_call(self, entry: RenderItem) -> str:
        parts = [
            f'<div class="tool"><b>tool call {esc(entry.text("name"))}</b> '
            f"<code>{esc(entry.text('tool_call_id'))}</code>"
            f"<pre>{esc(entry.text('arguments'))}</pre>"
        ]
        for approval in entry.approvals:
            decision = approval.text("decision")
            parts.append(f'<p class="approval {esc(decision)}">approval: {esc(decision)}</p>')
        output = entry.output
        if output is None:
            parts.append('<p class="meta">output: none recorded in this window</p>')
        else:
            stop = output.text("stop_reason")
            label = f" [{esc(stop)}]" if stop and stop != "completed" else ""
            parts.append(
                f'<p class="out{" failed" if label else ""}">output{label}</p>'
                + _output(output.text("output"), self.base)
                + self.images(output)
            )
        return "".join(parts) + "</div>"

    def request_failed(self, entry: RenderItem) -> str:
        attempt = entry.payload.get("attempt")
        tried = f" (attempt {esc(attempt)})" if attempt is not None else ""
        error = entry.text("error_message") or "no error message"
        return f'<p class="failed">request {esc(entry.text("status"))}{tried}: {esc(error)}</p>'

    def event(self, entry: RenderItem) -> str:
        ptype, payload = entry.record.ptype, entry.payload
        if ptype == "mcp_connect_end":
            results = payload.get("results")
            rows = [
                f"<li>{esc(as_text(r.get('server')))} ({esc(as_text(r.get('transport')))}): "
                f"{esc(as_text(r.get('status')))}"
                + (f", {esc(r.get('tools'))} tool(s)" if r.get("tools") is not None else "")
                + (f" - {esc(as_text(r.get('error')))}" if r.get("error") else "")
                + "</li>"
                for r in (results if isinstance(results, list) else [])
                if isinstance(r, dict)
            ]
            return f'<div class="mcp"><b>MCP connect</b><ul>{"".join(rows)}</ul></div>'
        if ptype == "compaction_begin":
            return (
                f'<p class="compaction">compaction begins ({esc(entry.text("mode"))}, '
                f"{esc(entry.text('reason'))})</p>"
            )
        if ptype == "compaction_end":
            summary = entry.text("summary")
            shown = f"<details><summary>summary</summary>{render_markdown(summary)}</details>"
            return (
                f'<div class="compaction">compaction ends: {esc(entry.text("status"))}'
                f"{shown if summary else ''}</div>"
            )
        if ptype == "abort":
            return f'<p class="failed">abort: {esc(entry.text("reason") or "no reason")}</p>'
        if ptype == "subagent":
            child = entry.text("session_id")
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
            return f'<p class="approval">approval: {esc(entry.text("decision"))}</p>'
        if ptype == "goal_finished":
            return f'<p class="meta">goal finished: {esc(entry.text("outcome"))}</p>'
        return f'<p class="meta">[{esc(as_text(ptype) or "event")}]</p>'

    def session(self, entry: RenderItem) -> str:
        forked = entry.payload.get("forked_from")
        fork = ""
        if isinstance(forked, dict):
            source = as_text(forked.get("session_id"))
            fork = (
                f'<p class="banner">forked from <a href="{PREFIX}/s/{esc(source)}">'
                f"{esc(source)}</a> after turn {esc(forked.get('turn'))}</p>"
            )
        return fork + (
            f'<p class="meta">session {esc(entry.text("session_id"))}, model '
            f"{esc(entry.text('provider'))}/{esc(entry.text('model_id'))}</p>"
        )

    def shard(self, entry: RenderItem) -> str:
        return f'<p class="shard">shard {entry.item.shard:03d} begins: a new context</p>'

    def record(self, entry: RenderItem) -> str:
        kind = as_text(entry.record.kind) or "unknown"
        return f'<p class="meta">[record of type {esc(kind)}]</p>'

    def render(self) -> list[str]:
        out: list[str] = []
        current: int | None = None
        for entry in self.items:
            item = entry.item
            if item.round is not None and item.round != current:
                label = "compaction request" if item.in_compaction else f"turn {item.turn}"
                status = f" ({esc(item.status)})" if item.status else ""
                out.append(
                    f'<h3 class="round {item.state}">{label}, request {item.round}: '
                    f"{_ROUND.get(item.state, item.state)}{status}</h3>"
                )
            current = item.round
            if entry.folded:
                continue
            shown = draw(entry, self)
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
