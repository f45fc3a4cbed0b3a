"""The ASGI app: :func:`create_app` wires routes, errors, auth and the ledger follower.

::

    app = create_app(ServiceSettings(data_root=Path("~/.penguin/data").expanduser()))
    uvicorn.run(app, host="127.0.0.1", port=8765)

``pentrace serve`` does exactly this.  The ledger is opened in the app's
lifespan (the same settings as the rest of pentrace: ``PENTRACE_LEDGER_URL``
or the SQLite file under the data root) and closed on shutdown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pentrace.errors import PentraceError
from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.service import analytics_routes
from pentrace.service.auth import BearerAuth
from pentrace.service.context import ServiceContext
from pentrace.service.errors import error_response, pentrace_error_response
from pentrace.service.follower import LedgerFollower
from pentrace.service.frames import FrameCache
from pentrace.service.openapi import openapi_document
from pentrace.service.sessions import list_route, show_route, trace_route
from pentrace.service.settings import ServiceSettings
from pentrace.service.sse import sse_endpoint
from pentrace.service.test_page import test_page_route

__all__ = ["create_app"]


async def _openapi(request: Request) -> Response:
    return JSONResponse(openapi_document())


async def _library_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, PentraceError)
    return pentrace_error_response(error)


async def _not_found(request: Request, error: Exception) -> Response:
    return error_response(
        404,
        f"no route for {request.method} {request.url.path}",
        hint="see /openapi.json for the endpoints",
    )


async def _not_allowed(request: Request, error: Exception) -> Response:
    return error_response(
        405,
        f"{request.method} is not allowed on {request.url.path}: the service is read-only",
        hint="use GET",
    )


def create_app(settings: ServiceSettings) -> Starlette:
    """The event service as an ASGI app (see the module docstring)."""
    settings.check_binding()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        ledger = RuntimeEventLedger.open(
            settings.data_root,
            settings.ledger,
            table_prefix=settings.ledger_table_prefix,
            penguin_read_only=True,  # replay a Penguin-format ledger file without writing it
        )
        follower = LedgerFollower(ledger, settings.poll_interval_seconds)
        follower.start()
        frames = FrameCache(settings.frame_cache_bytes)
        app.state.context = ServiceContext(settings, ledger, follower, frames)
        try:
            yield
        finally:
            follower.stop()
            ledger.close()

    routes = [
        Route("/api/v1/events/sse", sse_endpoint, methods=["GET"]),
        Route("/api/v1/sessions", list_route, methods=["GET"]),
        Route("/api/v1/sessions/{session_id}", show_route, methods=["GET"]),
        Route("/api/v1/sessions/{session_id}/trace", trace_route, methods=["GET"]),
        Route("/openapi.json", _openapi, methods=["GET"]),
        *analytics_routes.routes,
    ]
    if settings.test_page:
        routes.append(Route("/_test/sse.html", test_page_route, methods=["GET"]))
    middleware = []
    if settings.token is not None:
        middleware.append(Middleware(BearerAuth, token=settings.token))
    return Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={
            PentraceError: _library_error,
            404: _not_found,
            405: _not_allowed,
        },
    )
