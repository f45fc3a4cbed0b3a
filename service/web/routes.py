"""The viewer's routes, mounted by :func:`pentrace.service.app.create_app`, and its login.

``/web/login`` trades the server's token for a login cookie, so a browser can
open the viewer, download verbatim exports and import (ADR 0031).  ``POST
/web/login`` takes the form field ``token``, compares it in constant time with
the configured one and sets :data:`~pentrace.service.edge.auth.COOKIE` (an HMAC
of the token; ``HttpOnly``, ``SameSite=Strict``, ``Path=/``, no expiry: it ends
with the browser session).  ``POST /web/logout`` clears it.  The Origin check of
:mod:`pentrace.service.edge.guard` refuses a login posted from another site.
"""

from __future__ import annotations

import hmac
import re
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from pentrace.service.context import ServiceContext
from pentrace.service.edge.auth import COOKIE, authenticated, cookie_value
from pentrace.service.edge.errors import BadRequest
from pentrace.service.web.layout import PREFIX, page
from pentrace.service.web.media import image_route, output_route
from pentrace.service.web.session import record_route, session_page, short_route
from pentrace.service.web.traces import export_route, import_route, traces_page
from pentrace.service.web.usage import usage_page

__all__ = ["STATIC", "login_page", "login_route", "logout_route", "openapi_paths", "routes"]

STATIC: Final = Path(__file__).with_name("static")
_SESSION: Final = PREFIX + "/sessions/{project}/{agent}/{session_id}"
_MAX_LOGIN_BODY: Final = 4096


async def _home(request: Request) -> Response:
    return RedirectResponse(f"{PREFIX}/traces", status_code=303)


async def login_page(request: Request, *, note: str = "", status: int = 200) -> Response:
    """``GET /web/login``."""
    context: ServiceContext = request.app.state.context
    state = (
        "no token"
        if context.settings.token is None
        else "logged in"
        if authenticated(request.scope)
        else "form"
    )
    note = note or "Enter the server's token (PENTRACE_API_TOKEN)."
    return page(request, "login.html", {"state": state, "note": note}, title="Log in",
                status=status)  # fmt: skip


async def login_route(request: Request) -> Response:
    """``POST /web/login``: the form's token, checked; the cookie on success."""
    context: ServiceContext = request.app.state.context
    token = context.settings.token
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_LOGIN_BODY:
            raise BadRequest(
                f"login: expected a form of at most {_MAX_LOGIN_BODY} bytes, found more"
            )
    given = parse_qs(body.decode("utf-8", "replace")).get("token", [""])[0].strip()
    if token is None:
        return await login_page(request)
    if not hmac.compare_digest(given.encode(), token.get_secret_value().encode()):
        return await login_page(request, note="That is not the server's token.", status=401)
    answer = RedirectResponse(f"{PREFIX}/traces", status_code=303)
    answer.set_cookie(COOKIE, cookie_value(token), httponly=True, samesite="strict", path="/")
    return answer


async def logout_route(request: Request) -> Response:
    """``POST /web/logout``: clear the cookie."""
    answer = RedirectResponse(f"{PREFIX}/login", status_code=303)
    answer.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return answer


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
