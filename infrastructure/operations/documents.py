"""The session documents: one JSON shape of a session for every surface (ADR 0036).

:func:`session_document` is a session's entry in a listing (``pentrace list
--json``, ``GET /api/v1/sessions``); :func:`session_detail` adds the files,
the summary and the numbers (``pentrace show --json``, ``GET /api/v1/sessions/{id}``).
Both surfaces print the same object; the service then passes it through the
redaction policy, as it does with everything that leaves it.

The names before this shape are kept as aliases (:data:`CLI_ALIASES`,
:data:`SERVICE_ALIASES`): each surface's old field, with its old meaning, next
to the new one.  The two sets differ because the old names collide: ``model``
was ``provider/model_id`` in the CLI and the bare model id in the service.
:data:`FIELDS` lists every field with its type and meaning; the OpenAPI schema
and ``docs/cli-json.md`` follow it.  :func:`replay_document` is the replay of
a session (``pentrace replay --json``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from pentrace.infrastructure.analytics.prices import CostTally, PriceTable, load_prices
from pentrace.infrastructure.catalog.listing import SessionRow, short_id
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef
from pentrace.infrastructure.trace.reader import ParseReport
from pentrace.projections.replay import ReplayItem
from pentrace.projections.session_summary import SessionSummary, numbers_of

__all__ = [
    "CLI_ALIASES",
    "DETAIL_FIELDS",
    "FIELDS",
    "SERVICE_ALIASES",
    "CostTally",
    "PriceTable",
    "cost_fields",
    "cost_flag",
    "load_prices",
    "replay_document",
    "replay_item",
    "session_cost",
    "session_detail",
    "session_document",
    "shard_files",
    "with_aliases",
]

# name, JSON Schema type (``?``: or null), meaning; the listing entry, then what the detail adds.
_TABLE: Final = """
session_id           string    the full session id
ref                  string    project/agent/session_id: names the session when its id is shared
short_id             string    the 8-hex token of a native id (what you type); others unchanged
project              string    the project the session lives in
agent                string    the agent the session lives under
first_timestamp      string?   the first record's timestamp, as written
last_timestamp       string?   the last record's timestamp, as written
duration_s           number?   first to last record, in seconds
provider             string?   from the first session_meta
model_id             string?   from the first session_meta
model_name           string?   provider/model_id (model_id alone without a provider)
source               string?   subagent, schedule, or null for a user session
turns                integer   committed turns
tokens               integer   every request's token total, summed
requests             integer   requests begun, however they ended
last_request_status  string    the last request's status; open if it never ended, none without one
records              integer   records in all shards
shard_count          integer   shard files
bytes                integer   size of all shards
has_errors           boolean   errors in the history, damaged files or an unreadable session
problem              string?   why the session could not be read (it is still listed)
cost                 number?   tokens per model priced (docs/cost.md); null when no model is priced
currency             string    the currency of cost
cost_unpriced        array     models with tokens and no price: their tokens are not in cost
cost_fallback        array     models priced by the price table's [default] rate, a guess
--
shard_files          array     {index, day, path (under the data root), bytes} per shard
skipped_lines        integer   malformed lines the reader skipped
torn_tails           integer   shards whose last line is torn (a crash mid-write)
summary              object    the session summary (docs/cli-json.md)
numbers              object    requests, turns, tokens, duration and model, as every surface shows
"""
Field = tuple[str, str | list[str], str]


def _fields(rows: str) -> tuple[Field, ...]:
    parsed = (line.split(maxsplit=2) for line in rows.strip().splitlines())
    return tuple((n, [k[:-1], "null"] if k.endswith("?") else k, m) for n, k, m in parsed)


_ENTRY, _DETAIL = _TABLE.split("--\n")
FIELDS: Final = _fields(_ENTRY)
"""The listing entry's fields: (name, JSON Schema type, meaning), in document order."""
DETAIL_FIELDS: Final = _fields(_DETAIL)
"""What the detail adds to the listing entry."""

# Old name -> the field it repeats.  Deprecated; kept for one release (CHANGELOG).
CLI_ALIASES: Final[Mapping[str, str]] = {
    "start": "first_timestamp",
    "last": "last_timestamp",
    "model": "model_name",
    "status": "last_request_status",
    "shards": "shard_count",
}
# The service's names before this shape; the web viewer and scripts may read them.
SERVICE_ALIASES: Final[Mapping[str, str]] = {
    "id": "session_id",
    "start": "first_timestamp",
    "model": "model_id",
    "last_status": "last_request_status",
    "shards": "shard_count",
}


def session_document(row: SessionRow, prices: PriceTable | None = None) -> dict[str, Any]:
    """One session's listing entry, with the fields of :data:`FIELDS` in that order; the
    cost is priced with ``prices`` (default: :func:`load_prices`)."""
    summary = row.summary
    table = load_prices() if prices is None else prices
    numbers = numbers_of(summary)
    return {
        "session_id": row.session_id,
        "ref": f"{row.project}/{row.agent}/{row.session_id}",
        "short_id": short_id(row.session_id),
        "project": row.project,
        "agent": row.agent,
        "first_timestamp": summary.first_timestamp,
        "last_timestamp": summary.last_timestamp,
        "duration_s": numbers.duration_s,
        "provider": summary.provider,
        "model_id": summary.model_id,
        "model_name": numbers.model,
        "source": summary.source,
        "turns": summary.turns,
        "tokens": summary.total_tokens,
        "requests": numbers.request_total,
        "last_request_status": row.status,
        "records": summary.records,
        "shard_count": row.shards,
        "bytes": row.bytes,
        "has_errors": row.has_errors,
        "problem": row.problem,
        **cost_fields(session_cost(summary, table)),
    }


def session_cost(summary: SessionSummary, prices: PriceTable) -> CostTally:
    """What a session cost: its tokens per model (``SessionSummary.model_tokens``) through
    :class:`CostTally`, the sum ``stats cost --by session`` makes of the same counts.  Every
    surface that shows a session's cost takes it from here (the Traces list, the Session
    page, ``list``, ``show``, ``report`` and the HTTP API)."""
    tally = CostTally(prices)
    for model, counts in sorted((summary.model_tokens or {}).items()):
        tally.add(model, *(_count(value) for value in counts[:4]))
    return tally


def cost_fields(tally: CostTally) -> dict[str, Any]:
    """A cost as documents carry it: the figure (null when nothing is priced), its currency,
    and the models priced by a fallback rate or not at all (ADR 0099)."""
    flags = tally.flags()
    return {
        "cost": tally.amount(),
        "currency": tally.prices.currency,
        "cost_unpriced": flags["unpriced"],
        "cost_fallback": flags["fallback"],
    }


def cost_flag(document: Mapping[str, Any]) -> str:
    """The short word(s) shown beside a cost that is not all real prices: ``fallback``,
    ``unpriced`` (some models have no price), both, or nothing."""
    flags = [
        name
        for name, key in (("fallback", "cost_fallback"), ("unpriced", "cost_unpriced"))
        if document.get(key)
    ]
    return ", ".join(flags)


def _count(value: object) -> int:
    """A token count as priced: a whole number >= 0; anything else a trace may hold is 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value) if math.isfinite(value) and value >= 0 else 0


def shard_files(root: DataRoot, ref: SessionRef) -> list[dict[str, Any]]:
    """Each shard's index, day, path relative to the data root and size (None if it vanished)."""
    files = []
    for shard in ref.shards:
        try:
            size: int | None = os.stat(shard.path).st_size
        except OSError:
            size = None
        path = shard.path.relative_to(root.path) if shard.path.is_relative_to(root.path) else None
        day = shard.day.isoformat()
        where = str(path) if path is not None else shard.path.name
        files.append({"index": shard.index, "day": day, "path": where, "bytes": size})
    return files


def session_detail(
    root: DataRoot, ref: SessionRef, row: SessionRow, prices: PriceTable | None = None
) -> dict[str, Any]:
    """The listing entry plus :data:`DETAIL_FIELDS`: files, damage, summary and numbers."""
    return {
        **session_document(row, prices),
        "shard_files": shard_files(root, ref),
        "skipped_lines": row.skipped_lines,
        "torn_tails": row.torn_tails,
        "summary": msgspec.to_builtins(row.summary),
        "numbers": msgspec.to_builtins(numbers_of(row.summary)),
    }


def with_aliases(document: Mapping[str, Any], aliases: Mapping[str, str]) -> dict[str, Any]:
    """``document`` with each old name next to the field it repeats."""
    return {**document, **{old: document[new] for old, new in aliases.items()}}


def replay_item(item: ReplayItem) -> dict[str, Any]:
    """One replayed record: where it is, its round and state, and the envelope as written."""
    return {
        "position": item.position,
        "shard": item.shard,
        "line": item.record.line,
        "round": item.round,
        "state": item.state,
        "status": item.status,
        "turn": item.turn,
        "in_compaction": item.in_compaction,
        # The trace's own bytes: compact JSON output repeats each line exactly.
        "envelope": msgspec.Raw(item.record.raw),
    }


def replay_document(
    ref: SessionRef, items: list[ReplayItem], report: ParseReport, *, include_uncommitted: bool
) -> dict[str, Any]:
    """The ``pentrace replay --json`` document of ``items`` (already chosen)."""
    return {
        "project": ref.project,
        "agent": ref.agent,
        "session_id": ref.session_id,
        "include_uncommitted": include_uncommitted,
        "skipped_lines": report.skipped_count,
        "torn_tails": len(report.torn_tails),
        "items": [replay_item(item) for item in items],
    }
