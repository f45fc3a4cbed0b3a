"""JSON error bodies: ``{"error": {"status", "message", "hint"}}``, one shape everywhere.

Library errors (:class:`~pentrace.errors.PentraceError`) become HTTP errors in
one place, :func:`http_status`; their messages already avoid payload values.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import JSONResponse

from pentrace.errors import (
    AmbiguousIdError,
    InvalidNameError,
    NotFoundError,
    PentraceError,
    UsageError,
)

__all__ = ["BadRequest", "error_response", "http_status", "pentrace_error_response"]


class BadRequest(UsageError):
    """A query parameter or path value of an HTTP request is invalid (HTTP 400)."""


def error_response(
    status: int, message: str, *, hint: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """A JSON error response."""
    body = {"error": {"status": status, "message": message, "hint": hint}}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def http_status(error: PentraceError) -> int:
    """The HTTP status of a library error."""
    if isinstance(error, NotFoundError):
        return 404
    if isinstance(error, AmbiguousIdError | InvalidNameError | UsageError):
        return 400
    return 500


def pentrace_error_response(error: PentraceError) -> JSONResponse:
    """A library error as a JSON response with its hint."""
    return error_response(http_status(error), error.message, hint=error.hint)
