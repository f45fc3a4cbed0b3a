"""Read-only session endpoints over the catalog and the trace files.

``GET /api/v1/sessions`` lists (filters and sort as ``pentrace sessions list``),
``GET /api/v1/sessions/{id}`` shows one session's meta and counters (a unique
id prefix or 8-hex token works; ``/api/v1/sessions/{project}/{agent}/{id}``
names the owner when the id exists under several), and ``GET /api/v1/sessions/{id}/trace``
streams a shard record by record through the redaction policy, or verbatim
(``?redacted=false``) to a caller that sent the bearer token (ADR 0012).
Summaries pass through the same redaction before they leave, so a secret that
slipped into meta (a workspace path with a token in it) is hidden here too.
Every request value is read through :mod:`pentrace.service.edge.params`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.redaction import redact
from pentrace.errors import NotFoundError
from pentrace.infrastructure.catalog.listing import (
    SORT_KEYS,
    SessionFilter,
    SessionRow,
    list_sessions,
    read_row,
    resolve_session,
)
from pentrace.infrastructure.storage.layout import SessionRef, ShardRef
from pentrace.infrastructure.trace.reader import read_shard
from pentrace.projections.session_numbers import numbers_of
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.edge.auth import authenticated
from pentrace.service.edge.errors import ErrorWriter, Forbidden

__all__ = ["list_route", "session_filter", "session_item", "show_route", "trace_route"]

_CHUNK: Final = 256 * 1024
_encode: Final = JsonEncoder().encode
_MAX_SHARD: Final = 1_000_000
_MAX_LIMIT: Final = 1_000_000


def session_item(row: SessionRow) -> dict[str, Any]:
    """One list entry: id, its reference ``project/agent/id``, project, agent, start, model,
    turns, tokens, last status."""
    summary = row.summary
    numbers = numbers_of(summary)
    item: dict[str, Any] = redact(
        {
            "id": row.session_id,
            "ref": f"{row.project}/{row.agent}/{row.session_id}",
            "project": row.project,
            "agent": row.agent,
            "start": row.start,
            "provider": summary.provider,
            "model": summary.model_id,
            "model_name": numbers.model,
            "turns": summary.turns,
            "tokens": summary.total_tokens,
            "requests": numbers.request_total,
            "duration_s": numbers.duration_s,
            "last_status": row.status,
            "has_errors": row.has_errors,
            "shards": row.shards,
        }
    ).value
    return item


def session_filter(request: Request) -> SessionFilter:
    """The catalog filters of a request's query (the web Traces page reads the same ones)."""
    now = datetime.now(UTC)
    # A bad status raises UsageError, which the app answers with 400.
    return SessionFilter(
        project=params.text(request, "project"),
        agent=params.text(request, "agent"),
        since=params.time_bound(request, "since", now),
        until=params.time_bound(request, "until", now),
        model=params.text(request, "model"),
        status=params.text(request, "status"),
        has_errors=params.flag(request, "has_errors"),
    )


async def list_route(request: Request) -> Response:
    """``GET /api/v1/sessions``."""
    context: ServiceContext = request.app.state.context
    filters = session_filter(request)
    sort = params.choice(request, "sort", SORT_KEYS) or "start"
    reverse = bool(params.flag(request, "reverse"))
    limit = params.integer(request, "limit", low=1, high=_MAX_LIMIT)
    rows = await context.run(_list, context, filters, sort, reverse)
    shown = rows if limit is None else rows[:limit]
    return JSONResponse({"sessions": [session_item(row) for row in shown], "total": len(rows)})


def _list(
    context: ServiceContext, filters: SessionFilter, sort: str, reverse: bool
) -> list[SessionRow]:
    return list_sessions(context.root, filters, sort, reverse=reverse)


async def show_route(request: Request) -> Response:
    """``GET /api/v1/sessions/{id}``: meta, counters and files of one session."""
    context: ServiceContext = request.app.state.context
    errors: ErrorWriter = request.app.state.errors
    ref = await context.run(resolve_session, context.root, _reference(request))
    row = await context.run(read_row, ref)
    detail = {
        **session_item(row),
        "bytes": row.bytes,
        "skipped_lines": row.skipped_lines,
        "torn_tails": row.torn_tails,
        # A reader's message names files: relative to the data root, like error bodies.
        "problem": None if row.problem is None else errors.scrub(row.problem),
        "summary": redact(msgspec.to_builtins(row.summary)).value,
        "numbers": redact(msgspec.to_builtins(numbers_of(row.summary))).value,
    }
    return JSONResponse(detail)


async def trace_route(request: Request) -> Response:
    """``GET /api/v1/sessions/{id}/trace``: a shard's JSONL, redacted unless
    ``?redacted=false`` from a caller with the bearer token.

    ``?shard=N`` picks a shard (default: the latest, a complete model context);
    ``?shard=all`` streams every shard in index order.
    """
    context: ServiceContext = request.app.state.context
    redacted = params.flag(request, "redacted") is not False
    if not redacted and not authenticated(request.scope):
        raise Forbidden(
            "the verbatim trace (redacted=false) holds unredacted credentials: expected a "
            "request with the bearer token, found a server without one",
            hint="omit redacted=false for the redacted trace, or start the server with "
            "PENTRACE_API_TOKEN (or --token-file) and send Authorization: Bearer <token>",
        )
    ref = await context.run(resolve_session, context.root, _reference(request))
    shards = _chosen_shards(ref, params.integer_or(request, "shard", "all", high=_MAX_SHARD))
    body = _redacted_lines(shards) if redacted else _verbatim(shards)
    return StreamingResponse(
        body,
        media_type="application/x-ndjson",
        headers={
            "X-Pentrace-Session": ref.session_id,
            "X-Pentrace-Redacted": str(redacted).lower(),
        },
    )


def _reference(request: Request) -> str:
    """The session reference of the path: ``{id}`` or ``{project}/{agent}/{id}`` (ADR 0023)."""
    parts = [
        params.path_text(request, name)
        for name in ("project", "agent", "session_id")
        if name in request.path_params
    ]
    return "/".join(parts)


def _chosen_shards(ref: SessionRef, wanted: int | str | None) -> list[ShardRef]:
    if wanted is None:
        return [ref.shards[-1]]
    if wanted == "all":
        return list(ref.shards)
    for shard in ref.shards:
        if shard.index == wanted:
            return [shard]
    have = ", ".join(str(shard.index) for shard in ref.shards)
    raise NotFoundError(
        f"session {ref.session_id} has no shard {wanted} (it has {have})",
        hint="omit shard to get the latest",
    )


def _verbatim(shards: list[ShardRef]) -> Iterator[bytes]:
    """Each shard's bytes as they were when opened (a live writer's later appends are not read)."""
    for shard in shards:
        with Path(shard.path).open("rb") as handle:
            left = handle.seek(0, 2)
            handle.seek(0)
            while left > 0 and (chunk := handle.read(min(_CHUNK, left))):
                left -= len(chunk)
                yield chunk


def _redacted_lines(shards: list[ShardRef]) -> Iterator[bytes]:
    """Each record through the redaction policy; lines that do not parse are left out."""
    for shard in shards:
        batch: list[bytes] = []
        for record in read_shard(shard.path):
            batch.append(_encode(redact(record.value()).value) + b"\n")
            if len(batch) >= 256:
                yield b"".join(batch)
                batch = []
        if batch:
            yield b"".join(batch)
