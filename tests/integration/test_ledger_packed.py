"""The SQLite bulk insert of packed rows (ADR 0066): same rows, ids in the rows' order."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any
from unittest import mock

from sqlalchemy import select

from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.infrastructure.ledger.backend.sqlite import SQLITE
from pentrace.infrastructure.ledger.bulk import run as bulk
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.bulk.build import build_session, pack, unpack
from pentrace.infrastructure.ledger.bulk.run import insert_packed, insert_values
from pentrace.infrastructure.ledger.indexer import index_records
from pentrace.infrastructure.ledger.rows import ROW_COLUMNS
from pentrace.infrastructure.storage.layout import iter_sessions
from pentrace.testing.files import write_shards
from tests.integration.test_ledger_bulk import SESSIONS, corpus, stored
from tests.integration.test_ledger_indexer import AGENT, PROJECT, open_ledger, trace_lines
from tests.support import kill_sync_after

_TASK = ROW_COLUMNS.index("task_id")
_RUN = ROW_COLUMNS.index("run_id")


def test_packing_groups_rows_by_their_nulls_and_unpacking_gives_them_back_in_order() -> None:
    rows = [(n, None if n % 2 else "t", None if n % 3 else "r", b"x") for n in range(10)]
    packed = pack(rows)
    assert packed.count == 10
    assert sorted(group.present for group in packed.groups) == [
        (0, 1, 2, 3), (0, 1, 3), (0, 2, 3), (0, 3),
    ]  # fmt: skip
    assert sum(group.rows for group in packed.groups) == 10
    assert unpack(packed, 4) == rows


def mixed_rows(root: Path, ledger: RuntimeEventLedger) -> list[tuple[Any, ...]]:
    """Every session's rows, built, with task and run ids on some so that shapes alternate."""
    corpus(root)
    rows: list[tuple[Any, ...]] = []
    for ref in iter_sessions(root, PROJECT, AGENT):
        rows += build_session(ref, frozenset(), 0, ledger.now_ms(), ledger.db.codec).rows
    for index in range(len(rows)):
        row = list(rows[index])
        row[_TASK] = f"task-{index}" if index % 2 else None
        row[_RUN] = "run-1" if index % 3 == 0 else None
        rows[index] = tuple(row)
    return rows


def written(ledger: RuntimeEventLedger) -> list[tuple[Any, ...]]:
    """Every row with its notification id, in the ledger's order."""
    events = ledger.db.tables.events
    with ledger.db.reading("read the rows") as conn:
        return [tuple(row) for row in conn.execute(select(events).order_by(events.c[0])).all()]


def test_packed_rows_of_many_shapes_get_the_ids_executemany_gives_them(tmp_path: Path) -> None:
    plain, packed = open_ledger(tmp_path / "plain.db"), open_ledger(tmp_path / "packed.db")
    rows = mixed_rows(tmp_path / "root", plain)
    assert len(rows) == 87
    insert = SQLITE.packed_insert(packed.db.tables.events, ROW_COLUMNS)
    # Runs of several sizes, one transaction for the first two.
    assert insert_packed(packed, insert, [pack(rows[:40]), pack(rows[40:41])]) == 41
    assert insert_packed(packed, insert, [pack(rows[41:])]) == 46
    assert insert_values(plain, rows) == 87
    assert written(packed) == written(plain)
    assert [row[0] for row in written(packed)] == list(range(1, 88))


def test_packed_ids_follow_skipped_ids_and_a_writer_before_and_after(tmp_path: Path) -> None:
    ledger = open_ledger(tmp_path / "events.db")
    rows = mixed_rows(tmp_path / "root", ledger)
    other = open_ledger(tmp_path / "events.db")  # another writer: its own connections
    lines = trace_lines("session-live", 1)
    write_shards(tmp_path / "root", PROJECT, AGENT, "session-live", [lines])
    index_records(other, "session-live", [(1, lines[0])], project=PROJECT, agent=AGENT)
    with ledger.db.writing("skip ids") as conn:  # what a retention-aware sync leaves out
        assert SQLITE.skip_ids(conn, ledger.db.tables.events.name, 5) == 1
    insert = SQLITE.packed_insert(ledger.db.tables.events, ROW_COLUMNS)
    assert insert_packed(ledger, insert, [pack(rows)]) == 87
    index_records(other, "session-live", [(2, lines[1])], project=PROJECT, agent=AGENT)
    ids = [row[0] for row in written(ledger)]
    assert ids == [1, *range(7, 7 + 87), 94]


def test_a_packed_batch_meeting_held_rows_stores_only_the_others(tmp_path: Path) -> None:
    root = tmp_path / "root"
    session_id = SESSIONS[0]
    lines = trace_lines(session_id, 2)
    write_shards(root, PROJECT, AGENT, session_id, [lines])
    ledger = open_ledger(tmp_path / "events.db")
    (ref,) = iter_sessions(root, PROJECT, AGENT)
    build = build_session(ref, frozenset(), 0, ledger.now_ms(), ledger.db.codec)
    index_records(ledger, session_id, [(2, lines[1])], project=PROJECT, agent=AGENT,
                  directory="/srv/app")  # fmt: skip
    insert = SQLITE.packed_insert(ledger.db.tables.events, ROW_COLUMNS)
    assert insert_packed(ledger, insert, [pack(build.rows)]) == len(lines) - 1
    assert ledger.count() == len(lines)


def test_a_sync_through_packed_rows_stores_what_executemany_stores(tmp_path: Path) -> None:
    corpus(tmp_path)
    packed = open_ledger(tmp_path / "packed.db")
    assert sync(packed, tmp_path, workers=2).indexed == 87
    plain = open_ledger(tmp_path / "plain.db")
    for ref in iter_sessions(tmp_path, PROJECT, AGENT):
        insert_values(plain, build_session(ref, frozenset(), 0, 0, plain.db.codec).rows)
    assert stored(tmp_path / "packed.db") == stored(tmp_path / "plain.db")
    ids = [row[:4] for row in written(packed)]
    assert ids == [(n, *row[1:4]) for n, row in enumerate(written(plain), start=1)]


def test_a_live_writer_during_a_packed_sync_gets_ids_apart_and_every_order_holds(
    tmp_path: Path,
) -> None:
    corpus(tmp_path)
    ledger = open_ledger(tmp_path / "events.db")
    live = open_ledger(tmp_path / "events.db")  # the live path's own connections
    lines = trace_lines("session-live", 6)
    write_shards(tmp_path / "live", PROJECT, AGENT, "session-live", [lines])
    done = threading.Event()

    def write_live() -> None:
        for position, line in enumerate(lines, start=1):
            index_records(live, "session-live", [(position, line)], project=PROJECT, agent=AGENT)
            time.sleep(0.001)
        done.set()

    writer = threading.Thread(target=write_live)
    writer.start()
    with mock.patch.object(bulk, "BATCH", 8):  # many transactions for the live one to meet
        assert sync(ledger, tmp_path).indexed == 87
    writer.join()
    assert done.is_set()
    rows = written(ledger)
    assert len(rows) == 87 + len(lines)
    by_stream: dict[str, list[tuple[int, int]]] = {}
    for row in rows:
        by_stream.setdefault(row[2], []).append((row[0], row[3]))
    for pairs in by_stream.values():  # each stream's ids rise with its sequences
        assert [sequence for _, sequence in sorted(pairs)] == sorted(s for _, s in pairs)
    assert stored(tmp_path / "events.db")  # and every row reads back


def test_a_sync_killed_mid_way_then_run_again_holds_every_row_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for number in range(40):
        session_id = f"session-2026-11-29-10-00-00-{number:08d}"
        write_shards(root, PROJECT, AGENT, session_id, [trace_lines(session_id, 40)])
    path = tmp_path / "events.db"
    kill_sync_after(root, path, 200)  # some batches committed, not all
    ledger = open_ledger(path)
    report = sync(ledger, root, workers=2)
    assert report.already_held >= 200
    assert report.indexed + report.already_held == 40 * 121
    rows = written(ledger)
    assert len(rows) == 40 * 121
    assert len({(row[2], row[3]) for row in rows}) == len(rows)  # no position twice
    for stream in {row[2] for row in rows}:  # each stream in its order, ids apart
        sequences = [row[3] for row in rows if row[2] == stream]
        assert sequences == list(range(1, 122))
    ledger.close()
