"""Revalidation: a strong ``ETag`` over what makes an answer, and ``If-None-Match`` read safely.

A route that may be cached sends ``Cache-Control: no-cache`` and an ETag
(:func:`strong_etag`); the browser keeps the answer but asks again each time, and
:func:`not_modified` says whether the request's ``If-None-Match`` names the
current ETag, so the route can answer 304 with no body (RFC 9110, 13.1.2).

The header is the client's: any length the HTTP parser let through, any number
of entries, any bytes.  It is read in one linear pass and never echoed.  An
entry that is not a quoted entity-tag (``"..."``, optionally ``W/"..."``) matches
nothing; ``*`` matches any current answer, as the RFC says; the comparison is
the weak one the RFC asks for on ``If-None-Match`` (``W/`` is ignored).
"""

from __future__ import annotations

import hashlib
from typing import Final

from starlette.requests import Request

__all__ = ["not_modified", "strong_etag"]

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
