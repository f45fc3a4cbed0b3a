"""The ledger's row form and dictionaries, as stored in the ledger itself (ADR 0058).

:func:`read_codec` builds the :class:`~.codec.RowCodec` of an open ledger
from ``runtime_event_meta`` (``row_form``) and ``runtime_event_dictionaries``.
:func:`add_dictionary` stores a first (or next) dictionary race-safely: two
writers that train one at once (two ingest followers on two hosts, one
PostgreSQL) both insert under the same next id with ``ON CONFLICT DO
NOTHING``, then both read back and use the one that landed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Connection, Engine, func, inspect, select

from pentrace.errors import LedgerError
from pentrace.infrastructure.ledger.backend.codec import CorruptRow, RowCodec, train_dictionary
from pentrace.infrastructure.ledger.backend.schema import ROW_FORM, ROW_FORM_KEY, LedgerTables

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.backend.database import LedgerDatabase

__all__ = [
    "add_dictionary",
    "mark_new_form",
    "read_codec",
    "read_plain",
    "row_form",
    "store_dictionary",
]

_FIRST_ID: Final = 1


def row_form(conn: Connection, tables: LedgerTables) -> str:
    """The ledger's recorded row form ("1" when none is recorded: an earlier ledger)."""
    meta = tables.meta
    value = conn.execute(
        select(meta.c.value).where(meta.c.key == ROW_FORM_KEY)
    ).scalar_one_or_none()
    return "1" if value is None else str(value)


def mark_new_form(conn: Connection, db: LedgerDatabase) -> None:
    """Record that the ledger was created with today's row form (once, race-safe)."""
    meta = db.tables.meta
    statement = db.dialect.upsert(meta).values(key=ROW_FORM_KEY, value=ROW_FORM)
    conn.execute(statement.on_conflict_do_nothing(index_elements=[meta.c.key]))


def read_codec(engine: Engine, tables: LedgerTables) -> RowCodec:
    """The codec of the ledger as stored now (a ledger without the tables: plain rows)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table(tables.dictionaries.name):
            return RowCodec()
        table = tables.dictionaries
        found = conn.execute(
            select(table.c.dictionary_id, table.c.content).order_by(table.c.dictionary_id)
        ).all()
        form = row_form(conn, tables)
    dictionaries = {int(key): bytes(content) for key, content in found}
    current = max(dictionaries) if dictionaries else None
    return RowCodec(dictionaries, current, derived_ids=form == ROW_FORM)


def add_dictionary(db: LedgerDatabase, samples: list[bytes], now_ms: int) -> RowCodec:
    """Train a dictionary on ``samples`` (plain envelopes), store it, and return the codec
    every writer now uses (this one's dictionary, or the one another writer stored first)."""
    table = db.tables.dictionaries
    with db.reading("read the ledger's dictionaries") as conn:
        held = conn.execute(select(func.max(table.c.dictionary_id))).scalar_one_or_none()
    next_id = int(held or 0) + 1 if held is not None else _FIRST_ID
    return store_dictionary(db, next_id, train_dictionary(samples, next_id), now_ms, len(samples))


def store_dictionary(
    db: LedgerDatabase, dictionary_id: int, content: bytes, now_ms: int, samples: int
) -> RowCodec:
    """Store a trained dictionary under ``dictionary_id`` unless one is there already (then
    this one is dropped), and return the codec read back: the same for every writer."""
    table = db.tables.dictionaries
    with db.writing("store a ledger dictionary") as conn:
        statement = db.dialect.upsert(table).values(
            dictionary_id=dictionary_id, content=content, created_at=now_ms, samples=samples
        )
        conn.execute(statement.on_conflict_do_nothing(index_elements=[table.c.dictionary_id]))
    return db.reload_codec()


def read_plain(
    db: LedgerDatabase, rows: Sequence[Any], json_at: int, position_at: int | None
) -> list[bytes]:
    """The plain envelope of column ``json_at`` of each of ``rows``, in order.

    A frame of a dictionary this process has not seen yet (another writer
    trained one) reloads the dictionaries once; a frame that still does not
    decompress is a :class:`LedgerError` naming the ledger and the row (its
    notification id, column ``position_at``).
    """
    stored = [row[json_at] for row in rows]
    for attempt in (1, 2):
        try:
            return db.codec.plain_list(stored)
        except CorruptRow as error:
            if attempt == 1 and error.dictionary_id not in (None, *db.codec.dictionaries):
                db.reload_codec()
                continue
            raise _corrupt(db, error, rows, json_at, position_at) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _corrupt(
    db: LedgerDatabase,
    error: CorruptRow,
    rows: Sequence[Any],
    json_at: int,
    position_at: int | None,
) -> LedgerError:
    decode = db.codec.decoder()
    where = "a row"
    for row in rows:
        try:
            decode(row[json_at])
        except CorruptRow as found:
            error = found
            if position_at is not None:
                where = f"notification {row[position_at]}"
            break
    named = "" if error.dictionary_id is None else f" (dictionary {error.dictionary_id})"
    return LedgerError(
        f"read the ledger on {db.where}: the stored envelope of {where} cannot be read: "
        f"{error.reason}{named}",
        hint="the ledger row or its dictionaries table is damaged; "
        "`pentrace ledger rebuild` indexes the traces again",
    )
