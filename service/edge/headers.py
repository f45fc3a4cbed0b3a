"""The headers of responses: security headers on every one, and revalidation.

Security headers on every response, whatever route, error or static file made it.

:class:`SecurityHeaders` is the outermost layer of the app (outside even
Starlette's 500 handler), so a refused request, a 404, a crash and a future
HTML page all carry:

- ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: no-referrer``;
- ``X-Frame-Options: DENY`` and CSP ``frame-ancestors 'none'`` (no framing, so no
  clickjacking);
- ``Cross-Origin-Resource-Policy: same-origin`` (other sites cannot embed a body
  with ``<script src>`` or ``<img>``);
- ``Content-Security-Policy``: for HTML, scripts, styles, images and connections
  from this origin only, and **no inline script**; forms submit to this origin only
  (the viewer's filters, ADR 0030); for everything else, nothing
  at all (``default-src 'none'``);
- ``Cache-Control: no-store`` unless the route set its own (trace data, sessions
  and events must not land in a browser or proxy cache).

A route that sets one of these headers itself keeps its value.

Revalidation: a strong ``ETag`` over what makes an answer, and ``If-None-Match`` read safely.

A route that may be cached sends ``Cache-Control: no-cache`` and an ETag
(:func:`strong_etag`); the browser keeps the answer but asks again each time, and
:func:`not_modified` says whether the request's ``If-None-Match`` names the
current ETag, so the route can answer 304 with no body (RFC 9110, 13.1.2).

The header is the client's: any length the HTTP parser let through, any number
of entries, any bytes.  It is read in one linear pass and never echoed.  An
entry that is not a quoted entity-tag (``"..."``, optionally ``W/"..."``) matches
nothing; ``*`` matches any current answer, as the RFC says; the comparison is
the weak one the RFC asks for on ``If-None-Match`` (``W/`` is ignored)."""

from __future__ import annotations

import hashlib
from typing import Final

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HTML_POLICY", "OTHER_POLICY", "SecurityHeaders", "not_modified", "strong_etag"]

HTML_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
OTHER_POLICY: Final = (
    "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_ALWAYS: Final = (
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
)


class SecurityHeaders:
    """Add the headers of the module docstring to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the headers to the response as it starts."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _ALWAYS:
                    headers.setdefault(name, value)
                html = headers.get("content-type", "").startswith("text/html")
                headers.setdefault("Content-Security-Policy", HTML_POLICY if html else OTHER_POLICY)
                if html:
                    headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
            await send(message)

        await self.app(scope, receive, send_with_headers)


_DIGEST_CHARS: Final = 32


def strong_etag(parts: tuple[str, ...], data: bytes) -> str:
    """A quoted strong entity-tag over ``parts`` (names, positions, variant) and ``data``."""
    head = "".join(f"{part}\n" for part in parts).encode("utf-8", "surrogatepass")
    return f'"{hashlib.sha256(head + data).hexdigest()[:_DIGEST_CHARS]}"'


def _names(value: str, etag: str) -> bool:
    if value.strip() == "*":
        return True
    for entry in value.split(","):
        tag = entry.strip().removeprefix("W/")
        if tag == etag:
            return True
    return False


def not_modified(request: Request, etag: str) -> bool:
    """Whether the request's ``If-None-Match`` (every copy of the header) names ``etag``."""
    return any(_names(value, etag) for value in request.headers.getlist("if-none-match"))
