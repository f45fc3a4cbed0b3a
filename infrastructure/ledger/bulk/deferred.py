"""A bulk load into an empty events table makes the scoped indexes after its rows (ADR 0073).

Each scoped index (type, session, agent, directory) costs every insert a
B-tree descent and a page write: together they were more than half of what
``ledger sync`` spent inserting into SQLite, on the one core that writes.
Made once at the end from the finished table, they cost a sort, and the
writer's core is free for building rows meanwhile.

Only an empty table is loaded this way: nothing could read it through those
indexes yet, and no reader of a ledger in use has its pages slowed.  The key
constraints stay live throughout (the ``(stream_id, sequence)`` key and the
stored event ids), so a held row is refused as always, and so does the
``inserted_at`` index retention reads (appended to, at no cost to speak of).
The indexes are dropped and made again in write transactions; a load that
stops halfway (an error, SIGKILL) leaves a table that is complete but
slower to query, and the next writable open makes what is missing
(:func:`..backend.upgrade.upgrade_indexes`), as ``ledger sync`` does again at its end.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

from sqlalchemy import literal, select, text

from pentrace.infrastructure.ledger.backend.upgrade import restore_indexes

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.backend.database import LedgerDatabase

__all__ = ["DEFERRED", "indexes_after_rows"]

#: The indexes a bulk load makes after its rows (suffixes of the events table's name).
DEFERRED: Final = ("type_position_idx", "session_position_idx", "agent_idx", "directory_idx")
_log = logging.getLogger(__name__)


@contextmanager
def indexes_after_rows(db: LedgerDatabase, *, worth_it: bool) -> Iterator[bool]:
    """Drop the :data:`DEFERRED` indexes of an empty events table for the block, and make
    them when it ends, whether it raised or not; yields whether they were dropped.

    Nothing happens (False) unless ``worth_it`` (a load large enough that the
    sort is cheaper than the inserts' upkeep), the dialect :attr:`defers_indexes`
    and the table holds no row when the write transaction that drops them starts.
    """
    if not worth_it or not db.dialect.defers_indexes or db.read_only:
        yield False
        return
    events = db.tables.events
    with db.writing("drop the scoped indexes before a bulk load") as conn:
        empty = conn.execute(select(literal(1)).select_from(events).limit(1)).first() is None
        present = db.dialect.index_names(conn, events.name) if empty else set()
        dropped = [name for name in (f"{events.name}_{s}" for s in DEFERRED) if name in present]
        for name in dropped:
            conn.execute(text(f'DROP INDEX IF EXISTS "{name}"'))
    if not dropped:
        yield False
        return
    try:
        yield True
    except BaseException:
        # The load failed: make the indexes if the ledger still lets us, and raise its error.
        try:
            _restore(db)
        except Exception as error:  # noqa: BLE001  # the load's own error is the one to see
            _log.warning("ledger %s: the scoped indexes are made at its next open (%s)",
                         db.where, error)  # fmt: skip
        raise
    _restore(db)


def _restore(db: LedgerDatabase) -> None:
    with db.writing("make the scoped indexes after a bulk load") as conn:
        made = restore_indexes(conn, db.tables, db.dialect)
    _log.info("ledger %s: %d scoped indexes made after the bulk load", db.where, made)
