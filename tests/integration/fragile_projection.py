"""Projections whose handler cannot take one kind of event: a tool output holding ``POISON``.

Shared by the isolation tests and the crash test (the CLI loads them as
``tests.integration.fragile_projection:Fragile``).  ``fixed = True`` is the
handler after its author fixed it.
"""

from __future__ import annotations

from typing import ClassVar

from pentrace.infrastructure.analytics import (
    AnalyticsEvent,
    AnalyticsProjection,
    Transaction,
    handles,
)

POISON = "POISON"
# What a careless handler may put in its error: the database URL, password included.
LEAKY_ERROR = "cannot take it (postgresql://reader:hunter2secret@db.internal/x)"


def poisoned(event: AnalyticsEvent) -> bool:
    """True for the tool output the handler cannot take."""
    return POISON in str(event.payload.get("output", ""))


class Fragile(AnalyticsProjection):
    """Counts tool outputs per session with merged upserts; raises after writing on POISON."""

    name = "fragile"
    schema: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS fragile_outputs (session_id VARCHAR(600) PRIMARY KEY, "
        "outputs BIGINT, chars BIGINT)",
    )
    fixed: ClassVar[bool] = False

    @handles("tool.result")
    def on_result(self, event: AnalyticsEvent, tx: Transaction) -> None:
        output = str(event.payload.get("output", ""))
        tx.add("fragile_outputs", {"session_id": event.session}, outputs=1, chars=len(output))
        if poisoned(event) and not self.fixed:
            raise RuntimeError(LEAKY_ERROR)


class FragileSql(AnalyticsProjection):
    """Logs every tool output with raw SQL (so the event runs in a savepoint), then raises."""

    name = "fragile_sql"
    schema: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS fragile_log (session_id VARCHAR(600), seq BIGINT, "
        "PRIMARY KEY (session_id, seq))",
        "CREATE TABLE IF NOT EXISTS fragile_totals (session_id VARCHAR(600) PRIMARY KEY, "
        "outputs BIGINT)",
    )
    fixed: ClassVar[bool] = False

    @handles("tool.result")
    def on_result(self, event: AnalyticsEvent, tx: Transaction) -> None:
        tx.add("fragile_totals", {"session_id": event.session}, outputs=1)
        # Reading the row it has just added puts the event in a savepoint first.
        if tx.get("fragile_totals", {"session_id": event.session}) is None:
            raise AssertionError("a handler reads its own writes")
        tx.execute(
            "INSERT INTO fragile_log (session_id, seq) VALUES (:s, :q)",
            {"s": event.session, "q": event.sequence},
        )
        if poisoned(event) and not self.fixed:
            raise KeyError("missing field for POISON")


class Refused(AnalyticsProjection):
    """Stores each output's text in a NOT NULL column, and None for POISON: the database
    refuses the batched write, and the runner must find which event it was."""

    name = "refused"
    schema: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS refused_outputs (session_id VARCHAR(600), seq BIGINT, "
        "body TEXT NOT NULL, PRIMARY KEY (session_id, seq))",
    )

    @handles("tool.result")
    def on_result(self, event: AnalyticsEvent, tx: Transaction) -> None:
        body = None if poisoned(event) else str(event.payload.get("output", ""))
        tx.put("refused_outputs", {"session_id": event.session, "seq": event.sequence}, body=body)
