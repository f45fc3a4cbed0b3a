"""Read-only HTTP endpoints over the analytics read models (mounted by the event service).

``GET /api/v1/stats/{kind}`` with ``kind`` one of ``tokens``, ``cost``,
``tools``, ``requests``, ``sessions``, ``tree`` returns the same JSON document
as ``pentrace stats <kind> --json`` (``docs/projections.md``), built by the same
function (:mod:`pentrace.infrastructure.operations.stats`).  Query
parameters: ``by``, ``since``, ``until`` (inclusive UTC days) and
``catch_up=1`` to bring the built-in projections up to date with the ledger
first (otherwise the read models are served as the runners left them).
``GET /api/v1/projections`` lists each built-in projection's position and
its failed events (ADR 0032): ``failed_events`` counts them, ``failures``
lists them (session, sequence, notification id, type, redacted error); the
rows are those of ``pentrace projections status --json`` plus ``failures``.

Mount with ``routes.extend(analytics_routes.routes)``.
"""

from __future__ import annotations

from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pentrace.infrastructure.operations.projections import (
    BUILTINS,
    GROUPS,
    AnalyticsDatabase,
    projection_status,
)
from pentrace.infrastructure.operations.stats import NEEDS, StatsQuery, read_models, stats_document
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.edge.errors import BadRequest

__all__ = ["open_read_models", "openapi_paths", "routes"]


def open_read_models(
    context: ServiceContext, names: tuple[str, ...], bring_up_to_date: bool
) -> AnalyticsDatabase:
    """The read models' database, with the ``names`` projections' tables in place and, when
    ``bring_up_to_date``, caught up with the ledger first (the web Usage page uses it too)."""
    settings = context.settings
    return read_models(
        settings.data_root, names, catch_up_first=bring_up_to_date, env=settings.analytics_env()
    )


def _read(context: ServiceContext, query: StatsQuery, catch_up: bool) -> dict[str, Any]:
    settings = context.settings
    return stats_document(
        settings.data_root, query, catch_up_first=catch_up, env=settings.analytics_env()
    )


async def stats_route(request: Request) -> Response:
    """``GET /api/v1/stats/{kind}``: one analytics document."""
    kind = params.path_text(request, "kind")
    if kind not in NEEDS:
        raise BadRequest(
            f"stats kind: expected one of {', '.join(NEEDS)}, found {kind[:30]!r}",
            hint="for example /api/v1/stats/tokens?by=model",
        )
    query = StatsQuery(
        kind,
        by=params.choice(request, "by", tuple(GROUPS)),
        since=params.day(request, "since"),
        until=params.day(request, "until"),
    )
    catch_up = bool(params.flag(request, "catch_up"))
    context: ServiceContext = request.app.state.context
    return JSONResponse(await context.run(_read, context, query, catch_up))


def _status(context: ServiceContext) -> dict[str, Any]:
    settings = context.settings
    return projection_status(
        settings.data_root,
        BUILTINS.values(),
        env=settings.analytics_env(),
        with_failures=True,
    )


async def projections_route(request: Request) -> Response:
    """``GET /api/v1/projections``: each built-in projection's tracking position."""
    context: ServiceContext = request.app.state.context
    return JSONResponse(await context.run(_status, context))


routes: Final = [
    Route("/api/v1/stats/{kind}", stats_route, methods=["GET"]),
    Route("/api/v1/projections", projections_route, methods=["GET"]),
]

_QUERY: Final = [
    {"name": name, "in": "query", "required": False, "description": text, "schema": {"type": kind}}
    for name, text, kind in (
        (
            "by",
            "group by model, provider, agent, project, day, hour, minute (UTC) or session; "
            "requests and tools add per-group rows with it",
            "string",
        ),
        ("since", "first UTC day (YYYY-MM-DD)", "string"),
        ("until", "last UTC day (YYYY-MM-DD)", "string"),
        ("catch_up", "bring the projections up to date first", "boolean"),
    )
]
openapi_paths: Final[dict[str, Any]] = {
    "/api/v1/stats/{kind}": {
        "get": {
            "summary": "Analytics: the document of `pentrace stats <kind> --json`",
            "parameters": [
                {
                    "name": "kind",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", "enum": list(NEEDS)},
                },
                *_QUERY,
            ],
            "responses": {
                "200": {"description": "see docs/projections.md, the --json contract"},
                "400": {"description": "a bad kind or query parameter"},
            },
        }
    },
    "/api/v1/projections": {
        "get": {
            "summary": "Each built-in projection's tracking position and failed events",
            "responses": {
                "200": {"description": "{projections: [{name, position, failed_events, ...}]}"}
            },
        }
    },
}
"""OpenAPI path items of these routes, merged into the service's document."""
