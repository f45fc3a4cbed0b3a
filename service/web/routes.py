"""The viewer's routes, mounted by :func:`pentrace.service.app.create_app`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from pentrace.service.web.layout import PREFIX
from pentrace.service.web.login import login_page, login_route, logout_route
from pentrace.service.web.output import output_route
from pentrace.service.web.session import record_route, session_page, short_route
from pentrace.service.web.session_images import image_route
from pentrace.service.web.traces import traces_page
from pentrace.service.web.transfer import export_route, import_route
from pentrace.service.web.usage import usage_page

__all__ = ["STATIC", "openapi_paths", "routes"]

STATIC: Final = Path(__file__).with_name("static")
_SESSION: Final = PREFIX + "/sessions/{project}/{agent}/{session_id}"


async def _home(request: Request) -> Response:
    return RedirectResponse(f"{PREFIX}/traces", status_code=303)


routes: Final[list[BaseRoute]] = [
    Route("/", _home, methods=["GET"]),
    Route(PREFIX, _home, methods=["GET"]),
    Route(f"{PREFIX}/traces", traces_page, methods=["GET"]),
    Route(f"{PREFIX}/usage", usage_page, methods=["GET"]),
    Route(_SESSION, session_page, methods=["GET"]),
    Route(_SESSION + "/records/{position}", record_route, methods=["GET"]),
    Route(_SESSION + "/output/{file}", output_route, methods=["GET"]),
    Route(_SESSION + "/images/{position}/{index}", image_route, methods=["GET"]),
    Route(PREFIX + "/s/{session_id}", short_route, methods=["GET"]),
    Route(PREFIX + "/export/{project}/{agent}/{session_id}", export_route, methods=["GET"]),
    Route(PREFIX + "/import", import_route, methods=["POST"]),
    Route(PREFIX + "/login", login_page, methods=["GET"]),
    Route(PREFIX + "/login", login_route, methods=["POST"]),
    Route(PREFIX + "/logout", logout_route, methods=["POST"]),
    Mount(PREFIX + "/static", StaticFiles(directory=STATIC), name="web-static"),
]


# The query parameters each viewer endpoint reads (documented, and fuzzed by the tests).
_QUERY: Final[dict[Any, tuple[str, ...]]] = {
    traces_page: ("project", "agent", "model", "status", "has_errors", "since", "until",
                  "sort", "reverse", "page", "q"),
    usage_page: ("agent", "model", "range", "since", "until"),
    session_page: ("from", "fragment"),
    record_route: ("raw",),
    output_route: ("raw",),
    image_route: ("raw",),
    export_route: ("format",),
    import_route: ("project", "agent", "filename"),
}  # fmt: skip


def _operation(route: BaseRoute, path: str) -> dict[str, Any]:
    endpoint = getattr(route, "endpoint", None)
    if endpoint is _home:
        return {
            "summary": "Web viewer: to the Traces page",
            "responses": {"303": {"description": "a redirect to /web/traces"}},
        }
    lines = (getattr(endpoint, "__doc__", None) or "").strip().splitlines()
    summary = lines[0] if lines else ""
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in re.findall(r"{(\w+)}", path)
    ] + [
        {"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
        for name in (_QUERY.get(endpoint, ()) if endpoint is not None else ())
    ]
    return {
        "summary": f"Web viewer: {summary or 'the static assets (CSS, JavaScript, icon)'}",
        "parameters": parameters,
        "responses": {"200": {"description": "an HTML page, a file or a redirect"}},
    }


def _paths() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for route in routes:
        methods = sorted(getattr(route, "methods", None) or {"GET"})
        path = str(getattr(route, "path", ""))
        item = paths.setdefault(path, {})
        for method in methods:
            if method != "HEAD":
                item[method.lower()] = _operation(route, path)
    return paths


openapi_paths: Final = _paths()
"""OpenAPI path items of the viewer's routes (HTML, not a JSON contract)."""
