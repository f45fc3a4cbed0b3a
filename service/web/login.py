"""``/web/login``: trade the server's token for a login cookie, so a browser can open the
viewer, download verbatim exports and import (ADR 0031).

``POST /web/login`` takes the form field ``token``, compares it in constant time
with the configured one and sets :data:`~pentrace.service.edge.auth.COOKIE` (an HMAC
of the token; ``HttpOnly``, ``SameSite=Strict``, ``Path=/``, no expiry: it ends
with the browser session).  ``POST /web/logout`` clears it.  The Origin check of
:mod:`pentrace.service.edge.guard` refuses a login posted from another site.
"""

from __future__ import annotations

import hmac
from typing import Final
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from pentrace.service.context import ServiceContext
from pentrace.service.edge.auth import COOKIE, authenticated, cookie_value
from pentrace.service.edge.errors import BadRequest
from pentrace.service.web.layout import PREFIX, page

__all__ = ["login_page", "login_route", "logout_route"]

_MAX_BODY: Final = 4096


def _form(note: str) -> list[str]:
    return [
        f'<p class="meta">{note}</p>',
        f'<form class="filters" method="post" action="{PREFIX}/login">'
        '<label>token <input type="password" name="token" autocomplete="current-password" '
        'required></label><button type="submit">Log in</button></form>',
    ]


async def login_page(request: Request) -> Response:
    """``GET /web/login``."""
    context: ServiceContext = request.app.state.context
    if context.settings.token is None:
        return page("Log in", "", [
            '<p>This server has no token: the viewer is read-only and shows redacted data. '
            "Start it with <code>PENTRACE_API_TOKEN</code> (or <code>--token-file</code>) "
            "to allow verbatim exports and imports.</p>"
        ])  # fmt: skip
    if authenticated(request.scope):
        return page("Log in", "", [
            "<p>You are logged in.</p>",
            f'<form method="post" action="{PREFIX}/logout"><button type="submit">Log out</button>'
            "</form>",
        ])  # fmt: skip
    return page("Log in", "", _form("Enter the server's token (PENTRACE_API_TOKEN)."))


async def login_route(request: Request) -> Response:
    """``POST /web/login``: the form's token, checked; the cookie on success."""
    context: ServiceContext = request.app.state.context
    token = context.settings.token
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_BODY:
            raise BadRequest(f"login: expected a form of at most {_MAX_BODY} bytes, found more")
    given = parse_qs(body.decode("utf-8", "replace")).get("token", [""])[0].strip()
    if token is None:
        return await login_page(request)
    if not hmac.compare_digest(given.encode(), token.get_secret_value().encode()):
        return page("Log in", "", _form("That is not the server's token."), status=401)
    answer = RedirectResponse(f"{PREFIX}/traces", status_code=303)
    answer.set_cookie(COOKIE, cookie_value(token), httponly=True, samesite="strict", path="/")
    return answer


async def logout_route(request: Request) -> Response:
    """``POST /web/logout``: clear the cookie."""
    answer = RedirectResponse(f"{PREFIX}/login", status_code=303)
    answer.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return answer
