"""JSON error bodies: ``{"error": {"status", "message", "hint"}}``, one shape everywhere.

Library errors (:class:`~pentrace.errors.PentraceError`) become HTTP errors in
one place, :func:`http_status`; their messages already avoid payload values.
Every body is written by an :class:`ErrorWriter`, which rewrites host paths
before anything leaves: a path under the data root becomes relative to it
(``demo/agents/coder/sessions/...``), the data root itself ``<data root>``, and
any other absolute path on this machine ``<host path>``.  Routes never build
error bodies: they raise, and the app's handlers serialize through the writer,
so no route can leak where the data lives.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from starlette.responses import JSONResponse

from pentrace.errors import (
    AmbiguousIdError,
    ImageDataError,
    ImageTooLargeError,
    ImageTypeError,
    InvalidNameError,
    NotFoundError,
    PentraceError,
    UsageError,
)

__all__ = ["BadRequest", "ErrorWriter", "Forbidden", "http_status"]

# An absolute path in running text: starts at "/" after a boundary, runs to a space or quote.
_ABSOLUTE: Final = re.compile(r"(?<![\w.~/:-])/[^\s'\"`()<>,;]+")


class BadRequest(UsageError):
    """A query parameter, path value or header of an HTTP request is invalid (HTTP 400)."""


class Forbidden(UsageError):
    """The request is well formed but this server does not serve it to this caller (HTTP 403)."""


def http_status(error: PentraceError) -> int:
    """The HTTP status of a library error."""
    if isinstance(error, Forbidden):
        return 403
    if isinstance(error, NotFoundError):
        return 404
    if isinstance(error, ImageTooLargeError):
        return 413
    if isinstance(error, ImageTypeError):
        return 415
    if isinstance(error, ImageDataError):
        return 422
    if isinstance(error, AmbiguousIdError | InvalidNameError | UsageError):
        return 400
    return 500


class ErrorWriter:
    """Builds every error response of one app, with host paths rewritten (module docstring)."""

    def __init__(self, data_root: Path) -> None:
        forms = {str(data_root), os.path.abspath(data_root), os.path.realpath(data_root)}
        # Longest first, so /a/b/root wins over a shorter form that prefixes it.
        roots = sorted((form.rstrip("/") for form in forms if form.rstrip("/")), key=len)[::-1]
        # The root, then either "/" (a path under it) or the end of the path.
        self._root = (
            re.compile("(?:" + "|".join(map(re.escape, roots)) + r")(/|(?![\w.-]))")
            if roots
            else None  # the data root is "/": every absolute path is under it
        )

    def scrub(self, text: str) -> str:
        """``text`` with every host path made relative to the data root or hidden."""
        if self._root is not None:
            text = self._root.sub(lambda m: "" if m.group(1) else "<data root>", text)
        return _ABSOLUTE.sub(_hide_host_path, text)

    def response(
        self,
        status: int,
        message: str,
        *,
        hint: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> JSONResponse:
        """A JSON error response."""
        body = {
            "error": {
                "status": status,
                "message": self.scrub(message),
                "hint": None if hint is None else self.scrub(hint),
            }
        }
        return JSONResponse(body, status_code=status, headers=dict(headers or {}))

    def for_error(self, error: PentraceError) -> JSONResponse:
        """A library error as a JSON response with its hint."""
        return self.response(http_status(error), error.message, hint=error.hint)


def _hide_host_path(match: re.Match[str]) -> str:
    """``<host path>`` for an absolute path whose first folder exists on this machine
    (``/tmp/...``, ``/home/...``); a URL path such as ``/api/v1/sessions`` is kept."""
    path = match.group(0)
    first = path.split("/", 2)[1]
    return "<host path>" if first and os.path.lexists("/" + first) else path
