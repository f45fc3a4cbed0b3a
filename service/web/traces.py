"""``GET /web/traces``: every session of the data root from the catalog, filtered, sorted and
paged, or full-text search hits from the search index.

The filters are the JSON listing's (``project``, ``agent``, ``model``,
``status``, ``has_errors``, ``since``, ``until``: :func:`session_filter`), so
the page and ``/api/v1/sessions`` always select the same sessions.  Every
summary passes through :func:`session_item`, the listing's redaction.
"""

from __future__ import annotations

from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from pentrace.infrastructure.analytics.prices import PriceTable, load_prices
from pentrace.infrastructure.catalog.listing import (
    SORT_KEYS,
    STATUS_CHOICES,
    SessionFilter,
    SessionRow,
    list_sessions,
    short_id,
)
from pentrace.infrastructure.operations.documents import session_cost
from pentrace.infrastructure.search.index import SearchIndex
from pentrace.infrastructure.search.query import MARK_END, MARK_START, SearchHit, SearchQuery
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.sessions import session_filter, session_item
from pentrace.service.web.layout import PREFIX, esc, number, page, query_url, session_url

__all__ = ["traces_page"]

PAGE_SIZE: Final = 50
_PRESETS: Final = (
    ("", "any time"),
    ("24h", "last 24 h"),
    ("7d", "7 days"),
    ("30d", "30 days"),
    ("90d", "90 days"),
)
_KEPT: Final = (
    "project",
    "agent",
    "model",
    "status",
    "has_errors",
    "since",
    "until",
    "sort",
    "reverse",
)


def _listing(
    context: ServiceContext, filters: SessionFilter, sort: str, reverse: bool
) -> tuple[list[SessionRow], list[SessionRow], PriceTable]:
    everything = list_sessions(context.root, SessionFilter(), sort, reverse=reverse)
    # The listing's own selection (the walk keeps the project and agent, ``keeps`` the rest).
    chosen = (
        everything
        if filters == SessionFilter()
        else list_sessions(context.root, filters, sort, reverse=reverse)
    )
    return everything, chosen, load_prices()


def _search(context: ServiceContext, query: SearchQuery) -> list[SearchHit]:
    root = context.root
    with SearchIndex(root) as index:
        index.refresh(list(root.iter_sessions()) if root.path.is_dir() else [])
        return index.search(query)


def _cost(row: SessionRow, prices: PriceTable) -> str:
    value = session_cost(row, prices)  # the one session cost every surface shows
    return "-" if value is None else f"{value:.4f}"


def _select(name: str, label: str, options: list[str], chosen: str | None) -> str:
    items = [f'<option value="">any {esc(label)}</option>'] + [
        f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(v)}</option>'
        for v in options
    ]
    return f'<label>{esc(label)} <select name="{name}">{"".join(items)}</select></label>'


def _form(request: Request, rows: list[SessionRow]) -> str:
    q = request.query_params
    since = q.get("since", "")
    preset = since if since in {p for p, _ in _PRESETS} else "custom"
    presets = (
        "".join(
            f'<option value="{v}"{" selected" if v == preset else ""}>{t}</option>'
            for v, t in _PRESETS
        )
        + f'<option value="custom"{" selected" if preset == "custom" else ""}>custom</option>'
    )
    fields = [
        _select("project", "project", sorted({r.project for r in rows}), q.get("project")),
        _select("agent", "agent", sorted({r.agent for r in rows}), q.get("agent")),
        _select(
            "model",
            "model",
            sorted({r.summary.model_id or "" for r in rows} - {""}),
            q.get("model"),
        ),
        _select("status", "status", list(STATUS_CHOICES), q.get("status")),
        _select("has_errors", "errors", ["true", "false"], q.get("has_errors")),
        _select("sort", "sort", list(SORT_KEYS), q.get("sort")),
        f'<label>dates <select name="preset" data-preset>{presets}</select></label>',
        f'<label data-custom>since <input name="since" value="{esc(since)}" '
        'placeholder="2026-11-01 or 7d"></label>',
        f'<label data-custom>until <input name="until" value="{esc(q.get("until", ""))}" '
        'placeholder="2026-11-30"></label>',
        '<label><input type="checkbox" name="reverse" value="true"'
        + (" checked" if q.get("reverse") == "true" else "")
        + "> newest first</label>",
    ]
    return (
        f'<form class="filters" method="get" action="{PREFIX}/traces" role="search">'
        f'<label class="grow">search <input type="search" name="q" value="{esc(q.get("q", ""))}" '
        'placeholder="words, &quot;a phrase&quot;, prefix*" data-search></label>'
        + "".join(fields)
        + '<button type="submit">Apply</button></form>'
    )


def _row(row: SessionRow, prices: PriceTable) -> str:
    item = session_item(row)
    url = session_url(row.project, row.agent, row.session_id)
    errors = "yes" if row.has_errors else ""
    exports = "".join(
        f'<a href="{PREFIX}/export/{url.removeprefix(PREFIX + "/sessions/")}?format={kind}" '
        f"download>{label}</a> "
        for kind, label in (("redacted", "redacted"), ("jsonl", "jsonl"), ("archive", "tar.gz"))
    )
    cells = [
        f'<td><a href="{esc(url)}" data-nav>{esc(short_id(row.session_id))}</a></td>',
        f"<td>{esc(item['project'])}</td><td>{esc(item['agent'])}</td>",
        f"<td>{esc((item['start'] or '')[:19].replace('T', ' '))}</td>",
        f"<td>{esc(item['model'])}</td><td>{esc(item['last_status'])}</td>",
        f'<td class="n">{number(item["turns"])}</td><td class="n">{number(item["tokens"])}</td>',
        f'<td class="n">{_cost(row, prices)}</td><td>{errors}</td>',
        f'<td class="exports">{exports}</td>',
    ]
    return f'<tr data-session="{esc(item["ref"])}">{"".join(cells)}</tr>'


def _hits_html(hits: list[SearchHit]) -> list[str]:
    if not hits:
        return ['<p class="empty">No matches.</p>']
    out = ['<ol class="hits">']
    for hit in hits:
        snippet = (
            esc(hit.snippet).replace(esc(MARK_START), "<mark>").replace(esc(MARK_END), "</mark>")
        )
        url = session_url(
            hit.project,
            hit.agent,
            hit.session_id,
            f"?from={max(hit.position - 5, 1)}#p{hit.position}",
        )
        out.append(
            f'<li><a href="{esc(url)}" data-nav>{esc(hit.project)}/{esc(hit.agent)}/'
            f'{esc(short_id(hit.session_id))}</a> <span class="meta">turn {hit.turn}, '
            f"record {hit.position}, {esc(hit.kind)}</span><p>{snippet}</p></li>"
        )
    return [*out, "</ol>"]


def _pager(request: Request, number_of_page: int, total: int) -> str:
    last = max(0, (total - 1) // PAGE_SIZE)
    kept: dict[str, Any] = {k: request.query_params.get(k) for k in _KEPT}
    links = []

    def link(rel: str, to: int, label: str) -> str:
        url = query_url(f"{PREFIX}/traces", {**kept, "page": to})
        return f'<a rel="{rel}" href="{esc(url)}">{label}</a>'

    if number_of_page > 0:
        links.append(link("prev", number_of_page - 1, "previous"))
    links.append(f"<span>page {number_of_page + 1} of {last + 1}</span>")
    if number_of_page < last:
        links.append(link("next", number_of_page + 1, "next"))
    return f'<nav class="pager" aria-label="pages of sessions">{"".join(links)}</nav>'


def _import_form() -> str:
    return (
        '<details class="import"><summary>Import a trace (.jsonl)</summary>'
        f'<form data-import="{PREFIX}/import"><label>project <input name="project" required>'
        '</label><label>agent <input name="agent" required></label>'
        '<label>file <input type="file" name="file" accept=".jsonl" required></label>'
        '<button type="submit">Import</button><output role="status" data-import-result>'
        '</output></form><p class="meta">Needs the server\'s token (write permission).</p>'
        "</details>"
    )


async def traces_page(request: Request) -> Response:
    """``GET /web/traces``."""
    context: ServiceContext = request.app.state.context
    filters = session_filter(request)
    sort = params.choice(request, "sort", SORT_KEYS) or "start"
    reverse = bool(params.flag(request, "reverse"))
    shown_page = params.integer(request, "page", low=0, high=1_000_000, default=0) or 0
    text = params.text(request, "q", max_chars=500)
    everything, rows, prices = await context.run(_listing, context, filters, sort, reverse)
    body = [_form(request, everything), _import_form()]
    if text:
        query = SearchQuery(text=text, project=filters.project, agent=filters.agent, limit=50)
        hits = await context.run(_search, context, query)
        body += [f"<h2>Search: {len(hits)} hit(s) for “{esc(text)}”</h2>", *_hits_html(hits)]
        return page("Traces", "traces", body)
    start = shown_page * PAGE_SIZE
    head = "".join(
        f'<th scope="col">{name}</th>'
        for name in (
            "session",
            "project",
            "agent",
            "start (UTC)",
            "model",
            "status",
            "turns",
            "tokens",
            "cost",
            "errors",
            "export",
        )
    )
    body += [
        f'<p class="count" data-total="{len(rows)}">'
        f"{len(rows)} of {len(everything)} session(s)</p>",
        f'<div class="scroll"><table class="sessions"><thead><tr>{head}</tr></thead><tbody>',
        *(_row(row, prices) for row in rows[start : start + PAGE_SIZE]),
        "</tbody></table></div>",
        _pager(request, shown_page, len(rows)),
    ]
    return page("Traces", "traces", body)
