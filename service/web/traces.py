"""``GET /web/traces``: every session of the data root from the catalog, filtered, sorted and
paged, or full-text search hits from the search index; and moving traces in and out.

The filters are the JSON listing's (``project``, ``agent``, ``model``,
``status``, ``has_errors``, ``since``, ``until``: :func:`session_filter`), so
the page and ``/api/v1/sessions`` always select the same sessions.  Every
summary passes through :func:`session_item`, the listing's redaction.  Pages
count from 1 (``?page=N``); a page past the last shows the last, and says so.
Newest first unless ``reverse=false``.

``GET /web/export/{project}/{agent}/{id}?format=`` with ``redacted`` (the
default: every record through the redaction policy), ``jsonl`` (the latest
shard's bytes, verbatim) or ``archive`` (a tar.gz of every shard and the
subagent children, as ``pentrace export --archive`` writes it).  The last two
hold the trace as written, credentials included, so they follow ADR 0012: only
a request that carried the bearer token gets them; the page shows them
disabled, with how to log in, to a browser without it.

``POST /web/import?project=&agent=&filename=`` takes the file as the request
body and imports it with :func:`import_session`, the CLI's strict import; a
body that is not a trace (a tar.gz, a JSON document, bytes) is refused with 400
and the strict check's message, and an id that exists under the agent with
the CLI's message.  Importing writes, so it too needs the token.
"""

from __future__ import annotations

import copy
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from pentrace.errors import EnvelopeFormatError, PentraceError, TraceFormatError
from pentrace.infrastructure.operations.documents import PriceTable, cost_flag, load_prices
from pentrace.infrastructure.operations.exports import (
    export_archive,
    export_session,
    import_session,
)
from pentrace.infrastructure.operations.search import (
    MARK_END,
    MARK_START,
    SearchHit,
    SearchQuery,
    search_sessions,
)
from pentrace.infrastructure.operations.sessions import (
    SORT_KEYS,
    STATUS_CHOICES,
    SessionFilter,
    SessionRow,
    list_sessions,
    resolve_session,
    short_id,
)
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.edge.auth import authenticated
from pentrace.service.edge.errors import BadRequest
from pentrace.service.sessions import session_filter, session_item
from pentrace.service.web.layout import PREFIX, cost_note, need_token, page, query_url, session_url

__all__ = ["PAGE_SIZE", "export_route", "import_route", "traces_page"]

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
_EXPORTS: Final = (("redacted", "redacted"), ("jsonl", "jsonl"), ("archive", "tar.gz"))
_FORMATS: Final = tuple(kind for kind, _ in _EXPORTS)
_MAX_UPLOAD: Final = 512 * 1024 * 1024
_CHUNK: Final = 256 * 1024
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")


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
    return search_sessions(context.root, query)[1]


def _row(row: SessionRow) -> dict[str, Any]:
    item = session_item(row)
    path = "/".join(session_url(row.project, row.agent, row.session_id).split("/")[3:])
    return {
        **item,
        "url": session_url(row.project, row.agent, row.session_id),
        "short": short_id(row.session_id),
        "start": (item["start"] or "")[:19].replace("T", " "),
        # The session document's cost (documents.session_cost), as the API and the CLI show it.
        "cost": item["cost"],
        "cost_flag": cost_flag(item),
        "cost_note": cost_note(item),
        "errors": "yes" if row.has_errors else "",
        "exports": [
            (f"{PREFIX}/export/{path}?format={kind}", label, kind != "redacted")
            for kind, label in _EXPORTS
        ],
    }


def _hit(hit: SearchHit) -> dict[str, Any]:
    # The snippet as (text, marked) pieces: the template escapes each and marks the hits.
    first, *parts = hit.snippet.split(MARK_START)
    pieces: list[tuple[str, bool]] = [(first, False)]
    for part in parts:
        marked, _, rest = part.partition(MARK_END)
        pieces += [(marked, True), (rest, False)]
    return {
        "url": session_url(
            hit.project,
            hit.agent,
            hit.session_id,
            f"?from={max(hit.position - 5, 1)}#p{hit.position}",
        ),
        "name": f"{hit.project}/{hit.agent}/{short_id(hit.session_id)}",
        "meta": f"turn {hit.turn}, record {hit.position}, {hit.kind}",
        "pieces": pieces,
    }


def _pager(request: Request, shown: int, last: int) -> dict[str, Any]:
    """Pages count from 1; the links keep the filters."""
    kept = {k: request.query_params.get(k) for k in _KEPT}
    return {
        "page": shown,
        "last": last,
        "previous": query_url(f"{PREFIX}/traces", {**kept, "page": shown - 1}) if shown > 1 else "",
        "next": query_url(f"{PREFIX}/traces", {**kept, "page": shown + 1}) if shown < last else "",
    }


def _form(request: Request, rows: list[SessionRow], reverse: bool) -> dict[str, Any]:
    q = request.query_params
    since = q.get("since", "")
    presets = {value for value, _ in _PRESETS}

    def pairs(values: list[str]) -> list[tuple[str, str]]:
        return [(v, v) for v in values]

    return {
        "q": q.get("q", ""),
        "since": since,
        "until": q.get("until", ""),
        "preset": since if since in presets else "custom",
        "presets": [*_PRESETS, ("custom", "custom")],
        "reverse": "true" if reverse else "false",
        "selects": [
            ("project", "project", pairs(sorted({r.project for r in rows})), q.get("project")),
            ("agent", "agent", pairs(sorted({r.agent for r in rows})), q.get("agent")),
            (
                "model",
                "model",
                pairs(sorted({r.summary.model_id or "" for r in rows} - {""})),
                q.get("model"),
            ),
            ("status", "status", pairs(list(STATUS_CHOICES)), q.get("status")),
            ("has_errors", "errors", pairs(["true", "false"]), q.get("has_errors")),
        ],
        "sorts": pairs(list(SORT_KEYS)),
        "sort": q.get("sort") or "start",
    }


async def traces_page(request: Request) -> Response:
    """``GET /web/traces``."""
    context: ServiceContext = request.app.state.context
    filters = session_filter(request)
    sort = params.choice(request, "sort", SORT_KEYS) or "start"
    given = params.flag(request, "reverse")
    reverse = True if given is None else given  # newest (largest) first unless asked
    asked = params.integer(request, "page", low=1, high=1_000_000, default=1) or 1
    text = params.text(request, "q", max_chars=500)
    everything, rows, prices = await context.run(_listing, context, filters, sort, reverse)
    data: dict[str, Any] = {
        "form": _form(request, everything, reverse),
        "can_write": authenticated(request.scope),
        "search": None,
    }
    if text:
        query = SearchQuery(text=text, project=filters.project, agent=filters.agent, limit=50)
        hits = await context.run(_search, context, query)
        data["search"] = {"text": text, "hits": [_hit(hit) for hit in hits]}
        return page(request, "traces.html", data, title="Traces", active="traces")
    last = max(1, -(-len(rows) // PAGE_SIZE))
    shown = min(asked, last)
    start = (shown - 1) * PAGE_SIZE
    data.update(
        total=len(rows),
        everything=len(everything),
        rows=[_row(row) for row in rows[start : start + PAGE_SIZE]],
        currency=prices.currency,
        pager=_pager(request, shown, last),
        asked=asked,
    )
    return page(request, "traces.html", data, title="Traces", active="traces")


def _chunks(spool: IO[bytes]) -> Iterator[bytes]:
    spool.seek(0)
    try:
        while chunk := spool.read(_CHUNK):
            yield chunk
    finally:
        spool.close()


def _export(context: ServiceContext, reference: str, kind: str) -> tuple[str, IO[bytes]]:
    ref = resolve_session(context.root, reference)
    spool = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)  # noqa: SIM115  # streamed
    if kind == "archive":
        export_archive(context.root, ref.project, ref.agent, ref.session_id, spool)
        return f"{ref.session_id}.tar.gz", spool
    export_session(
        context.root, ref.project, ref.agent, ref.session_id, spool, redacted=kind == "redacted"
    )
    suffix = ".redacted.jsonl" if kind == "redacted" else ".jsonl"
    return ref.session_id + suffix, spool


async def export_route(request: Request) -> Response:
    """``GET /web/export/{project}/{agent}/{session_id}``."""
    context: ServiceContext = request.app.state.context
    kind = params.choice(request, "format", _FORMATS) or "redacted"
    if kind != "redacted":
        need_token(request, f"the verbatim export (format={kind})", "download the redacted export")
    reference = params.session_path(request)
    name, spool = await context.run(_export, context, reference, kind)
    media = "application/gzip" if kind == "archive" else "application/x-ndjson"
    return StreamingResponse(
        _chunks(spool),
        media_type=media,
        headers={
            "Content-Disposition": f'attachment; filename="{name}"',
            "X-Pentrace-Redacted": str(kind == "redacted").lower(),
        },
    )


def _import(context: ServiceContext, project: str, agent: str, source: Path) -> str:
    try:
        result = import_session(context.root, project, agent, source)
    except PentraceError as error:
        # The CLI's message, naming the file as the user named it, not our temporary folder.
        message = error.message.replace(str(source.parent) + "/", "")
        if isinstance(error, TraceFormatError | EnvelopeFormatError):
            # The body is not a trace the strict check takes: the client's mistake (400).
            raise BadRequest(f"import: {message}", hint=error.hint) from None
        shown = copy.copy(error)
        shown.message, shown.args = message, (message,)
        raise shown from None
    return result.session_id


async def import_route(request: Request) -> Response:
    """``POST /web/import``: the body is the trace file."""
    need_token(request, "importing a trace", "import it on the server with `pentrace import`")
    context: ServiceContext = request.app.state.context
    project, agent = params.text(request, "project"), params.text(request, "agent")
    if not project or not agent:
        raise BadRequest(
            "import: expected both project and agent, found "
            + ("neither" if not (project or agent) else "only one"),
            hint="for example POST /web/import?project=demo&agent=coder&filename=trace.jsonl",
        )
    filename = _UNSAFE.sub("_", params.text(request, "filename") or "upload.jsonl")[:100]
    with tempfile.TemporaryDirectory(prefix="pentrace-import-") as folder:
        source = Path(folder) / (filename.lstrip(".") or "upload.jsonl")
        size = 0
        with source.open("wb") as handle:
            async for chunk in request.stream():
                size += len(chunk)
                if size > _MAX_UPLOAD:
                    raise BadRequest(
                        f"import: expected at most {_MAX_UPLOAD} bytes, found more",
                        hint="import large traces with `pentrace import` on the server",
                    )
                handle.write(chunk)
        session_id = await context.run(_import, context, project, agent, source)
    return JSONResponse(
        {
            "session_id": session_id,
            "ref": f"{project}/{agent}/{session_id}",
            "url": session_url(project, agent, session_id),
        },
        status_code=201,
    )
