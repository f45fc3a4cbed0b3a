"""Read-only session endpoints over the catalog and the trace files.

``GET /api/v1/sessions`` lists (filters and sort as ``pentrace sessions list``),
``GET /api/v1/sessions/{id}`` shows one session's meta and counters (a unique
id prefix or 8-hex token works; ``/api/v1/sessions/{project}/{agent}/{id}``
names the owner when the id exists under several), ``GET /api/v1/sessions/{id}/trace``
streams a shard record by record through the redaction policy, or verbatim
(``?redacted=false``) to a caller that sent the bearer token (ADR 0012), and
``GET /api/v1/sessions/{id}/archive`` sends the tar.gz of ``pentrace export
--archive`` to such a caller.  The documents and the bytes come from
:mod:`pentrace.infrastructure.operations`, as the CLI's do.
Summaries pass through the same redaction before they leave, so a secret that
slipped into meta (a workspace path with a token in it) is hidden here too.
Every request value is read through :mod:`pentrace.service.edge.params`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from pentrace.domain.redaction import redact
from pentrace.infrastructure.operations.documents import (
    SERVICE_ALIASES,
    session_detail,
    session_document,
    with_aliases,
)
from pentrace.infrastructure.operations.exports import archive_export, trace_export
from pentrace.infrastructure.operations.sessions import (
    SORT_KEYS,
    SessionFilter,
    SessionRow,
    list_sessions,
    read_row,
    resolve_session,
)
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.edge.auth import authenticated
from pentrace.service.edge.errors import ErrorWriter, Forbidden

__all__ = [
    "archive_route",
    "list_route",
    "routes",
    "session_filter",
    "session_item",
    "show_route",
    "trace_route",
]

_MAX_SHARD: Final = 1_000_000
_MAX_LIMIT: Final = 1_000_000


def session_item(row: SessionRow) -> dict[str, Any]:
    """One list entry: the session document (ADR 0036) with the service's old names, redacted."""
    item: dict[str, Any] = redact(with_aliases(session_document(row), SERVICE_ALIASES)).value
    return item


def session_filter(request: Request) -> SessionFilter:
    """The catalog filters of a request's query (the web Traces page reads the same ones)."""
    now = datetime.now(UTC)
    # A bad status raises UsageError, which the app answers with 400.
    return SessionFilter(
        project=params.text(request, "project"),
        agent=params.text(request, "agent"),
        since=params.time_bound(request, "since", now),
        until=params.time_bound(request, "until", now),
        model=params.text(request, "model"),
        status=params.text(request, "status"),
        has_errors=params.flag(request, "has_errors"),
    )


async def list_route(request: Request) -> Response:
    """``GET /api/v1/sessions``."""
    context: ServiceContext = request.app.state.context
    filters = session_filter(request)
    sort = params.choice(request, "sort", SORT_KEYS) or "start"
    reverse = bool(params.flag(request, "reverse"))
    limit = params.integer(request, "limit", low=1, high=_MAX_LIMIT)
    rows = await context.run(_list, context, filters, sort, reverse)
    shown = rows if limit is None else rows[:limit]
    return JSONResponse({"sessions": [session_item(row) for row in shown], "total": len(rows)})


def _list(
    context: ServiceContext, filters: SessionFilter, sort: str, reverse: bool
) -> list[SessionRow]:
    return list_sessions(context.root, filters, sort, reverse=reverse)


async def show_route(request: Request) -> Response:
    """``GET /api/v1/sessions/{id}``: meta, counters and files of one session."""
    context: ServiceContext = request.app.state.context
    errors: ErrorWriter = request.app.state.errors
    ref = await context.run(resolve_session, context.root, _reference(request))
    row = await context.run(read_row, ref)
    detail: dict[str, Any] = redact(
        with_aliases(session_detail(context.root, ref, row), SERVICE_ALIASES)
    ).value
    if row.problem is not None:
        # A reader's message names files: relative to the data root, like error bodies.
        detail["problem"] = errors.scrub(detail["problem"])
    return JSONResponse(detail)


def _verbatim_allowed(request: Request, what: str, instead: str) -> None:
    if not authenticated(request.scope):
        raise Forbidden(
            f"{what} holds unredacted credentials: expected a request with the bearer token, "
            "found a server without one",
            hint=f"{instead}, or start the server with PENTRACE_API_TOKEN (or --token-file) "
            "and send Authorization: Bearer <token>",
        )


async def trace_route(request: Request) -> Response:
    """``GET /api/v1/sessions/{id}/trace``: a shard's JSONL, redacted unless
    ``?redacted=false`` from a caller with the bearer token.

    ``?shard=N`` picks a shard (default: the latest, a complete model context);
    ``?shard=all`` streams every shard in index order.  The bytes are those of
    ``pentrace export`` (:mod:`pentrace.infrastructure.operations.exports`).
    """
    context: ServiceContext = request.app.state.context
    redacted = params.flag(request, "redacted") is not False
    if not redacted:
        _verbatim_allowed(
            request,
            "the verbatim trace (redacted=false)",
            "omit redacted=false for the redacted trace",
        )
    ref = await context.run(resolve_session, context.root, _reference(request))
    wanted = params.integer_or(request, "shard", "all", high=_MAX_SHARD)
    export = trace_export(
        ref, shard="all" if isinstance(wanted, str) else wanted, redacted=redacted
    )
    return StreamingResponse(
        export.chunks,
        media_type="application/x-ndjson",
        headers={
            "X-Pentrace-Session": ref.session_id,
            "X-Pentrace-Redacted": str(redacted).lower(),
        },
    )


async def archive_route(request: Request) -> Response:
    """``GET /api/v1/sessions/{id}/archive``: the tar.gz of ``pentrace export --archive``
    (every shard verbatim, with the subagent children), for a caller with the bearer token."""
    context: ServiceContext = request.app.state.context
    _verbatim_allowed(
        request, "the archive (every shard verbatim)", "read the redacted trace (/trace) instead"
    )
    ref = await context.run(resolve_session, context.root, _reference(request))
    built = await context.run(archive_export, context.root, ref)
    return StreamingResponse(
        built.chunks,
        media_type="application/gzip",
        headers={
            "X-Pentrace-Session": ref.session_id,
            "Content-Disposition": f'attachment; filename="{ref.session_id}.tar.gz"',
        },
    )


def _reference(request: Request) -> str:
    """The session reference of the path: ``{id}`` or ``{project}/{agent}/{id}`` (ADR 0023)."""
    parts = [
        params.path_text(request, name)
        for name in ("project", "agent", "session_id")
        if name in request.path_params
    ]
    return "/".join(parts)


def _owned(path: str) -> tuple[str, str]:
    """A session path and the same path naming the owner (ADR 0023)."""
    return (
        f"/api/v1/sessions/{{session_id}}{path}",
        f"/api/v1/sessions/{{project}}/{{agent}}/{{session_id}}{path}",
    )


routes: Final = [
    Route("/api/v1/sessions", list_route, methods=["GET"]),
    *(
        Route(where, endpoint, methods=["GET"])
        for path, endpoint in (
            ("", show_route),
            ("/trace", trace_route),
            ("/archive", archive_route),
        )
        for where in _owned(path)
    ),
]
