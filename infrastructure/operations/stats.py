"""Stats documents: which projections each stat reads, catching them up, and the document
that ``pentrace stats <kind> --json`` prints and ``GET /api/v1/stats/{kind}`` returns.

:data:`NEEDS` is the one table of the built-in projections each stat reads.
:func:`prepare` brings them up to date with the ledger (optionally syncing the
traces the ledger is missing first, with retention held until the projections
have read them) and opens the analytics database; :func:`document` builds the
JSON document from it (``docs/projections.md``: fields are only ever added);
:func:`stats_document` does both.  The CLI formats the document as a table or
a plot, the service serializes it (ADR 0036).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pentrace.errors import UsageError
from pentrace.infrastructure.analytics import queries
from pentrace.infrastructure.analytics.activity_queries import OUTCOME_GROUPS, TOOL_GROUPS
from pentrace.infrastructure.analytics.cold import cold_build
from pentrace.infrastructure.analytics.database import AnalyticsDatabase, analytics_url
from pentrace.infrastructure.analytics.failures import failure_warnings
from pentrace.infrastructure.analytics.prices import load_prices
from pentrace.infrastructure.analytics.query_rows import GROUPS, column_of
from pentrace.infrastructure.analytics.registry import BUILTINS
from pentrace.infrastructure.analytics.runner import catch_up, open_ledger, open_projection
from pentrace.infrastructure.analytics.session_queries import SESSION_GROUPS
from pentrace.infrastructure.ledger.bulk import sync

__all__ = [
    "DEFAULT_BY",
    "GROUPINGS",
    "NEEDS",
    "Prepared",
    "StatsQuery",
    "document",
    "prepare",
    "read_models",
    "stats_document",
]

NEEDS: Final[Mapping[str, tuple[str, ...]]] = {
    "tokens": ("tokens",),
    "cost": ("tokens",),
    "tools": ("tools",),
    "requests": ("sessions",),
    "sessions": ("sessions",),
    "tree": ("sessions", "tokens"),
}
"""The built-in projections (``registry.BUILTINS``) each stat kind reads."""

DEFAULT_BY: Final[Mapping[str, str]] = {"tokens": "model", "cost": "model", "sessions": "day"}
"""The grouping of the kinds that group, when none is asked for."""


GROUPINGS: Final[Mapping[str, tuple[str, ...]]] = {
    "tokens": tuple(GROUPS),
    "cost": tuple(GROUPS),
    "tools": TOOL_GROUPS,
    "requests": OUTCOME_GROUPS,
    "sessions": SESSION_GROUPS,
}
"""The groupings (``--by``) of the kinds that group (``tree`` does not)."""


@dataclass(frozen=True, slots=True)
class StatsQuery:
    """One stat: its kind, grouping, inclusive UTC days and (``cost``) the price table; a
    kind or grouping that does not exist is a :class:`~pentrace.errors.UsageError`."""

    kind: str
    by: str | None = None
    since: str | None = None
    until: str | None = None
    prices: Path | None = None

    def __post_init__(self) -> None:
        if self.kind not in NEEDS:
            raise UsageError(
                f"stats kind: expected one of {', '.join(NEEDS)}, found {self.kind[:30]!r}",
                hint="for example: tokens, grouped by model",
            )
        if self.by is not None and self.kind in GROUPINGS:
            # Checked here, before any catching up, which can take long on a big data root.
            column_of(self.by, GROUPINGS[self.kind], minutes=True)


@dataclass(frozen=True, slots=True)
class Prepared:
    """The analytics database with the needed read models ready; the caller closes ``db``.

    ``warnings`` name the sessions a ``sync_first`` had to leave out, and the
    projections whose numbers leave out events their handler failed on (ADR 0032).
    """

    db: AnalyticsDatabase
    warnings: tuple[str, ...] = ()


def _catch_up(names: tuple[str, ...], root: Path, env: Mapping[str, str] | None) -> None:
    for name in names:
        catch_up(BUILTINS[name], data_root=root, env=env)


def prepare(
    root: Path,
    kind: str,
    *,
    catch_up_first: bool = True,
    sync_first: bool = False,
    env: Mapping[str, str] | None = None,
    workers: int = 1,
) -> Prepared:
    """Ready the read models ``kind`` needs and open the analytics database.

    ``catch_up_first=False`` serves the read models as the runners left them
    (their tables are created once, empty).  ``sync_first`` indexes the traces
    the ledger is missing before catching up.  Otherwise a read model that was
    never built, over a ledger that never held an event, is built straight
    from the traces (:func:`~pentrace.infrastructure.analytics.cold.cold_build`,
    in ``workers`` processes; 0 picks them) before the catch-up.
    """
    names = NEEDS[StatsQuery(kind).kind]
    left_out: list[str] = []
    if catch_up_first and not sync_first:
        for name in names:
            report = cold_build(BUILTINS[name], data_root=root, env=env, workers=workers)
            left_out += [
                f"{f.project}/{f.agent}/{f.session_id}: cut short in {name}: {f.message}"
                for f in (report.failures if report is not None else ())
            ]
    if sync_first:
        ledger = open_ledger(root, env)
        try:
            # Retention waits until the projections have read what this sync indexed.
            with ledger.retention_held():
                left_out = [
                    f"{f.project}/{f.agent}/{f.session_id}: left out of the sync: {f.message}"
                    for f in sync(ledger, root).failures
                ]
                _catch_up(names, root, env)
        finally:
            ledger.close()
        db = read_models(root, names, catch_up_first=False, env=env)
    else:
        db = read_models(root, names, catch_up_first=catch_up_first, env=env)
    return Prepared(db, (*left_out, *failure_warnings(db, names)))


def read_models(
    root: Path,
    names: tuple[str, ...],
    *,
    catch_up_first: bool = True,
    env: Mapping[str, str] | None = None,
) -> AnalyticsDatabase:
    """The analytics database with the ``names`` projections' tables in place, caught up with
    the ledger first unless ``catch_up_first`` is False (their tables are then created once)."""
    for name in names:
        if catch_up_first:
            catch_up(BUILTINS[name], data_root=root, env=env)
        else:
            open_projection(BUILTINS[name], root, env).view.db.close()
    return AnalyticsDatabase(analytics_url(root, os.environ if env is None else env))


def document(db: AnalyticsDatabase, query: StatsQuery) -> dict[str, Any]:
    """The JSON document of one stat over a prepared analytics database."""
    kind, since, until = query.kind, query.since, query.until
    by = query.by or DEFAULT_BY.get(kind)
    if kind == "tokens":
        return {"by": by, "rows": queries.tokens(db, by or "model", since, until)}
    if kind == "cost":
        table = load_prices(query.prices)
        rows = queries.cost(db, table, by or "model", since, until)
        return {"by": by, "currency": table.currency, "rows": rows}
    if kind == "tools":
        return queries.tools(db, since, until, by=by)
    if kind == "requests":
        value = queries.requests(db, since, until)
        if by is not None:  # per group, with the success rate (act_minutes)
            value.update(by=by, rows=queries.outcomes(db, by, since, until))
        return value
    if kind == "sessions":
        return {"by": by, "rows": queries.sessions(db, by or "day", since, until)}
    return {"trees": queries.tree(db, since, until)}


def stats_document(
    root: Path,
    query: StatsQuery,
    *,
    catch_up_first: bool = True,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """:func:`prepare` then :func:`document`, closing the database."""
    prepared = prepare(root, query.kind, catch_up_first=catch_up_first, env=env)
    try:
        return document(prepared.db, query)
    finally:
        prepared.db.close()
