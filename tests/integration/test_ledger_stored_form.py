"""The ledger's stored form (ADR 0058): compressed envelopes, derived ids, same reads.

Every reader must hand out the very bytes the trace mapping built, whether a
row is stored compressed (a new ledger), plain (an earlier ledger's rows), or
written before the ledger had a dictionary.  Each test runs on SQLite and
PostgreSQL.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import msgspec
import pytest
from sqlalchemy import Column, Index, MetaData, Table, UniqueConstraint, select, update

from pentrace.errors import LedgerError
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.backend.codec import (
    MAGIC,
    RowCodec,
    store_dictionary,
    train_dictionary,
)
from pentrace.infrastructure.ledger.backend.dialect import ledger_tables
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.indexer import build_events, rebuild, session_directory
from pentrace.infrastructure.ledger.retention import RetentionPolicy
from pentrace.infrastructure.ledger.rows import envelope_row
from pentrace.infrastructure.ledger.store import TRAIN_AFTER
from pentrace.infrastructure.storage.layout import iter_sessions
from pentrace.infrastructure.trace.reader import read_session
from pentrace.testing.files import write_shards
from tests.integration.ledger_backends import (
    LedgerBackend,
    entries_after,
    index_names,
    ledger_stats,
    locate,
    newest_entries,
    reach,
)
from tests.integration.test_ledger_indexer import AGENT, PROJECT, trace_lines
from tests.support import plain_rows

# 14 sessions of 22 records: enough first records (20 each) to train a dictionary.
SESSIONS = [f"session-2026-11-29-10-00-00-{n:08x}" for n in range(14)]


@pytest.fixture
def backend(ledger_backend: LedgerBackend) -> LedgerBackend:
    """Each ledger backend in turn."""
    return ledger_backend


def corpus(root: Path, sessions: list[str] = SESSIONS, turns: int = 7) -> None:
    for session_id in sessions:
        write_shards(root, PROJECT, AGENT, session_id, [trace_lines(session_id, turns)])


def expected(root: Path) -> dict[str, bytes]:
    """Every event id of the corpus and the envelope bytes the mapping builds for it."""
    found: dict[str, bytes] = {}
    for ref in iter_sessions(root):
        records = [(n, r.raw) for n, r in enumerate(read_session(ref.shards), start=1)]
        for event in build_events(
            ref.key.session_id,
            records,
            project=ref.key.project,
            agent=ref.key.agent,
            directory=session_directory(ref.shards),
        ):
            found[event.id] = msgspec.json.encode(event)
    return found


def raw_columns(db: LedgerDatabase) -> list[Any]:
    events = db.tables.events
    with db.reading("read the raw columns") as conn:
        return list(
            conn.execute(
                select(
                    events.c.notification_id,
                    events.c.event_id,
                    events.c.category,
                    events.c.conversation_id,
                    events.c.event_json,
                    events.c.privacy_classification,
                ).order_by(events.c.notification_id)
            )
        )


def assert_reads(ledger: RuntimeEventLedger, want: dict[str, bytes]) -> None:
    """Every read path hands out the mapping's bytes under the mapping's ids."""
    page = ledger.replay_after(None, limit=0).events
    assert {entry.event_id: entry.event_json for entry in page} == want
    assert len(page) == len(want)
    session = SESSIONS[3]
    scoped = ledger.replay_after(None, limit=0, session_id=session, agent_id=AGENT).events
    assert [entry.event_json for entry in scoped] == [
        data for event_id, data in want.items() if f"/{session}:" in event_id
    ]
    middle = page[len(page) // 2]
    resumed = ledger.replay_after(middle.event_id, limit=5).events
    assert [entry.event_id for entry in resumed] == [entry.event_id for entry in page][
        len(page) // 2 + 1 : len(page) // 2 + 6
    ]
    assert ledger.contains(middle.event_id)
    assert not ledger.contains(middle.event_id[:-8] + "00000999")  # past the session's end
    assert locate(ledger, middle.event_id) == middle.notification_id
    assert newest_entries(ledger, 3) == page[-3:]
    assert entries_after(ledger, page[0].notification_id or 0, limit=4) == page[1:5]
    notifications = ledger.select_notifications(1, len(page) + 10)
    assert [n.state for n in notifications] == [entry.event_json for entry in page]
    stream = notifications[0].originator_id
    assert [stored.state for stored in ledger.select_events(stream)] == [
        n.state for n in notifications if n.originator_id == stream
    ]
    categories = collections.Counter(
        msgspec.json.decode(data)["category"] for data in want.values()
    )
    assert ledger_stats(ledger).by_category == dict(sorted(categories.items()))


def synced_corpus(
    backend: LedgerBackend, root: Path
) -> tuple[LedgerDatabase, RuntimeEventLedger, int]:
    """The corpus written under ``root`` and synced into a fresh ledger with no limits: its
    database, the ledger and the events indexed."""
    corpus(root)
    db = backend.database()
    ledger = RuntimeEventLedger(db, LedgerSettings().with_limits_off())
    return db, ledger, sync(ledger, root).indexed


def test_a_synced_ledger_stores_frames_and_leaves_out_derived_values(
    backend: LedgerBackend, tmp_path: Path
) -> None:
    db, ledger, indexed = synced_corpus(backend, tmp_path)
    assert indexed == 14 * 22
    want = expected(tmp_path)
    rows = raw_columns(db)
    assert all(bytes(row[4]).startswith(MAGIC) for row in rows)
    assert {row[1] for row in rows} == {None}  # every id derives from (stream, sequence)
    assert {row[3] for row in rows} == {None}  # conversation id = session id
    assert {row[5] for row in rows} == {None}  # the default classification, public
    assert sum(len(bytes(row[4])) for row in rows) * 3 < sum(map(len, want.values()))
    assert sorted(db.codec.dictionaries) == [1]
    assert_reads(ledger, want)
    # A second sync finds every row held, by its derived id and envelope.
    assert sync(ledger, tmp_path).indexed == 0
    assert ledger.extend(msgspec.json.decode(data) for data in list(want.values())[:5]) == 0


def test_workers_write_the_frames_one_process_writes(
    backend: LedgerBackend, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    corpus(tmp_path)
    (tmp_path / "two").mkdir()
    other = reach(backend.backend, tmp_path / "two")
    assert other is not None
    request.addfinalizer(other.close)
    one = RuntimeEventLedger(backend.database(), LedgerSettings().with_limits_off())
    two = RuntimeEventLedger(other.database(), LedgerSettings().with_limits_off())
    sync(one, tmp_path)
    sync(two, tmp_path, workers=2)
    assert plain_rows(one.db) == plain_rows(two.db)
    assert all(bytes(row[4]).startswith(MAGIC) for row in raw_columns(two.db))


def earlier_ledger(db: LedgerDatabase) -> None:
    """Replace ``db``'s tables with the shape pentrace used before ADR 0058: every id stored
    under a unique constraint, NOT NULL category with its index, no dictionaries table."""
    tables = ledger_tables(db.tables.events.name.removesuffix("runtime_events"))
    db.drop_all()
    metadata = MetaData()
    new = tables.events
    events = Table(
        new.name,
        metadata,
        *(
            Column(
                c.name,
                c.type,
                primary_key=c.primary_key,
                autoincrement=c.autoincrement,
                nullable=c.nullable and c.name not in ("event_id", "category"),
            )
            for c in new.columns
        ),
        UniqueConstraint("event_id", name=f"{new.name}_event_id_key"),
        UniqueConstraint("stream_id", "sequence", name=f"{new.name}_stream_sequence_key"),
        sqlite_autoincrement=True,
    )
    for index in new.indexes:
        name = str(index.name)
        if not name.endswith("_event_id_idx"):
            Index(name, *(events.c[c.name] for c in index.columns))
    Index(f"{new.name}_category_idx", events.c.category)
    for table in (tables.watermarks, tables.tracking, tables.meta, tables.ingest_cursors):
        table.to_metadata(metadata)
    metadata.create_all(db.engine)
    db.codec = RowCodec()  # as the earlier code wrote: plain rows, every id


def test_an_earlier_ledger_keeps_its_rows_and_compresses_the_new_ones(
    backend: LedgerBackend, tmp_path: Path
) -> None:
    corpus(tmp_path, SESSIONS[:4])
    db = backend.database()
    earlier_ledger(db)
    old = RuntimeEventLedger(db, LedgerSettings().with_limits_off())
    sync(old, tmp_path)
    before = raw_columns(db)
    db.close()
    corpus(tmp_path, SESSIONS[4:])
    reopened = backend.database()  # today's code opens (and upgrades) it
    ledger = RuntimeEventLedger(reopened, LedgerSettings().with_limits_off())
    with reopened.reading("list the indexes") as conn:
        indexes = index_names(conn, reopened.tables.events.name)
    assert not any(name.endswith(("_category_idx", "_event_id_idx")) for name in indexes)
    assert sync(ledger, tmp_path).indexed == 10 * 22
    after = raw_columns(reopened)
    assert after[: len(before)] == before  # the old rows, byte for byte, ids and positions
    new = after[len(before) :]
    assert all(bytes(row[4]).startswith(MAGIC) and row[1] is not None for row in new)
    assert_reads(ledger, expected(tmp_path))
    # Retention over both forms: the watermark names the id prefix, the gap says evicted.
    ledger.policy = RetentionPolicy(max_events=5, max_age_days=None, max_bytes=None)
    oldest = before[0]
    ledger.cleanup()
    gap = ledger.replay_after(expected_id(ledger, oldest[0], before), limit=1)
    assert (gap.found, gap.gap and gap.gap.reason) == (False, "evicted")
    assert ledger.count() == 5


def expected_id(ledger: RuntimeEventLedger, nid: int, rows: list[Any]) -> str:
    return next(str(row[1]) for row in rows if row[0] == nid)


def test_a_ledger_the_live_path_writes_trains_its_dictionary_from_its_rows(
    backend: LedgerBackend, tmp_path: Path
) -> None:
    corpus(tmp_path, SESSIONS[:1], turns=(TRAIN_AFTER + 200) // 3)
    want = expected(tmp_path)
    envelopes = [msgspec.json.decode(data) for data in want.values()]
    db = backend.database()
    ledger = RuntimeEventLedger(db, LedgerSettings().with_limits_off())
    for start in range(0, len(envelopes), 100):
        ledger.extend(envelopes[start : start + 100])
    forms = [bytes(row[4]).startswith(MAGIC) for row in raw_columns(db)]
    assert forms == [False] * TRAIN_AFTER + [True] * (len(forms) - TRAIN_AFTER)
    assert {event_id: data for _, event_id, data in plain_rows(db)} == want


def test_two_writers_that_train_at_once_both_use_the_dictionary_stored_first(
    backend: LedgerBackend, tmp_path: Path
) -> None:
    corpus(tmp_path)
    want = list(expected(tmp_path).values())
    first, second = backend.database(), backend.database()
    mine, theirs = train_dictionary(want[::2], 1), train_dictionary(want[1::2], 1)
    assert mine != theirs
    store_dictionary(first, 1, mine, 0, 1)
    store_dictionary(second, 1, theirs, 0, 1)  # the race's loser: its insert does nothing
    assert first.codec.dictionaries == second.codec.dictionaries == {1: mine}
    frame = second.codec.stored_json(want[0])
    assert first.codec.plain_json(frame) == want[0]


def test_a_damaged_frame_or_a_missing_dictionary_is_a_clear_error(
    backend: LedgerBackend, tmp_path: Path
) -> None:
    db, ledger, _ = synced_corpus(backend, tmp_path)
    events, target = db.tables.events, raw_columns(db)[7]
    with db.writing("damage a row") as conn:
        damaged = MAGIC + bytes(target[4])[4:-3] + b"\x00\x00\x00"
        conn.execute(
            update(events).where(events.c.notification_id == target[0]).values(event_json=damaged)
        )
    with pytest.raises(LedgerError) as caught:
        ledger.replay_after(None, limit=20)
    assert f"notification {target[0]}" in caught.value.message
    assert db.where in caught.value.message
    assert "ledger rebuild" in (caught.value.hint or "")
    with db.writing("lose the dictionaries") as conn:
        conn.execute(db.tables.dictionaries.delete())
    reader = RuntimeEventLedger(backend.database(), LedgerSettings().with_limits_off())
    with pytest.raises(LedgerError, match=r"dictionary 1"):
        reader.replay_after(None, limit=3)


def test_a_rebuild_of_an_earlier_ledger_compresses_its_rows_once_it_has_a_dictionary(
    backend: LedgerBackend, tmp_path: Path
) -> None:
    corpus(tmp_path, SESSIONS[:6], turns=(TRAIN_AFTER + 500) // 18)  # 6 x 250 rows
    want = expected(tmp_path)
    db = backend.database()
    earlier_ledger(db)
    with db.writing("write as the earlier version did") as conn:  # plain rows, every id
        rows = [envelope_row(msgspec.json.decode(data), 0) for data in want.values()]
        conn.execute(db.tables.events.insert(), rows)
    db.close()
    reopened = backend.database()
    ledger = RuntimeEventLedger(reopened, LedgerSettings().with_limits_off())
    rebuild(ledger, tmp_path)
    # The sessions rebuilt after the first TRAIN_AFTER rows are stored compressed.
    forms = [bytes(row[4]).startswith(MAGIC) for row in raw_columns(reopened)]
    assert sorted(reopened.codec.dictionaries) == [1]
    assert forms == sorted(forms)  # plain until the dictionary, compressed after
    assert TRAIN_AFTER <= forms.count(False) < len(forms)
    assert {event_id: data for _, event_id, data in plain_rows(reopened)} == want
