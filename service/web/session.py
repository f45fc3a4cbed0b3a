"""``GET /web/sessions/{project}/{agent}/{id}``: one session for reading.

The replay (:func:`read_replay`) is shown in windows of :data:`WINDOW` records
(``?from=N``; the script fetches the next window as a fragment, so a
100,000-record session opens as fast as a small one), each request round under
a heading that the outline at the top links to (``#rN``) and the script can
collapse.  The records are drawn by :mod:`projections.replay_items` through
the macros of ``templates/items.html``: rounds marked committed, dropped or
open, text as safe Markdown, thinking collapsed, images (:mod:`.media`), tool
calls paired with approvals and outputs, truncation markers, aborts, retries,
MCP results, compactions, shard boundaries and subagent links.  Every payload
is redacted (:func:`redact`) before any of it is shown; the raw record is
fetched on demand (``data-raw``), redacted too unless the request carries the
token (ADR 0012).

The tokens chart has a column per request, numbered as the round headings
are; the resume panel comes from :func:`resume_trace_file` and
:func:`resume_report`, the findings from :func:`audit_session`.  The live
panel follows the SSE endpoint for this session; the browser's EventSource
resumes with ``Last-Event-ID``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import quote

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from pentrace.domain.redaction import redact
from pentrace.infrastructure.operations.audit import audit_session
from pentrace.infrastructure.operations.documents import (
    cost_fields,
    cost_flag,
    load_prices,
    session_cost,
)
from pentrace.infrastructure.operations.sessions import (
    ParseReport,
    SessionRef,
    read_replay,
    record_at,
    resolve_session,
    resume_trace_file,
    short_id,
)
from pentrace.infrastructure.operations.stats import Chart, render_chart
from pentrace.projections.audit import Problem
from pentrace.projections.replay import RenderItem, ReplayItem, as_text, build_render_items, draw
from pentrace.projections.resume import resume_report
from pentrace.projections.session_summary import SummaryFold, token_delta
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.edge.auth import authenticated
from pentrace.service.web.layout import (
    TEMPLATES,
    cost_note,
    number,
    page,
    raw_asked,
    session_url,
)
from pentrace.service.web.markdown import render_markdown
from pentrace.service.web.media import archive_name, image_view, path_number

__all__ = ["WINDOW", "record_route", "render_items", "session_page", "short_route"]

WINDOW: Final = 500
_OUTLINE_OPEN: Final = 20  # rounds up to which the outline starts open
_MARKER: Final = re.compile(r"\[output (?:truncated|archived|archive failed)[^\]\n]*\]")
_SWITCH: Final = re.compile(r"\[model_switch_from\]\n(?P<block>.*?)\[/model_switch_from\]\n*", re.S)
_KINDS: Final = ("input", "output", "cache_read", "cache_write")


def _window(
    ref: SessionRef, first: int
) -> tuple[list[ReplayItem], list[ReplayItem], list[Problem]]:
    items = read_replay(ref, ParseReport())
    problems = audit_session(ref).problems
    return items, items[first - 1 : first - 1 + WINDOW], problems


def round_label(item: ReplayItem) -> str:
    """A round's name: a committed one is the turn it completed; a dropped or open one is an
    attempt at the next turn (never "turn 0")."""
    if item.in_compaction:
        return f"compaction request, request {item.round}"
    turn = item.turn if item.state == "committed" else item.turn + 1
    return f"turn {turn}, request {item.round}"


def _outline(everything: Sequence[ReplayItem], base: str, first: int) -> list[dict[str, Any]]:
    """Every round of the session: its label, state and where its heading is."""
    rounds: list[dict[str, Any]] = []
    seen: set[int] = set()
    for item in everything:
        if item.round is None or item.round in seen:
            continue
        seen.add(item.round)
        inside = first <= item.position < first + WINDOW
        rounds.append(
            {
                "round": item.round,
                "label": round_label(item),
                "state": item.state,
                "status": item.status or "",
                "href": f"#r{item.round}"
                if inside
                else f"{base}?from={item.position}#r{item.round}",
            }
        )
    return rounds


def _tokens(everything: Sequence[ReplayItem], base: str) -> dict[str, Any]:
    """Tokens per request stacked by kind, the running total as a line, and the session's cost
    (the numbers ``pentrace show`` counts).  A ``token_usage`` record counts for the request
    it came in or right after, so a column is numbered as its round's heading."""
    columns: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    current = 0
    for item in everything:
        record = item.record
        if item.round is not None:
            current = item.round
            starts.setdefault(item.round, item.position)
            columns.setdefault(item.round, [0, 0, 0, 0, 0])
        if record.ptype == "token_usage":
            delta = token_delta(record.payload())
            if delta is not None:
                column = columns.setdefault(current, [0, 0, 0, 0, 0])
                starts.setdefault(current, item.position)
                for k in range(5):
                    column[k] += delta[k]
    order = sorted(columns)
    running, cumulative = 0, list[float | None]()
    for request in order:
        running += columns[request][4]
        cumulative.append(float(running))
    chart = Chart(
        title="Tokens per request by kind (bars) and cumulative tokens (line)",
        labels=[f"request {n}" if n else "before request 1" for n in order],
        series=[
            (kind.replace("_", " "), [float(columns[n][k]) for n in order])
            for k, kind in enumerate(_KINDS)
        ],
        line=("cumulative tokens", cumulative),
        links=[f"{base}?from={max(starts[n] - 5, 1)}#r{n}" for n in order],
        ticks=[str(n) for n in order] if len(order) <= 40 else None,
        x_title="request",
        y_title="tokens per request",
        line_title="cumulative tokens",
    )
    summary = SummaryFold()
    summary.feed(item.record for item in everything)
    # The session's cost as every surface works it out (documents.session_cost).
    finished = summary.finish()
    cost = cost_fields(session_cost(finished, load_prices()))
    return {
        "chart": render_chart(chart),
        "total": running,
        "requests": sum(1 for n in order if columns[n][4]),
        **cost,
        "cost_flag": cost_flag(cost),
        "cost_note": cost_note(cost),
        "model": finished.model_id or "",
    }


def _resume(ref: SessionRef) -> list[tuple[str, str]]:
    report = ParseReport()
    document: dict[str, Any] = resume_report(
        resume_trace_file(ref.shards[-1].path, report=report), report
    )
    synthesized = document["synthesized"]
    tokens = redact(document["session_tokens"]).value
    shown_tokens = (
        ", ".join(f"{k} {number(v)}" for k, v in tokens.items())
        if isinstance(tokens, dict)
        else str(tokens)
    )
    placeholders = len(synthesized["history"]) + len(synthesized["carry_over"])
    return [
        ("history", f"{len(document['history'])} message(s)"),
        ("carry-over", f"{len(document['carry_over'])} message(s) resent with the next input"),
        ("placeholders", f"{placeholders} (interrupted tool calls)"),
        ("turns", number(document["session_turns"])),
        ("tokens", f"{shown_tokens}; last request total "
                   f"{number(document['last_request_total'])}"),
        ("context closed", "yes" if document["context_closed"] else "no"),
        ("pending summary", "yes" if document["pending_summary"] is not None else "no"),
        ("dangling compaction", str(document["dangling_compaction"] or "none")),
        ("reader", f"{document['parse']['skipped_count']} skipped line(s), torn tail "
                   f"{'yes' if document['parse']['torn_tail'] else 'no'}"),
    ]  # fmt: skip


def _full(context: ServiceContext, reference: str, first: int) -> dict[str, Any]:
    ref = resolve_session(context.root, reference)
    everything, items, problems = _window(ref, first)
    base = session_url(ref.project, ref.agent, ref.session_id)
    return {
        "ref": ref,
        "items": items,
        "total": len(everything),
        "problems": problems,
        "tokens": _tokens(everything, base),
        "outline": _outline(everything, base, first),
        "resume": _resume(ref),
    }


class _Window:
    """A window's items drawn by the macros of ``items.html`` (a :class:`Formatter`)."""

    def __init__(
        self, items: Sequence[ReplayItem], base: str, problems: list[Problem], image_cap: int
    ) -> None:
        self.items = build_render_items(
            items, [redact(item.record.payload()).value for item in items]
        )
        self.base = base
        self.image_cap = image_cap
        self.macros: Any = TEMPLATES.get_template("items.html").module
        self.findings: dict[int, list[Problem]] = {}
        for problem in problems:
            if problem.position is not None:
                self.findings.setdefault(problem.position, []).append(problem)
        # Where each call of the window stands: an output written before its call is drawn
        # with the call, and points there.
        self.calls = {
            entry.text("tool_call_id"): entry.position
            for entry in self.items
            if entry.kind == "tool_call"
        }

    def _images(self, entry: RenderItem | None) -> list[dict[str, str]]:
        if entry is None:
            return []
        return [
            image_view(image, f"{self.base}/images/{entry.position}/{image.index}", self.image_cap)
            for image in entry.images
        ]

    def _output(self, entry: RenderItem | None) -> dict[str, Any] | None:
        if entry is None:
            return None
        text = entry.text("output")
        pieces, at = [], 0
        for match in _MARKER.finditer(text):
            pieces += [(text[at : match.start()], False), (match.group(0), True)]
            at = match.end()
        stop = entry.text("stop_reason")
        return {
            "pieces": [*pieces, (text[at:], False)],
            "archive": archive_name(text),
            "stop": stop if stop and stop != "completed" else "",
            "images": self._images(entry),
        }

    @staticmethod
    def who(entry: RenderItem) -> str:
        return as_text(entry.record.role) or "?"

    def text(self, entry: RenderItem) -> Markup:
        text = entry.text("text")
        match = _SWITCH.match(text)
        switch = None
        if match is not None:
            lines = match.group("block").splitlines()
            switch = dict(line.split(": ", 1) for line in lines if ": " in line)
            text = text[match.end() :]
        body = render_markdown(text)
        return self.macros.text(self.who(entry), body, switch)  # type: ignore[no-any-return]

    def thinking(self, entry: RenderItem) -> Markup:
        return self.macros.thinking(self.who(entry), entry.thinking)  # type: ignore[no-any-return]

    def tool_output(self, entry: RenderItem) -> Markup:
        call = self.calls.get(entry.text("tool_call_id"))
        return self.macros.tool_output(  # type: ignore[no-any-return]
            entry.text("tool_call_id"), call, self._output(entry), self.base
        )

    def image(self, entry: RenderItem) -> Markup:
        return self.macros.images_of(self.who(entry), self._images(entry))  # type: ignore[no-any-return]

    def inline_data(self, entry: RenderItem) -> Markup:
        what = entry.text("mime_type") or "data"
        return self.macros.meta(f"{self.who(entry)}: [inline {what}, not shown]")  # type: ignore[no-any-return]

    def message(self, entry: RenderItem) -> Markup:
        what = entry.record.ptype or "message"
        return self.macros.meta(f"{self.who(entry)}: [{what}]")  # type: ignore[no-any-return]

    def tool_call(self, entry: RenderItem) -> Markup:
        return self.macros.tool_call(  # type: ignore[no-any-return]
            entry.text("name"),
            entry.text("tool_call_id"),
            entry.text("arguments"),
            [approval.text("decision") for approval in entry.approvals],
            self._output(entry.output),
            self.base,
        )

    def request_failed(self, entry: RenderItem) -> Markup:
        attempt = entry.payload.get("attempt")
        return self.macros.request_failed(  # type: ignore[no-any-return]
            entry.text("status"),
            "" if attempt is None else str(attempt),
            entry.text("error_message") or "no error message",
        )

    def event(self, entry: RenderItem) -> Markup:
        payload = entry.payload
        results = payload.get("results")
        request, session = payload.get("request"), payload.get("session")
        return self.macros.event(  # type: ignore[no-any-return]
            as_text(entry.record.ptype),
            entry,
            [r for r in (results if isinstance(results, list) else []) if isinstance(r, dict)],
            render_markdown(entry.text("summary")),
            request.get("total") if isinstance(request, dict) else None,
            session.get("total") if isinstance(session, dict) else None,
        )

    def session(self, entry: RenderItem) -> Markup:
        forked = entry.payload.get("forked_from")
        fork = None
        if isinstance(forked, dict):
            fork = {"source": as_text(forked.get("session_id")), "turn": forked.get("turn")}
        return self.macros.session(entry, fork)  # type: ignore[no-any-return]

    def shard(self, entry: RenderItem) -> Markup:
        return self.macros.meta_shard(f"{entry.item.shard:03d}")  # type: ignore[no-any-return]

    def record(self, entry: RenderItem) -> Markup:
        kind = as_text(entry.record.kind) or "unknown"
        return self.macros.meta(f"[record of type {kind}]")  # type: ignore[no-any-return]

    def rows(self) -> list[dict[str, Any]]:
        """The window as headings and drawn items, in order."""
        out: list[dict[str, Any]] = []
        current: int | None = None
        for entry in self.items:
            item = entry.item
            if item.round is not None and item.round != current:
                out.append(
                    {
                        "heading": round_label(item),
                        "round": item.round,
                        "state": item.state,
                        "status": item.status or "",
                    }
                )
            current = item.round
            if entry.folded:
                continue
            shown = draw(entry, self)
            findings = self.findings.get(item.position, [])
            if shown is None and not findings:
                continue
            out.append({"item": item, "shown": shown or "", "findings": findings})
        return out


def render_items(
    items: Sequence[ReplayItem], base: str, problems: list[Problem], image_cap: int
) -> Markup:
    """The HTML of ``items`` (a window of the replay); ``base`` is the session page's URL;
    images larger than ``image_cap`` bytes are named, not requested."""
    window = _Window(items, base, problems, image_cap)
    return window.macros.window(window.rows(), base)  # type: ignore[no-any-return]


def _more(base: str, first: int, total: int) -> dict[str, Any] | None:
    if first + WINDOW > total:
        return None
    after = first + WINDOW
    return {"after": after, "last": min(after + WINDOW - 1, total), "total": total}


async def session_page(request: Request) -> Response:
    """``GET /web/sessions/{project}/{agent}/{session_id}`` (``?from=N``, ``?fragment=1``)."""
    context: ServiceContext = request.app.state.context
    first = params.integer(request, "from", low=1, high=100_000_000, default=1) or 1
    reference = params.session_path(request)
    cap = context.settings.image_max_bytes
    if params.flag(request, "fragment"):
        found = await context.run(resolve_session, context.root, reference)
        everything, items, window_problems = await context.run(_window, found, first)
        url = session_url(found.project, found.agent, found.session_id)
        fragment = TEMPLATES.get_template("items.html").module.fragment(  # type: ignore[attr-defined]
            render_items(items, url, window_problems, cap), url, _more(url, first, len(everything))
        )
        return HTMLResponse(
            str(fragment),
            headers={"X-Pentrace-Next": str(items[-1].position + 1 if items else first)},
        )
    data = await context.run(_full, context, reference, first)
    ref: SessionRef = data["ref"]
    base = session_url(ref.project, ref.agent, ref.session_id)
    total = data["total"]
    short = short_id(ref.session_id)
    view = {
        **data,
        "base": base,
        "first": first,
        "short": short,
        "window": WINDOW,
        "outline_open": len(data["outline"]) <= _OUTLINE_OPEN,
        "live": f"/api/v1/events/sse?session_id={quote(ref.key.reference, safe='')}",
        "records": render_items(data["items"], base, data["problems"], cap),
        "more": _more(base, first, total),
        "tail": first + WINDOW > total,
        "raw_note": not authenticated(request.scope),
    }
    title = f"{short} ({ref.project}/{ref.agent})"
    return page(request, "session.html", view, title=title, active="traces")


def _record(context: ServiceContext, reference: str, position: int) -> Any:
    return record_at(resolve_session(context.root, reference), position).value()


async def record_route(request: Request) -> Response:
    """``GET .../records/{position}``: one record, redacted; ``?raw=1`` needs the token (403)."""
    context: ServiceContext = request.app.state.context
    position = path_number(request, "position", "a record position (1, 2, ...)", 1)
    raw = raw_asked(
        request, "the verbatim record (raw=1)", "open the record without raw=1, redacted"
    )
    value = await context.run(_record, context, params.session_path(request), position)
    shown = value if raw else redact(value).value
    return JSONResponse(
        {"position": position, "redacted": not raw, "record": shown},
        headers={"X-Pentrace-Redacted": str(not raw).lower()},
    )


async def short_route(request: Request) -> Response:
    """``GET /web/s/{id}``: the Session page of a session named by id or short id."""
    context: ServiceContext = request.app.state.context
    ref = await context.run(resolve_session, context.root, params.path_text(request, "session_id"))
    return RedirectResponse(session_url(ref.project, ref.agent, ref.session_id), status_code=303)
