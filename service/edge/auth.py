"""Bearer-token check for every request, in constant time.

A pure ASGI middleware: when a token is configured, a request without
``Authorization: Bearer <token>`` (compared with :func:`hmac.compare_digest`)
gets a JSON 401 and never reaches a route.  The token is only ever compared,
never logged or echoed.  A request that passed carries ``scope["auth"] ==
BEARER``, which :func:`authenticated` reads: the verbatim trace is served only
to such requests (ADR 0012).

Browsers cannot add a header to a page load or a download, so the web viewer's
login (``POST /web/login`` with the token, ADR 0031) sets the cookie
:data:`COOKIE` to :func:`cookie_value` - an HMAC of the token, never the token
itself - ``HttpOnly`` and ``SameSite=Strict``.  A request carrying that cookie
counts as authenticated too.  Without a token the login page and the viewer's
static files are the only things served to a request that has neither.
"""

from __future__ import annotations

import hmac
from typing import Final

from pydantic import SecretStr
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from pentrace.service.edge.errors import ErrorWriter

__all__ = [
    "BEARER",
    "COOKIE",
    "OPEN_PATHS",
    "BearerAuth",
    "authenticated",
    "cookie_value",
    "token_matches",
]

_PREFIX: Final = b"bearer "
BEARER: Final = "bearer"
COOKIE: Final = "pentrace_auth"
# Reachable without the token: the login form and the assets it needs.
OPEN_PATHS: Final = ("/web/login", "/web/static/")
_COOKIE_PURPOSE: Final = b"pentrace web viewer login"


def cookie_value(token: SecretStr) -> str:
    """The login cookie's value for ``token``: an HMAC-SHA256 of it, hex (ADR 0031)."""
    key = token.get_secret_value().encode("utf-8")
    return hmac.new(key, _COOKIE_PURPOSE, "sha256").hexdigest()


def _cookie(header: bytes) -> bytes | None:
    for part in header.split(b";"):
        name, _, value = part.strip().partition(b"=")
        if name == COOKIE.encode():
            return value
    return None


def authenticated(scope: Scope) -> bool:
    """Whether this request carried the configured bearer token."""
    return scope.get("auth") == BEARER


def token_matches(header: bytes | None, expected: bytes) -> bool:
    """Whether an ``Authorization`` header value carries ``expected`` (constant time)."""
    if header is None or header[: len(_PREFIX)].lower() != _PREFIX:
        # Still compare, so a missing scheme costs the same as a wrong token.
        hmac.compare_digest(b"", expected)
        return False
    return hmac.compare_digest(header[len(_PREFIX) :].strip(), expected)


class BearerAuth:
    """Reject HTTP requests that lack the configured bearer token."""

    def __init__(self, app: ASGIApp, token: SecretStr, errors: ErrorWriter) -> None:
        self.app = app
        self._expected = token.get_secret_value().encode("utf-8")
        self._cookie = cookie_value(token).encode("ascii")
        self._errors = errors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass authorised requests through; answer the others with 401."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = cookie = None
        for name, value in scope["headers"]:
            if name == b"authorization" and header is None:
                header = value
            elif name == b"cookie" and cookie is None:
                cookie = _cookie(value)
        by_cookie = cookie is not None and hmac.compare_digest(cookie, self._cookie)
        if token_matches(header, self._expected) or by_cookie:
            scope["auth"] = BEARER
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path == OPEN_PATHS[0] or path.startswith(OPEN_PATHS[1]):
            await self.app(scope, receive, send)
            return
        if path.startswith("/web") and scope.get("method") == "GET":
            # A browser opening a viewer page: to the login form, not a JSON error.
            await RedirectResponse(OPEN_PATHS[0], status_code=303)(scope, receive, send)
            return
        response = self._errors.response(
            401,
            "a valid bearer token is required: expected `Authorization: Bearer <token>`, "
            + ("found a different one" if header is not None else "found no Authorization header"),
            hint="send the token configured with PENTRACE_API_TOKEN or --token-file "
            "(in a browser: log in at /web/login)",
            headers={"WWW-Authenticate": "Bearer"},
        )
        await response(scope, receive, send)
