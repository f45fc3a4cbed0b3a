"""ASGI middleware in front of every route: Host and Origin checks, and CORS when configured.

:class:`RequestGuard` wraps the whole app (routes, static files, future pages), so
no route can be reached past it.  It refuses:

- a missing or malformed ``Host`` with 400, a Host the server does not answer for
  with **421 Misdirected Request** (DNS rebinding, ADR 0011);
- a foreign ``Origin`` (or a cross-site no-cors load) with **403**.

Both answers are JSON errors saying which value was refused and which option
allows it.  CORS headers are sent only for an origin the operator allowed;
their preflight (``OPTIONS`` with ``Access-Control-Request-Method``) is
answered here, before the bearer-token check, because browsers never send the
token on a preflight.
"""

from __future__ import annotations

from typing import Final

from starlette.datastructures import MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pentrace.service.edge.errors import ErrorWriter
from pentrace.service.edge.hosts import HostPolicy, split_host

__all__ = ["RequestGuard"]

_WANTED: Final = frozenset(
    {b"host", b"origin", b"sec-fetch-site", b"sec-fetch-mode", b"sec-fetch-dest"}
)
_EXPOSED: Final = "X-Pentrace-Session, X-Pentrace-Redacted"
_REQUEST_HEADERS: Final = "Authorization, Last-Event-ID"


class RequestGuard:
    """Refuse requests for a foreign Host or from a foreign Origin (module docstring)."""

    def __init__(self, app: ASGIApp, policy: HostPolicy, errors: ErrorWriter) -> None:
        self.app = app
        self.policy = policy
        self.errors = errors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check an HTTP or WebSocket request; pass everything else through."""
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        seen: dict[bytes, list[str]] = {}
        for name, value in scope["headers"]:
            if name in _WANTED:
                seen.setdefault(name, []).append(value.decode("latin-1"))
        refusal = self._refusal(seen)
        if refusal is not None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            else:
                await refusal(scope, receive, send)
            return
        origin = self.policy.cors_allowed(_one(seen, b"origin"))
        if origin is None:
            await self.app(scope, receive, send)
            return
        if scope.get("method") == "OPTIONS" and any(
            name == b"access-control-request-method" for name, _ in scope["headers"]
        ):
            await _preflight(origin)(scope, receive, send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Access-Control-Allow-Origin"] = origin
                headers["Access-Control-Expose-Headers"] = _EXPOSED
                headers.add_vary_header("Origin")
            await send(message)

        await self.app(scope, receive, send_with_cors)

    def _refusal(self, seen: dict[bytes, list[str]]) -> Response | None:
        hosts = seen.get(b"host", [])
        if len(hosts) > 1:
            return self.errors.response(
                400, f"expected one Host header, found {len(hosts)}", hint="send Host once"
            )
        host = hosts[0] if hosts else None
        refused = self.policy.host_refusal(host)
        if refused is not None:
            status, reason = refused
            parts = split_host(host) if status == 421 and host else None
            name = parts[0] if parts else "NAME"  # a checked name: safe to echo
            return self.errors.response(
                status,
                f"{reason} (DNS rebinding protection: the server answers only the names "
                "it is bound to)",
                hint="if clients reach this server by that name, start it with "
                f"--allowed-host {name} (or set PENTRACE_ALLOWED_HOSTS={name})",
            )
        origins = seen.get(b"origin", [])
        if len(origins) > 1:
            return self.errors.response(
                400, f"expected one Origin header, found {len(origins)}", hint="send Origin once"
            )
        navigation = (
            _one(seen, b"sec-fetch-mode") == "navigate"
            and _one(seen, b"sec-fetch-dest") == "document"
        )
        foreign = self.policy.origin_refusal(
            origins[0] if origins else None, host, _one(seen, b"sec-fetch-site"), navigation
        )
        if foreign is None:
            return None
        return self.errors.response(
            403,
            f"{foreign}: pages of other sites may not read this service",
            hint="to let a web app on another origin call it, start the server with "
            "--allowed-origin https://app.example (or set PENTRACE_ALLOWED_ORIGINS)",
        )


def _one(seen: dict[bytes, list[str]], name: bytes) -> str | None:
    values = seen.get(name)
    return values[0] if values else None


def _preflight(origin: str) -> Response:
    """The answer to a CORS preflight from an allowed origin: GET only, two headers."""
    return Response(
        status_code=204,
        headers={
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": "GET, HEAD",
            "Access-Control-Allow-Headers": _REQUEST_HEADERS,
            "Access-Control-Max-Age": "600",
            "Vary": "Origin",
        },
    )
