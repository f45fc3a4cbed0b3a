"""The ASGI app: :func:`create_app` wires routes, errors, auth and the ledger follower.

::

    app = create_app(ServiceSettings(data_root=Path("~/.penguin/data").expanduser()))
    uvicorn.run(app, host="127.0.0.1", port=8765)

``pentrace serve`` does exactly this.  The ledger is opened in the app's
lifespan (the same settings as the rest of pentrace: ``PENTRACE_LEDGER_URL``
or the SQLite file under the data root) and closed on shutdown.

Layers, outermost first: :class:`~pentrace.service.edge.headers.SecurityHeaders`,
:class:`~pentrace.service.edge.guard.RequestGuard` (Host, Origin, CORS), Starlette's
500 handler, :class:`~pentrace.service.edge.auth.BearerAuth` when a token is set,
then the routes.  The first two wrap the whole app, so every route added later
(pages, static files) is covered without doing anything.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, ExceptionHandler, Lifespan, Message, Receive, Scope, Send

from pentrace.errors import PentraceError
from pentrace.infrastructure.operations.ledger import open_ledger
from pentrace.service import analytics_routes, sessions
from pentrace.service.context import ServiceContext
from pentrace.service.edge.auth import BearerAuth
from pentrace.service.edge.errors import ErrorWriter
from pentrace.service.edge.guard import RequestGuard
from pentrace.service.edge.headers import SecurityHeaders
from pentrace.service.events.follower import LedgerFollower
from pentrace.service.events.frames import FrameCache
from pentrace.service.events.sse import sse_endpoint
from pentrace.service.events.test_page import test_page_routes
from pentrace.service.openapi import openapi_document
from pentrace.service.settings import ServiceSettings
from pentrace.service.web import routes as web_routes

__all__ = ["create_app"]


class CancelOnDisconnect:
    """A GET or HEAD whose client went away stops where it waits (ADR 0101).

    Starlette finishes a request whose client has gone, so under overload a
    backlog of abandoned requests kept the server busy, and its memory held,
    long after the clients left.  Here the request's (empty) body is read
    first, then the connection is watched: on ``http.disconnect`` before the
    response is complete, the request is cancelled (a route waiting for a
    worker thread stops waiting; a call already running in one finishes
    there).  Other methods read their bodies and are left alone.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        first: Message | None = await receive()
        gone = anyio.Event()
        complete = False

        async def app_receive() -> Message:
            nonlocal first
            if first is not None:
                message, first = first, None
                return message
            await gone.wait()
            return {"type": "http.disconnect"}

        async def app_send(message: Message) -> None:
            nonlocal complete
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                complete = True

        async with anyio.create_task_group() as group:

            async def watch() -> None:
                message = first
                while message is None or message["type"] != "http.disconnect":
                    message = await receive()
                gone.set()
                if not complete:
                    group.cancel_scope.cancel()

            group.start_soon(watch)
            await self.app(scope, app_receive, app_send)
            group.cancel_scope.cancel()


class _ServiceApp(Starlette):
    """Starlette with the guard and the security headers outside everything else."""

    def __init__(
        self,
        settings: ServiceSettings,
        errors: ErrorWriter,
        routes: Sequence[BaseRoute],
        middleware: Sequence[Middleware],
        lifespan: Lifespan[Starlette],
        exception_handlers: Mapping[Any, ExceptionHandler],
    ) -> None:
        self._policy = settings.policy()
        self._errors = errors
        super().__init__(
            routes=routes,
            middleware=middleware,
            lifespan=lifespan,
            exception_handlers=exception_handlers,
        )
        self.state.errors = errors

    def build_middleware_stack(self) -> ASGIApp:
        """The stack Starlette builds, wrapped so even its 500 answers get the headers."""
        inner = super().build_middleware_stack()
        return CancelOnDisconnect(SecurityHeaders(RequestGuard(inner, self._policy, self._errors)))


def _errors(request: Request) -> ErrorWriter:
    writer: ErrorWriter = request.app.state.errors
    return writer


async def _openapi(request: Request) -> Response:
    return JSONResponse(openapi_document())


async def _library_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, PentraceError)
    return _errors(request).for_error(error)


async def _internal(request: Request, error: Exception) -> Response:
    # The traceback goes to the server's log (Starlette re-raises); the client gets no detail.
    return _errors(request).response(
        500,
        f"internal error while answering {request.method} {request.url.path}",
        hint="the server's log has the details",
    )


async def _not_found(request: Request, error: Exception) -> Response:
    return _errors(request).response(
        404,
        f"no route for {request.method} {request.url.path}",
        hint="see /openapi.json for the endpoints",
    )


async def _not_allowed(request: Request, error: Exception) -> Response:
    return _errors(request).response(
        405,
        f"{request.method} is not allowed on {request.url.path}: the service is read-only "
        "(only the viewer's import, POST /web/import, writes)",
        hint="use GET",
    )


def create_app(settings: ServiceSettings) -> Starlette:
    """The event service as an ASGI app (see the module docstring)."""
    settings.check_binding()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        ledger = open_ledger(
            settings.ledger,
            settings.data_root,
            penguin_read_only=True,  # replay a Penguin-format ledger file without writing it
        )
        follower = LedgerFollower(ledger, settings.poll_interval_seconds)
        follower.start()
        frames = FrameCache(settings.frame_cache_bytes)
        context = ServiceContext(settings, ledger, follower, frames)
        app.state.context = context
        try:
            yield
        finally:
            context.close()
            follower.stop()
            ledger.close()

    routes = [
        Route("/api/v1/events/sse", sse_endpoint, methods=["GET"]),
        *sessions.routes,  # each also under the owner-naming project/agent/id (ADR 0023)
        Route("/openapi.json", _openapi, methods=["GET"]),
        *analytics_routes.routes,
        *web_routes,
    ]
    if settings.test_page:
        routes.extend(test_page_routes)
    errors = ErrorWriter(settings.data_root)
    middleware = []
    if settings.token is not None:
        middleware.append(Middleware(BearerAuth, token=settings.token, errors=errors))
    return _ServiceApp(
        settings,
        errors,
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={
            PentraceError: _library_error,
            Exception: _internal,
            404: _not_found,
            405: _not_allowed,
        },
    )
