"""``GET /web/sessions/{project}/{agent}/{id}``: one session for reading.

The replay (:func:`read_replay`) is shown in windows of :data:`WINDOW` records
(``?from=N``; the script fetches the next window as a fragment, so a
100,000-record session opens as fast as a small one); the charts come from
the report's timeline (:func:`build_timeline`), the resume panel from
:func:`resume_trace_file` and :func:`resume_report`, the findings from
:func:`audit_session`.  The live panel follows the SSE endpoint for this
session; the browser's EventSource resumes with ``Last-Event-ID``.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from pentrace.domain.redaction import redact
from pentrace.infrastructure.analytics.prices import load_prices
from pentrace.infrastructure.audit.run import audit_session
from pentrace.infrastructure.catalog.listing import resolve_session
from pentrace.infrastructure.sessions.fork import read_replay, record_at
from pentrace.infrastructure.storage.layout import SessionRef
from pentrace.infrastructure.trace.reader import ParseReport, resume_trace_file
from pentrace.projections.audit import Problem
from pentrace.projections.replay import ReplayItem
from pentrace.projections.resume import resume_report
from pentrace.projections.session_summary import token_delta
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.edge.auth import authenticated
from pentrace.service.web.layout import esc, number, page, session_url
from pentrace.service.web.session_images import path_number
from pentrace.service.web.session_items import render_items
from pentrace.service.web.svg import Chart, render_chart
from pentrace.service.web.transfer import raw_asked

__all__ = ["WINDOW", "record_route", "session_page", "short_route"]

WINDOW: Final = 500


def _window(
    ref: SessionRef, first: int
) -> tuple[list[ReplayItem], list[ReplayItem], list[Problem]]:
    items = read_replay(ref, ParseReport())
    problems = audit_session(ref).problems
    return items, items[first - 1 : first - 1 + WINDOW], problems


def _tokens_chart(items: list[ReplayItem], base: str) -> str:
    """Tokens of each ``token_usage`` record stacked by kind, the running total as a line, and
    the session's cost from the price table (the numbers ``pentrace show`` counts)."""
    deltas: list[tuple[ReplayItem, tuple[int, int, int, int, int]]] = []
    model = ""
    for item in items:
        if item.record.kind == "session_meta" and not model:
            model = str(item.record.payload().get("model_id") or "")
        if item.record.ptype == "token_usage":
            delta = token_delta(item.record.payload())
            if delta is not None:
                deltas.append((item, delta))
    running = 0
    cumulative: list[float | None] = []
    for _, delta in deltas:
        running += delta[4]
        cumulative.append(float(running))
    kinds = ("input", "output", "cache read", "cache write")
    chart = Chart(
        title="Tokens per request by kind (bars) and cumulative tokens (line)",
        labels=[str(n + 1) for n in range(len(deltas))],
        series=[(kind, [float(d[k]) for _, d in deltas]) for k, kind in enumerate(kinds)],
        line=("cumulative tokens", cumulative),
        links=[f"{base}?from={max(i.position - 5, 1)}#p{i.position}" for i, _ in deltas],
    )
    prices = load_prices()
    price = prices.price_for(model)
    sums = [sum(d[k] for _, d in deltas) for k in range(4)]
    cost = (
        f"{price.cost(*sums):.4f} {esc(prices.currency)}"
        if price is not None
        else f"unknown (no price for {esc(model or 'this model')})"
    )
    return (
        render_chart(chart)
        + f'<p class="meta" data-session-tokens="{running}">{number(running)} tokens in '
        f"{len(deltas)} request(s); cost {cost}</p>"
    )


def _resume_panel(ref: SessionRef) -> str:
    report = ParseReport()
    document: dict[str, Any] = resume_report(
        resume_trace_file(ref.shards[-1].path, report=report), report
    )
    synthesized = document["synthesized"]
    tokens = redact(document["session_tokens"]).value
    shown_tokens = (
        ", ".join(f"{k} {number(v)}" for k, v in tokens.items())
        if isinstance(tokens, dict)
        else esc(tokens)
    )
    rows = (
        ("history", f"{len(document['history'])} message(s)"),
        ("carry-over", f"{len(document['carry_over'])} message(s) resent with the next input"),
        (
            "placeholders",
            f"{len(synthesized['history']) + len(synthesized['carry_over'])} "
            "(interrupted tool calls)",
        ),
        ("turns", number(document["session_turns"])),
        ("tokens", f"{shown_tokens}; last request total {number(document['last_request_total'])}"),
        ("context closed", "yes" if document["context_closed"] else "no"),
        ("pending summary", "yes" if document["pending_summary"] is not None else "no"),
        ("dangling compaction", esc(document["dangling_compaction"] or "none")),
        (
            "reader",
            f"{document['parse']['skipped_count']} skipped line(s), torn tail "
            f"{'yes' if document['parse']['torn_tail'] else 'no'}",
        ),
    )
    cells = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in rows)
    return f'<section class="panel" id="resume"><h2>Resume</h2><dl>{cells}</dl></section>'


def _full(context: ServiceContext, reference: str, first: int) -> dict[str, Any]:
    ref = resolve_session(context.root, reference)
    everything, items, problems = _window(ref, first)
    base = session_url(ref.project, ref.agent, ref.session_id)
    total = len(everything)
    return {
        "ref": ref,
        "items": items,
        "total": total,
        "problems": problems,
        "chart": _tokens_chart(everything, base),
        "resume": _resume_panel(ref),
    }


def _more(base: str, first: int, total: int) -> str:
    if first + WINDOW > total:
        return ""
    after = first + WINDOW
    return (
        f'<a class="more" data-more href="{esc(base)}?from={after}&amp;fragment=1" '
        f'data-page="{esc(base)}?from={after}">load records {after} to '
        f"{min(after + WINDOW - 1, total)} of {total}</a>"
    )


def _tail(base: str, first: int, total: int) -> str:
    """When this window reaches the trace's end: where the script fetches newer records from."""
    if first + WINDOW <= total:
        return ""
    return f' data-tail="{esc(base)}" data-next="{total + 1}"'


async def session_page(request: Request) -> Response:
    """``GET /web/sessions/{project}/{agent}/{session_id}`` (``?from=N``, ``?fragment=1``)."""
    context: ServiceContext = request.app.state.context
    first = params.integer(request, "from", low=1, high=100_000_000, default=1) or 1
    reference = params.session_path(request)
    if params.flag(request, "fragment"):
        found = await context.run(resolve_session, context.root, reference)
        everything, items, window_problems = await context.run(_window, found, first)
        total = len(everything)
        url = session_url(found.project, found.agent, found.session_id)
        cap = context.settings.image_max_bytes
        return HTMLResponse(
            "".join([*render_items(items, url, window_problems, cap), _more(url, first, total)]),
            headers={"X-Pentrace-Next": str(items[-1].position + 1 if items else first)},
        )
    data = await context.run(_full, context, reference, first)
    ref: SessionRef = data["ref"]
    base = session_url(ref.project, ref.agent, ref.session_id)
    problems: list[Problem] = data["problems"]
    live = f"/api/v1/events/sse?session_id={quote(ref.key.reference, safe='')}"
    findings = "".join(
        f'<li class="{esc(p.severity)}">{esc(p.code)}: {esc(p.message)}'
        + (
            f' (<a href="{esc(base)}?from={max(p.position - 5, 1)}#p{p.position}">'
            f"record {p.position}</a>)"
            if p.position
            else ""
        )
        + "</li>"
        for p in problems
    )
    earlier = (
        f'<a class="more" href="{esc(base)}?from={max(first - WINDOW, 1)}">earlier records</a>'
        if first > 1
        else ""
    )
    body = [
        f'<p class="meta">{esc(ref.project)} / {esc(ref.agent)} / '
        f"<code>{esc(ref.session_id)}</code>, "
        f"{data['total']} record(s) in {len(ref.shards)} shard(s)</p>",
        '<div class="panels">',
        f'<section class="panel" id="tokens"><h2>Tokens</h2>{data["chart"]}</section>',
        data["resume"],
        f'<section class="panel" id="audit"><h2>Audit</h2>'
        f"{'<ul>' + findings + '</ul>' if findings else '<p>No findings.</p>'}</section>",
        f'<section class="panel" id="live" data-live="{esc(live)}"><h2>Live</h2>'
        '<p data-live-state role="status">connecting...</p>'
        '<ol class="live" data-live-events></ol></section>',
        "</div>",
        f'<section id="records" aria-label="records"{_tail(base, first, data["total"])}>'
        f"<h2>Records</h2>{_raw_note(request)}{earlier}",
        *render_items(data["items"], base, problems, context.settings.image_max_bytes),
        _more(base, first, data["total"]),
        "</section>",
    ]
    return page(f"Session {ref.session_id}", "traces", body)


def _record(context: ServiceContext, reference: str, position: int) -> Any:
    return record_at(resolve_session(context.root, reference), position).value()


def _raw_note(request: Request) -> str:
    """Why the page offers no verbatim record, when it does not (ADR 0012)."""
    if authenticated(request.scope):
        return ""
    return (
        '<p class="meta" data-raw-note>Records and images are shown redacted. The verbatim '
        "record needs the bearer token: start the server with PENTRACE_API_TOKEN (or "
        "--token-file) and log in.</p>"
    )


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
