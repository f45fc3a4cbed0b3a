"""Read-only session endpoints over the catalog and the trace files.

``GET /api/v1/sessions`` lists (filters and sort as ``pentrace sessions list``),
``GET /api/v1/sessions/{id}`` shows one session's meta and counters (a unique
id prefix or 8-hex token works), and ``GET /api/v1/sessions/{id}/trace``
streams a shard verbatim, or record by record through the redaction policy.
Summaries pass through the same redaction before they leave, so a secret that
slipped into meta (a workspace path with a token in it) is hidden here too.
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
from pentrace.infrastructure.catalog import (
    SORT_KEYS,
    SessionFilter,
    SessionRow,
    list_sessions,
    parse_time_bound,
    read_row,
    resolve_session,
)
from pentrace.infrastructure.layout import SessionRef, ShardRef
from pentrace.infrastructure.trace_reader import read_shard
from pentrace.service.context import ServiceContext
from pentrace.service.errors import BadRequest

__all__ = ["list_route", "session_item", "show_route", "trace_route"]

_CHUNK: Final = 256 * 1024
_encode: Final = JsonEncoder().encode
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})


def session_item(row: SessionRow) -> dict[str, Any]:
    """One list entry: id, project, agent, start, model, turns, tokens, last status."""
    summary = row.summary
    item: dict[str, Any] = redact(
        {
            "id": row.session_id,
            "project": row.project,
            "agent": row.agent,
            "start": row.start,
            "provider": summary.provider,
            "model": summary.model_id,
            "turns": summary.turns,
            "tokens": summary.total_tokens,
            "last_status": row.status,
            "has_errors": row.has_errors,
            "shards": row.shards,
        }
    ).value
    return item


def _flag(request: Request, name: str) -> bool | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise BadRequest(
        f"query parameter {name}: expected true or false, found {raw[:40]!r}",
        hint=f"for example ?{name}=true",
    )


def _int(request: Request, name: str, default: int | None, low: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or int(raw) < low:
        raise BadRequest(
            f"query parameter {name}: expected an integer >= {low}, found {raw[:40]!r}",
            hint=f"for example ?{name}={max(low, 1)}",
        )
    return int(raw)


def _filters(request: Request) -> SessionFilter:
    query = request.query_params
    now = datetime.now(UTC)
    since, until = query.get("since"), query.get("until")
    # A bad time bound or status raises UsageError, which the app answers with 400.
    return SessionFilter(
        project=query.get("project") or None,
        agent=query.get("agent") or None,
        since=parse_time_bound(since, now) if since else None,
        until=parse_time_bound(until, now) if until else None,
        model=query.get("model") or None,
        status=query.get("status") or None,
        has_errors=_flag(request, "has_errors"),
    )


async def list_route(request: Request) -> Response:
    """``GET /api/v1/sessions``."""
    context: ServiceContext = request.app.state.context
    filters = _filters(request)
    sort = request.query_params.get("sort") or "start"
    if sort not in SORT_KEYS:
        raise BadRequest(
            f"query parameter sort: expected one of {', '.join(SORT_KEYS)}, found {sort[:40]!r}",
            hint="for example ?sort=tokens",
        )
    reverse = bool(_flag(request, "reverse"))
    limit = _int(request, "limit", None, 1)
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
    ref = await context.run(resolve_session, context.root, request.path_params["session_id"])
    row = await context.run(read_row, ref)
    detail = {
        **session_item(row),
        "bytes": row.bytes,
        "skipped_lines": row.skipped_lines,
        "torn_tails": row.torn_tails,
        "problem": row.problem,
        "summary": redact(msgspec.to_builtins(row.summary)).value,
    }
    return JSONResponse(detail)


async def trace_route(request: Request) -> Response:
    """``GET /api/v1/sessions/{id}/trace``: a shard's JSONL, verbatim or ``?redacted=true``.

    ``?shard=N`` picks a shard (default: the latest, a complete model context);
    ``?shard=all`` streams every shard in index order.
    """
    context: ServiceContext = request.app.state.context
    redacted = bool(_flag(request, "redacted"))
    ref = await context.run(resolve_session, context.root, request.path_params["session_id"])
    shards = _chosen_shards(ref, request.query_params.get("shard"))
    body = _redacted_lines(shards) if redacted else _verbatim(shards)
    return StreamingResponse(
        body,
        media_type="application/x-ndjson",
        headers={
            "X-Pentrace-Session": ref.session_id,
            "X-Pentrace-Redacted": str(redacted).lower(),
        },
    )


def _chosen_shards(ref: SessionRef, raw: str | None) -> list[ShardRef]:
    if raw is None or raw == "":
        return [ref.shards[-1]]
    if raw == "all":
        return list(ref.shards)
    if not raw.isdigit():
        raise BadRequest(
            f"query parameter shard: expected a shard number or 'all', found {raw[:40]!r}",
            hint="for example ?shard=1 or ?shard=all",
        )
    for shard in ref.shards:
        if shard.index == int(raw):
            return [shard]
    have = ", ".join(str(shard.index) for shard in ref.shards)
    raise NotFoundError(
        f"session {ref.session_id} has no shard {int(raw)} (it has {have})",
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
