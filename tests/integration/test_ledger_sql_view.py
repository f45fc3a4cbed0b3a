"""SQL readers get every row's event id (and session id) from the view ``runtime_event_rows``.

Row form 2 leaves ``event_id`` NULL where the row's stream and sequence spell it
(ADR 0058); a tool reading the ledger with plain SQL read NULL in every row.
The view spells them out, on both backends, at no storage cost (ADR 0080), and is
read here with the database's own driver, as such a tool would.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import text

from pentrace.domain.runtime import build_event
from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.testing.files import write_shards
from tests.integration.ledger_backends import LedgerBackend
from tests.integration.test_ledger_indexer import AGENT, PROJECT, trace_lines

SESSION = "session-2026-11-29-10-00-00-00000001"


def _plain_sql(backend: LedgerBackend, ledger: RuntimeEventLedger, query: str) -> list[Any]:
    """Rows of ``query`` through the driver itself (sqlite3, psycopg), no pentrace code."""
    if ledger.db.path is not None:
        conn = sqlite3.connect(ledger.db.path)
        try:
            return conn.execute(query).fetchall()
        finally:
            conn.close()
    import psycopg

    url = backend.url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as pg:
        return pg.execute(query).fetchall()


def _ledger_with_rows(backend: LedgerBackend, root: Path) -> RuntimeEventLedger:
    write_shards(root, PROJECT, AGENT, SESSION, [trace_lines(SESSION, 3)])
    ledger = RuntimeEventLedger(backend.database(), backend.settings())
    sync(ledger, root)
    foreign = build_event(
        event_type="message.updated", payload={"n": 1}, time_ms=1, sequence=1, stream_id="x"
    ).to_builtins()
    foreign["id"] = "evt:foreign:given"  # an id stored as sent
    assert ledger.append(foreign)
    return ledger


def test_plain_sql_reads_every_event_id_from_the_view(
    tmp_path: Path, ledger_backend: LedgerBackend
) -> None:
    ledger = _ledger_with_rows(ledger_backend, tmp_path)
    table, view = ledger.db.tables.events.name, f"{ledger_backend.prefix}runtime_event_rows"
    stored = _plain_sql(ledger_backend, ledger, f"SELECT event_id FROM {table}")
    assert [row[0] for row in stored].count(None) == len(stored) - 1  # row form 2: derived
    rows = _plain_sql(
        ledger_backend,
        ledger,
        f"SELECT notification_id, event_id, session_id, stream_id, sequence "
        f"FROM {view} ORDER BY notification_id",
    )
    expected = [entry.event_id for entry in ledger.replay_after(None, limit=0).events]
    assert [row[1] for row in rows] == expected
    assert rows[-1][1] == "evt:foreign:given"
    assert {row[2] for row in rows[:-1]} == {SESSION}
    for _, event_id, _, stream, sequence in rows[:-1]:
        assert event_id == f"evt:{stream}:{sequence:08d}"
    # A filter on the view finds the row (the index of the table underneath serves it).
    one = _plain_sql(
        ledger_backend, ledger, f"SELECT event_id FROM {view} WHERE event_id = '{expected[2]}'"
    )
    assert one == [(expected[2],)]
    ledger.close()


def test_the_view_is_made_again_by_a_writable_open_and_never_blocks_dropping_the_table(
    tmp_path: Path, ledger_backend: LedgerBackend
) -> None:
    ledger = _ledger_with_rows(ledger_backend, tmp_path)
    view = f"{ledger_backend.prefix}runtime_event_rows"
    held = ledger.count()
    with ledger.db.writing("drop the view") as conn:
        conn.execute(text(f'DROP VIEW "{view}"'))
    ledger.close()
    reopened = RuntimeEventLedger(ledger_backend.database(), ledger_backend.settings())
    assert len(_plain_sql(ledger_backend, reopened, f"SELECT event_id FROM {view}")) == held
    table = reopened.db.tables.events.name
    with reopened.db.writing("drop the events table") as conn:
        conn.execute(text(f'DROP TABLE "{table}"'))  # the view does not hold it
    reopened.close()
    again = RuntimeEventLedger(ledger_backend.database(), ledger_backend.settings())
    assert _plain_sql(ledger_backend, again, f"SELECT event_id FROM {view}") == []
    again.close()
