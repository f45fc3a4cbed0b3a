"""Bearer-token check for every request, in constant time.

A pure ASGI middleware: when a token is configured, a request without
``Authorization: Bearer <token>`` (compared with :func:`hmac.compare_digest`)
gets a JSON 401 and never reaches a route.  The token is only ever compared,
never logged or echoed.  A request that passed carries ``scope["auth"] ==
BEARER``, which :func:`authenticated` reads: the verbatim trace is served only
to such requests (ADR 0012).
"""

from __future__ import annotations

import hmac
from typing import Final

from pydantic import SecretStr
from starlette.types import ASGIApp, Receive, Scope, Send

from pentrace.service.edge.errors import ErrorWriter

__all__ = ["BEARER", "BearerAuth", "authenticated", "token_matches"]

_PREFIX: Final = b"bearer "
BEARER: Final = "bearer"


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
        self._errors = errors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass authorised requests through; answer the others with 401."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                header = value
                break
        if token_matches(header, self._expected):
            scope["auth"] = BEARER
            await self.app(scope, receive, send)
            return
        response = self._errors.response(
            401,
            "a valid bearer token is required: expected `Authorization: Bearer <token>`, "
            + ("found a different one" if header is not None else "found no Authorization header"),
            hint="send the token configured with PENTRACE_API_TOKEN or --token-file",
            headers={"WWW-Authenticate": "Bearer"},
        )
        await response(scope, receive, send)
