"""Security headers on every response, whatever route, error or static file made it.

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
"""

from __future__ import annotations

from typing import Final

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HTML_POLICY", "OTHER_POLICY", "SecurityHeaders"]

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
